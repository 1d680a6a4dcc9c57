#!/usr/bin/env bash
# A cancel whose VoucherReleased cannot be published keeps the use taken: with
# Kafka stopped, DELETE answers 503, Redis still counts the use (order X, not
# confirmable), /readyz says not ready; once Kafka is back, the retried DELETE
# publishes, finishes, and gives the use back, and PostgreSQL agrees.
# Stops and starts the stack's Kafka: run it on a private stack (tests/run).
source "$(dirname "$0")/lib.sh"
plan 16

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
ready=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$base_url/readyz")
is "$ready" 503 "/readyz: 503 without a broker"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'")" 1 "PostgreSQL still counts the use"

kafka_back
ok $? "Kafka started again"
for ((i = 0; i < 300; i++)); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$base_url/readyz")" = 200 ] && break
  sleep 0.2
done
is "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$base_url/readyz")" 200 "/readyz: 200 once a broker is back"

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
