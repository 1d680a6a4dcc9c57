# Shared helpers for the integration tests: TAP output, the stack's servers,
# the daemons, and HTTP calls. Each test sources this file, calls `plan N`,
# starts the daemons it needs, and asserts on what a user would see.
set -uo pipefail

: "${VOUCHER_SOURCE_DIR:?run through meson test (tests/run sets everything up)}"
: "${VOUCHER_BUILD_DIR:?run through meson test}"
if [ -z "${VOUCHER_STACK_DIR:-}" ] || [ -z "${VOUCHER_PG_DSN:-}" ]; then
  echo "Bail out! no stack: run tests/run, or deploy/stack up and eval \"\$(deploy/stack env)\""
  exit 1
fi
source "$VOUCHER_SOURCE_DIR/deploy/lib/daemons.sh"

bin_gateway=$VOUCHER_BUILD_DIR/gateway/voucher-gateway
bin_writer=$VOUCHER_BUILD_DIR/writer/voucher-writer
bin_reconciler=$VOUCHER_BUILD_DIR/reconciler/voucher-reconciler
bin_load=$VOUCHER_BUILD_DIR/tests/tools/vc-load
# The text of a Redis script as the daemons send it: NAME is vc_lua_NAME's
# (common/vc_lua.h), its includes expanded and its prelude put first by the
# build (common/lua/meson.build). common/lua/NAME.lua alone may not run.
lua_script() { cat "$VOUCHER_BUILD_DIR/common/lua/$1.lua"; }
base_url="http://$VOUCHER_HTTP_ADDR"
# The guessing limits (gw_guard.h) are off unless a test sets them: every test
# of a run shares one Redis and one client address, so their 404s would add up
# across tests (and the contract test makes hundreds) and turn a later test's
# expected 404 into a 429. test_guessing_limits turns them on with its own flags.
export VOUCHER_GUARD_CUSTOMER_TRIES=${VOUCHER_GUARD_CUSTOMER_TRIES:-0}
export VOUCHER_GUARD_IP_TRIES=${VOUCHER_GUARD_IP_TRIES:-0}
# The admin login limit (gw_login.h) likewise: the contract test sends wrong
# admin tokens by the hundred from one address, and test_hostile_logins turns
# it on with its own flags.
export VOUCHER_ADMIN_LOGIN_TRIES=${VOUCHER_ADMIN_LOGIN_TRIES:-0}
test_name=$(basename "$0" .sh)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/voucher-$test_name.XXXXXX")

tap_n=0
tap_failed=0

tap_planned=0
plan() { tap_planned=$1; echo "1..$1"; }

ok() { # CONDITION-RESULT DESCRIPTION: pass when the first argument is 0
  tap_n=$((tap_n + 1))
  if [ "$1" -eq 0 ]; then
    echo "ok $tap_n - $2"
  else
    echo "not ok $tap_n - $2"
    tap_failed=$((tap_failed + 1))
  fi
}

is() { # GOT WANT DESCRIPTION
  tap_n=$((tap_n + 1))
  if [ "$1" = "$2" ]; then
    echo "ok $tap_n - $3"
  else
    echo "not ok $tap_n - $3"
    echo "#   got:  '$1'"
    echo "#   want: '$2'"
    tap_failed=$((tap_failed + 1))
  fi
}

diag() { printf '%s\n' "$*" | sed 's/^/# /'; }

