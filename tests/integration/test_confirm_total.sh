#!/usr/bin/env bash
# Confirm against the final order (issue 24, proto/openapi.yaml "Confirm
# against the final order"), through real HTTP on the real stack:
# - a total below the minimum: 422 NOT_ELIGIBLE ORDER_TOO_SMALL with the
#   reservation's quote, and nothing recorded (Redis as it was, PostgreSQL
#   still RESERVED, no event); the same total again, the same 422; then the
#   right total confirms;
# - a percent voucher on a smaller basket: a smaller discount, in the answer
#   and in PostgreSQL's row, beside the reservation's quote; a larger basket
#   gets the cap;
# - the window closing while the buyer pays: the hold is confirmable until its
#   heldUntil, priced again, and still refused below the minimum;
# - retries: the same total replays the same answer; another total after a
#   success is 409 ALREADY_CONFIRMED with the confirmed figures; a 503 while
#   Redis is slow is settled by the retry;
# - no body, or {}, is the confirm of before; a bad body is 400 and changes
#   nothing;
# - the writer still applies a VoucherConfirmed of the old format (no figures).
# Pauses the stack's Redis for a moment: run it on a private stack (tests/run).
source "$(dirname "$0")/lib.sh"
plan 56

trap 'rcli CLIENT UNPAUSE >/dev/null 2>&1; finish' EXIT

export VOUCHER_GATEWAY_THREADS=2
start_gateway
start_writer

p=$(unique_code CONFTOT)
fixed=${p}_FIX pct=${p}_PCT late=${p}_LATE
# voucher CODE DISCOUNT PERCENT CAP MIN ENDS_IN
voucher() {
  sql "INSERT INTO voucher (code, mode, discount_amount, discount_percent, max_discount_amount,
                            min_order_amount, total_limit, per_user_limit, starts_at, ends_at)
       VALUES ('$1', 'flash', $2, $3, $4, $5, 100, 100, now() - interval '1 hour', now() + interval '$6')"
}
voucher "$fixed" 1000 NULL NULL 20000 '1 day'
voucher "$pct" 0 10 5000 20000 '1 day'

