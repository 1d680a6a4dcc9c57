#!/usr/bin/env bash
# PostgreSQL holds a campaign's perCustomerLimit (deploy/sql/017): when Redis
# lets a customer past it (its users count wrong, as after a rebuild from an
# older state), the writer's insert is refused (check_violation,
# ck_campaign_per_customer) and the event is dead-lettered, so the customer
# never holds more live uses of the campaign than the limit; the same for
# events applied directly and for a released row brought back by hand.
source "$(dirname "$0")/lib.sh"
plan 7

source "$(dirname "$0")/campaign_lib.sh"
campaign_test QU '"name":"limit","count":6,"discountAmount":500'
campaign_codes c1 c2 c3 c4 c5
x=$((base + 1)) y=$((base + 2))
live() { sql "SELECT count(*) FROM campaign_redemption WHERE campaign_id = $cid AND customer_id = $1 AND status <> 'RELEASED'"; }

reserve "$c1" $x "$o-a"
is "$status $(wait_sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-a'" RESERVED 30)" "201 RESERVED" \
  "customer x holds code 1 (limit 1 across the campaign)"

# ---- Redis lets x past the limit: PostgreSQL refuses ----
rcli HSET "$k:users" $x 0 >/dev/null
reserve "$c2" $x "$o-b"
is "$status" 201 "with its count wrong in Redis, x gets a second hold from Redis: 201"
is "$(wait_sql "SELECT error_class || ':' || (error_message LIKE '%per_customer_limit%') FROM dead_letter WHERE order_id = '$o-b'" constraint:true 30)" \
  constraint:true "the writer's insert was refused by the per-customer limit: a dead letter of class constraint"
is "$(live $x) $(sql "SELECT count(*) FROM campaign_redemption WHERE order_id = '$o-b'")" "1 0" \
  "PostgreSQL: x holds one live use, no row for the second order"

# ---- events applied directly: all or nothing ----
apply() { # ORDER CODE CUSTOMER
  echo "ARRAY[1]::smallint[], ARRAY['$2'], ARRAY[$3]::bigint[], ARRAY['$1'], ARRAY[500]::bigint[], ARRAY[10000]::bigint[], ARRAY[0]::bigint[], ARRAY[0]::bigint[], ARRAY['']::text[], ARRAY[$cid]::bigint[]"
}
out=$(sql "SELECT wr_apply_campaign_events($(apply "$o-c" "$c3" $y)); SELECT wr_apply_campaign_events($(apply "$o-d" "$c4" $y))" 2>&1)
grep -q 'ck_campaign_per_customer\|above per_customer_limit 1' <<<"$out"; ok $? "two reservations of y applied in one transaction: refused ($(grep -m1 -o "ERROR.*" <<<"$out"))"
is "$(live $y)" 0 "nothing of it was written"

# ---- a released row brought back by hand ----
sql "SELECT wr_apply_campaign_events($(apply "$o-e" "$c5" $y))" >/dev/null
sql "UPDATE campaign_redemption SET status = 'RELEASED' WHERE order_id = '$o-e'"
sql "SELECT wr_apply_campaign_events($(apply "$o-f" "$c3" $y))" >/dev/null
out=$(sql "UPDATE campaign_redemption SET status = 'RESERVED' WHERE order_id = '$o-e'" 2>&1)
is "$(live $y)" 1 "a released row of y set live again by hand is refused: y still holds one use"
finish
