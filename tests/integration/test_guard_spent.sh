#!/usr/bin/env bash
# Guessing limits without a round trip for a new customer (issue 17,
# gateway/gw_guard.h "the spent set", proto/redis-keys.md "Guessing limits"),
# through real HTTP with several gateways on the stack:
# - a customer who spent every try on gateway A with 404s gets 429 on gateway
#   B once B heard the spends (voucher-guard), not a pass from memory;
# - a gateway C started after those spends answers that customer 429 from the
#   start (it loaded guard:index after subscribing);
# - a customer and an address never spent are answered from memory on B: the
#   checks from memory grow and the checks asked of Redis do not;
# - a gateway D whose Redis user may not subscribe to voucher-guard (the ACL
#   of before) asks Redis for every check, and the limits hold there; a
#   subscription that stops answering (Redis paused) is a gap too;
# - a gateway F on that ACL, whose voucher-rules channel carries a message
#   between its two SUBSCRIBEs, still sees voucher-guard refused: it does not
#   take the message for the channel's confirmation and trust a set it never
#   hears (a customer emptied on A afterwards gets 429 on F, not a pass);
# - a gateway E on the ACL of deploy/README.md (with &voucher-guard) syncs and
#   publishes its spends.
# Client addresses are made up per run (198.18.0.0/15), sent in
# X-Forwarded-For through gateways that trust 127.0.0.1.
source "$(dirname "$0")/lib.sh"
plan 22

