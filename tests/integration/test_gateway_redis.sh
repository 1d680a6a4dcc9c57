#!/usr/bin/env bash
# A slow Redis, made so with CLIENT PAUSE: a reservation whose script gets no
# reply within VOUCHER_REDIS_TIMEOUT answers 503 UNAVAILABLE (with Retry-After)
# on time, alone: the connection stays, the next request after the pause is
# served on it, and a retry of the late order gets its 201 (the script ran
# when Redis woke up). Only a Redis silent for several timeouts (2 s at least)
# makes the gateway drop the connection and connect again; a retry of the order
# that got 503 then gets its 201.
# Then the orderId's claim: a request refused and held (pause point) just
# before releasing its claim, while a second gateway takes a use for the same
# orderId under that claim, must not delete the claim when it goes on; the
# orderId then stays out of other vouchers.
# Pauses the stack's Redis: run it on a private stack (tests/run).
source "$(dirname "$0")/lib.sh"
plan 23

# Whatever happens, leave Redis serving the tests after this one.
trap 'rcli CLIENT UNPAUSE >/dev/null 2>&1; finish' EXIT

export VOUCHER_REDIS_TIMEOUT=300ms VOUCHER_GATEWAY_THREADS=1
log=$VOUCHER_STACK_DIR/logs/$test_name-gateway.log
log_from=$(($(wc -l <"$log" 2>/dev/null || echo 0) + 1)) # the log of earlier runs stays
start_gateway
new_log() { tail -n "+$log_from" "$log"; }
timeouts() { metric "$(gateway_admin)" 'voucher_gateway_redis_errors_total{kind="timeout"}'; }
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
# PING waits behind the pause like every client: it returns once Redis answers.
rcli PING >/dev/null
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
for ((i = 0; i < 60; i++)); do
  new_log | grep -q 'reconnecting' && break
  sleep 0.1
done
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

# --- The orderId's claim is released only by the request that holds it.
# Request A (gateway 1) claims an orderId and is refused OUT_OF_STOCK; it is
# held just before it releases the claim. Meanwhile a use comes back and
# request B of the same orderId and code (gateway 2) takes it under A's claim.
# A's late release must leave the claim, or the orderId could then be
# reserved with another voucher too (two uses, one PostgreSQL row).
daemon_stop "$test_name-gateway"
VOUCHER_PAUSE=reserve-before-unclaim VOUCHER_PAUSE_DIR=$pause_dir start_gateway
addr2=127.0.0.1:$((VOUCHER_PORT_BASE + 16))
VOUCHER_HTTP_ADDR=$addr2 VOUCHER_GATEWAY_ADMIN_ADDR=127.0.0.1:$((VOUCHER_PORT_BASE + 17)) \
  daemon_start "$test_name-gateway2" "$bin_gateway"
trap 'rcli CLIENT UNPAUSE >/dev/null 2>&1; pause_go reserve-before-unclaim; daemon_stop "$test_name-gateway2"; finish' EXIT
wait_http_ok "http://$addr2/healthz" 30
ok $? "a second gateway on $addr2"
via2() { # METHOD PATH [JSON]: lib.sh's http through the second gateway
  base_url=http://$addr2 admin_base_url=http://127.0.0.1:$((VOUCHER_PORT_BASE + 17)) http "$@"
}
claimed=$(unique_code CLAIMED)
other=$(unique_code OTHER)
new_voucher "$claimed" 1
new_voucher "$other" 5
order=$claimed-o
claim="voucher-order:{$order}"
via2 POST "/vouchers/$other/reservations" '{"customerId":1,"orderId":"'"$other"'-o1","orderAmount":1000}'
http POST "/vouchers/$claimed/reservations" '{"customerId":1,"orderId":"'"$claimed"'-filler","orderAmount":1000}'
is "$status" 201 "the voucher's only use is taken"
curl -s -o "$scratch/a.body" -w '%{http_code}' --max-time 30 -X POST -H 'Content-Type: application/json' \
  --data-binary '{"customerId":2,"orderId":"'"$order"'","orderAmount":1000}' \
  "$base_url/vouchers/$claimed/reservations" >"$scratch/a.status" &
a_pid=$!
pause_wait reserve-before-unclaim
ok $? "request A was refused and holds before releasing its claim ($(rcli GET "$claim"))"
via2 DELETE "/vouchers/$claimed/reservations/$claimed-filler"
is "$status" 200 "the use comes back (a cancel)"
via2 POST "/vouchers/$claimed/reservations" '{"customerId":2,"orderId":"'"$order"'","orderAmount":1000}'
is "$status" 201 "request B of the same orderId takes it under A's claim"
pause_go reserve-before-unclaim
wait "$a_pid"
is "$(cat "$scratch/a.status") $(jq -r .error "$scratch/a.body")" "409 OUT_OF_STOCK" "request A answers OUT_OF_STOCK"
# A quote through gateway 1 (one worker, one connection) is answered after
# A's release ran in Redis: commands of a connection run in order.
http POST "/vouchers/$claimed/quote" '{"customerId":9,"orderAmount":1000}'
is "$(rcli GET "$claim" | cut -d: -f1)" "$claimed" "A's late release left the claim B holds"
via2 POST "/vouchers/$other/reservations" '{"customerId":2,"orderId":"'"$order"'","orderAmount":1000}'
is "$status $(jq -r .error <<<"$body")" "409 ORDER_CONFLICT" "the orderId with another voucher: 409 ORDER_CONFLICT"
is "$(rcli GET "voucher:{$other}:remaining") $(rcli HEXISTS "voucher:{$other}:orders" "$order")" "4 0" \
  "the other voucher took nothing for it"
