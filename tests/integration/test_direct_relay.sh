#!/usr/bin/env bash
# Direct mode, the reconciler's and the writer's side (proto/direct-mode.md):
# the events a direct voucher's transactions write into event_outbox reach
# voucher-events in id order, keyed by the code, and are marked sent; the
# writer verifies them against the rows (no change, no dead letter) and
# dead-letters one the rows do not bear out (direct-mismatch); a reconciler
# that does not act relays nothing; with Kafka stopped the rows stay unsent
# and the backlog metric grows, and once Kafka is back they are published in
# order, none lost; the reconciler releases a direct voucher's expired holds
# with their events, and never gives a direct voucher a Redis key.
# The rows are written by the SQL functions as the gateway's role, so this
# test does not depend on the gateway's direct path. Stops and starts the
# stack's Kafka: run it on a private stack (tests/run).
source "$(dirname "$0")/lib.sh"
plan 31

stack=$VOUCHER_SOURCE_DIR/deploy/stack
kafka_back() { "$stack" up kafka >"$scratch/kafka-up.log" 2>&1; }
# The session that holds the reconcilers' lock in part 4, by its application_name: ending
# the psql client would leave its backend asleep, the lock held.
holder=test-direct-relay-lock
release_lock() {
  sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '$holder'" >/dev/null
}
# Whatever happens, leave Kafka running and the lock free for the tests after this one.
trap 'release_lock; kafka_back; finish' EXIT

export VOUCHER_OUTBOX_POLL=200ms VOUCHER_RECONCILE_INTERVAL=500ms VOUCHER_RECONCILE_GRACE=1s
export VOUCHER_RECONCILE_TIMEOUT=2s
rc_addr=$(reconciler_admin 0)

# SQL as the gateway's role, which may only execute the dr_* functions.
gw_sql() { psql -X -q -tA -v ON_ERROR_STOP=1 "$VOUCHER_GATEWAY_PG_DSN" -c "$1"; }
direct_voucher() { # CODE LIMIT
  sql "INSERT INTO voucher (code, discount_amount, total_limit, per_user_limit, starts_at, ends_at, mode)
       VALUES ('$1', 100, $2, 5, now() - interval '1 hour', now() + interval '1 day', 'direct')"
}
iso() { date -u -d "@$(($1 / 1000)).$(printf %03d $(($1 % 1000)))" +%Y-%m-%dT%H:%M:%S.%3NZ; }
# reserve CODE ORDER CUSTOMER HELD_UNTIL_MS: dr_reserve's answer, with the event the gateway would build.
reserve() {
  local now ev
  now=$(now_ms)
  ev='{"type":"VoucherReserved","version":1,"code":"'$1'","customerId":'$3',"orderId":"'$2'","discountAmount":100,"orderAmount":5000,"reservedAt":"'$(iso "$now")'","heldUntil":"'$(iso "$4")'"}'
  gw_sql "SELECT answer FROM dr_reserve('$1', '$2', '$3', 5000, 100, $now, $4, '$ev')"
}
cancel() { # CODE ORDER CUSTOMER
  local now ev
  now=$(now_ms)
  ev='{"type":"VoucherReleased","version":1,"code":"'$1'","customerId":'$3',"orderId":"'$2'","releasedAt":"'$(iso "$now")'","reason":"CANCELLED"}'
  gw_sql "SELECT answer FROM dr_cancel('$1', '$2', $now, '$ev')"
}
later=$(($(now_ms) + 3600 * 1000))
unsent() { sql "SELECT count(*) FROM event_outbox WHERE event_key = '$1' AND sent_at IS NULL"; }
# The outbox's rows of CODE as "TYPE ORDER" lines, in id order.
outbox_order() { sql "SELECT payload::json->>'type' || ' ' || (payload::json->>'orderId') FROM event_outbox WHERE event_key = '$1' ORDER BY id"; }
# The events keyed CODE in voucher-events as "TYPE ORDER" lines, in their partition's order.
topic_order() {
  kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -o beginning -e -q -f '%k\t%p\t%s\n' 2>/dev/null |
    awk -F'\t' -v k="$1" '$1 == k { print $3 }' | jq -r '.type + " " + .orderId'
}
topic_partitions() {
  kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -o beginning -e -q -f '%k %p\n' 2>/dev/null |
    awk -v k="$1" '$1 == k { print $2 }' | sort -u | wc -l
}
redis_keys() { rcli --scan --pattern "voucher:{$1}:*" | wc -l; }

