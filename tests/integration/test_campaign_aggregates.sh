#!/usr/bin/env bash
# A quiet campaign is judged by its aggregates (proto/campaigns.md,
# "Aggregates"; issue 43), as a quiet voucher is: per order state, the orders
# Redis holds (campaign:{cID}:agg, kept by every script) and the rows
# PostgreSQL holds (campaign_aggregate, kept by campaign_redemption's
# triggers), with their customers' sums. While they agree the campaign is not
# read in full, however short --full-every; a confirm Redis took whose event
# was lost (C in Redis, RESERVED in PostgreSQL: the numbers still agree) moves
# them apart, and the next pass reads the campaign in full and repairs it,
# however long --full-every. And PostgreSQL's aggregate stays a recount of the
# rows after the writer's applies, the reconciler's releases and an
# operator's change by hand. Promise checked: an acknowledged confirm is never
# lost (its event published again).
source "$(dirname "$0")/lib.sh"
plan 12

source "$(dirname "$0")/campaign_lib.sh"
campaign_test QG '"name":"aggregates","count":10,"discountAmount":500' --hold-ttl 10s
campaign_codes c1 c2 c3 c4
state() { rcli HGET "$k:orders" "$1" | cut -d: -f4; }
tail6() { echo $(($1 % 1000000)); } # a customer's last six digits, as both sides sum them
# The aggregate Redis keeps, as "field=n" sorted, zeros left out.
agg() { rcli HGETALL "$k:agg" | paste - - | awk '$2 != 0 { print $1 "=" $2 }' | sort | tr '\n' ' '; }
# PostgreSQL's aggregate: reserved confirmed released, then their customers' sums.
pg_agg() {
  sql "SELECT agg_reserved || ' ' || agg_confirmed || ' ' || agg_released || ' '
              || agg_reserved_customers || ' ' || agg_confirmed_customers || ' '
              || agg_released_customers FROM campaign_aggregate WHERE campaign_id = $cid"
}
# The same numbers counted from the rows.
recount() {
  sql "SELECT count(*) FILTER (WHERE status = 'RESERVED') || ' '
              || count(*) FILTER (WHERE status = 'CONFIRMED') || ' '
              || count(*) FILTER (WHERE status = 'RELEASED') || ' '
              || coalesce(sum(right(customer_id::text, 6)::bigint) FILTER (WHERE status = 'RESERVED'), 0)
              || ' ' || coalesce(sum(right(customer_id::text, 6)::bigint) FILTER (WHERE status = 'CONFIRMED'), 0)
              || ' ' || coalesce(sum(right(customer_id::text, 6)::bigint) FILTER (WHERE status = 'RELEASED'), 0)
         FROM campaign_redemption WHERE campaign_id = $cid"
}
# How the reconciler's last pass read the campaign: 0 numbers and aggregates, 2 in full.
read_kind() { metric "$(reconciler_admin 0)" "voucher_reconciler_campaign_read{campaign=\"$cid\"}"; }
# Until three passes in a row read it by its numbers (the writer has committed its offsets: its
# events no longer count as in flight), at most 20 s.
wait_settled() {
  local i n=0
  for ((i = 0; i < 100 && n < 3; i++)); do
    passes_after 1
    if [ "$(read_kind)" = 0 ]; then n=$((n + 1)); else n=0; fi
  done
  [ "$n" -ge 3 ]
}

c_1=$((base + 1)) c_2=$((base + 2)) c_3=$((base + 3)) c_4=$((base + 4))
reserve "$c1" "$c_1" "$o-1"
http POST "/vouchers/$c1/reservations/$o-1/confirm"
reserve "$c3" "$c_3" "$o-3"
http DELETE "/vouchers/$c3/reservations/$o-3"
is "$(wait_sql "SELECT string_agg(status, ' ' ORDER BY order_id) FROM campaign_redemption WHERE campaign_id = $cid" \
  "CONFIRMED RELEASED" 20)" "CONFIRMED RELEASED" "o1 confirmed, o3 cancelled: PostgreSQL has them"