reserve() { # CODE ORDER AMOUNT
  http POST "/vouchers/$1/reservations" "{\"customerId\":1,\"orderId\":\"$2\",\"orderAmount\":$3}"
}
confirm() { http POST "/vouchers/$1/reservations/$2/confirm" "${3:-}"; } # CODE ORDER [JSON]
total() { echo "{\"orderAmount\":$1}"; }
# What a client reads: the status, then the answer's fields that matter.
answer() { echo "$status $(jq -c '[.error // .status, .reason, .orderAmount, .discountAmount,
                                    (.quote // .confirmed | if . then [.orderAmount, .discountAmount] else null end),
                                    .replayed]' <<<"$body")"; }
# Everything Redis keeps of an order: its value, its hold, its amounts.
redis_state() {
  local k="voucher:{$1}"
  echo "$(rcli HGET "$k:orders" "$2")|$(rcli ZSCORE "$k:holds" "$2")|$(rcli HGET "$k:amounts" "$2")|$(rcli HGET "$k:paid" "$2")"
}
row() { # ORDER: status, the reservation's quote, the confirmed figures
  sql "SELECT status, order_amount, discount_amount, coalesce(confirmed_order_amount::text, '-'),
              coalesce(confirmed_discount_amount::text, '-')
         FROM voucher_redemption WHERE order_id = '$1'"
}
wait_row() { wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$1'" "$2" 20 >/dev/null; row "$1"; }

# ---- The total shrinks below the minimum: refused, nothing recorded. ----
reserve "$fixed" "$fixed-a" 30000
is "$status $(jq -r .discountAmount <<<"$body")" "201 1000" "reserved at 30000: discount 1000"
is "$(wait_row "$fixed-a" RESERVED)" "RESERVED|30000|1000|-|-" "PostgreSQL has the hold"
before=$(redis_state "$fixed" "$fixed-a")
confirm "$fixed" "$fixed-a" "$(total 15000)"
is "$(answer)" '422 ["NOT_ELIGIBLE","ORDER_TOO_SMALL",null,null,[30000,1000],null]' \
  "confirm at 15000 (minimum 20000): 422 ORDER_TOO_SMALL with the earlier quote"
confirm "$fixed" "$fixed-a" "$(total 15000)"
is "$(answer)" '422 ["NOT_ELIGIBLE","ORDER_TOO_SMALL",null,null,[30000,1000],null]' "the retry: the same 422"
is "$(redis_state "$fixed" "$fixed-a")" "$before" "Redis unchanged: still held, same hold, no paid total"
# The voucher's events are one partition, in order: once a later reservation
# is in PostgreSQL, any event of the refused confirms would be too.
reserve "$fixed" "$fixed-b" 30000
wait_row "$fixed-b" RESERVED >/dev/null
is "$(row "$fixed-a")" "RESERVED|30000|1000|-|-" "PostgreSQL unchanged: still RESERVED (no event was published)"

confirm "$fixed" "$fixed-a" "$(total 25000)"
is "$(answer)" '200 ["CONFIRMED",null,25000,1000,null,null]' "then the right total: 200 with the final figures"
confirm "$fixed" "$fixed-a" "$(total 25000)"
is "$(answer)" '200 ["CONFIRMED",null,25000,1000,null,true]' "the retry with the same total: the same answer, replayed"
is "$(wait_row "$fixed-a" CONFIRMED)" "CONFIRMED|30000|1000|25000|1000" \
  "PostgreSQL: CONFIRMED at 25000 (discount 1000), the quote kept beside"
confirm "$fixed" "$fixed-a" "$(total 26000)"
is "$(answer)" '409 ["ALREADY_CONFIRMED",null,null,null,[25000,1000],null]' \
  "another total after the success: 409 ALREADY_CONFIRMED with the confirmed figures"
confirm "$fixed" "$fixed-a" "$(total 15000)"
is "$(answer)" '409 ["ALREADY_CONFIRMED",null,null,null,[25000,1000],null]' "and so is a total below the minimum"
confirm "$fixed" "$fixed-a"
is "$status $(jq -c . <<<"$body")" "200 {\"orderId\":\"$fixed-a\",\"code\":\"$fixed\",\"status\":\"CONFIRMED\",\"replayed\":true}" \
  "a confirm without a body afterwards: answered as before"
held=$(cut -d: -f3 <<<"$before")
is "$(redis_state "$fixed" "$fixed-a")" "1:1000:$held:C||30000|25000" \
  "Redis: confirmed, no longer in holds, the reservation's total and the paid one"

# ---- A percent voucher on a smaller basket: a smaller discount. ----
reserve "$pct" "$pct-a" 40000
is "$status $(jq -r .discountAmount <<<"$body")" "201 4000" "10% of 40000 reserved: 4000"
confirm "$pct" "$pct-a" "$(total 30000)"
is "$(answer)" '200 ["CONFIRMED",null,30000,3000,null,null]' "confirmed at 30000: discount 3000"
confirm "$pct" "$pct-a" "$(total 30000)"
is "$(answer)" '200 ["CONFIRMED",null,30000,3000,null,true]' "the retry: the same 3000, replayed"
is "$(wait_row "$pct-a" CONFIRMED)" "CONFIRMED|40000|4000|30000|3000" "PostgreSQL stores the smaller discount"
is "$(rcli HGET "voucher:{$pct}:orders" "$pct-a" | cut -d: -f2,4)" "3000:C" "Redis's order holds the final discount"
reserve "$pct" "$pct-b" 40000
confirm "$pct" "$pct-b" "$(total 90000)"
is "$(answer)" '200 ["CONFIRMED",null,90000,5000,null,null]' "a larger basket: 10% capped at 5000"
reserve "$pct" "$pct-c" 40000
confirm "$pct" "$pct-c" "$(total 40000)"
is "$(answer)" '200 ["CONFIRMED",null,40000,4000,null,null]' "the reservation's own total: its quote"

# ---- No body, {} and bad bodies. ----
reserve "$pct" "$pct-d" 40000
before=$(redis_state "$pct" "$pct-d")
for bad in '{"orderAmount":-1}' '{"orderAmount":"30000"}' '{"orderAmount":1.5}' '{"total":30000}' '{"orderAmount":' 'null'; do
  confirm "$pct" "$pct-d" "$bad"
  is "$(answer)" '400 ["BAD_REQUEST",null,null,null,null,null]' "a confirm with the body $bad: 400"
done
is "$(redis_state "$pct" "$pct-d")" "$before" "the bad bodies changed nothing in Redis"
confirm "$pct" "$pct-d" '{}'
is "$status $(jq -c . <<<"$body")" "200 {\"orderId\":\"$pct-d\",\"code\":\"$pct\",\"status\":\"CONFIRMED\"}" \
  "{} is a confirm without a total: the answer of before"
is "$(wait_row "$pct-d" CONFIRMED)" "CONFIRMED|40000|4000|-|-" "PostgreSQL: confirmed at the quote, no final figures"
confirm "$pct" "$pct-d" "$(total 40000)"
is "$(answer)" '200 ["CONFIRMED",null,40000,4000,null,true]' "then the reservation's total: replayed with the quote's figures"
confirm "$pct" "$pct-d" "$(total 30000)"
is "$(answer)" '409 ["ALREADY_CONFIRMED",null,null,null,[40000,4000],null]' \
  "another total: 409, it was confirmed at the reservation's"
is "$(rcli HGET "voucher:{$pct}:paid" "$pct-d")" 40000 "Redis records the total it was confirmed at, the reservation's"
# An order repaired to C from PostgreSQL after Redis lost a confirm's write has
# no paid entry: a retry of that confirm at its final total is not compared.
rcli HSET "voucher:{$pct}:orders" "$pct-a" "1:4000:$(rcli HGET "voucher:{$pct}:orders" "$pct-a" | cut -d: -f3):C" >/dev/null
rcli HDEL "voucher:{$pct}:paid" "$pct-a" >/dev/null
confirm "$pct" "$pct-a" "$(total 30000)"
is "$(answer)" '200 ["CONFIRMED",null,null,4000,null,true]'   "a confirmed order whose total Redis lost: not compared, 200 with its discount only"
reserve "$pct" "$pct-e" 40000
confirm "$pct" "$pct-e" ""
is "$status $(jq -c . <<<"$body")" "200 {\"orderId\":\"$pct-e\",\"code\":\"$pct\",\"status\":\"CONFIRMED\"}" \
  "no body at all: the answer of before"
confirm "$pct" "$pct-never" "$(total 30000)"
is "$(answer)" '404 ["NOT_FOUND",null,null,null,null,null]' "a total for an order never reserved: 404"
confirm "${p}_NONE" "$pct-a" "$(total 30000)"
is "$(answer)" '404 ["NOT_FOUND",null,null,null,null,null]' "a total for a voucher that does not exist: 404"

# ---- The window closes while the buyer pays. ----
# Decided (proto/openapi.yaml): a hold taken inside the window is confirmable
# until its heldUntil, also after endsAt; the total is priced again without
# the clock.
voucher "$late" 0 10 5000 20000 '5 seconds'
reserve "$late" "$late-a" 40000
is "$status" 201 "a hold taken just before endsAt"
reserve "$late" "$late-b" 40000
is "$status" 201 "and another"
is "$(wait_sql "SELECT now() >= ends_at FROM voucher WHERE code = '$late'" t 15)" t "endsAt passed"
http POST "/vouchers/$late/reservations" '{"customerId":2,"orderId":"'"$late-new"'","orderAmount":40000}'
is "$(answer)" '422 ["NOT_ELIGIBLE","EXPIRED",null,null,null,null]' "a new reservation now: 422 EXPIRED"
confirm "$late" "$late-a" "$(total 30000)"
is "$(answer)" '200 ["CONFIRMED",null,30000,3000,null,null]' "a hold confirmed after endsAt, within heldUntil: 200, priced again"
confirm "$late" "$late-a" "$(total 30000)"
is "$(answer)" '200 ["CONFIRMED",null,30000,3000,null,true]' "its retry: the same answer"
confirm "$late" "$late-b" "$(total 10000)"
is "$(answer)" '422 ["NOT_ELIGIBLE","ORDER_TOO_SMALL",null,null,[40000,4000],null]' \
  "a total below the minimum after endsAt: ORDER_TOO_SMALL (not EXPIRED), with the quote"
confirm "$late" "$late-b" "$(total 10000)"
is "$(answer)" '422 ["NOT_ELIGIBLE","ORDER_TOO_SMALL",null,null,[40000,4000],null]' "its retry: the same"
is "$(rcli HGET "voucher:{$late}:orders" "$late-b" | cut -d: -f4)" H "the refused hold is still held"
is "$(wait_row "$late-a" CONFIRMED)" "CONFIRMED|40000|4000|30000|3000" "PostgreSQL: the late confirm with its figures"
is "$(row "$late-b")" "RESERVED|40000|4000|-|-" "and the refused one still RESERVED"
confirm "$late" "$late-b" "$(total 20000)"
is "$(answer)" '200 ["CONFIRMED",null,20000,2000,null,null]' "confirmed again with a right total: 200"
is "$(wait_row "$late-b" CONFIRMED)" "CONFIRMED|40000|4000|20000|2000" "PostgreSQL follows"

# ---- The writer still applies a VoucherConfirmed of the old format. ----
reserve "$fixed" "$fixed-old" 30000
wait_row "$fixed-old" RESERVED >/dev/null
printf '%s\t%s\n' "$fixed" "{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"$fixed\",\"customerId\":1,\"orderId\":\"$fixed-old\",\"confirmedAt\":\"$(date -u +%Y-%m-%dT%H:%M:%S.000Z)\"}" |
  kcat -P -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -K $'\t'
is "$(wait_row "$fixed-old" CONFIRMED)" "CONFIRMED|30000|1000|-|-" "an old confirm event (no figures) is applied: CONFIRMED at the quote"

# ---- A conflict or an outage: 503 with Retry-After, settled by the retry. ----
# A short Redis timeout for this part only (test_gateway_redis.sh does the same).
daemon_stop "$test_name-gateway"
VOUCHER_REDIS_TIMEOUT=300ms start_gateway
reserve "$pct" "$pct-slow" 40000
rcli CLIENT PAUSE 1200 ALL >/dev/null
confirm "$pct" "$pct-slow" "$(total 30000)"
is "$(answer)" '503 ["UNAVAILABLE",null,null,null,null,null]' "a confirm while Redis does not answer: 503"
grep -qi '^retry-after:' <<<"$headers"
ok $? "with Retry-After"
for i in $(seq 1 50); do
  confirm "$pct" "$pct-slow" "$(total 30000)"
  [ "$status" = 200 ] && break
  sleep 0.1
done
is "$(answer | cut -d, -f1-4)" '200 ["CONFIRMED",null,30000,3000' "the order service's retry: 200 with the final figures"
is "$(wait_row "$pct-slow" CONFIRMED)" "CONFIRMED|40000|4000|30000|3000" "PostgreSQL has them"

is "$(sql "SELECT used_count FROM voucher WHERE code = '$pct'")" 6 "the percent voucher counts its six uses once each"
is "$(sql "SELECT count(*) FROM dead_letter WHERE voucher_code LIKE '$p%'")" 0 "nothing of this test was dead-lettered"