start_writer
start_reconciler

# 1. Rows written by the functions reach the topic in id order, keyed by the code.
a=$(unique_code DRELAY)
direct_voucher "$a" 5
is "$(reserve "$a" "$a-o1" 1 "$later") $(reserve "$a" "$a-o2" 2 "$later") $(cancel "$a" "$a-o1" 1)" \
  "RESERVED RESERVED RELEASED" "two reservations and a cancel of a direct voucher, as the gateway's role"
is "$(wait_for 0 30 unsent "$a")" 0 "the relay marked its three outbox rows sent"
want=$(outbox_order "$a")
is "$(topic_order "$a" | tr '\n' ,)" "$(tr '\n' , <<<"$want")" \
  "voucher-events holds them in id order (reserved o1, reserved o2, released o1), each once"
is "$(topic_partitions "$a")" 1 "keyed by the code: all in one partition"
metric_wait "$(writer_admin)" 'voucher_writer_events_total{outcome="noop"}' 3 30
ok $? "the writer handled them as no-ops"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$a'")/$(sql "SELECT string_agg(order_id || '=' || status, ' ' ORDER BY order_id) FROM voucher_redemption WHERE voucher_code = '$a'")" \
  "1/$a-o1=RELEASED $a-o2=RESERVED" "the rows are as the functions left them: used_count 1"
is "$(sql "SELECT count(*) FROM dead_letter WHERE voucher_code = '$a'")" 0 "no dead letter for events the rows bear out"

# 2. An event the row does not bear out: a VoucherReleased forged for o2, still RESERVED.
sql "INSERT INTO event_outbox (event_key, payload) VALUES ('$a',
  '{\"type\":\"VoucherReleased\",\"version\":1,\"code\":\"$a\",\"customerId\":2,\"orderId\":\"$a-o2\",\"releasedAt\":\"$(iso "$(now_ms)")\",\"reason\":\"CANCELLED\"}');
  SELECT pg_notify('voucher_outbox', '')" >/dev/null
is "$(wait_sql "SELECT error_class || ' ' || state || ' ' || event_type FROM dead_letter WHERE order_id = '$a-o2'" \
  "direct-mismatch parked VoucherReleased" 30)" "direct-mismatch parked VoucherReleased" \
  "the forged release became a parked dead letter of class direct-mismatch"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$a'") $(sql "SELECT status FROM voucher_redemption WHERE order_id = '$a-o2'")" \
  "1 RESERVED" "and changed nothing: the row is still RESERVED, used_count 1"
"$bin_writer" dlt list --code "$a" >"$scratch/dlt-list.txt" 2>&1
grep -q "direct-mismatch" "$scratch/dlt-list.txt"
ok $? "voucher-writer dlt list shows it with its class"

# 3. A direct voucher's expired hold: released by the reconciler with its event.
c=$(unique_code DREXPIRE)
direct_voucher "$c" 3
is "$(reserve "$c" "$c-o1" 1 $(($(now_ms) - 5000))) $(reserve "$c" "$c-o2" 2 "$later")" "RESERVED RESERVED" \
  "a hold that expired five seconds ago and one that holds for an hour"
is "$(wait_sql "SELECT status || ' ' || release_reason FROM voucher_redemption WHERE order_id = '$c-o1'" "RELEASED EXPIRED" 30)" \
  "RELEASED EXPIRED" "the reconciler released the expired hold"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$c'") $(sql "SELECT status FROM voucher_redemption WHERE order_id = '$c-o2'")" \
  "1 RESERVED" "its use came back; the live hold stays"
wait_for 0 30 unsent "$c" >/dev/null
is "$(topic_order "$c" | tr '\n' ,)" "VoucherReserved $c-o1,VoucherReserved $c-o2,VoucherReleased $c-o1," \
  "its VoucherReleased reached the topic after the reservations"
