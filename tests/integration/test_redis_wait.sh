#!/usr/bin/env bash
# VOUCHER_REDIS_WAIT_REPLICAS: a use taken must reach that many Redis replicas
# (WAIT) before its event is published, so that a failover cannot forget an
# acknowledged reservation. Too few in time: 503 with the outcome unknown, the
# hold kept and no event; a retry waits for the replicas as well (503 again
# while none has it), and once it can, settles it (201 replayed, one row). With a replica attached, the same setting answers 201.
source "$(dirname "$0")/lib.sh"
plan 12

reserve() { # CUSTOMER ORDER
  http POST "/vouchers/$code/reservations" "{\"customerId\":$1,\"orderId\":\"$2\",\"orderAmount\":500000}"
}
rows() { sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'"; }

replica_port=$((VOUCHER_PORT_BASE + 22)) # +19 is test_readiness's closed port
redis_host_port=${VOUCHER_REDIS_URL#redis://}
redis_host_port=${redis_host_port%%/*}
stop_replica() { redis-cli -p "$replica_port" shutdown nosave >/dev/null 2>&1 || true; }
trap 'stop_replica; finish' EXIT

code=$(unique_code WAIT)
new_voucher "$code" 5 1
start_writer

# The stack's Redis has no replica: WAIT 1 cannot be met.
VOUCHER_REDIS_WAIT_REPLICAS=1 VOUCHER_REDIS_WAIT_TIMEOUT=50ms start_gateway
reserve 1 "$code-o1"
is "$status" 503 "no replica took the use in time: 503"
ok "$(grep -q 'outcome unknown' <<<"$body"; echo $?)" "saying the outcome is unknown ($body)"
is "$(rcli HEXISTS "voucher:{$code}:orders" "$code-o1")" 1 "the hold is kept in Redis, for the retry"

# A retry while still no replica has it: the replay waits for the replicas too
# (a failover now would forget the use a 201 would acknowledge).
reserve 1 "$code-o1"
is "$status" 503 "the retry while no replica has the use: 503 again, not a 201 replayed"
ok "$(grep -q 'outcome unknown' <<<"$body"; echo $?)" "again saying the outcome is unknown ($body)"

# The retry, once replicas are no longer asked for, is answered from that hold.
daemon_stop "$test_name-gateway"
start_gateway
reserve 1 "$code-o1"
is "$status $(jq -r '.replayed' <<<"$body")" "201 true" "the retry of the same orderId: 201 replayed"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'" 1 20)" 1 \
  "one row for it in PostgreSQL"
is "$(rcli GET "voucher:{$code}:remaining")" 4 "one use taken in all"

# A replica attached: WAIT 1 is met and a new order is answered 201 at once.
daemon_stop "$test_name-gateway"
redis-server --bind 127.0.0.1 --port "$replica_port" --dir "$scratch" --save "" --appendonly no \
  --replicaof "${redis_host_port%:*}" "${redis_host_port#*:}" --daemonize yes \
  --logfile "$scratch/replica.log" >/dev/null
for ((i = 0; i < 300; i++)); do
  redis-cli -p "$replica_port" info replication 2>/dev/null | grep -q '^master_link_status:up' && break
  sleep 0.1
done
redis-cli -p "$replica_port" info replication 2>/dev/null | grep -q '^master_link_status:up' ||
  diag "the replica is not linked after 30 s: $(tail -3 "$scratch/replica.log" 2>/dev/null)"
VOUCHER_REDIS_WAIT_REPLICAS=1 VOUCHER_REDIS_WAIT_TIMEOUT=2s start_gateway
reserve 2 "$code-o2"
is "$status" 201 "with a replica attached, WAIT 1 is met: 201"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'" 2 20)" 2 \
  "its row reaches PostgreSQL"

# A replica slow to acknowledge while the WAIT timeout (2 s) is above the
# command timeout (500 ms): the replica is stopped, the reservation's WAIT
# blocks on the master, and the replica resumes once the command timeout has
# passed. The WAIT's deadline counts its own wait, so the use is answered 201
# once the replica has it, not 503 "timed out" at 500 ms (the code before).
replica_pid=$(redis-cli -p "$replica_port" info server | tr -d '\r' | awk -F: '$1 == "process_id" { print $2 }')
blocked() { redis-cli -p "${redis_host_port#*:}" info clients | tr -d '\r' | awk -F: '$1 == "blocked_clients" { print $2 }'; }
kill -STOP "$replica_pid"
started=$(now_ms)
(reserve 3 "$code-o3"; echo "$status" >"$scratch/o3.status") &
waiting=$!
wait_for 1 10 blocked >/dev/null
# Past the command timeout: what is under test is a deadline.
while [ $(($(now_ms) - started)) -lt 900 ]; do sleep 0.05; done
kill -CONT "$replica_pid"
wait "$waiting"
is "$(cat "$scratch/o3.status")" 201 \
  "a replica that acknowledges after $(($(now_ms) - started)) ms, WAIT timeout 2 s: 201, not 503 at the 500 ms command timeout"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'" 3 20)" 3 \
  "its row reaches PostgreSQL"
