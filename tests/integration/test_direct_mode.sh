#!/usr/bin/env bash
# Direct mode (proto/direct-mode.md, issue 46 slice 2): a voucher whose mode is
# 'direct' is decided by PostgreSQL alone, one dr_* call per request, and
# answers as a flash voucher answers the same situation.
# - Every answer of reserve, retry, confirm, cancel and quote on a direct voucher
#   beside a flash voucher of the same rules: the same status, error, reason,
#   detail and figures (the body without its code, orderId and heldUntil).
# - The rows and used_count are in PostgreSQL at the 201, with no writer
#   running; one outbox row per change, none for a refusal or a retry, each
#   with the fields flash mode's event has on Kafka; no Redis key of the voucher.
# - Many reservations at once: exactly the limit taken, no CHECK violation, no
#   503; one customer's at once: one; one orderId's at once: one use.
# - Redis unreachable (a gateway of this test pointed at a closed port): a
#   direct voucher answers 201/200/409 while a flash one answers 503; with the
#   guessing limits on too, the local limiter taking the guard's tries (slice 3:
#   test_direct_outage.sh has its numbers).
# - Kafka unreachable (a gateway of this test pointed at a closed port): a
#   direct voucher answers 201 and 200 (the gateway never produces for it),
#   a flash one 503.
source "$(dirname "$0")/lib.sh"
plan 98

export VOUCHER_GATEWAY_THREADS=2
t0=$(now_ms)
start_gateway

# voucher MODE CODE LIMIT [PER_CUSTOMER] [ACTIVE] [STARTS] [ENDS]: discount 500, minimum 100.
voucher() {
  sql "INSERT INTO voucher (code, mode, discount_amount, min_order_amount, total_limit, per_user_limit,
                            active, starts_at, ends_at)
       VALUES ('$2', '$1', 500, 100, $3, ${4:-1}, ${5:-true}, ${6:-now() - interval '1 hour'},
               ${7:-now() + interval '1 day'})"
}
f=$(unique_code DMF) d=$(unique_code DMD)
voucher flash "$f" 2
voucher direct "$d" 2

# What a client compares: the status, and the body without the fields that name the
# code, the order or the time of the hold.
view() { echo "$status $(jq -cS 'del(.orderId, .code, .heldUntil)' <<<"$body" 2>/dev/null)"; }
# both DESCRIPTION WANT METHOD PATH [BODY]: the request on the flash voucher, then on the
# direct one (@ in PATH and BODY is the voucher's code), each answer checked against WANT
# (status and error, or status field), and the direct answer's view against the flash one's.
both() {
  local desc=$1 want=$2 method=$3 path=$4 data=${5:-} fview
  http "$method" "${path//@/$f}" "${data//@/$f}"
  fview=$(view) fanswer=$(answer)
  http "$method" "${path//@/$d}" "${data//@/$d}"
  is "$fanswer | $(answer)" "$want | $want" "$desc: $want in both modes"
  is "$(view)" "$fview" "$desc: the direct answer's body is the flash one's"
}
reserve() { echo "{\"customerId\":$1,\"orderId\":\"@-$2\",\"orderAmount\":${3:-1000}}"; }
used() { sql "SELECT used_count FROM voucher WHERE code = '$1'"; }
rows() { sql "SELECT string_agg(order_id || ':' || status, ',' ORDER BY order_id) FROM voucher_redemption WHERE voucher_code = '$1'"; }
outbox() { sql "SELECT count(*) FROM event_outbox WHERE event_key = '$1'"; }

# ---- reserve: new, retry, conflicts, limits ----
both "a new reservation" "201 " POST "/vouchers/@/reservations" "$(reserve 1 o1)"
is "$(used "$d") $(rows "$d")" "1 $d-o1:RESERVED" \
  "at the 201, with no writer running: the row and used_count are in PostgreSQL"
is "$(outbox "$d")" 1 "one outbox row for the reservation"
both "the same request again" "201 " POST "/vouchers/@/reservations" "$(reserve 1 o1)"
is "$(jq -r .replayed <<<"$body") $(used "$d") $(outbox "$d")" "true 1 1" \
  "the retry says replayed, takes nothing, writes no outbox row"
