#!/usr/bin/env bash
# A voucher's orders hash lost while its counter stays (the explorer's
# other-answer-after-cancel, other-undersold and other-users; tests/model/README.md).
# Before: a retry of a cancelled orderId found no order, took a new use and was
# answered 201 while PostgreSQL kept the order RELEASED (a 201 no row will ever
# hold); a retry of a held order took its use a second time, and no repair gave
# it back (undersold for good, the customer's count one too high); a use taken
# by a hold lost with the hash and never published stayed taken for good. Now
# reserve.lua refuses new orders (503) while users or amounts exists without
# orders, and the reconciler rebuilds the hash from PostgreSQL after the
# restore delay, released orders included, with the counter and the counts
# set to it (rebuild.lua, proto/redis-keys.md "A lost orders hash").
# With users and amounts lost too (7, 8), the counter tells: below its limit
# key by more than the uses it holds back for no order (the outside key), it
# counts uses whose orders went with the hash.
source "$(dirname "$0")/lib.sh"
plan 59

reserve() { # CUSTOMER ORDER -> $status $body
  http POST "/vouchers/$code/reservations" "{\"customerId\":$1,\"orderId\":\"$2\",\"orderAmount\":500000}"
}
rows() {
  sql "SELECT coalesce(string_agg(order_id || ' ' || status, ',' ORDER BY order_id), '')
       FROM voucher_redemption WHERE voucher_code = '$code'"
}
wait_rows() { wait_sql "SELECT coalesce(string_agg(order_id || ' ' || status, ',' ORDER BY order_id), '')
       FROM voucher_redemption WHERE voucher_code = '$code'" "$1" 20; }
rebuild() { # runs the reconciler once: a pass sees the loss, waits the delay, rebuilds
  "$bin_reconciler" --once --grace 60s --restore-delay 1s >"$scratch/once-$code.txt" 2>&1
}
key() { echo "voucher:{$code}:$1"; }

token=$(new_token admin)
VOUCHER_ADMIN_TOKEN=$token start_gateway
start_writer
admin() { http "$@" -H "Authorization: Bearer $token"; }
users_of() { # CUSTOMER... -> each customer's count in users, "-" for none
  local c
  for c in "$@"; do echo -n "$(rcli HGET "$(key users)" "$c" | sed 's/^$/-/') "; done
}
left() { # remaining, and total_limit - used_count in PostgreSQL
  echo "$(rcli GET "$(key remaining)") $(sql "SELECT total_limit - used_count FROM voucher WHERE code = '$code'")"
}

# 1. A cancelled order, then the orders hash lost: the retry is not a new 201.
code=$(unique_code ORDLOSS)
new_voucher "$code" 2 2
reserve 1 "$code-o1"
is "$(answer)" "201 " "o1 reserved"
http DELETE "/vouchers/$code/reservations/$code-o1"
is "$(answer)" "200 RELEASED" "o1 cancelled"
is "$(wait_rows "$code-o1 RELEASED")" "$code-o1 RELEASED" "PostgreSQL has o1 released"
rcli DEL "$(key orders)" >/dev/null
reserve 1 "$code-o1"
is "$(answer)" "503 UNAVAILABLE" "with the orders hash lost, a retry of the cancelled o1 is refused for now, not answered 201"
ok "$(grep -qi '^retry-after:' <<<"$headers"; echo $?)" "with Retry-After"
reserve 2 "$code-o2"
is "$(answer)" "503 UNAVAILABLE" "so is a new order"
is "$(rcli GET "$(key remaining)")" 2 "nothing was taken: remaining 2"
rebuild
is "$(rcli HGET "$(key orders)" "$code-o1" | cut -d: -f4)" R "the reconciler wrote o1 back as released (R)"
reserve 1 "$code-o1"
is "$(answer)" "409 HOLD_EXPIRED" "the retry of the cancelled o1 is answered 409, never 201"
reserve 2 "$code-o2"
is "$(answer)" "201 " "a new order takes a use again"
is "$(wait_rows "$code-o1 RELEASED,$code-o2 RESERVED")" "$code-o1 RELEASED,$code-o2 RESERVED" \
  "PostgreSQL: o1 released, o2 held"

# 2. A held order, the hash lost, the order retried before the reconciler:
#    its use is not taken twice, and the counts come back to what is held.
code=$(unique_code ORDLOSS)
new_voucher "$code" 3 3
reserve 5 "$code-o1"
is "$(answer)" "201 " "o1 reserved"
is "$(wait_rows "$code-o1 RESERVED")" "$code-o1 RESERVED" "PostgreSQL has o1 held"
rcli DEL "$(key orders)" >/dev/null
reserve 5 "$code-o1"
is "$(answer)" "503 UNAVAILABLE" "the retry of o1 with its order lost is refused, no second use taken"
# Its confirm and its cancel cannot tell either: 503 (retry), never the 404 that
# tells the order service there is no such order (it could drop a paid order).
http POST "/vouchers/$code/reservations/$code-o1/confirm"
is "$(answer)" "503 UNAVAILABLE" "a confirm of o1 while the orders hash is lost: 503, not 404"
http DELETE "/vouchers/$code/reservations/$code-o1"
is "$(answer)" "503 UNAVAILABLE" "a cancel of o1 while the orders hash is lost: 503, not 404"
rebuild
reserve 5 "$code-o1"
is "$(answer)" "201 " "after the rebuild the retry is answered from Redis (o1 held)"
is "$(rcli GET "$(key remaining)") $(rcli HGET "$(key users)" 5)" "2 1" \
  "remaining 2 (total 3, one held) and customer 5 holds 1: not undersold, not counted twice"

# 3. A hold lost with the hash whose event was never published (its gateway
#    died after the script): no order holds the use, the rebuild gives it back.
code=$(unique_code ORDLOSS)
new_voucher "$code" 2 2
reserve 7 "$code-o1"
is "$(answer)" "201 " "o1 reserved"
now=$(($(date +%s%3N)))
rcli EVAL "$(lua_script reserve)" 6 "$(key remaining)" "$(key users)" "$(key orders)" \
  "$(key holds)" "$(key resent)" "$(key amounts)" 7 2 "$code-o2" 100000 $((now + 600000)) "$now" \
  500000 take >/dev/null
is "$(wait_rows "$code-o1 RESERVED")" "$code-o1 RESERVED" "PostgreSQL has o1 only (o2's event never published)"
rcli DEL "$(key orders)" >/dev/null
rebuild
is "$(rcli GET "$(key remaining)") $(rcli HGET "$(key users)" 7) $(rcli HKEYS "$(key orders)" | tr '\n' ' ')" \
  "1 1 $code-o1 " "the rebuild wrote o1 back, gave o2's use back (remaining 1 of 2) and counts customer 7 at 1"

# 4. forget.lua of a voucher's last order deletes users and amounts with it,
#    so that it is not read as an orders hash lost.
code=$(unique_code ORDLOSS)
new_voucher "$code" 2 2
reserve 8 "$code-o0"
http DELETE "/vouchers/$code/reservations/$code-o0" >/dev/null
rcli DEL "$(key orders)" "$(key users)" "$(key amounts)" >/dev/null # as if never used
rcli EVAL "$(lua_script reserve)" 6 "$(key remaining)" "$(key users)" "$(key orders)" \
  "$(key holds)" "$(key resent)" "$(key amounts)" 8 2 "$code-o1" 100000 $((now + 600000)) "$now" \
  500000 take >/dev/null
rcli EVAL "$(lua_script forget)" 5 "$(key remaining)" "$(key users)" "$(key orders)" \
  "$(key holds)" "$(key resent)" "$code-o1" >/dev/null
is "$(rcli EXISTS "$(key orders)" "$(key users)" "$(key amounts)")" 0 \
  "the hold forgotten (taken under another claim, no event): no orders, users or amounts left"
reserve 8 "$code-o2"
is "$(answer)" "201 " "a new order is taken, not refused as a lost orders hash"

# 5. A cancel begun (X, listed in releasing) whose finish never came (its
#    gateway died between the two steps), then the orders hash lost: the
#    rebuild writes the order back as being released, never as held, so the
#    cancelled order cannot be confirmed (rebuild.lua, lacking_order()).
code=$(unique_code ORDLOSS)
new_voucher "$code" 2 2
reserve 9 "$code-o1"
is "$(answer) $(wait_rows "$code-o1 RESERVED")" "201  $code-o1 RESERVED" "o1 reserved, PostgreSQL has it held"
rcli EVAL "$(lua_script release_begin)" 3 "$(key orders)" "$(key holds)" "$(key releasing)" \
  "$code-o1" cancel "$(date +%s%3N)" >/dev/null
rcli DEL "$(key orders)" >/dev/null
rebuild
state=$(rcli HGET "$(key orders)" "$code-o1" | cut -d: -f4)
ok "$([ "$state" = X ] || [ "$state" = R ]; echo $?)" \
  "the rebuild wrote o1 back as being released ($state: X, or R once the pass finished it), not held"
http POST "/vouchers/$code/reservations/$code-o1/confirm"
is "$status" 409 "a confirm of the cancelled o1 is refused"

# 6. Every key of the voucher lost (its counter too) while it sells: a confirm
#    or a cancel of its order answers 503 until the reconciler restores them
#    (PostgreSQL says Redis had the voucher); a voucher never loaded into Redis
#    answers 404 for an unknown order, as before.
code=$(unique_code ORDLOSS)
new_voucher "$code" 2 2
reserve 11 "$code-o1"
is "$(answer) $(wait_rows "$code-o1 RESERVED")" "201  $code-o1 RESERVED" "o1 reserved, PostgreSQL has it held"
rcli DEL $(for k in remaining users orders holds amounts limit releasing resent paid; do key $k; done) >/dev/null
http POST "/vouchers/$code/reservations/$code-o1/confirm"
is "$(answer)" "503 UNAVAILABLE" "a confirm of o1 with every key lost: 503, not 404"
http DELETE "/vouchers/$code/reservations/$code-o1"
is "$(answer)" "503 UNAVAILABLE" "a cancel of o1 with every key lost: 503, not 404"
fresh=$(unique_code ORDNEW)
new_voucher "$fresh" 2 2
http POST "/vouchers/$fresh/reservations/$fresh-o1/confirm"
is "$(answer)" "404 NOT_FOUND" "a voucher never loaded into Redis: an unknown order's confirm is 404"
http DELETE "/vouchers/$fresh/reservations/$fresh-o1"
is "$(answer)" "404 NOT_FOUND" "and its cancel is 404"
rebuild
http POST "/vouchers/$code/reservations/$code-o1/confirm"
is "$(answer)" "200 CONFIRMED" "once the reconciler restored the keys, o1 is confirmed: 200"

# 7. The orders hash lost with users and amounts, the counter kept (an eviction
#    of several keys, a partial restore, a DEL by hand). Before, nothing told
#    the loss: the retry of a held order was a new order, its use taken twice,
#    and the retake only lowers, so the voucher stayed undersold for good. Now
#    the counter tells it: 4 - 2 held, no orders hash, nothing held back for
#    no order.
code=$(unique_code ORDGONE)
new_voucher "$code" 4 2
reserve 21 "$code-o1"
is "$(answer)" "201 " "o1 reserved"
reserve 22 "$code-o2"
is "$(answer)" "201 " "o2 reserved"
is "$(wait_rows "$code-o1 RESERVED,$code-o2 RESERVED")" "$code-o1 RESERVED,$code-o2 RESERVED" \
  "PostgreSQL has both held"
rcli DEL "$(key orders)" "$(key users)" "$(key amounts)" >/dev/null
reserve 21 "$code-o1"
is "$(answer)" "503 UNAVAILABLE" \
  "orders, users and amounts lost: the retry of the held o1 is refused (503), not a new 201"
is "$(rcli GET "$(key remaining)")" 2 "no second use was taken for o1: remaining 2"
http POST "/vouchers/$code/reservations/$code-o2/confirm"
is "$(answer)" "503 UNAVAILABLE" "a confirm of o2 while the orders hash is lost: 503, not 404"
reserve 23 "$code-o3"
is "$(answer)" "503 UNAVAILABLE" "so is a new order"
rebuild
ok "$(grep -q "wrote again a lost orders hash" "$scratch/once-$code.txt"; echo $?)" \
  "the reconciler saw the loss and rebuilt the orders hash"
reserve 21 "$code-o1"
is "$status $(jq -r .replayed <<<"$body")" "201 true" "after the rebuild the retry of o1 is answered 201 replayed"
is "$(left)" "2 2" "remaining 2 = total_limit 4 - used_count 2: one use per order, not undersold"
is "$(users_of 21 22 23)" "1 1 - " "customers 21 and 22 hold one use each, 23 none"
reserve 21 "$code-o4"
is "$(answer)" "201 " "customer 21 takes a second use (per customer 2: the count is not one too high)"
reserve 21 "$code-o5"
is "$(answer)" "409 ALREADY_USED" "and a third is refused"
reserve 23 "$code-o3"
is "$(answer) $(rcli GET "$(key remaining)")" "201  0" "every use of the voucher is sold: o3 takes the last"

# 8. Uses counted without rows (used_count above the live rows: an imported
#    campaign, a counter set by hand) also leave the counter below its limit
#    key with no orders hash; they are held back for no order (the outside
#    key), so such a voucher is not taken for one whose orders were lost.
code=$(unique_code ORDOUT)
new_voucher "$code" 5 2
sql "UPDATE voucher SET used_count = 2 WHERE code = '$code'" >/dev/null
reserve 31 "$code-o1"
is "$(answer) $(rcli GET "$(key remaining)")" "201  2" \
  "2 of 5 uses counted without rows: the first order is taken (5 - 2 - 1), not refused as lost"
is "$(wait_rows "$code-o1 RESERVED")" "$code-o1 RESERVED" "PostgreSQL has o1 held"
rcli DEL "$(key orders)" "$(key users)" "$(key amounts)" >/dev/null
reserve 31 "$code-o1"
is "$(answer)" "503 UNAVAILABLE" "its orders, users and amounts lost: the retry of o1 is refused (503)"
rebuild
reserve 31 "$code-o1"
is "$status $(jq -r .replayed <<<"$body")" "201 true" "after the rebuild the retry of o1 is answered 201 replayed"
is "$(left) $(users_of 31)" "2 2 1 " "remaining 2 = total_limit 5 - used_count 3 (2 without rows), customer 31 holds 1"
# All of them without rows, sold out at the load: 409, never a 503, and the
# reconciler finds nothing lost.
code=$(unique_code ORDOUT)
new_voucher "$code" 3 2
sql "UPDATE voucher SET used_count = 3 WHERE code = '$code'" >/dev/null
reserve 32 "$code-o1"
is "$(answer)" "409 OUT_OF_STOCK" "3 of 3 uses counted without rows: sold out (409), not refused as lost"
rebuild
ok "$(! grep -q "lost orders hash" "$scratch/once-$code.txt"; echo $?)" \
  "the reconciler does not take it for a lost orders hash"
reserve 32 "$code-o1"
is "$(answer) $(rcli GET "$(key remaining)")" "409 OUT_OF_STOCK 0" "still sold out after its pass"
# Counted without rows after the load (used_count raised by hand): the
# reconciler lowers the counter, and holds those uses back for no order.
code=$(unique_code ORDOUT)
admin POST /vouchers "{\"code\":\"$code\",\"mode\":\"flash\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":5,\"perUserLimit\":2,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"}"
is "$status $(rcli GET "$(key remaining)")" "201 5" "a voucher created through the API: loaded with 5"
sql "UPDATE voucher SET used_count = 2 WHERE code = '$code'" >/dev/null
rebuild
is "$(rcli GET "$(key remaining)")" 3 "used_count raised by hand to 2: the reconciler lowered the counter to 3"
reserve 33 "$code-o1"
is "$(answer) $(rcli GET "$(key remaining)")" "201  2" "a new order is taken, not refused as a lost orders hash"
# A later endsAt moves the outside key's expiry with the counter's (gw_limit_extend()): expired
# first, it would read as 0, and the voucher would look lost (503) once its orders hash is gone.
before=$(rcli PEXPIRETIME "$(key outside)")
admin PATCH "/vouchers/$code" '{"endsAt":"2099-06-01T00:00:00Z"}'
is "$status $(rcli GET "$(key outside)")" "200 2" "endsAt moved later: 200, 2 uses held back for no order"
after=$(rcli PEXPIRETIME "$(key outside)")
ok "$([ "$after" -gt "$before" ] && [ "$after" = "$(rcli PEXPIRETIME "$(key remaining)")" ]; echo $?)" \
  "the outside key's expiry moved later with the counter's ($before -> $after)"
