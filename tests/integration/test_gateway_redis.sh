#!/usr/bin/env bash
# A slow Redis, made so with CLIENT PAUSE: a reservation whose script gets no
# reply within VOUCHER_REDIS_TIMEOUT answers 503 UNAVAILABLE (with Retry-After)
# on time, alone: the connection stays, the next request after the pause is
# served on it, and a retry of the late order gets its 201 (the script ran
# when Redis woke up). Only a Redis silent for several timeouts (2 s at least)
# makes the gateway drop the connection and connect again; a retry of the order
# that got 503 then gets its 201.
# Pauses the stack's Redis: run it on a private stack (tests/run).
source "$(dirname "$0")/lib.sh"
plan 14

# Whatever happens, leave Redis serving the tests after this one.
trap 'rcli CLIENT UNPAUSE >/dev/null 2>&1; finish' EXIT

export VOUCHER_REDIS_TIMEOUT=300ms VOUCHER_GATEWAY_THREADS=1
log=$VOUCHER_STACK_DIR/logs/$test_name-gateway.log
log_from=$(($(wc -l <"$log" 2>/dev/null || echo 0) + 1)) # the log of earlier runs stays
start_gateway
new_log() { tail -n "+$log_from" "$log"; }
timeouts() { metric "$VOUCHER_HTTP_ADDR" 'voucher_gateway_redis_errors_total{kind="timeout"}'; }
reserve() { # ORDER CUSTOMER: sets status, body, headers and secs (the answer's time)
  http POST "/vouchers/$code/reservations" '{"customerId":'"$2"',"orderId":"'"$1"'","orderAmount":1000}'
}

code=$(unique_code SLOWREDIS)
new_voucher "$code" 10
reserve "$code-o1" 1
is "$status" 201 "a reservation while Redis answers"
before=$(timeouts)

# --- Redis answers 1.2 s late: the request fails alone, the connection stays.
rcli CLIENT PAUSE 1200 ALL >/dev/null
reserve "$code-o2" 2
is "$status $(jq -r .error <<<"$body")" "503 UNAVAILABLE" "a reservation while Redis is paused: 503 UNAVAILABLE"
ok "$(awk -v s="$secs" 'BEGIN { exit !(s < 1.0) }'; echo $?)" "answered after the 300 ms timeout, not after the pause (${secs}s)"
grep -qi '^retry-after:' "$scratch/headers"
ok $? "with Retry-After"
sleep 1.3
reserve "$code-o3" 3
is "$status" 201 "the next reservation after the pause: 201"
after=$(timeouts)
ok "$([ "${after:-0}" -gt "${before:-0}" ]; echo $?)" "the timeout is counted (voucher_gateway_redis_errors_total{kind=\"timeout\"} $before -> $after)"
new_log | grep -q 'reconnecting'
ok "$((! $?))" "the connection was kept: no reconnect in the log"
new_log | grep -q 'commands got no reply within 300 ms'
ok $? "the late command is logged as a warning"
reserve "$code-o2" 2
is "$status" 201 "a retry of the late order: 201 (replayed: $(jq -r .replayed <<<"$body"))"
is "$(rcli GET "voucher:{$code}:remaining")" 7 "Redis counts three uses: o1, o2 once, o3"

# --- Redis silent for 3 s: past 2 s the connection is taken as hung.
rcli CLIENT PAUSE 3000 ALL >/dev/null
reserve "$code-o4" 4
is "$status" 503 "a reservation at the start of a long pause: 503"
sleep 3.3
new_log | grep -q 'reconnecting'
ok $? "after 2 s without any reply the gateway dropped the connection: $(new_log | grep -o '"message":"redis[^"]*reconnecting' | head -1)"
for i in $(seq 1 50); do
  reserve "$code-o5" 5
  [ "$status" = 201 ] && break
  sleep 0.1
done
is "$status" 201 "once Redis answers again, reservations succeed on the new connection"
reserve "$code-o4" 4
is "$status" 201 "a retry of the order that got 503 during the pause: 201 (replayed: $(jq -r .replayed <<<"$body"))"