# N symbols of the codes' alphabet (proto/campaigns.md), drawn at random: for a
# campaign prefix no earlier run took. Drawn until there are N: 64 random bytes
# hold fewer than 5 of the 31 symbols one time in ten, and a shorter prefix can
# start another campaign's (422, overlap).
random_symbols() {
  local s=
  while [ ${#s} -lt "$1" ]; do s+=$(head -c 256 /dev/urandom | tr -dc '2-9A-HJ-NP-Z'); done
  printf '%s' "${s:0:$1}"
}

# SQL on the stack's database; prints unaligned tuples.
sql() { psql -X -q -tA -v ON_ERROR_STOP=1 "$VOUCHER_PG_DSN" -c "$1"; }

rcli() {
  local hostport=${VOUCHER_REDIS_URL#redis://}
  hostport=${hostport%%/*}
  redis-cli -h "${hostport%:*}" -p "${hostport#*:}" "$@"
}

# A fresh voucher valid from an hour ago for a day: CODE LIMIT [PER_CUSTOMER] [DISCOUNT] [MIN_ORDER]
new_voucher() {
  sql "INSERT INTO voucher (code, mode, discount_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at)
       VALUES ('$1', 'flash', ${4:-100000}, ${5:-0}, $2, ${3:-1}, now() - interval '1 hour', now() + interval '1 day')"
}

# A unique voucher code for this run: PREFIX -> PREFIX_<random>
unique_code() { echo "$1_$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F)"; }
# new_token PREFIX: a bearer token the gateway accepts (at least 32 characters,
# gw_auth.h): PREFIX- and 32 random hex digits.
new_token() { echo "$1-$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }

# Whether METHOD PATH is an admin route (gw_route_auth() GW_AUTH_ADMIN): served on
# the gateway's admin address only, 404 on the API port (issue 42). /campaigns...,
# GET and POST /vouchers, GET and PATCH /vouchers/{code}..., never the order
# service's POST .../reservations, .../confirm, .../quote or DELETE.
is_admin_route() {
  case "$2" in
    /campaigns*) return 0 ;;
    /vouchers | /vouchers\?*) return 0 ;;
    /vouchers/*) [ "$1" = GET ] || [ "$1" = PATCH ] ;;
    *) return 1 ;;
  esac
}

# http METHOD PATH [JSON] [CURL ARGS...]: sets $status, $body, $headers (the answer's
# header lines) and $secs (how long the answer took). An admin route goes to the
# admin address ($admin_base_url, default the gateway's: gateway_admin), any other
# to $base_url, as a client on each side must; set http_base to send one anywhere
# (http_base=$base_url http GET /vouchers: the API port's 404).
http() {
  local method=$1 path=$2 data=${3:-} out url=${http_base:-}
  shift 2
  [ $# -gt 0 ] && shift
  if [ -z "$url" ]; then
    url=$base_url
    is_admin_route "$method" "$path" && url=${admin_base_url:-http://$(gateway_admin)}
  fi
  out=$(curl -s -D "$scratch/headers" -X "$method" ${data:+-H 'Content-Type: application/json'} \
    ${data:+--data-binary "$data"} -w '\n%{http_code} %{time_total}' --max-time 10 "$@" "$url$path")
  read -r status secs <<<"${out##*$'\n'}"
  body=${out%$'\n'*}
  headers=$(tr -d '\r' <"$scratch/headers" 2>/dev/null)
}

# The last call's status and its body's error code or status field, e.g. "409 OUT_OF_STOCK",
# "200 RELEASED", "201 " (a reservation has neither). A test that wants another view
# defines its own.
answer() { echo "$status $(jq -r '.error // .status // empty' <<<"$body" 2>/dev/null)"; }

now_ms() { date +%s%3N; } # Unix time in ms, as the scripts' nowMs
# Successful passes of the reconciler started with start_reconciler (its /metrics).
reconciler_passes() { metric "$(reconciler_admin 0)" 'voucher_reconciler_passes_total{result="ok"}'; }
# passes_after N: until the reconciler has finished N more passes than now (each began after
# this call's start); 1 if not within 30 s.
passes_after() {
  local p0 i
  p0=$(reconciler_passes)
  for ((i = 0; i < 300; i++)); do
    [ "$(reconciler_passes)" -ge $((${p0:-0} + $1 + 1)) ] && return 0
    sleep 0.1
  done
  return 1
}
# read_kind CODE: how the reconciler's last pass read it: 0 numbers, 1 targeted, 2 in full.
read_kind() { metric "$(reconciler_admin 0)" "voucher_reconciler_read{code=\"$1\"}"; }
# wait_graces GRACE_MS: until three graces and six of its passes went by (at
# most 30 s), for "nothing was released" checks that must outlast the grace.
wait_graces() {
  local since p0 i
  since=$(now_ms) p0=$(reconciler_passes)
  for ((i = 0; i < 300; i++)); do
    [ $(($(now_ms) - since)) -gt $((3 * $1)) ] && [ "$(reconciler_passes)" -ge $((${p0:-0} + 6)) ] && break
    sleep 0.1
  done
  diag "waited $(($(now_ms) - since)) ms and $(($(reconciler_passes) - ${p0:-0})) reconciler passes (grace $1 ms)"
}

# Polls COMMAND (every 0.1 s) until it prints WANT or SECONDS pass; prints the last output.
wait_for() { # WANT SECONDS COMMAND...
  local want=$1 secs=$2 got i
  shift 2
  for ((i = 0; i < secs * 10; i++)); do
    got=$("$@")
    [ "$got" = "$want" ] && break
    sleep 0.1
  done
  echo "$got"
}

# Polls a SQL query until it prints WANT or SECONDS pass; prints the last value.
wait_sql() { wait_for "$2" "$3" sql "$1"; } # QUERY WANT SECONDS

# The gateway's admin address (/readyz, /metrics): VOUCHER_GATEWAY_ADMIN_ADDR, base port + 14.
gateway_admin() { echo "${VOUCHER_GATEWAY_ADMIN_ADDR:-127.0.0.1:$((VOUCHER_PORT_BASE + 14))}"; }
# Its URL, where the admin routes are (is_admin_route): for a test's own curl.
admin_url=http://$(gateway_admin)
start_gateway() {
  daemon_start "$test_name-gateway" "$bin_gateway" --admin-addr "$(gateway_admin)" "$@"
  { wait_http_ok "$base_url/healthz" 30 && wait_http_ok "http://$(gateway_admin)/healthz" 30; } || { echo "Bail out! the gateway did not become healthy"; tail -20 "$VOUCHER_STACK_DIR/logs/$test_name-gateway.log"; exit 1; }
}

# The writer's admin endpoint: base port + 11.
writer_admin() { echo "127.0.0.1:$((VOUCHER_PORT_BASE + 11))"; }
start_writer() { daemon_start "$test_name-writer" "$bin_writer" --admin-addr "$(writer_admin)" "$@"; }

# The reconciler's admin endpoint: base port + 12 (+ 13 for a second one).
reconciler_admin() { echo "127.0.0.1:$((VOUCHER_PORT_BASE + 12 + ${1:-0}))"; }

# start_reconciler [NAME-SUFFIX] [ARGS...]: a reconciler daemon with its admin endpoint.
start_reconciler() {
  local suffix=${1:-} n=0
  [ $# -gt 0 ] && shift
  [ -n "$suffix" ] && n=1
  daemon_start "$test_name-reconciler$suffix" "$bin_reconciler" --admin-addr "$(reconciler_admin $n)" "$@"
  wait_http_ok "http://$(reconciler_admin $n)/healthz" 30 || { echo "Bail out! the reconciler did not start"; exit 1; }
}

# A metric's value from an admin endpoint: ADDR NAME (with labels, as printed)
metric() { curl -s --max-time 2 "http://$1/metrics" | awk -v m="$2" '$1 == m {print $2; exit}'; }

# A metric summed over all its label sets: ADDR NAME (without labels)
metric_sum() {
  curl -s --max-time 2 "http://$1/metrics" |
    awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2; n++ } END { if (n) print s }'
}

# Waits until a summed metric reaches at least WANT: ADDR NAME WANT [SECONDS].
# 0 when it did; the barrier a "nothing changed" check stands on (e.g. the
# writer has handled the event that could have changed something), instead
# of a sleep that passes whenever the daemon is merely slow.
metric_wait() {
  local i got
  for ((i = 0; i < ${4:-30} * 10; i++)); do
    got=$(metric_sum "$1" "$2")
    [ -n "$got" ] && awk -v g="$got" -v w="$3" 'BEGIN { exit !(g >= w) }' && return 0
    sleep 0.1
  done
  diag "$2 at $1 stayed at ${got:-nothing}, below $3"
  return 1
}

# Events the writer has handled, whatever their outcome.
writer_handled() { metric_sum "$(writer_admin)" voucher_writer_events_total; }

# Pause points (common/vc_fault.h, fault builds only). A daemon started with
# VOUCHER_PAUSE=POINT and VOUCHER_PAUSE_DIR=$pause_dir stops at that point until
# the test lets it go: pause_wait POINT [SECONDS] (0 once it is there),
# act inside the window, then pause_go POINT.
pause_dir=$scratch/pause
mkdir -p "$pause_dir"
pause_wait() {
  local i
  for ((i = 0; i < ${2:-30} * 20; i++)); do
    [ -e "$pause_dir/$1" ] && return 0
    sleep 0.05
  done
  return 1
}
pause_go() { rm -f "$pause_dir/$1"; }

stop_daemons() {
  daemon_stop "$test_name-gateway"
  daemon_stop "$test_name-writer"
  daemon_stop "$test_name-reconciler"
  daemon_stop "$test_name-reconciler2"
}

finish() {
  stop_daemons
  rm -rf "$scratch"
  if [ "$tap_n" -ne "$tap_planned" ]; then
    diag "planned $tap_planned checks but ran $tap_n: the script stopped early or its plan is wrong"
    exit 1
  fi
  if [ "$tap_failed" -gt 0 ]; then
    diag "$tap_failed of $tap_n checks failed; daemon logs are in $VOUCHER_STACK_DIR/logs/$test_name-*.log"
    exit 1
  fi
  exit 0
}
trap finish EXIT
