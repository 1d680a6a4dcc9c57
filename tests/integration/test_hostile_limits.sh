#!/usr/bin/env bash
# Hostile clients against the gateway's per-connection resources (issue 14,
# "Slow readers" and "Memory per connection"; deploy/README.md,
# "Connections and memory"):
# - a client that pipelines requests and never reads its answers is closed
#   within the write timeout, and the gateway stays healthy with bounded RSS;
# - connections left idle after large requests give their buffers back, so
#   a thousand of them cost little memory (measured from /proc);
# - over VOUCHER_MAX_CONNECTIONS_PER_IP a new connection gets a clean 503
#   and is closed, and the room it left is given back when connections
#   close; over VOUCHER_MAX_CONNECTIONS it closes the connection idle
#   longest, and gets the 503 only when none is idle;
# - 10,000 idle sockets from one address do not keep another client out,
#   with the default settings (the per-address cap, 256) nor with the cap
#   off (as behind a NAT: the idle ones make room) (issue 42, item 3). Red
#   before (no cap by default, no eviction on the API port): the other
#   client got 503 in both, and the 5 connections over VOUCHER_MAX_CONNECTIONS=3
#   got "200:3 503:2";
# - framing that RFC 9112 says to reject (whitespace before a header's
#   colon, obs-fold, bare LF: request smuggling behind a proxy that reads it
#   otherwise) gets 400 and a close (issue 42, item 4). Red before the
#   framing check (common/vc_http.c): all seven answered 200 and kept open;
# - a guessable token (the systemd template's CHANGE-ME, one character) in
#   VOUCHER_ADMIN_TOKEN or VOUCHER_API_TOKEN stops the gateway at start with
#   exit 2, naming the setting (issue 42, item 6). Red before
#   gw_token_list_check(): the gateway started with each and ran.
source "$(dirname "$0")/lib.sh"
plan 35

client() { python3 "$VOUCHER_SOURCE_DIR/tests/integration/hostile_client.py" "$@"; }
healthz() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$base_url/healthz"; }
gateway_pid() { cat "$(daemon_dir)/$test_name-gateway.pid"; }

# --- The slow reader. An idle timeout far beyond the bound, so that only the
# write timeout (2 s) can end the connection in time. (In a sanitizer build,
# AddressSanitizer's quarantine would keep freed buffers resident: it is off
# here, so that the memory checks measure the gateway, not the quarantine.)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0 \
  VOUCHER_HTTP_WRITE_TIMEOUT=2s VOUCHER_HTTP_IDLE_TIMEOUT=120s VOUCHER_MAX_CONNECTIONS_PER_IP=0 \
  start_gateway --threads 1
read -r state took grown < <(client slowread "$VOUCHER_HTTP_ADDR" "$(gateway_pid)" 30)
diag "slow reader: $state after $took s; the gateway's RSS grew by at most $grown KiB"
is "$state" closed "a client pipelining requests and never reading is closed"
ok "$(awk -v t="${took:-99}" 'BEGIN { exit !(t < 12) }'; echo $?)" \
  "within the bound: write timeout 2 s plus the time its buffers take to fill (< 12 s; ${took} s)"
ok "$([ "${grown:-999999}" -lt 16384 ]; echo $?)" "meanwhile the gateway's RSS grew by less than 16 MiB ($grown KiB)"
is "$(healthz)" 200 "the gateway still answers /healthz"

# --- Idle connections after traffic (the per-address cap is off for this
# gateway: they all come from 127.0.0.1): 1000 connections that each sent a
# 6000-byte path and a 15000-byte body and stay open. Buffers kept until
# close cost about 24 KiB each (about 24 MiB here); given back, the
# connection's struct and libuv handles remain (a few hundred bytes to 2 KiB).
read -r answered grown < <(client idle "$VOUCHER_HTTP_ADDR" "$(gateway_pid)" 1000)
diag "1000 idle connections after large requests: RSS grew by $grown KiB"
is "$answered" 1000 "1000 connections sent a large request each and got an answer"
ok "$([ "${grown:-999999}" -lt 6144 ]; echo $?)" \
  "held open and idle, they grow the gateway's RSS by less than 6 MiB ($grown KiB)"
is "$(healthz)" 200 "the gateway still answers /healthz"
daemon_stop "$test_name-gateway"

# --- The per-address cap, shared by the workers: 4 from one address, the
# fifth and sixth get 503 (with Retry-After) and are closed.
VOUCHER_MAX_CONNECTIONS_PER_IP=4 start_gateway --threads 2
is "$(client percap "$VOUCHER_HTTP_ADDR" 6)" "200:4 503:2" \
  "6 connections from one address with a cap of 4: 4 served, 2 refused with 503"
