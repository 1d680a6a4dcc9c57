#!/usr/bin/env bash
# A campaign's hold that is never confirmed expires (proto/campaigns.md, "The
# reconciler"): a grace after heldUntil the reconciler releases it with a
# VoucherReleased (EXPIRED) that carries the campaign, the row becomes
# RELEASED, the code is free for another customer and the customer's use is
# back; a confirmed hold of the same campaign is left alone.
source "$(dirname "$0")/lib.sh"
plan 9

source "$(dirname "$0")/campaign_lib.sh"
campaign_test QE '"name":"expiry","count":5,"discountAmount":500' --hold-ttl 2s
campaign_codes a b c

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