both "the orderId with another amount" "409 ORDER_CONFLICT" POST "/vouchers/@/reservations" "$(reserve 1 o1 1001)"
both "the orderId from another customer" "409 ORDER_CONFLICT" POST "/vouchers/@/reservations" "$(reserve 9 o1)"
both "the customer's second use" "409 ALREADY_USED" POST "/vouchers/@/reservations" "$(reserve 1 o2)"
both "an order below the minimum" "422 NOT_ELIGIBLE" POST "/vouchers/@/reservations" "$(reserve 2 o3 50)"
is "$(jq -r .reason <<<"$body")" ORDER_TOO_SMALL "with the reason ORDER_TOO_SMALL"
both "a quote" "200 " POST "/vouchers/@/quote" '{"customerId":3,"orderAmount":1000}'
both "a quote for a customer at the limit" "409 ALREADY_USED" POST "/vouchers/@/quote" '{"customerId":1,"orderAmount":1000}'
both "the last use" "201 " POST "/vouchers/@/reservations" "$(reserve 2 o4)"
both "sold out" "409 OUT_OF_STOCK" POST "/vouchers/@/reservations" "$(reserve 3 o5)"
both "a quote when sold out" "409 OUT_OF_STOCK" POST "/vouchers/@/quote" '{"customerId":3,"orderAmount":1000}'
is "$(used "$d") $(outbox "$d") $(rows "$d")" "2 2 $d-o1:RESERVED,$d-o4:RESERVED" \
  "refusals leave no row, no use and no outbox row"

# ---- confirm and cancel ----
both "a confirm with the final total" "200 CONFIRMED" POST "/vouchers/@/reservations/@-o1/confirm" '{"orderAmount":2000}'
both "the same confirm again" "200 CONFIRMED" POST "/vouchers/@/reservations/@-o1/confirm" '{"orderAmount":2000}'
both "a confirm at another total" "409 ALREADY_CONFIRMED" POST "/vouchers/@/reservations/@-o1/confirm" '{"orderAmount":3000}'
both "a confirm without a total" "200 CONFIRMED" POST "/vouchers/@/reservations/@-o1/confirm"
both "a confirm below the minimum" "422 NOT_ELIGIBLE" POST "/vouchers/@/reservations/@-o4/confirm" '{"orderAmount":50}'
both "a cancel" "200 RELEASED" DELETE "/vouchers/@/reservations/@-o4"
is "$(used "$d") $(rows "$d")" "1 $d-o1:CONFIRMED,$d-o4:RELEASED" "at the 200: the rows and the use back"
both "the same cancel again" "200 RELEASED" DELETE "/vouchers/@/reservations/@-o4"
both "a confirm of a released order" "409 HOLD_EXPIRED" POST "/vouchers/@/reservations/@-o4/confirm"
both "a retry of a released reservation" "409 HOLD_EXPIRED" POST "/vouchers/@/reservations" "$(reserve 2 o4)"
both "a confirm of an unknown order" "404 NOT_FOUND" POST "/vouchers/@/reservations/@-o9/confirm"
both "a cancel of an unknown order" "404 NOT_FOUND" DELETE "/vouchers/@/reservations/@-o9"
both "a cancel of a confirmed order" "200 RELEASED" DELETE "/vouchers/@/reservations/@-o1"
is "$(used "$d") $(outbox "$d")" "0 5" \
  "five changes (two reservations, a confirm, two cancels), five outbox rows"
is "$(sql "SELECT string_agg(payload::json->>'type', ',' ORDER BY id) FROM event_outbox WHERE event_key = '$d'")" \
  VoucherReserved,VoucherReserved,VoucherConfirmed,VoucherReleased,VoucherReleased \
  "the outbox holds the events in the order of the changes"
is "$(rcli KEYS "voucher:{$d}:*" | grep -c .)" 0 "no Redis key of the direct voucher"

