#!/usr/bin/env bash
# Redemption of one-time campaign codes on the voucher routes
# (proto/campaigns.md): 200 customers at once on one code get one 201; a
# customer is limited across the whole campaign; a retry replays; a release
# gives the code back to another customer; a code bound to another customer
# answers exactly as an unknown code; each event reaches campaign_redemption.
source "$(dirname "$0")/lib.sh"
plan 47

source "$(dirname "$0")/campaign_lib.sh"
campaign_test QR "\"name\":\"redeem\",\"count\":20,\"customerIds\":[$((base + 900))],\"discountAmount\":2000"
is "$status" 201 "a campaign of 20 codes, the first bound to customer $((base + 900))"
campaign_codes bound c2 c3 c4 c5
# As a customer types it: lower case, in groups.
typed() { tr A-Z a-z <<<"$1" | sed -E 's/(.{4})/\1-/g; s/-$//'; }

# ---- one code, 200 customers at once: exactly one 201 ----
"$bin_load" --code "$c2" --attempts 200 --connections 200 --customers 200 --customer-base "$((base + 1000))" \
  --order-prefix "$o-race-" --out "$scratch/attempts.tsv" >"$scratch/summary.txt"
ok $? "vc-load ran 200 concurrent reservations of one code"
is "$(awk -F'\t' '$4 == "201"' "$scratch/attempts.tsv" | wc -l)" 1 "exactly one of 200 answered 201"
is "$(awk -F'\t' '$4 == "409" && $5 == "ALREADY_USED"' "$scratch/attempts.tsv" | wc -l)" 199 \
  "the other 199 answered 409 ALREADY_USED"
is "$(wait_sql "SELECT count(*) FROM campaign_redemption WHERE code = '$c2' AND status = 'RESERVED'" 1 30)" 1 \
  "one RESERVED row for the code in PostgreSQL"
is "$(wait_sql "SELECT used_count FROM campaign WHERE id = $cid" 1 30)" 1 "the campaign's used_count is 1"
is "$(rcli HKEYS "campaign:{c$cid}:taken" | grep -cvx "!")" 1 "Redis: one code taken (the \"!\" field marks the hash as kept)"

# ---- quote ----
quote() { http POST "/vouchers/$1/quote" "{\"customerId\":$2,\"orderAmount\":10000}"; }
quote "$(typed "$c3")" $((base + 1))
is "$status $(jq -r .discountAmount <<<"$body")" "200 2000" "quote of a free code: 200 with its discount"
quote "$c2" $((base + 1))
is "$(answer)" "409 ALREADY_USED" "quote of the raced code: 409 ALREADY_USED"
quote "$bound" $((base + 5))
is "$(answer)" "404 NOT_FOUND" "quote of a code bound to another customer: 404"

# ---- a reservation, typed in lower case with separators; its retry ----
reserve "$(typed "$c3")" $((base + 1)) "$o-a"
is "$(answer)" "201 " "customer 1 reserves code 3 typed as $(typed "$c3"): 201"
is "$(jq -r .code <<<"$body")" "$c3" "the answer names the code in stored form"
reserve "$(typed "$c3")" $((base + 1)) "$o-a"
is "$(answer) $(jq -r .replayed <<<"$body")" "201  true" "the same request again: 201 replayed"
is "$(wait_sql "SELECT count(*) || ':' || min(status) FROM campaign_redemption WHERE order_id = '$o-a'" 1:RESERVED 30)" \
  "1:RESERVED" "one RESERVED row for the order, the retry applied once"
is "$(rcli HGET "campaign:{c$cid}:users" $((base + 1)))" 1 "the customer holds one use in Redis"

# ---- the customer is limited across the whole campaign (perCustomerLimit 1) ----
reserve "$c4" $((base + 1)) "$o-b"
is "$(answer) $(jq -r .detail <<<"$body" | grep -c perCustomerLimit)" "409 ALREADY_USED 1" \
  "customer 1 on another code of the campaign: 409 ALREADY_USED, the detail naming the campaign's limit"
reserve "$c3" $((base + 2)) "$o-c"
is "$(answer) $(jq -r .detail <<<"$body")" "409 ALREADY_USED this code has already been used" \
  "customer 2 on the taken code 3: 409 ALREADY_USED, the detail saying the code is used (not the customer's limit)"
reserve "$c3" $((base + 2)) "$o-a"
is "$(answer)" "409 ORDER_CONFLICT" "another customer with the orderId of the hold: 409 ORDER_CONFLICT"

