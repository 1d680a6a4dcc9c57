#!/usr/bin/env bash
# The writer's apply lanes (VOUCHER_WRITER_LANES): one process applies its
# partitions through several PostgreSQL sessions, partition p in lane
# p % lanes, so a voucher whose row is locked holds back its own lane only.
# A transaction holds voucher A's row (SELECT ... FOR UPDATE) while one event
# for A (partition 0) and one for B (partition 1) wait in a topic of their
# own: with four lanes B is applied while A waits, and A right after the lock
# goes; with one session both would wait in the same batch.
source "$(dirname "$0")/lib.sh"
plan 5

topic=lanes-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
a=$(unique_code LANEA)
b=$(unique_code LANEB)
new_voucher "$a" 10
new_voucher "$b" 10
deploy_kafka() { "$VOUCHER_SOURCE_DIR/deploy/stack" kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$VOUCHER_KAFKA_BROKERS" "$@"; }
deploy_kafka --create --topic "$topic" --partitions 4 --replication-factor 1 >/dev/null ||
  { echo "Bail out! cannot create topic $topic"; exit 1; }
# The writer stops before its topic goes (a writer whose topic vanished waits out its shutdown timeout).
trap 'stop_daemons; deploy_kafka --delete --topic "$topic" >/dev/null 2>&1; finish' EXIT

event() { # CODE ORDER CUSTOMER
  printf '{"type":"VoucherReserved","version":1,"code":"%s","customerId":%d,"orderId":"%s","discountAmount":100000,"orderAmount":500000,"reservedAt":"%s","heldUntil":"%s"}' \
    "$1" "$3" "$2" "$(date -u +%Y-%m-%dT%H:%M:%S.000Z)" "$(date -u -d '+15 minutes' +%Y-%m-%dT%H:%M:%S.000Z)"
}
produce() { # PARTITION CODE ORDER CUSTOMER
  printf '%s\t%s\n' "$2" "$(event "$2" "$3" "$4")" |
    kcat -P -b "$VOUCHER_KAFKA_BROKERS" -t "$topic" -p "$1" -K $'\t'
}
rows() { sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$1'"; }

# The lock: a session holds A's row until its fifo is written to (bounded: 60 s).
mkfifo "$scratch/unlock"
(
  printf 'BEGIN;\nSELECT code FROM voucher WHERE code = %s FOR UPDATE;\n\\! echo locked > %s\n\\! timeout 60 cat %s\nCOMMIT;\n' \
    "'$a'" "$scratch/locked" "$scratch/unlock" "$scratch/unlock" | psql -X -q -tA "$VOUCHER_PG_DSN" >/dev/null 2>&1
) &
locker=$!
for ((i = 0; i < 100; i++)); do [ -s "$scratch/locked" ] && break; sleep 0.1; done
[ -s "$scratch/locked" ] || { echo "Bail out! the locking session did not start"; exit 1; }

produce 0 "$a" "lane-a-$a" 1
produce 1 "$b" "lane-b-$b" 2
VOUCHER_WRITER_LANES=4 start_writer --topic "$topic" --group "lanes-$topic" --linger 0ms

got_b=$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$b'" 1 30)
got_a=$(rows "$a")
is "$got_b" 1 "B (partition 1, lane 1) is applied while A's row is locked"
is "$got_a" 0 "A (partition 0, lane 0) waits for the lock"
is "$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'voucher-writer' AND datname = current_database()")" 4 \
  "the writer holds one PostgreSQL session per lane"

echo go >"$scratch/unlock"
wait "$locker" 2>/dev/null || true
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$a'" 1 30)" 1 \
  "A is applied once the lock goes"
is "$(sql "SELECT used_count FROM voucher WHERE code IN ('$a', '$b') ORDER BY code")" "$(printf '1\n1')" \
  "each voucher counts its one use"