# The events: each outbox row has the fields of flash mode's event on Kafka for the same change.
# Every partition from the test's start (the partition is not known here); other tests'
# poison events may be on the topic, so a line that is not JSON is skipped, not fatal.
kafka_event() { # TYPE ORDER: flash mode's event on the topic, as JSON
  local out i
  for ((i = 0; i < 50; i++)); do
    out=$(kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -o "s@$t0" -e -q -f '%s\n' 2>/dev/null |
      jq -cR "fromjson? | select(.type == \"$1\" and .orderId == \"$2\")" 2>/dev/null | head -1)
    [ -n "$out" ] && break
    sleep 0.2
  done
  echo "$out"
}
outbox_event() { sql "SELECT payload FROM event_outbox WHERE event_key = '$d' AND payload::json->>'type' = '$1' AND payload::json->>'orderId' = '$2' ORDER BY id LIMIT 1"; }
shape() { jq -cS 'del(.code, .orderId, .reservedAt, .confirmedAt, .releasedAt, .heldUntil) + {fields: (keys | join(","))}' 2>/dev/null; }
for e in VoucherReserved:o1 VoucherConfirmed:o1 VoucherReleased:o4; do
  is "$(outbox_event "${e%:*}" "$d-${e#*:}" | shape)" "$(kafka_event "${e%:*}" "$f-${e#*:}" | shape)" \
    "${e%:*} of ${e#*:}: the outbox row has flash mode's fields and figures"
done

# ---- an orderId belongs to one voucher, across modes ----
http POST "/vouchers/$f/reservations" "{\"customerId\":5,\"orderId\":\"$f-x1\",\"orderAmount\":1000}"
fx=$(answer)
http POST "/vouchers/$d/reservations" "{\"customerId\":5,\"orderId\":\"$f-x1\",\"orderAmount\":1000}"
is "$fx | $(answer) | $(jq -r .detail <<<"$body")" \
  "201  | 409 ORDER_CONFLICT | this orderId was reserved with another voucher code" \
  "a flash voucher's orderId, its event not in PostgreSQL (no writer), is refused on a direct one"
is "$(rows "$d" | grep -c x1)" 0 "and no row was written for it"
http POST "/vouchers/$d/reservations" "{\"customerId\":6,\"orderId\":\"$d-x2\",\"orderAmount\":1000}"
http POST "/vouchers/$f/reservations" "{\"customerId\":6,\"orderId\":\"$d-x2\",\"orderAmount\":1000}"
is "$(answer) | $(jq -r .detail <<<"$body")" "409 ORDER_CONFLICT | this orderId was reserved with another voucher code" \
  "a direct voucher's orderId is refused on a flash one"

# ---- not eligible: the same reasons ----
for r in "INACTIVE false" "NOT_STARTED true now()+interval'1h' now()+interval'1d'" \
  "EXPIRED true now()-interval'1d' now()-interval'1h'"; do
  set -- $r
  f=$(unique_code DMF) d=$(unique_code DMD)
  voucher flash "$f" 5 1 "$2" "${3:-}" "${4:-}"
  voucher direct "$d" 5 1 "$2" "${3:-}" "${4:-}"
  both "a voucher $1" "422 NOT_ELIGIBLE" POST "/vouchers/@/reservations" "$(reserve 1 n1)"
  is "$(jq -r .reason <<<"$body")" "$1" "with the reason $1"
  both "a quote of a voucher $1" "422 NOT_ELIGIBLE" POST "/vouchers/@/quote" '{"customerId":1,"orderAmount":1000}'
done

# ---- at once ----
d=$(unique_code DMLOAD)
voucher direct "$d" 50
"$bin_load" --code "$d" --attempts 200 --connections 50 --order-prefix "$d-" --amount 1000 \
  --out "$scratch/load.tsv" >/dev/null
ok $? "vc-load ran 200 reservations of a direct voucher of 50 uses, 50 at a time"
is "$(awk -F'\t' 'NR > 1 { n[$4 " " $5]++ } END { for (k in n) print n[k] " x " k }' "$scratch/load.tsv" | sort | tr '\n' ';')" \
  "150 x 409 OUT_OF_STOCK;50 x 201 -;" "exactly 50 answered 201, the other 150 409 OUT_OF_STOCK, no 503"
is "$(used "$d") $(sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$d'") $(outbox "$d")" "50 50 50" \
  "used_count 50, 50 rows, 50 outbox rows"
d=$(unique_code DMCUST)
voucher direct "$d" 50
"$bin_load" --code "$d" --attempts 20 --connections 20 --customers 1 --order-prefix "$d-" --amount 1000 \
  --out "$scratch/cust.tsv" >/dev/null
is "$(awk -F'\t' 'NR > 1 { n[$4 " " $5]++ } END { for (k in n) print n[k] " x " k }' "$scratch/cust.tsv" | sort | tr '\n' ';')" \
  "1 x 201 -;19 x 409 ALREADY_USED;" "one customer's 20 reservations at once: one 201, 19 ALREADY_USED"