is "$(client percap "$VOUCHER_HTTP_ADDR" 4)" "200:4" "once they closed, 4 are served again"
out=$(curl -s -i --max-time 5 "$base_url/healthz" -H 'Connection: keep-alive' \
  --next -s -o /dev/null "$base_url/healthz")
echo "$out" | grep -q '^HTTP/1.1 200'
ok $? "a client within the cap is served as before"
daemon_stop "$test_name-gateway"

# --- The cap on all connections: a newcomer closes the connection idle
# longest (it ends without an answer); when every one has a request under
# way, the newcomer gets 503 (it used to be closed without a word).
VOUCHER_MAX_CONNECTIONS=3 start_gateway --threads 1
is "$(client percap "$VOUCHER_HTTP_ADDR" 5)" "200:3 reset:2" \
  "5 idle connections with VOUCHER_MAX_CONNECTIONS=3: the 2 idle longest make room, 3 served"
is "$(client percap "$VOUCHER_HTTP_ADDR" 5 busy)" "200:3 503:2" \
  "5 with a request under way each: 3 served, 2 refused with 503"
is "$(healthz)" 200 "the gateway still answers /healthz once they closed"
daemon_stop "$test_name-gateway"

# --- 10,000 idle sockets from 127.0.0.1, then another client from
# 127.0.0.2. With the defaults, the address's cap (256) refuses all but 256
# of them; with the cap off, as when every client comes through one NAT
# address, they stay within VOUCHER_MAX_CONNECTIONS (1,000) by closing each
# other, idle longest first, and the other client's connection closes one
# too. Either way the other client is served.
start_gateway --threads 2
out=$(client idleflood "$VOUCHER_HTTP_ADDR" 10000 127.0.0.2)
diag "idle flood, default settings: $out"
is "$(sed -n 's/.*; other \([^ ]*\) in.*/\1/p' <<<"$out")" 200 \
  "10,000 idle sockets from one address (default settings): another client gets 200"
held=$(sed -n 's/.*, held \([0-9]*\),.*/\1/p' <<<"$out")
ok "$([ "${held:-99999}" -le 256 ]; echo $?)" "the address holds at most 256 of them open ($held)"
is "$(healthz)" 200 "the gateway still answers /healthz"
daemon_stop "$test_name-gateway"
VOUCHER_MAX_CONNECTIONS_PER_IP=0 start_gateway --threads 2
out=$(client idleflood "$VOUCHER_HTTP_ADDR" 10000 127.0.0.2)
diag "idle flood, no per-address cap: $out"
is "$(sed -n 's/.*; other \([^ ]*\) in.*/\1/p' <<<"$out")" 200 \
  "10,000 idle sockets from one address (no per-address cap): another client gets 200"
held=$(sed -n 's/.*, held \([0-9]*\),.*/\1/p' <<<"$out")
ok "$([ "${held:-99999}" -le 1000 ]; echo $?)" "at most VOUCHER_MAX_CONNECTIONS (1,000) of them are held open ($held)"
daemon_stop "$test_name-gateway"

# --- Framing RFC 9112 says to reject, each case on a connection of its own:
# 400, and the connection closed after it.
start_gateway --threads 2
while read -r name status state; do
  diag "framing $name: $status, $state"
  is "$status $state" "400 closed" "framing $name: 400 and the connection closed"
done < <(client framing "$VOUCHER_HTTP_ADDR")
daemon_stop "$test_name-gateway"

# --- Guessable tokens: each refused at start with exit 2, the setting named.
# (A gateway that starts is stopped by the timeout: 124.)
for setting in VOUCHER_ADMIN_TOKEN VOUCHER_API_TOKEN; do
  for value in CHANGE-ME x; do
    env "$setting=$value" timeout 15 "$bin_gateway" >"$scratch/token.out" 2>"$scratch/token.err"
    rc=$?
    diag "$setting=$value: exit $rc: $(head -c 300 "$scratch/token.err" | head -1)"
    is "$rc" 2 "$setting=$value: the gateway refuses to start (exit 2)"
    grep -q "$setting" "$scratch/token.err"
    ok $? "and names $setting on stderr"
  done
done
# As a flag, in a list whose other token is long enough.
timeout 15 "$bin_gateway" --admin-token "$(new_token admin),short" >/dev/null 2>"$scratch/token.err"
is "$?" 2 "--admin-token with a short second token of its list: exit 2"
grep -q "token 2 of the list has 5 characters" "$scratch/token.err"
ok $? "and says which token of the list is too short"
