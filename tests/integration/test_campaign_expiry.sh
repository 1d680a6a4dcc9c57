#!/usr/bin/env bash
# A campaign's hold that is never confirmed expires (proto/campaigns.md, "The
# reconciler"): a grace after heldUntil the reconciler releases it with a
# VoucherReleased (EXPIRED) that carries the campaign, the row becomes
# RELEASED, the code is free for another customer and the customer's use is
# back; a confirmed hold of the same campaign is left alone.
source "$(dirname "$0")/lib.sh"
plan 9

token=admin-$RANDOM$RANDOM
export VOUCHER_ADMIN_TOKEN=$token
start_gateway --hold-ttl 2s
unset VOUCHER_ADMIN_TOKEN
start_writer

window='"startsAt":"2020-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z"'
pfx=QE$(head -c 64 /dev/urandom | tr -dc '2-9A-HJ-NP-Z' | head -c 5)
base=$(( (RANDOM * 32768 + RANDOM) * 1000 ))
http POST /campaigns "{\"name\":\"expiry\",\"count\":5,\"prefix\":\"$pfx\",\"discountAmount\":500,$window}" \
  -H "Authorization: Bearer $token"
cid=$(jq -r .id <<<"$body")
code() { sql "SELECT code FROM campaign_code WHERE campaign_id = $cid AND seq = $1"; }
a=$(code 1) b=$(code 2) c=$(code 3)
reserve() { # CODE CUSTOMER ORDER
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":10000}"
}
o=x$base

reserve "$a" $((base + 1)) "$o-a"
s_a=$status
reserve "$b" $((base + 2)) "$o-b"
s_b=$status
http POST "/vouchers/$b/reservations/$o-b/confirm"
is "$s_a $s_b $status" "201 201 200" "two holds of the campaign; the second confirmed at once"
is "$(wait_sql "SELECT string_agg(status, ',' ORDER BY order_id) FROM campaign_redemption WHERE campaign_id = $cid" RESERVED,CONFIRMED 30)" \
  "RESERVED,CONFIRMED" "PostgreSQL has both"

# One pass at a time until the hold is released (heldUntil 2 s, grace 1 s), at most 30 s.
released=
for ((i = 0; i < 30; i++)); do
  "$bin_reconciler" --once --grace 1s >>"$scratch/passes.txt" 2>&1
  [ "$(sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-a'")" = RELEASED ] && { released=1; break; }
  sleep 1
done
ok $([ -n "$released" ]; echo $?) "the reconciler released the unconfirmed hold"
is "$(wait_sql "SELECT status || ':' || release_reason FROM campaign_redemption WHERE order_id = '$o-a'" RELEASED:EXPIRED 30)" \
  "RELEASED:EXPIRED" "its row: RELEASED, reason EXPIRED"
is "$(rcli HEXISTS "campaign:{c$cid}:taken" "$a") $(rcli HGET "campaign:{c$cid}:users" $((base + 1)))" "0 0" \
  "Redis: the code is free, the customer holds no use"
is "$(sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-b'") $(rcli HEXISTS "campaign:{c$cid}:taken" "$b")" \
  "CONFIRMED 1" "the confirmed hold is left alone"
reserve "$a" $((base + 3)) "$o-c"
is "$status" 201 "another customer takes the expired code: 201"
reserve "$c" $((base + 1)) "$o-d"
is "$status" 201 "the first customer, its use back, takes another code: 201"
http POST "/vouchers/$a/reservations/$o-a/confirm"
is "$status $(jq -r .error <<<"$body")" "409 HOLD_EXPIRED" "a late confirm of the expired hold: 409 HOLD_EXPIRED"
finish
