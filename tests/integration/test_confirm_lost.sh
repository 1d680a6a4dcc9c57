#!/usr/bin/env bash
# A confirm answered 503 must not hold a use forever (promise 4;
# proto/redis-keys.md, "A confirm answered 503"). The order service confirms a
# reservation PostgreSQL has RESERVED; the gateway's call to Redis times out
# (503), but Redis runs confirm.lua anyway: the order is C, its total in paid,
# and no VoucherConfirmed is ever published. Opened deterministically: Redis
# holds writes (CLIENT PAUSE WRITE), the gateway's 300 ms timeout passes, and
# the gateway stops at its pause point confirm-after-redis-error before it
# answers 503; the test lets Redis run the held script there, sees the order
# C, then lets the 503 go.
#
# The reconciler daemon (not --once) finds it by its periodic full read (the
# voucher's numbers agree, so it is not read in full every pass:
# VOUCHER_RECONCILE_FULL_EVERY) and, past heldUntil and the grace, publishes
# the missing VoucherConfirmed with the figures Redis confirmed: PostgreSQL
# has the row CONFIRMED at the final total, Redis keeps C, no use is given
# back, the event is on voucher-events once, and --once says consistent. The
# client's late retry of the confirm answers 200 and changes nothing (the
# writer applies the second VoucherConfirmed as a no-op). The same for a
# campaign's one-time code.
# Pauses the stack's Redis for a moment: run it on a private stack (tests/run).
source "$(dirname "$0")/lib.sh"
plan 33

trap 'rcli CLIENT UNPAUSE >/dev/null 2>&1; pause_go confirm-after-redis-error; finish' EXIT

# Holds of 8 s, a grace of 4 s above the gateway's delivery timeout of 2 s, a
# pass every second, a quiet voucher read in full every 2 s.
export VOUCHER_KAFKA_TIMEOUT=2s VOUCHER_REDIS_TIMEOUT=300ms
source "$(dirname "$0")/campaign_lib.sh"
export VOUCHER_PAUSE=confirm-after-redis-error VOUCHER_PAUSE_DIR=$pause_dir
campaign_test CL '"name":"confirm lost","count":3,"discountPercent":10,"maxDiscountAmount":5000' \
  --hold-ttl 8s
unset VOUCHER_PAUSE
start_reconciler "" --interval 1s --grace 4s --full-every 2s
grace_ms=4000

code=$(unique_code CONFLOST)
sql "INSERT INTO voucher (code, mode, discount_amount, discount_percent, max_discount_amount,
                          min_order_amount, total_limit, per_user_limit, starts_at, ends_at)
     VALUES ('$code', 'flash', 0, 10, 5000, 0, 5, 1, now() - interval '1 hour', now() + interval '1 day')" >/dev/null
campaign_codes one
order=$code-o1 corder=$o-c1

