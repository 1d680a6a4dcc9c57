#!/usr/bin/env bash
# A cancel whose VoucherReleased cannot be published keeps the use taken: with
# Kafka stopped, DELETE answers 503, Redis still counts the use (order X, not
# confirmable), /readyz says not ready; once Kafka is back, the retried DELETE
# publishes, finishes, and gives the use back, and PostgreSQL agrees.
# A reservation whose event Kafka definitely did not store keeps its hold
# (503, outcome unknown): a confirm of the order may have been published, and
# Redis cannot remember that across a lost write, so giving the use back could
# offer a use PostgreSQL counts. A retry of the same orderId, once Kafka is
# back, publishes again and gets its 201 (replayed) and the row; a retry while
# Kafka is still down is marked in resent and keeps the hold too.
# Stops and starts the stack's Kafka: run it on a private stack (tests/run).
source "$(dirname "$0")/lib.sh"
plan 25

stack=$VOUCHER_SOURCE_DIR/deploy/stack
kafka_back() { "$stack" up kafka >"$scratch/kafka-up.log" 2>&1; }
# Whatever happens, leave Kafka running for the tests after this one.
trap 'kafka_back; finish' EXIT

export VOUCHER_KAFKA_TIMEOUT=3s VOUCHER_GATEWAY_THREADS=2
start_gateway
start_writer

code=$(unique_code GWKAFKA)
new_voucher "$code" 2
http POST "/vouchers/$code/reservations" '{"customerId":1,"orderId":"'"$code"'-o1","orderAmount":1000}'
is "$status" 201 "a reservation while Kafka is up"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 1 30)" 1 "the writer applied it"

"$stack" down kafka >"$scratch/kafka-down.log" 2>&1
ok $? "Kafka stopped"

http DELETE "/vouchers/$code/reservations/$code-o1"
is "$status $(jq -r .error <<<"$body")" "503 UNAVAILABLE" "DELETE while Kafka is down: 503"
is "$(rcli GET "voucher:{$code}:remaining")" 1 "Redis still counts the use"
is "$(rcli HGET "voucher:{$code}:orders" "$code-o1" | cut -d: -f4)" X "the order is X: release begun, not finished"
is "$(rcli ZCARD "voucher:{$code}:releasing")" 1 "the release is listed for the reconciler"
http POST "/vouchers/$code/reservations/$code-o1/confirm"
is "$status $(jq -r .error <<<"$body")" "409 HOLD_EXPIRED" "a confirm after the cancel began: 409 HOLD_EXPIRED"
ready=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$(gateway_admin)/readyz")
is "$ready" 503 "/readyz: 503 without a broker"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'")" 1 "PostgreSQL still counts the use"

# Kafka definitely did not store it (never reachable): the hold is kept all the same.
code2=$(unique_code GWKAFKA)
new_voucher "$code2" 2
orders2="voucher:{$code2}:orders"
http POST "/vouchers/$code2/reservations" '{"customerId":2,"orderId":"'"$code2"'-o2","orderAmount":1000}'
is "$status $(jq -r .detail <<<"$body")" "503 event delivery (hold kept): outcome unknown" \
  "a reservation while Kafka is down: 503, outcome unknown, once the producer gives up"
is "$(rcli HGET "$orders2" "$code2-o2" | cut -d: -f4) $(rcli GET "voucher:{$code2}:remaining") $(rcli EXISTS "voucher-order:{$code2-o2}")" \
  "H 1 1" "'not persisted' does not give the use back: the order held, the orderId still claimed"

# A retry found the hold and published again before the first attempt's
# message timed out: the hold stays, and the retry is marked.
o3=$code2-o3
curl -s -o /dev/null --max-time 1 -X POST -H 'Content-Type: application/json' \
  --data-binary '{"customerId":3,"orderId":"'"$o3"'","orderAmount":1000}' "$base_url/vouchers/$code2/reservations"
# Answered when its own message times out (3 s); the bound is for a loaded
# machine running the sanitizer build (CI once took over 10 s).
http POST "/vouchers/$code2/reservations" '{"customerId":3,"orderId":"'"$o3"'","orderAmount":1000}' --max-time 30
is "$status" 503 "its retry (sent before the first attempt's message timed out): 503"
is "$(rcli HGET "$orders2" "$o3" | cut -d: -f4) $(rcli GET "voucher:{$code2}:remaining")" "H 0" \
  "the first attempt's 'not persisted' did not give the use back: still held"
[ -n "$(rcli ZSCORE "voucher:{$code2}:resent" "$o3")" ]
ok $? "the retry's publication is marked in voucher:{CODE}:resent"

kafka_back
ok $? "Kafka started again"
for ((i = 0; i < 300; i++)); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$(gateway_admin)/readyz")" = 200 ] && break
  sleep 0.2
done
is "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$(gateway_admin)/readyz")" 200 "/readyz: 200 once a broker is back"

# The retry: publishes VoucherReleased again (status 2) and finishes.
for ((i = 0; i < 20; i++)); do
  http DELETE "/vouchers/$code/reservations/$code-o1"
  [ "$status" = 200 ] && break
  sleep 1
done
is "$status $(jq -r .status <<<"$body")" "200 RELEASED" "the retried DELETE: 200 RELEASED"
is "$(rcli GET "voucher:{$code}:remaining") $(rcli HGET "voucher:{$code}:orders" "$code-o1" | cut -d: -f4)" "2 R" \
  "the use is back in Redis, the order R"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 0 60)" 0 "the writer gave the use back in PostgreSQL"
is "$(sql "SELECT status FROM voucher_redemption WHERE order_id = '$code-o1'")" RELEASED "the redemption is RELEASED"

# The retries once Kafka is back: their events are stored, and Redis and PostgreSQL agree.
http POST "/vouchers/$code2/reservations" '{"customerId":2,"orderId":"'"$code2"'-o2","orderAmount":1000}'
is "$status $(jq -r .replayed <<<"$body")" "201 true" "the retry of the 'not persisted' order once Kafka is back: 201 replayed"
http POST "/vouchers/$code2/reservations" '{"customerId":3,"orderId":"'"$o3"'","orderAmount":1000}'
is "$status $(jq -r .replayed <<<"$body")" "201 true" "the retry once Kafka is back: 201 replayed"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE order_id IN ('$code2-o2', '$o3') AND status = 'RESERVED'" 2 60)" 2 \
  "the writer inserted both kept reservations"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code2'" 2 30) $(rcli GET "voucher:{$code2}:remaining")" "2 0" \
  "PostgreSQL counts both uses, Redis offers none"