is "$(sql "SELECT payload::json->>'reason' FROM event_outbox WHERE event_key = '$c' AND payload LIKE '%VoucherReleased%'")" \
  EXPIRED "the release's event says EXPIRED"
p0=$(reconciler_passes)
for ((i = 0; i < 300; i++)); do [ "$(reconciler_passes)" -ge $((${p0:-0} + 4)) ] && break; sleep 0.1; done
is "$(redis_keys "$a") $(redis_keys "$c")" "0 0" "after $(($(reconciler_passes) - ${p0:-0})) more passes, the direct vouchers have no Redis key"
is "$(metric "$rc_addr" "voucher_reconciler_verdict{code=\"$c\"}")" 0 "the reconciler judges the direct voucher consistent"
# Its check, rows against used_count, finds a change made by hand either way:
# a use counted without a row (used-without-rows, 5), a live row without its
# use (drifted, 4); the live rows are the aggregates' count (voucher_aggregate).
verdict_c() { metric "$rc_addr" "voucher_reconciler_verdict{code=\"$c\"}"; }
sql "UPDATE voucher SET used_count = used_count + 1 WHERE code = '$c'"
is "$(wait_for 5 30 verdict_c)" 5 "used_count raised by hand: the direct voucher is judged used-without-rows"
sql "UPDATE voucher SET used_count = used_count - 1 WHERE code = '$c';
     INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status, held_until)
     VALUES ('$c', 9, '$c-by-hand', 'RESERVED', 'infinity')"
is "$(wait_for 4 30 verdict_c)" 4 "a live row added by hand, its use not counted: drifted"
sql "DELETE FROM voucher_redemption WHERE order_id = '$c-by-hand'"
is "$(wait_for 0 30 verdict_c)" 0 "both taken back: consistent again"

# 4. A reconciler that does not act relays nothing: the lock held elsewhere.
daemon_stop "$test_name-reconciler"
PGAPPNAME=$holder psql -X -q "$VOUCHER_PG_DSN" -c "SELECT pg_advisory_lock(x'7461736b'::bigint)" \
  -c "SELECT pg_sleep(600)" >/dev/null 2>&1 &
is "$(wait_sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = x'7461736b'::bigint::oid" 1 30)" 1 \
  "the reconcilers' lock is held by another session"
b=$(unique_code DRSTANDBY)
direct_voucher "$b" 10
reserve "$b" "$b-o1" 1 "$later" >/dev/null
"$bin_reconciler" --once >"$scratch/standby.out" 2>&1
grep -q "another reconciler holds the lock and acts: reporting only" "$scratch/standby.out" && ! grep -q '^outbox:' "$scratch/standby.out"
ok $? "a reconciler run while another holds the lock reports only, and does not relay"
is "$(unsent "$b")" 1 "the row it saw stays unsent"
release_lock
start_reconciler
is "$(wait_for 0 30 unsent "$b")" 0 "once a reconciler acts, it relays the row"

# 5. Kafka stopped: the rows stay unsent, the backlog metric grows; back: drained in order.
"$stack" down kafka >"$scratch/kafka-down.log" 2>&1
ok $? "Kafka stopped"
for n in 2 3 4; do reserve "$b" "$b-o$n" "$n" "$later" >/dev/null; done
metric_wait "$rc_addr" voucher_outbox_unsent 3 60
ok $? "voucher_outbox_unsent counts the three rows Kafka cannot take"
cancel "$b" "$b-o2" 2 >/dev/null
metric_wait "$rc_addr" voucher_outbox_unsent 4 60
ok $? "and grows with a fourth"
is "$(unsent "$b")" 4 "the four rows stay unsent while Kafka is away"
kafka_back
ok $? "Kafka started again"
is "$(wait_for 0 120 unsent "$b")" 0 "once Kafka is back, the backlog is published and marked sent"
# Kafka may hold a copy sent before the outage ended (re-sent, not marked): the first of each is in order.
is "$(topic_order "$b" | awk '!seen[$0]++' | tr '\n' ,)" \
  "VoucherReserved $b-o1,VoucherReserved $b-o2,VoucherReserved $b-o3,VoucherReserved $b-o4,VoucherReleased $b-o2," \
  "every event reached the topic, in id order: nothing lost"
