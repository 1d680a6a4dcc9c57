#!/usr/bin/env bash
# The guessing limits against an attacker who does not wait (issue 42,
# gateway/gw_guard.h "Tries in flight", proto/openapi.yaml "Guessing
# limits"), with the documented limits (5 failed tries an hour a customer,
# 100 an address):
# - 500 connections from one address, each one reservation of a different
#   unknown code and customer, all at once: at most the address's 100 plus
#   the stated bound (GW_GUARD_MEMORY_IN_FLIGHT, 1 a gateway) get 404, the
#   rest 429 (before issue 42: 500 404s);
# - 300 at once for one customer: at most 5 + 1 get 404 (before: 64);
# - Redis at maxmemory (noeviction): failed tries are never 404 unpaid (before
#   issue 42: 10 of 10 got 404, nothing counted): counted in
#   voucher_gateway_guard_write_errors_total and logged, and since issue 46's
#   slice 3 paid in the gateway's local limiter (the customer's 5, then 429;
#   before it, 503); once Redis takes writes again, 404 from Redis;
# - a Redis whose maxmemory-policy would evict the buckets is named in a
#   warning at start; a Redis user that may not read INFO gets a warning
#   that the policy could not be checked;
# - honest reservations from one address at once run on the gateway's lease
#   of the address's tries, which goes back to Redis when the gateway stops.
# Each run guesses from addresses of its own (127.x.y.z, the loopback) so
# that the stack's 127.0.0.1 buckets are left alone for the other tests.
source "$(dirname "$0")/lib.sh"
plan 13

guessers() { python3 "$VOUCHER_SOURCE_DIR/tests/integration/hostile_guess.py" "$@"; }
count() { tr ' ' '\n' <<<"$1" | awk -F: -v s="$2" '$1 == s { n = $2 } END { print n + 0 }'; }
rnd() { od -An -N1 -tu1 /dev/urandom | tr -d ' '; }
fresh_addr() { echo "127.$(($(rnd) % 200 + 20)).$(rnd).$(($(rnd) % 250 + 2))"; }

old_maxmemory=$(rcli CONFIG GET maxmemory | sed -n 2p)
old_policy=$(rcli CONFIG GET maxmemory-policy | sed -n 2p)
fill_key="hostile_guard:fill:$$"
restore_redis() {
  [ -z "${lease_bucket:-}" ] || rcli DEL "$lease_bucket" >/dev/null
  [ -z "${noinfo_user:-}" ] || rcli ACL DELUSER "$noinfo_user" >/dev/null
  rcli DEL "$fill_key" >/dev/null
  rcli CONFIG SET maxmemory "${old_maxmemory:-0}" >/dev/null
  rcli CONFIG SET maxmemory-policy "${old_policy:-noeviction}" >/dev/null
}
# Redis is given back its memory even when the test fails half-way.
trap 'restore_redis; finish' EXIT
gateway_log=$VOUCHER_STACK_DIR/logs/$test_name-gateway.log
# What the gateway logged since log_mark (the log is kept across runs).
log_mark() { mark=$(wc -l <"$gateway_log" 2>/dev/null || echo 0); }
logged_since() { tail -n +$((mark + 1)) "$gateway_log" | grep -q "$1"; }

unset VOUCHER_API_TOKEN
# The documented limits, and room for 500 connections from one address (the
# per-address cap is not what this test is about).
VOUCHER_MAX_CONNECTIONS=4000 VOUCHER_MAX_CONNECTIONS_PER_IP=2000 start_gateway \
  --guard-customer-tries 5 --guard-customer-window 1h --guard-ip-tries 100 --guard-ip-window 1h
admin=$(gateway_admin)
p=$(unique_code HOSTILE)

# --- 500 guesses at once from one address, each a different customer: the
# address's bucket (100) is what holds them.
out=$(guessers "$VOUCHER_HTTP_ADDR" "$(fresh_addr)" 500 "${p}_A" 0)
n404=$(count "$out" 404) n429=$(count "$out" 429)
diag "500 parallel guesses from one address, 500 customers: $out (allowance 100, bound 1)"
ok "$([ "$n404" -le 101 ]; echo $?)" "500 parallel guesses from one address: at most 100 + 1 get 404 ($n404)"
is "$((n404 + n429))" 500 "every other one gets 429 (404 $n404 + 429 $n429)"

# --- 300 at once for one customer, from another fresh address: the
# customer's bucket (5) holds them.
customer=$(( $(od -An -N4 -tu4 /dev/urandom | tr -d ' ') + 1000000 ))
out=$(guessers "$VOUCHER_HTTP_ADDR" "$(fresh_addr)" 300 "${p}_C" "$customer")
n404=$(count "$out" 404) n429=$(count "$out" 429)
diag "300 parallel guesses for one customer: $out (allowance 5, bound 1)"
ok "$([ "$n404" -le 6 ]; echo $?)" "300 parallel guesses for one customer: at most 5 + 1 get 404 ($n404)"
is "$((n404 + n429))" 300 "every other one gets 429 (404 $n404 + 429 $n429)"

