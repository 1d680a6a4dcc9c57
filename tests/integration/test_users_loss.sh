#!/usr/bin/env bash
# A voucher's users hash (each customer's count of uses held) lost alone, the
# explorer's finding (tests/model/README.md): a count read as 0 let a customer
# past perUserLimit in Redis, so the gateway answered 201 for a use that
# PostgreSQL then refused (a dead letter: an acknowledged reservation lost),
# and a release finished on the lost hash wrote -1 for good. Now the gateway
# refuses new orders with 503 while orders exist without users, a release
# never takes a count below 0, and the reconciler rebuilds the hash.
source "$(dirname "$0")/lib.sh"
plan 14

reserve() { # CUSTOMER ORDER -> $status $body
  http POST "/vouchers/$code/reservations" "{\"customerId\":$1,\"orderId\":\"$2\",\"orderAmount\":500000}"
}
dead_letters() {
  kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events.dlt -o beginning -e -q -f '%k\n' 2>/dev/null |
    grep -acx "$1"
}

code=$(unique_code USERS)
new_voucher "$code" 5 1
start_gateway
start_writer

reserve 1 "$code-o1"
is "$(answer)" "201 " "customer 1 takes their one use"
rcli DEL "voucher:{$code}:users" >/dev/null

reserve 1 "$code-o2"
is "$(answer)" "503 UNAVAILABLE" "with the counts lost, customer 1's second order is refused for now, not answered 201"
ok "$(grep -qi '^retry-after:' <<<"$headers"; echo $?)" "with Retry-After"
reserve 2 "$code-o3"
is "$(answer)" "503 UNAVAILABLE" "so is another customer's first (their count is lost as well)"
reserve 1 "$code-o1"
is "$(answer)" "201 " "a retry of the order that holds its use is still answered from Redis"
is "$(rcli GET "voucher:{$code}:remaining")" 4 "nothing was taken: remaining 4"

http DELETE "/vouchers/$code/reservations/$code-o1"
is "$(answer)" "200 RELEASED" "customer 1 cancels"
is "$(rcli EXISTS "voucher:{$code}:users") $(rcli GET "voucher:{$code}:remaining")" "0 5" \
  "the release gave the use back and wrote no count of -1"

"$bin_reconciler" --once >"$scratch/once.txt" 2>&1
grep -q "^$code .*DRIFTED" "$scratch/once.txt"
ok $? "the reconciler calls the voucher DRIFTED and rebuilds the counts"
is "$(rcli EXISTS "voucher:{$code}:users") $(rcli HGET "voucher:{$code}:users" 1)" "1 0" \
  "users exists again, customer 1 at 0"

reserve 1 "$code-o2"
is "$(answer)" "201 " "customer 1 takes a use again"
reserve 1 "$code-o4"
is "$(answer)" "409 ALREADY_USED" "and is held to perUserLimit 1"
is "$(wait_sql "SELECT string_agg(order_id || ' ' || status, ',' ORDER BY order_id) FROM voucher_redemption WHERE voucher_code = '$code'" \
  "$code-o1 RELEASED,$code-o2 RESERVED" 20)" "$code-o1 RELEASED,$code-o2 RESERVED" \
  "PostgreSQL has o1 released and o2 held, nothing else"
is "$(dead_letters "$code")" 0 "no dead letter for the voucher"