b_addr=127.0.0.1:$((VOUCHER_PORT_BASE + 60)) b_admin=127.0.0.1:$((VOUCHER_PORT_BASE + 61))
c_addr=127.0.0.1:$((VOUCHER_PORT_BASE + 62)) c_admin=127.0.0.1:$((VOUCHER_PORT_BASE + 63))
d_addr=127.0.0.1:$((VOUCHER_PORT_BASE + 64)) d_admin=127.0.0.1:$((VOUCHER_PORT_BASE + 65))
e_addr=127.0.0.1:$((VOUCHER_PORT_BASE + 66)) e_admin=127.0.0.1:$((VOUCHER_PORT_BASE + 67))
f_addr=127.0.0.1:$((VOUCHER_PORT_BASE + 68)) f_admin=127.0.0.1:$((VOUCHER_PORT_BASE + 69))
hostport=${VOUCHER_REDIS_URL#redis://}
hostport=${hostport%%/*}
redis_user=gs_$RANDOM$RANDOM
redis_pw=pw-$(head -c12 /dev/urandom | od -An -tx1 | tr -d ' \n')
trap 'pause_go notify-between-subscribes; for g in b c d e f; do daemon_stop "$test_name-gateway-$g"; done
      rcli ACL DELUSER "$redis_user" >/dev/null 2>&1; finish' EXIT

unset VOUCHER_API_TOKEN
export VOUCHER_GATEWAY_THREADS=1
limits=(--trusted-proxies 127.0.0.1/32 --guard-customer-tries 5 --guard-customer-window 1h
  --guard-ip-tries 1000 --guard-ip-window 1h)
start_gateway "${limits[@]}"
a_admin=$(gateway_admin)
# start_other NAME ADDR ADMIN [VAR=VALUE...]: another gateway, healthy.
start_other() {
  local name=$1 addr=$2 admin=$3
  shift 3
  (
    [ $# -gt 0 ] && export "$@"
    daemon_start "$test_name-gateway-$name" "$bin_gateway" --http-addr "$addr" --admin-addr "$admin" \
      "${limits[@]}"
  )
  wait_http_ok "http://$addr/healthz" 30 || { echo "Bail out! gateway $name did not start"; exit 1; }
}
synced() { metric "$1" voucher_gateway_guard_spent_synced; }
checks() { metric "$1" "voucher_gateway_guard_checks_total{source=\"$2\"}"; }
start_other b "$b_addr" "$b_admin"

p=$(unique_code GSPENT)
real=${p}_REAL
new_voucher "$real" 100000 100000
rnd() { od -An -N2 -tu2 /dev/urandom | tr -d ' '; }
ip() { echo "198.$((18 + $(rnd) % 2)).$(($(rnd) % 256)).$(($(rnd) % 254 + 1))"; }
base_customer=$(($(rnd) * 1000 + 2000000))
n=0
# try ADDR IP CUSTOMER CODE: a reservation; sets $status, $body.
try() {
  n=$((n + 1))
  local saved=$base_url
  base_url=http://$1
  http POST "/vouchers/$4/reservations" \
    '{"customerId":'"$3"',"orderId":"'"$p-$n"'","orderAmount":1000}' -H "X-Forwarded-For: $2"
  base_url=$saved
}

is "$(wait_for 1 30 synced "$a_admin") $(wait_for 1 30 synced "$b_admin")" "1 1" \
  "gateways A and B subscribed to voucher-guard and loaded guard:index"

# --- (c) a new customer on a new address: both checks from memory on B.
mem0=$(checks "$b_admin" memory) red0=$(checks "$b_admin" redis)
try "$b_addr" "$(ip)" $((base_customer + 1)) "$real"
is "$status" 201 "a new customer's reservation on B: 201"
is "$(($(checks "$b_admin" memory) - mem0)) $(($(checks "$b_admin" redis) - red0))" "2 0" \
  "both its checks answered from memory on B, none asked of Redis (memory +2, redis +0)"

# --- (a) a customer empties its bucket on A; B hears it and asks Redis: 429.
x=$((base_customer + 2)) ipx=$(ip)
heard0=$(metric "$b_admin" voucher_gateway_guard_spends_heard_total)
out=
for i in 1 2 3 4 5; do try "$VOUCHER_HTTP_ADDR" "$ipx" "$x" "${p}_NO$n"; out+="$status "; done
is "$out" "404 404 404 404 404 " "five failed tries of customer X on A: 404 each"
# Each failure spends two buckets (customer and address): ten spends published.
metric_wait "$b_admin" voucher_gateway_guard_spends_heard_total $((heard0 + 10)) 10
ok $? "B heard A's ten spends on voucher-guard"
ok "$([ -n "$(rcli ZSCORE guard:index "guard:{cu:v:$x}")" ]; echo $?)" \
  "guard:index holds X's bucket until it is full again"
red0=$(checks "$b_admin" redis)
try "$b_addr" "$ipx" "$x" "$real"
is "$status $(jq -r .error <<<"$body")" "429 TOO_MANY_ATTEMPTS" \
  "B refuses X with a real code: 429, not a pass from memory"
is "$(($(checks "$b_admin" redis) - red0))" 2 "B asked Redis for both of X's buckets (both spent on A)"

# --- (b) a gateway started after those spends knows them from guard:index.
start_other c "$c_addr" "$c_admin"
is "$(wait_for 1 30 synced "$c_admin")" 1 "gateway C, started after the spends, is subscribed and loaded"
try "$c_addr" "$ipx" "$x" "$real"
is "$status" 429 "C refuses X from the start (the index), not a pass from memory"

# --- A subscription that stops answering (Redis paused: no close, no data)
# is a gap: B stops trusting the set until it subscribed and loaded again.
# The pause outlasts the longest detection (a PING sent up to 1 s after the
# last pong, then 3 s without its pong: gw_notify.c) with room to spare, so
# that the gap is seen while it lasts: with 4 s it could close before a busy
# listener noticed it (a fresh clone's run, once).
rcli CLIENT PAUSE 6000 ALL >/dev/null
is "$(wait_for 0 8 synced "$b_admin")" 0 "Redis paused: B's unanswered PING makes it stop trusting the set"
is "$(wait_for 1 20 synced "$b_admin")" 1 "Redis back: B subscribed and loaded again"

# --- (d) a Redis user without the channel (the ACL before voucher-guard):
# the set is never trusted, every check asks Redis, and the limits hold.
rcli ACL SETUSER "$redis_user" on ">$redis_pw" '~voucher:*' '~voucher-order:*' '~guard:*' '~campaign:*' \
  resetchannels '&voucher-rules' '+@all' '-@dangerous' >/dev/null
d_log=$VOUCHER_STACK_DIR/logs/$test_name-gateway-d.log
d_lines=$(cat "$d_log" 2>/dev/null | wc -l)
start_other d "$d_addr" "$d_admin" VOUCHER_REDIS_URL="redis://$redis_user:$redis_pw@$hostport/0"
# D's listener tried the channel and was refused (its warning), before any check below.
refused() { tail -n +"$((d_lines + 1))" "$d_log" | grep -c "cannot subscribe to Redis channel voucher-guard"; }
is "$(wait_for 1 10 refused)" 1 \
  "D's listener is refused voucher-guard and says so"
mem0=$(checks "$d_admin" memory) red0=$(checks "$d_admin" redis)
y=$((base_customer + 3)) ipy=$(ip)
out=
for i in 1 2 3 4 5 6; do try "$d_addr" "$ipy" "$y" "${p}_NOD$n"; out+="$status "; done
is "$out" "404 404 404 404 404 429 " "on D a new customer's five failures are 404 and the sixth 429"
is "$(($(checks "$d_admin" redis) - red0)) $(checks "$d_admin" memory) $(synced "$d_admin")" \
  "12 $mem0 0" "D asked Redis for every check (two buckets, six tries), none from memory, never synced"
try "$d_addr" "$ipx" "$x" "$real"
is "$status" 429 "D refuses X too"

# --- A rules message between the listener's two SUBSCRIBEs (voucher-rules,
# then voucher-guard) is read before the refusal of the second: F must still
# see the refusal, not take the message for a confirmation and trust its set.
f_log=$VOUCHER_STACK_DIR/logs/$test_name-gateway-f.log
f_lines=$(cat "$f_log" 2>/dev/null | wc -l)
start_other f "$f_addr" "$f_admin" VOUCHER_REDIS_URL="redis://$redis_user:$redis_pw@$hostport/0" \
  VOUCHER_PAUSE=notify-between-subscribes VOUCHER_PAUSE_DIR="$pause_dir"
pause_wait notify-between-subscribes 10
ok $? "F's listener subscribed to voucher-rules and stopped before voucher-guard"
rcli PUBLISH voucher-rules "${p}_RULES" >/dev/null
pause_go notify-between-subscribes
# Refused (the warning) or, on the code before, synced: whichever comes first.
f_state() {
  if tail -n +"$((f_lines + 1))" "$f_log" | grep -q "cannot subscribe to Redis channel voucher-guard"; then
    echo refused
  elif [ "$(synced "$f_admin")" = 1 ]; then
    echo synced
  fi
}
is "$(wait_for refused 10 f_state) $(synced "$f_admin")" "refused 0" \
  "F sees voucher-guard refused after the rules message, and does not trust its set"
w=$((base_customer + 5)) ipw=$(ip)
heard0=$(metric "$b_admin" voucher_gateway_guard_spends_heard_total)
for i in 1 2 3 4 5; do try "$VOUCHER_HTTP_ADDR" "$ipw" "$w" "${p}_NOW$n"; done
metric_wait "$b_admin" voucher_gateway_guard_spends_heard_total $((heard0 + 10)) 10 >/dev/null
try "$f_addr" "$ipw" "$w" "$real"
is "$status" 429 "a customer emptied on A since is refused on F (Redis asked), not passed from memory"

# --- The ACL of deploy/README.md (with &voucher-guard) is enough: a gateway on
# it subscribes, loads the index, and its spends are indexed and published.
rcli ACL SETUSER "$redis_user" resetchannels '&voucher-rules' '&voucher-guard' >/dev/null
start_other e "$e_addr" "$e_admin" VOUCHER_REDIS_URL="redis://$redis_user:$redis_pw@$hostport/0"
is "$(wait_for 1 30 synced "$e_admin")" 1 "gateway E on the deploy ACL is subscribed and loaded"
z=$((base_customer + 4))
heard0=$(metric "$b_admin" voucher_gateway_guard_spends_heard_total)
try "$e_addr" "$(ip)" "$z" "${p}_NOE"
metric_wait "$b_admin" voucher_gateway_guard_spends_heard_total $((heard0 + 2)) 10
ok $? "E's failure is indexed and published (B heard its two spends)"
is "$(metric "$e_admin" voucher_gateway_guard_index_errors_total)" 0 "E had no index errors"