# ---- a release gives the code back; another customer takes it ----
http DELETE "/vouchers/$c4/reservations/$o-a"
is "$(answer)" "404 NOT_FOUND" "DELETE naming another code of the campaign: 404"
http DELETE "/vouchers/$(typed "$c3")/reservations/$o-a"
is "$(answer)" "200 RELEASED" "DELETE of the hold: 200 RELEASED"
is "$(wait_sql "SELECT status || ':' || coalesce(release_reason, '') FROM campaign_redemption WHERE order_id = '$o-a'" RELEASED:CANCELLED 30)" \
  "RELEASED:CANCELLED" "the row is RELEASED (CANCELLED)"
reserve "$c3" $((base + 2)) "$o-d"
is "$(answer)" "201 " "customer 2 now takes code 3: 201"
is "$(wait_sql "SELECT count(*) FROM campaign_redemption WHERE code = '$c3' AND status <> 'RELEASED'" 1 30)" 1 \
  "one live row for code 3 (customer 2's)"
reserve "$c4" $((base + 1)) "$o-e"
is "$(answer)" "201 " "customer 1, its use released, may take another code: 201"
is "$(wait_sql "SELECT used_count FROM campaign WHERE id = $cid" 3 30)" 3 \
  "used_count 3: the race's winner, customer 2's and customer 1's second"

# ---- a code bound to another customer answers as an unknown code ----
reserve "$bound" $((base + 5)) "$o-f"
bound_answer="$status $body"
reserve "${pfx}ZZZZZZZZZZZZ" $((base + 5)) "$o-g"
is "$bound_answer" "$status $body" "a code bound to another customer: the answer of an unknown code ($status)"
is "$status" 404 "both 404"
reserve "$bound" $((base + 900)) "$o-h"
is "$(answer)" "201 " "the customer it is bound to: 201"

# ---- confirm ----
http POST "/vouchers/$c4/reservations/$o-e/confirm"
is "$(answer)" "200 CONFIRMED" "confirm of customer 1's hold: 200"
is "$(wait_sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-e'" CONFIRMED 30)" CONFIRMED \
  "the row is CONFIRMED"
http GET "/vouchers/$(typed "$c4")/reservations/$o-e" "" -H "Authorization: Bearer $token"
is "$status $(jq -c '[.code == "'"$c4"'", .redis.state, .postgres.status, .postgres.customerId == .redis.customerId]' <<<"$body")" \
  '200 [true,"CONFIRMED","CONFIRMED",true]' "support's view of the order, by the code as typed: Redis and PostgreSQL agree"
http GET "/vouchers/$(typed "$c4")/reservations/$o-nothing" "" -H "Authorization: Bearer $token"
is "$status" 404 "an order of the code that neither store knows: 404"
http GET "/campaigns/$cid" "" -H "Authorization: Bearer $token"
usage=$(sql "SELECT count(*) FILTER (WHERE status = 'RESERVED') || ' ' || count(*) FILTER (WHERE status = 'CONFIRMED') || ' ' || 20 - count(*) FILTER (WHERE status <> 'RELEASED') FROM campaign_redemption WHERE campaign_id = $cid")
is "$status $(jq -r '"\(.codes.held) \(.codes.redeemed) \(.codes.free)"' <<<"$body")" "200 $usage" \
  "GET /campaigns/{id} counts the codes held, redeemed and free as PostgreSQL has them: $usage"
# ---- the campaigns listed, newest first, a page at a time ----
# A second campaign, so that a page of one has a next even on a stack this test has to itself.
keep_cid=$cid keep_pfx=$pfx
new_campaign QL '"name":"listed","count":1,"discountAmount":100'
if [ "$status" != 201 ]; then
  echo "Bail out! the second campaign was not made: $status $body"
  exit 1
fi
cid=$keep_cid pfx=$keep_pfx
newest=$(sql "SELECT string_agg(id::text, ' ' ORDER BY id DESC) FROM (SELECT id FROM campaign ORDER BY id DESC LIMIT 2) t")
http GET "/campaigns?limit=1" "" -H "Authorization: Bearer $token"
first=$(jq -r '.campaigns[0].id' <<<"$body")
next=$(jq -r '.next' <<<"$body")
http GET "/campaigns?limit=1&after=$next" "" -H "Authorization: Bearer $token"
is "$status $first $(jq -r '.campaigns[0].id' <<<"$body")" "200 $newest" \
  "GET /campaigns?limit=1, then after its next: the two newest campaigns, one a page"
http GET "/campaigns?active=false&limit=100" "" -H "Authorization: Bearer $token"
is "$status $(jq '[.campaigns[] | select(.state == "ACTIVE")] | length' <<<"$body") $(jq "[.campaigns[] | select(.id == $cid)] | length" <<<"$body")" \
  "200 0 0" "active=false lists no ACTIVE campaign (this one is ACTIVE: not listed)"