is "$(agg) / $(pg_agg)" \
  "C=1 C_customers=$(tail6 $c_1) R=1 R_customers=$(tail6 $c_3)  / 0 1 1 0 $(tail6 $c_1) $(tail6 $c_3)" \
  "Redis's aggregate and PostgreSQL's count one order per state, and sum their customers alike"

# 1. Nothing wrong: with --full-every 1s, a campaign whose aggregates are
#    missing or apart is read in full every second; this one is not, over 4 s
#    of passes (its first one, which reads everything, aside).
start_reconciler "" --interval 200ms --grace 2s --full-every 1s
passes_after 1 || { echo "Bail out! the reconciler finished no pass"; exit 1; }
wait_settled || { echo "Bail out! the campaign never went quiet"; exit 1; }
kinds=""
deadline=$(($(now_ms) + 4000))
while [ "$(now_ms)" -lt "$deadline" ]; do
  passes_after 1
  kinds+="$(read_kind)"
done
ok "$([ -n "$kinds" ] && [ -z "${kinds//0/}" ]; echo $?)" \
  "a quiet campaign whose aggregates agree is judged by its numbers on every pass for 4 s, never read in full (voucher_reconciler_campaign_read: $kinds)"
daemon_stop "$test_name-reconciler"

# 2. A confirm Redis took whose VoucherConfirmed never reached Kafka (the
#    gateway answered 503): made by confirm.lua itself on a hold PostgreSQL
#    has. The codes taken still equal the live rows; the aggregates do not
#    (H-1, C+1 in Redis).
start_reconciler "" --interval 200ms --grace 2s --full-every 1h
passes_after 1 || { echo "Bail out! the reconciler finished no pass"; exit 1; }
reserve "$c2" "$c_2" "$o-2"
s2=$status
wait_sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-2'" RESERVED 20 >/dev/null
wait_settled
is "$s2 $(read_kind)" "201 0" "o2 held on both sides: the campaign is judged by its numbers again"
rcli EVAL "$(lua_script confirm)" 2 "$k:orders" "$k:holds" "$o-2" "$(now_ms)" >/dev/null
is "$(state "$o-2") $(sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-2'")" \
  "C RESERVED" "Redis confirmed o2, PostgreSQL holds it RESERVED: its use taken on both sides"
passes_after 1
is "$(read_kind)" 2 "the next pass read the campaign in full: its aggregates disagree (--full-every 1h)"
grep -q "campaign $cid: its aggregates in Redis and PostgreSQL disagree: read in full" \
  "$VOUCHER_STACK_DIR/logs/$test_name-reconciler.log"
ok $? "and said why"
is "$(wait_sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-2'" CONFIRMED 40)" CONFIRMED \
  "that read published the lost confirm once heldUntil and the grace had passed: PostgreSQL has o2 CONFIRMED"
wait_settled
is "$(read_kind) $(agg)" \
  "0 C=2 C_customers=$(($(tail6 $c_1) + $(tail6 $c_2))) R=1 R_customers=$(tail6 $c_3) " \
  "repaired, the aggregates agree again: judged by its numbers"

# 3. PostgreSQL's aggregate is a recount of the rows, whoever changed them:
#    the writer (above, and a hold the reconciler expires and releases), and
#    an operator by hand.
reserve "$c4" "$c_4" "$o-4"
is "$status $(wait_sql "SELECT status || ':' || release_reason FROM campaign_redemption WHERE order_id = '$o-4'" RELEASED:EXPIRED 40)" \
  "201 RELEASED:EXPIRED" "o4's hold expired by the reconciler, its release applied by the writer"
is "$(pg_agg)" "$(recount)" "PostgreSQL's aggregate is a recount of the rows: $(pg_agg)"
daemon_stop "$test_name-reconciler"
sql "UPDATE campaign_redemption SET customer_id = customer_id + 7 WHERE order_id = '$o-3';
     DELETE FROM campaign_redemption WHERE order_id = '$o-4'" >/dev/null
is "$(pg_agg)" "$(recount)" "and after a row changed and one deleted by hand: $(pg_agg)"
finish