reserve_at() { # CODE CUSTOMER ORDER -> $status
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":40000}"
}
state() { rcli HGET "$1:orders" "$2" | cut -d: -f4; } # KEYS-PREFIX ORDER
row() { # TABLE ORDER: status, the quote, the confirmed figures
  sql "SELECT status, order_amount, discount_amount, coalesce(confirmed_order_amount::text, '-'),
              coalesce(confirmed_discount_amount::text, '-') FROM $1 WHERE order_id = '$2'"
}
# The VoucherConfirmed events Kafka holds for ORDER: every partition from the test's
# start (the partition is not known here); on a busy stack kcat can fail to fetch: try again.
t0=$(now_ms)
confirms_of() {
  local out i
  for ((i = 0; i < 5; i++)); do
    out=$(kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -o "s@$t0" -e -q -f '%s\n' 2>/dev/null) && break
    sleep 0.5
  done
  grep '"type":"VoucherConfirmed"' <<<"$out" | grep -c "\"orderId\":\"$1\""
}
# Until Kafka holds N of them, at most SECONDS: ORDER N SECONDS; prints the last count.
wait_confirms() {
  local until=$(($(now_ms) + $3 * 1000)) got
  while :; do
    got=$(confirms_of "$1")
    { [ "$got" = "$2" ] || [ "$(now_ms)" -ge "$until" ]; } && break
    sleep 0.2
  done
  echo "$got"
}
# Until the writer has applied every event Kafka holds (--once: none after its committed
# offsets), at most 30 s. Its output is read whole: --once exits 1 or 3 while some voucher of
# the stack is undersold or behind, which is not what this waits for.
drained() {
  local until=$(($(now_ms) + 30000)) out
  while [ "$(now_ms)" -lt "$until" ]; do
    out=$("$bin_reconciler" --once --report-only 2>/dev/null)
    grep -q '; 0 events after the writer' <<<"$out" && return 0
    sleep 0.2
  done
  diag "still in flight: $(tail -1 <<<"$out")"
  return 1
}
verdict_of() { "$bin_reconciler" --once --report-only 2>/dev/null | awk -v c="$1" '$1 == c { print $NF }'; }
# Whether the daemon logged publishing ORDER's confirm and counts at least one of KIND
# (voucher, campaign): others may be left from earlier tests on the stack.
published() { # KIND ORDER
  local n lines
  n=$(metric "$(reconciler_admin 0)" "voucher_reconciler_confirms_published_total{of=\"$1\"}")
  lines=$(grep -F "\"orderId\":\"$2\"" "$VOUCHER_STACK_DIR/logs/$test_name-reconciler.log")
  grep -q 'published the VoucherConfirmed' <<<"$lines" && [ "${n:-0}" -ge 1 ]
}

# lost_confirm PATH-CODE KEYS-PREFIX ORDER: the confirm of ORDER at the total 30000,
# answered 503 after Redis ran it. Sets $lost to "STATUS STATE": the answer's status
# and the order's state in Redis when the 503 went.
lost_confirm() {
  local pid
  rcli CLIENT PAUSE 60000 WRITE >/dev/null
  curl -s -o "$scratch/confirm.body" -w '%{http_code}' --max-time 60 -X POST \
    -H 'Content-Type: application/json' --data-binary '{"orderAmount":30000}' \
    "$base_url/vouchers/$1/reservations/$3/confirm" >"$scratch/confirm.status" &
  pid=$!
  pause_wait confirm-after-redis-error 30 || echo "# the confirm did not reach confirm-after-redis-error"
  rcli CLIENT UNPAUSE >/dev/null
  lost=$(wait_for C 10 state "$2" "$3")
  pause_go confirm-after-redis-error
  wait "$pid"
  lost="$(cat "$scratch/confirm.status") $lost"
}

# ---- A voucher's order ----
reserve_at "$code" 1 "$order"
is "$status" 201 "a reservation of the voucher: 201"
is "$(wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$order'" RESERVED 30)" RESERVED \
  "the writer applied it: RESERVED in PostgreSQL"
reserve_at "$one" $((base + 1)) "$corder"
is "$status" 201 "a reservation of a campaign's code: 201"
is "$(wait_sql "SELECT status FROM campaign_redemption WHERE order_id = '$corder'" RESERVED 30)" RESERVED \
  "the writer applied it: RESERVED in PostgreSQL"
# The daemon has read both in full since (its first passes), and they are quiet now.
metric_wait "$(reconciler_admin 0)" 'voucher_reconciler_passes_total{result="ok"}' $(($(reconciler_passes) + 2)) 30
ok $? "the reconciler daemon passed twice since"
used=$(sql "SELECT used_count FROM voucher WHERE code = '$code'")
remaining=$(rcli GET "voucher:{$code}:remaining")

lost_confirm "$code" "voucher:{$code}" "$order"
is "$lost" "503 C" "the confirm answered 503 while Redis ran it: the order is C in Redis"
is "$(jq -r .error "$scratch/confirm.body")" UNAVAILABLE "the 503 says UNAVAILABLE: outcome unknown, retry"
is "$(rcli HGET "voucher:{$code}:paid" "$order")" 30000 "Redis recorded the total it confirmed the order at"
lost_confirm "$one" "$k" "$corder"
is "$lost" "503 C" "the campaign code's confirm answered 503 while Redis ran it: C in Redis"
is "$(row voucher_redemption "$order")|$(row campaign_redemption "$corder")" \
  "RESERVED|40000|4000|-|-|RESERVED|40000|4000|-|-" "PostgreSQL still has both RESERVED"
