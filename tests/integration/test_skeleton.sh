#!/usr/bin/env bash
# The walking skeleton, end to end on the real servers: the source document's
# concurrency test (a voucher of 10 uses, 200 customers at once), a retried
# orderId, the events in Kafka, PostgreSQL's rows, and the reconciler's verdict.
source "$(dirname "$0")/lib.sh"
plan 21

code=$(unique_code SKEL)
new_voucher "$code" 10
start_gateway
start_writer

# 200 concurrent attempts from 200 customers, one connection each.
"$bin_load" --code "$code" --attempts 200 --connections 200 --customers 200 \
  --order-prefix "$code-o" --out "$scratch/attempts.tsv" >"$scratch/summary.txt"
ok $? "vc-load ran 200 concurrent attempts"
created=$(awk -F'\t' '$4 == "201"' "$scratch/attempts.tsv" | wc -l)
out_of_stock=$(awk -F'\t' '$4 == "409" && $5 == "OUT_OF_STOCK"' "$scratch/attempts.tsv" | wc -l)
is "$created" 10 "exactly 10 of 200 answered 201"
is "$out_of_stock" 190 "the other 190 answered 409 OUT_OF_STOCK"

is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 10 30)" 10 \
  "the writer brought used_count to 10"
is "$(sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'")" 10 \
  "10 redemption rows"
is "$(sql "SELECT count(DISTINCT order_id) FROM voucher_redemption WHERE voucher_code = '$code' AND status = 'RESERVED'")" 10 \
  "10 distinct orders, all RESERVED"
is "$(rcli GET "voucher:{$code}:remaining")" 0 "Redis remaining is 0"

# A retry of a successful orderId: the same answer, nothing taken. The retry
# publishes its event again; once the writer has handled it, PostgreSQL must
# still count 10.
handled=$(writer_handled)
read -r order customer <<<"$(awk -F'\t' '$4 == "201" {print $2, $3; exit}' "$scratch/attempts.tsv")"
http POST "/vouchers/$code/reservations" "{\"customerId\":$customer,\"orderId\":\"$order\",\"orderAmount\":100000000}"
is "$status" 201 "a retried orderId answers 201 again"
is "$(jq -r .replayed <<<"$body")" true "the retry says replayed"
is "$(jq -r .orderId <<<"$body")" "$order" "the retry names the same order"
metric_wait "$(writer_admin)" voucher_writer_events_total "$((${handled:-0} + 1))" 30
ok $? "the writer handled the retry's event again"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'")" 10 "the retry took nothing in PostgreSQL (after the writer handled its event)"
is "$(rcli GET "voucher:{$code}:remaining")" 0 "the retry took nothing in Redis"

# The events, read back from Kafka: keyed by the voucher code, one order per use
# (the retry above published its order's event again, which the writer applies once).
kcat -b "$VOUCHER_KAFKA_BROKERS" -C -t voucher-events -o beginning -e -q \
  -f '%k\t%s\n' >"$scratch/events.tsv" 2>/dev/null
awk -F'\t' -v c="$code" '$1 == c' "$scratch/events.tsv" | grep -a '"type":"VoucherReserved"' |
  cut -f2- | jq -r .orderId | sort -u >"$scratch/event-orders.txt"
awk -F'\t' '$4 == "201" {print $2}' "$scratch/attempts.tsv" | sort -u >"$scratch/created-orders.txt"
is "$(wc -l <"$scratch/event-orders.txt")" 10 "VoucherReserved events keyed by the code name 10 orders"
is "$(comm -3 "$scratch/event-orders.txt" "$scratch/created-orders.txt" | wc -l)" 0 \
  "exactly the orders that were answered 201"
is "$(grep -a "\"code\":\"$code\"" "$scratch/events.tsv" | awk -F'\t' -v c="$code" '$1 != c' | wc -l)" 0 \
  "no event of this code under another key"

# Rejections a client can act on.
http POST "/vouchers/NOSUCH_$code/reservations" '{"customerId":1,"orderId":"x-1","orderAmount":1}'
is "$status $(jq -r .error <<<"$body")" "404 NOT_FOUND" "an unknown code answers 404 NOT_FOUND"
http POST "/vouchers/$code/reservations" '{"customerId":1,"orderId":'
is "$status $(jq -r .error <<<"$body")" "400 BAD_REQUEST" "a malformed body answers 400 BAD_REQUEST"
http POST "/vouchers/$code/reservations" '{"customerId":"seven","orderId":"x-2","orderAmount":1}'
ok "$(grep -q customerId <<<"$(jq -r .detail <<<"$body")"; echo $?)" "the 400's detail names the bad field"

# The reconciler agrees: PostgreSQL and Redis tell the same story once the
# writer settled (it may first say "behind" while offsets are being committed).
# Its exit status speaks for every voucher on the stack, which other tests
# share; the table's line speaks for this one.
for ((i = 0; i < 20; i++)); do
  "$bin_reconciler" --once --report-only >"$scratch/reconcile.txt" 2>&1
  rc=$?
  grep -q "^$code .* consistent$" "$scratch/reconcile.txt" && break
  sleep 0.5
done
ok "$([ "$rc" != 2 ]; echo $?)" "voucher-reconciler --once ran without errors (exit $rc)"
grep -q "^$code .* consistent$" "$scratch/reconcile.txt"
ok $? "the reconciler calls the voucher consistent"