is "$(used "$d")" 1 "and one use taken"
same=()
for i in $(seq 1 10); do
  curl -s -o "$scratch/same.$i" -w '%{http_code}\n' -X POST -H 'Content-Type: application/json' \
    --data "{\"customerId\":7,\"orderId\":\"$d-same\",\"orderAmount\":1000}" "$base_url/vouchers/$d/reservations" \
    >"$scratch/same.$i.status" &
  same+=($!)
done
wait "${same[@]}" # these ten only: the daemons run in the background of this shell too
is "$(cat "$scratch"/same.*.status | sort | uniq -c | awk '{print $1 "x" $2}')" 10x201 \
  "one orderId's 10 reservations at once: all 201"
is "$(cat "$scratch"/same.? "$scratch"/same.10 | jq -r '.replayed // false' | sort | uniq -c | awk '{print $1 "x" $2}' | tr '\n' ' ')" \
  "1xfalse 9xtrue " "one of them new, nine replayed"
is "$(used "$d") $(sql "SELECT count(*) FROM voucher_redemption WHERE order_id = '$d-same'")" "2 1" \
  "one use and one row for the orderId"

# ---- Redis unreachable ----
closed=127.0.0.1:$((VOUCHER_PORT_BASE + 19))
f=$(unique_code DMF) d=$(unique_code DMD)
voucher flash "$f" 5
voucher direct "$d" 5
daemon_stop "$test_name-gateway"
VOUCHER_REDIS_URL=redis://$closed/0 start_gateway
both_down() { # DESCRIPTION FLASH-WANT DIRECT-WANT METHOD PATH [BODY]
  local data=${6:-} fa
  http "$4" "${5//@/$f}" "${data//@/$f}"
  fa=$(answer)
  http "$4" "${5//@/$d}" "${data//@/$d}"
  is "$fa | $(answer)" "$2 | $3" "$1"
}
both_down "Redis unreachable: a reservation" "503 UNAVAILABLE" "201 " POST "/vouchers/@/reservations" "$(reserve 1 r1)"
is "$(rows "$d")" "$d-r1:RESERVED" "Redis unreachable: the direct voucher's row is written"
both_down "Redis unreachable: its retry" "503 UNAVAILABLE" "201 " POST "/vouchers/@/reservations" "$(reserve 1 r1)"
both_down "Redis unreachable: a quote" "503 UNAVAILABLE" "200 " POST "/vouchers/@/quote" '{"customerId":2,"orderAmount":1000}'
both_down "Redis unreachable: a confirm" "503 UNAVAILABLE" "200 CONFIRMED" POST "/vouchers/@/reservations/@-r1/confirm"
both_down "Redis unreachable: the customer's second use" "503 UNAVAILABLE" "409 ALREADY_USED" POST "/vouchers/@/reservations" "$(reserve 1 r2)"
both_down "Redis unreachable: a cancel" "503 UNAVAILABLE" "200 RELEASED" DELETE "/vouchers/@/reservations/@-r1"
is "$(used "$d") $(outbox "$d")" "0 3" "Redis unreachable: the changes and their outbox rows, in PostgreSQL"
daemon_stop "$test_name-gateway"
VOUCHER_REDIS_URL=redis://$closed/0 VOUCHER_GUARD_CUSTOMER_TRIES=20 VOUCHER_GUARD_IP_TRIES=20 start_gateway
both_down "Redis unreachable, the guessing limits on: the local limiter lets only the direct one on" \
  "503 UNAVAILABLE" "201 " POST "/vouchers/@/reservations" "$(reserve 3 r3)"
is "$(rows "$d" | grep -c r3)" 1 "the direct voucher's row is written"

# ---- Kafka unreachable ----
daemon_stop "$test_name-gateway"
VOUCHER_KAFKA_BROKERS=$closed VOUCHER_KAFKA_TIMEOUT=1s start_gateway
both_down "Kafka unreachable: a reservation" "503 UNAVAILABLE" "201 " POST "/vouchers/@/reservations" "$(reserve 4 k1)"
is "$(rows "$d" | grep -o "$d-k1:RESERVED")" "$d-k1:RESERVED" "Kafka unreachable: the direct voucher's row is written"
both_down "Kafka unreachable: a confirm" "503 UNAVAILABLE" "200 CONFIRMED" \
  POST "/vouchers/@/reservations/@-k1/confirm"
is "$(sql "SELECT count(*) FROM event_outbox WHERE event_key = '$d' AND sent_at IS NULL")" 6 \
  "its events wait in the outbox, unsent (the relay is the reconciler's; r3 is the sixth)"
finish