admin_cli=$VOUCHER_BUILD_DIR/admin/voucher-admin
"$admin_cli" campaign code "$(typed "$c4")" >"$scratch/code.txt"
is "$? $(sed -n 's/^\(campaign\|uses\|orderId\|status\): //p' "$scratch/code.txt" | tr '\n' ' ')" \
  "0 $cid 1 $o-e CONFIRMED " "voucher-admin campaign code, typed as the customer typed it: who used it, and its order"
"$admin_cli" report --campaign "$cid" --by hour >"$scratch/report.csv" 2>/dev/null
want=$(sql "SELECT count(*) || ',' || count(*) FILTER (WHERE status = 'RESERVED') || ',' || count(*) FILTER (WHERE status = 'CONFIRMED') || ',' || count(*) FILTER (WHERE status = 'RELEASED') FROM campaign_redemption WHERE campaign_id = $cid")
is "$? $(head -1 "$scratch/report.csv") $(awk -F, 'NR > 1 {t += $2; h += $3; c += $4; r += $5} END {print t "," h "," c "," r}' "$scratch/report.csv")" \
  "0 period,taken,held,confirmed,released,confirmedDiscount $want" "voucher-admin report --campaign: the orders by state per hour add up to PostgreSQL's ($want)"
"$admin_cli" report --campaign "$cid" --voucher X >/dev/null 2>&1
is "$?" 2 "report naming a campaign and a voucher: usage error (exit 2)"

# ---- one leaked code revoked, its campaign still on ----
# As voucher-admin's own role (021, 024), and recorded in the admin audit.
VOUCHER_PG_DSN=$VOUCHER_ADMIN_PG_DSN "$admin_cli" --operator carol campaign revoke "$(typed "$c5")" >"$scratch/revoke.txt"
is "$? $(grep -c "^revoked $c5 of campaign $cid" "$scratch/revoke.txt") $(sql "SELECT actor || ' ' || action || ' ' || target FROM admin_audit WHERE action = 'campaign.revoke' AND target = '$c5'")" \
  "0 1 carol campaign.revoke $c5" "voucher-admin campaign revoke as its own role: exit 0, says what it did, one audit row"
reserve "$c5" $((base + 50)) "$o-r1"
revoked_answer="$status $body"
reserve "${pfx}ZZZZZZZZZZZZ" $((base + 50)) "$o-r2"
is "$revoked_answer" "$status $body" "a revoked code, never used: the answer of an unknown code ($status)"
"$admin_cli" campaign revoke "$c3" >/dev/null
reserve "$c3" $((base + 2)) "$o-d"
is "$status $(jq -r .replayed <<<"$body")" "201 true" \
  "code 3 revoked while customer 2 holds it: the retry of that order replays its 201 (the order stands)"

# ---- PostgreSQL's last line of defence, then a dead letter's replay ----
# A live row for code 6 that Redis does not know (written by hand): the 201
# below is refused by the unique index on live codes, parked, then replayed
# once the hand-written row is released.
c6=$(code 6)
sql "INSERT INTO campaign_redemption (order_id, code, campaign_id, customer_id, status) VALUES ('$o-hand', '$c6', $cid, 1, 'RESERVED')"
reserve "$c6" $((base + 6)) "$o-i"
is "$(answer)" "201 " "a reservation of code 6 Redis knows as free: 201"
is "$(wait_sql "SELECT state || ' ' || error_class || ' ' || (error_message LIKE '23505:%') FROM dead_letter WHERE order_id = '$o-i'" "parked constraint true" 30)" \
  "parked constraint true" "PostgreSQL refused a second live use of the code: dead letter parked (23505)"
is "$(sql "SELECT count(*) FROM campaign_redemption WHERE order_id = '$o-i'")" 0 "no row for it"
sql "UPDATE campaign_redemption SET status = 'RELEASED' WHERE order_id = '$o-hand'"
"$bin_writer" dlt replay --order "$o-i" --operator tester >"$scratch/replay.txt" 2>&1
ok $? "dlt replay of the campaign's letter"
is "$(wait_sql "SELECT status || ':' || campaign_id FROM campaign_redemption WHERE order_id = '$o-i'" "RESERVED:$cid" 30)" \
  "RESERVED:$cid" "the replayed event applied: its row RESERVED, with its campaign"
is "$(wait_sql "SELECT state FROM dead_letter WHERE order_id = '$o-i'" replayed 30)" replayed "the letter is replayed"
finish