is "$(confirms_of "$order") $(confirms_of "$corder")" "0 0" "no VoucherConfirmed of either was published"

# ---- The daemon publishes the lost confirms past heldUntil and the grace ----
held=$(rcli HGET "voucher:{$code}:orders" "$order" | cut -d: -f3)
is "$(wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$order'" CONFIRMED 30)" CONFIRMED \
  "the voucher's order is CONFIRMED in PostgreSQL"
since=$(($(now_ms) - held))
ok "$([ "$since" -ge "$grace_ms" ]; echo $?)" "not before heldUntil and the grace (${since} ms past heldUntil)"
is "$(row voucher_redemption "$order")" "CONFIRMED|40000|4000|30000|3000" \
  "with the figures Redis confirmed: the final total 30000 and its discount 3000"
is "$(state "voucher:{$code}" "$order") $(sql "SELECT used_count FROM voucher WHERE code = '$code'") $(rcli GET "voucher:{$code}:remaining")" \
  "C $used $remaining" "Redis keeps C, and no use was given back or taken (used_count, remaining)"
is "$(confirms_of "$order")" 1 "the VoucherConfirmed is on voucher-events once"
published voucher "$order"
ok $? "the daemon logged it, and voucher_reconciler_confirms_published_total{of=\"voucher\"} counts it"
drained
ok $? "nothing is in flight"
is "$(verdict_of "$code")" consistent "voucher-reconciler --once: consistent"

is "$(wait_sql "SELECT status FROM campaign_redemption WHERE order_id = '$corder'" CONFIRMED 30)" CONFIRMED \
  "the campaign code's order is CONFIRMED in PostgreSQL"
is "$(row campaign_redemption "$corder")" "CONFIRMED|40000|4000|30000|3000" \
  "with the figures Redis confirmed"
is "$(state "$k" "$corder") $(rcli HGET "$k:taken" "$one")" "C $corder" "Redis keeps it C, the code taken by it"
is "$(confirms_of "$corder")" 1 "its VoucherConfirmed is on voucher-events once"
published campaign "$corder"
ok $? "the daemon logged it, and voucher_reconciler_confirms_published_total{of=\"campaign\"} counts it"

# ---- The client's late retry: 200, and nothing changes ----
http POST "/vouchers/$code/reservations/$order/confirm" '{"orderAmount":30000}'
is "$status $(jq -c '[.status, .orderAmount, .discountAmount, .replayed]' <<<"$body")" \
  '200 ["CONFIRMED",30000,3000,true]' "the late retry of the confirm: 200 replayed, the same figures"
is "$(wait_confirms "$order" 2 10)" 2 "it published the VoucherConfirmed again"
drained
ok $? "the writer applied it"
is "$(row voucher_redemption "$order") $(sql "SELECT used_count FROM voucher WHERE code = '$code'") $(rcli GET "voucher:{$code}:remaining")" \
  "CONFIRMED|40000|4000|30000|3000 $used $remaining" "the row, used_count and remaining are unchanged"
is "$(verdict_of "$code")" consistent "voucher-reconciler --once: still consistent"
http POST "/vouchers/$one/reservations/$corder/confirm" '{"orderAmount":30000}'
is "$status $(jq -c '[.status, .orderAmount, .discountAmount, .replayed]' <<<"$body")" \
  '200 ["CONFIRMED",30000,3000,true]' "the campaign code's late retry: 200 replayed, the same figures"
is "$(wait_confirms "$corder" 2 10)" 2 "it published the VoucherConfirmed again"
drained
ok $? "the writer applied it"
is "$(row campaign_redemption "$corder") $(rcli HGET "$k:taken" "$one")" \
  "CONFIRMED|40000|4000|30000|3000 $corder" "its row is unchanged, the code still taken by it"