# --- Redis full. maxmemory just above what it uses, noeviction (what the
# stack and the runbook require), then one value that takes it over: every
# write is refused from then on, reads are not.
errors_before=$(metric_sum "$admin" voucher_gateway_guard_write_errors_total)
log_mark
rcli CONFIG SET maxmemory-policy noeviction >/dev/null
used=$(rcli INFO memory | awk -F: '$1 == "used_memory" { print $2 + 0 }')
rcli CONFIG SET maxmemory $((used + 65536)) >/dev/null
rcli EVAL "return redis.call('SET', KEYS[1], string.rep('x', tonumber(ARGV[1])))" 1 \
  "$fill_key" 262144 >/dev/null
refused=$(rcli SET hostile_guard:probe 1)
is "${refused%% *}" OOM "Redis is full: a write is refused ($refused)"
customer2=$((customer + 1)) statuses= addr3=$(fresh_addr)
for i in $(seq 1 10); do
  http POST "/vouchers/${p}_FULL$i/reservations" \
    '{"customerId":'"$customer2"',"orderId":"'"$p-full-$i"'","orderAmount":1000}' --interface "$addr3"
  statuses+="$status "
done
n404=$(grep -o 404 <<<"$statuses" | wc -l) n429=$(grep -o 429 <<<"$statuses" | wc -l)
diag "10 failed tries with Redis full: $statuses"
# The first may be let through from memory (the bucket nobody spent) before
# its spend is refused: the bound GW_GUARD_MEMORY_IN_FLIGHT; every one after
# takes its try in Redis, that write is refused, and the local limiter takes
# it from the customer's bucket in the gateway's memory (5 tries): then 429.
ok "$([ "$n404" -le 6 ] && [ $((n404 + n429)) -eq 10 ]; echo $?)" \
  "10 failed tries with Redis full: at most the one from memory + 5 local get 404, the rest 429: $n404 404, $n429 429"
errors_after=$(metric_sum "$admin" voucher_gateway_guard_write_errors_total)
ok "$(awk -v a="${errors_after:-0}" -v b="${errors_before:-0}" 'BEGIN { exit !(a - b >= 9) }'; echo $?)" \
  "voucher_gateway_guard_write_errors_total counted them (${errors_before:-0} -> ${errors_after:-0})"
logged_since "guessing limits: a try could not be taken.*redis full at maxmemory"
ok $? "the gateway says so in its log"
restore_redis
http POST "/vouchers/${p}_AFTER/reservations" \
  '{"customerId":'"$((customer + 2))"',"orderId":"'"$p-after"'","orderAmount":1000}' \
  --interface "$addr3"
is "$status" 404 "Redis takes writes again: a failed try is a 404 again"
daemon_stop "$test_name-gateway"

# --- A policy that would evict the buckets is named at start.
rcli CONFIG SET maxmemory-policy allkeys-lru >/dev/null
log_mark
start_gateway
policy_warned() { logged_since "maxmemory-policy is allkeys-lru"; echo $?; }
ok "$(wait_for 0 10 policy_warned)" "a gateway started on a Redis with maxmemory-policy allkeys-lru warns that it would evict its keys"
daemon_stop "$test_name-gateway"
restore_redis

# --- A Redis user that may not read INFO: the gateway says it could not check.
noinfo_user=hostile_guard_$$ noinfo_pw=$(head -c12 /dev/urandom | od -An -tx1 | tr -d ' \n')
hostport=${VOUCHER_REDIS_URL#redis://}
hostport=${hostport%%/*}
rcli ACL SETUSER "$noinfo_user" on ">$noinfo_pw" '~*' '&*' '+@all' '-info' >/dev/null
log_mark
VOUCHER_REDIS_URL="redis://$noinfo_user:$noinfo_pw@$hostport/0" start_gateway
not_checked() { logged_since "could not check redis's maxmemory-policy"; echo $?; }
ok "$(wait_for 0 10 not_checked)" "a Redis user refused INFO: the gateway warns that it could not check the policy"
daemon_stop "$test_name-gateway"
rcli ACL DELUSER "$noinfo_user" >/dev/null

# --- The lease: 32 connections of honest reservations from 127.0.0.1 hold
# some of the address's tries on the gateway; stopped mid-load, the gateway
# gives them back (else they stay taken until the bucket refills them).
lease_code=$(unique_code HGLEASE)
new_voucher "$lease_code" 1000000 1
lease_bucket='guard:{ip:v:127.0.0.1}'
rcli DEL "$lease_bucket" >/dev/null
VOUCHER_GATEWAY_THREADS=1 start_gateway \
  --guard-customer-tries 5 --guard-customer-window 1h --guard-ip-tries 100 --guard-ip-window 1h
"$bin_load" --code "$lease_code" --attempts 1000000 --connections 32 --customers 0 \
  --customer-base "$((customer + 100))" --duration 30s --out "$scratch/lease.tsv" >/dev/null 2>&1 &
load_pid=$!
held() { [ -n "$(rcli HGET "$lease_bucket" level)" ] && echo yes || echo no; }
is "$(wait_for yes 20 held)" yes "honest load from one address: the gateway holds some of its tries"
diag "the address's bucket during the load: $(rcli HGETALL "$lease_bucket" | tr '\n' ' ')"
daemon_stop "$test_name-gateway"
wait "$load_pid"
is "$(rcli EXISTS "$lease_bucket")" 0 "stopped mid-load, the gateway gave them back: the address's bucket is full"
