#!/usr/bin/env bash
# Where vouchers and campaign codes meet (proto/campaigns.md): POST /vouchers
# refuses a code that is a campaign's one-time code (409 EXISTS, the reason
# names the campaign; typed with separators too), and an orderId belongs to one
# voucher or one campaign code: used on the other kind, or on another code of
# the same campaign, it gets 409 ORDER_CONFLICT and nothing is half-applied (no Redis order, no code taken, no
# customer's use, no row, no event applied).
source "$(dirname "$0")/lib.sh"
plan 15

source "$(dirname "$0")/campaign_lib.sh"
campaign_test QC '"name":"codes","count":5,"discountAmount":500'
campaign_codes c1 c2 c3
admin() { http "$@" -H "Authorization: Bearer $token"; }
window='"startsAt":"2020-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z"'
voucher_body() { echo "{\"code\":\"$1\",\"mode\":\"flash\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":5,\"perUserLimit\":5,$window}"; }

# ---- POST /vouchers and a campaign's code ----
admin POST /vouchers "$(voucher_body "$c1")"
is "$(answer)" "409 EXISTS" "POST /vouchers with a campaign's code: 409 EXISTS"
is "$(jq -r '(.reason // "-") + ": " + .detail' <<<"$body")" "CAMPAIGN_CODE: this code is a one-time code of campaign $cid" \
  "the reason is CAMPAIGN_CODE (proto/openapi.yaml) and the detail names the campaign"
dashed=$(sed -E 's/(.{4})/\1-/g; s/-$//' <<<"$c2")
admin POST /vouchers "$(voucher_body "$dashed")"
is "$(answer)" "409 EXISTS" "the same in display form ($dashed): 409 EXISTS"
is "$(sql "SELECT count(*) FROM voucher WHERE code IN ('$c1', '$dashed')")" 0 "no voucher row was written"
v=$(unique_code CV)
admin POST /vouchers "$(voucher_body "$v")"
is "$status" 201 "another code: 201 (control)"

# ---- an orderId of a voucher, then on a campaign code ----
http POST "/vouchers/$v/reservations" "{\"customerId\":$((base + 1)),\"orderId\":\"$o-v\",\"orderAmount\":10000}"
is "$status" 201 "a voucher reservation with orderId $o-v"
reserve "$c3" $((base + 1)) "$o-v"
is "$(answer)" "409 ORDER_CONFLICT" "the same orderId on a campaign code: 409 ORDER_CONFLICT"
used=$(rcli HGET "$k:users" $((base + 1)))
is "$(rcli HEXISTS "$k:orders" "$o-v") $(rcli HEXISTS "$k:taken" "$c3") ${used:-0}" "0 0 0" \
  "nothing half-applied in Redis: no campaign order, the code not taken, no use counted"
reserve "$c3" $((base + 2)) "$o-k"
is "$status" 201 "the code is still free for someone else: 201"

# ---- an orderId of a campaign code, then on another code of the campaign ----
reserve "$c1" $((base + 2)) "$o-k"
is "$(answer)" "409 ORDER_CONFLICT" "the same customer and orderId on another code of the campaign: 409 ORDER_CONFLICT, not a replay"
# Without the orderId's claim (lost, or expired before the campaign's keys), which
# refused it above, campaign_reserve.lua alone must refuse it. The claim is put back after.
claim=$(rcli GET "voucher-order:{$o-k}")
rcli DEL "voucher-order:{$o-k}" >/dev/null
reserve "$c1" $((base + 2)) "$o-k"
got=$(answer)
rcli SET "voucher-order:{$o-k}" "$claim" >/dev/null
is "$got" "409 ORDER_CONFLICT" "the same with the orderId's claim lost: campaign_reserve.lua answers ORDER_CONFLICT"
is "$(rcli HEXISTS "$k:taken" "$c1") $(rcli HGET "$k:users" $((base + 2)))" "0 1" \
  "nothing taken: code 1 free, the customer still holds one use"

# ---- an orderId of a campaign code, then on a voucher ----
http POST "/vouchers/$v/reservations" "{\"customerId\":$((base + 2)),\"orderId\":\"$o-k\",\"orderAmount\":10000}"
is "$(answer)" "409 ORDER_CONFLICT" "the campaign's orderId on a voucher: 409 ORDER_CONFLICT"
is "$(rcli GET "voucher:{$v}:remaining") $(rcli HEXISTS "voucher:{$v}:orders" "$o-k")" "4 0" \
  "nothing half-applied: the voucher still has 4 uses, no such order"
is "$(wait_sql "SELECT (SELECT count(*) FROM voucher_redemption WHERE order_id IN ('$o-v', '$o-k')) || ':' || (SELECT string_agg(order_id || '=' || code, ',') FROM campaign_redemption WHERE campaign_id = $cid)" "1:$o-k=$c3" 30)" \
  "1:$o-k=$c3" "PostgreSQL: one voucher row, one campaign row, each on its own"
finish
