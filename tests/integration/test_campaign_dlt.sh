#!/usr/bin/env bash
# A campaign's dead letters (proto/campaigns.md, "Dead letters"), with the
# gateway, the writer and the reconciler running. A real failure makes them:
# Redis lets a customer past the campaign's perCustomerLimit (its count set
# wrong by hand), the gateway answers 201, and PostgreSQL's per-customer
# trigger refuses the row (017): the event is dead-lettered and parked. While
# it is parked the reconciler never gives the code back (the 201 was given:
# the hold is kept until an operator decides), however many graces pass. The
# operator then inspects it with voucher-writer dlt list, and either replays it
# once the cause is gone (applied once, confirm 200) or discards it (the code
# comes back through the two-phase release with reason DISCARDED, confirm 409,
# the code free for another customer).
source "$(dirname "$0")/lib.sh"
plan 20

source "$(dirname "$0")/campaign_lib.sh"
campaign_test QD '"name":"dlt","count":6,"discountAmount":500'
campaign_codes c1 c2 c3 c4
x=$((base + 1)) y=$((base + 2)) z=$((base + 3))
grace_ms=2000
confirm() { http POST "/vouchers/$1/reservations/$2/confirm"; }
cancel() { http DELETE "/vouchers/$1/reservations/$2"; }
state() { rcli HGET "$k:orders" "$1" | cut -d: -f4; }
row() { sql "SELECT status || ' ' || coalesce(release_reason, '-') FROM campaign_redemption WHERE order_id = '$1'"; }
wait_state() { # ORDER STATE SECONDS: until Redis has the order in STATE; prints the last state
  local i s
  for ((i = 0; i < $3 * 10; i++)); do
    s=$(state "$1")
    [ "$s" = "$2" ] && break
    sleep 0.1
  done
  echo "$s"
}

# ---- Two customers each get a second code past the limit: two dead letters ----
reserve "$c1" $x "$o-a"
s1=$status
reserve "$c3" $y "$o-c"
is "$s1 $status" "201 201" "customers x and y each hold a code (perCustomerLimit 1)"
wait_sql "SELECT count(*) FROM campaign_redemption WHERE order_id IN ('$o-a', '$o-c')" 2 30 >/dev/null
rcli HSET "$k:users" $x 0 $y 0 >/dev/null
reserve "$c2" $x "$o-b"
s1=$status
reserve "$c4" $y "$o-d"
is "$s1 $status" "201 201" "with their counts wrong in Redis, each gets a second code: 201"
is "$(wait_sql "SELECT string_agg(order_id || '=' || state || ':' || error_class, ' ' ORDER BY order_id) FROM dead_letter WHERE order_id IN ('$o-b', '$o-d')" \
  "$o-b=parked:constraint $o-d=parked:constraint" 30)" "$o-b=parked:constraint $o-d=parked:constraint" \
  "PostgreSQL's per-customer trigger refused both: each is dead-lettered and parked"
is "$(sql "SELECT count(*) FROM campaign_redemption WHERE order_id IN ('$o-b', '$o-d')")" 0 "no row for them"

# ---- Parked for longer than the grace: the codes stay taken ----
start_reconciler "" --grace "${grace_ms}ms" --interval 300ms
wait_graces "$grace_ms"
is "$(state "$o-b") $(state "$o-d") $(rcli HGET "$k:taken" "$c2") $(rcli HGET "$k:taken" "$c4")" "H H $o-b $o-d" \
  "after three graces and six passes both holds are still H and hold their codes (never released as undelivered)"
is "$(sql "SELECT count(*) FROM campaign_redemption WHERE order_id IN ('$o-b', '$o-d')")" 0 \
  "and no VoucherReleased reached PostgreSQL (no tombstone row)"
grep -q "campaign $cid: 2 dead letters parked" "$VOUCHER_STACK_DIR/logs/$test_name-reconciler.log"
ok $? "the reconciler says the campaign has 2 dead letters parked, waiting for an operator"

# ---- Inspect ----
"$bin_writer" dlt list --order "$o-b" >"$scratch/list.txt" 2>"$scratch/list.err"
ok $? "dlt list --order exits 0"
is "$(awk 'NR > 1 {print $2, $3, $4, $5, $7}' "$scratch/list.txt")" "$c2 $o-b VoucherReserved constraint parked" \
  "dlt list shows the campaign code's letter: code, order, event, class, parked"

# ---- Replay once the cause is gone: x cancels the first order, then the letter is replayed ----
cancel "$c1" "$o-a"
is "$(answer) $(wait_sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-a'" RELEASED 30)" "200 RELEASED RELEASED" \
  "customer x cancels the first order"
"$bin_writer" dlt replay --order "$o-b" --operator tester >"$scratch/replay1.txt" 2>"$scratch/replay1.err"
ok $? "dlt replay --order exits 0"
is "$(wait_sql "SELECT r.status || ' ' || d.state FROM campaign_redemption r JOIN dead_letter d USING (order_id) WHERE r.order_id = '$o-b'" "RESERVED replayed" 30)" \
  "RESERVED replayed" "the replayed reservation is applied (campaignId kept), and its letter marked replayed"
confirm "$c2" "$o-b"
is "$(answer) $(wait_sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-b'" CONFIRMED 30)" "200 CONFIRMED CONFIRMED" \
  "confirm of the replayed order answers 200, and PostgreSQL has it confirmed"
"$bin_writer" dlt replay --order "$o-b" --operator tester >"$scratch/replay2.txt" 2>/dev/null
grep -q "already replayed" "$scratch/replay2.txt"
ok $? "replaying it again sends nothing: $(head -1 "$scratch/replay2.txt")"

# ---- Discard: the code comes back ----
"$bin_writer" dlt discard --order "$o-d" --operator tester >"$scratch/discard.txt" 2>"$scratch/discard.err"
ok $? "dlt discard --order exits 0"
is "$(wait_state "$o-d" R 30) $(rcli HEXISTS "$k:taken" "$c4")" "R 0" \
  "the reconciler released the order in Redis (R) and code 4 is no longer taken"
is "$(wait_sql "SELECT status || ' ' || coalesce(release_reason, '-') FROM campaign_redemption WHERE order_id = '$o-d'" "RELEASED DISCARDED" 30)" \
  "RELEASED DISCARDED" "PostgreSQL has it released with reason DISCARDED"
confirm "$c4" "$o-d"
is "$(answer)" "409 HOLD_EXPIRED" "confirm of the discarded order answers 409"
reserve "$c4" $z "$o-e"
is "$status" 201 "code 4 is free again: another customer takes it (201)"

# ---- At the end: used_count equals the live rows, within the campaign's count ----
wait_sql "SELECT count(*) FROM campaign_redemption WHERE order_id = '$o-e'" 1 30 >/dev/null
is "$(sql "SELECT c.used_count || ':' || (SELECT count(*) FROM campaign_redemption r WHERE r.campaign_id = c.id AND r.status <> 'RELEASED') FROM campaign c WHERE c.id = $cid")" \
  "3:3" "used_count equals the live rows (y's first, x's replayed, z's): nothing counted twice"
finish
