#!/usr/bin/env bash
# A failover must not undo a confirm, a cancel or a release (proto/redis-keys.md,
# "Redis Cluster"): with VOUCHER_REDIS_WAIT_REPLICAS=1 every write an answer or a
# repair stands on reaches a replica before its event is published. One node
# with a real replica, started here (--replicaof the stack's Redis), and its
# link broken on purpose:
#  1. The replica stopped (SIGSTOP: still counted as a replica, acknowledging
#     nothing): a cancel of an order whose release another client began (its
#     X on the master only) answers 503; once the replica is back, its retry 200.
#  2. The replica promoted (REPLICAOF NO ONE: it keeps what it had, the state a
#     failover would leave): a confirm and a cancel answer 503 and publish
#     nothing; a PATCH lowering the total answers 503 and commits nothing; the
#     reconciler begins the release of a hold whose event was lost (E) and
#     publishes nothing, and counts it.
#  3. A gateway on the promoted replica (what survived): every order there is
#     as PostgreSQL has it; the confirm of the hold the reconciler had begun to
#     release is CONFIRMED in PostgreSQL (before: a 200 for an order PostgreSQL
#     had RELEASED, released behind the customer), the retry of the cancelled
#     order is a reservation PostgreSQL still holds.
source "$(dirname "$0")/lib.sh"
plan 20

token=$(new_token admin)
auth=(-H "Authorization: Bearer $token")
reserve() { # CODE CUSTOMER ORDER
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":500000}"
}
confirm() { http POST "/vouchers/$1/reservations/$2/confirm"; }
cancel() { http DELETE "/vouchers/$1/reservations/$2"; }
status_of() { sql "SELECT status FROM voucher_redemption WHERE order_id = '$1'"; }
wait_status() { wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$1'" "$2" 20; }
state_on() { redis-cli -p "$1" HGET "voucher:{$2}:orders" "$3" | awk -F: '{print $4}'; }
outcome_unknown() { grep -q 'outcome unknown' <<<"$body"; echo $?; }

replica_port=$((VOUCHER_PORT_BASE + 23)) # +22 is test_redis_wait's replica
redis_host_port=${VOUCHER_REDIS_URL#redis://}
redis_host_port=${redis_host_port%%/*}
master_port=${redis_host_port#*:}
replica_pid=
stop_replica() {
  [ -n "$replica_pid" ] && kill -CONT "$replica_pid" 2>/dev/null
  redis-cli -p "$replica_port" shutdown nosave >/dev/null 2>&1 || true
}
# The stack's Redis keeps the old master's state of both vouchers, which no
# longer agrees with PostgreSQL: ended two days ago, they leave the reconciler's
# window (a day after the end), so that the later tests' passes never act on them.
retire() {
  sql "UPDATE voucher SET starts_at = now() - interval '3 days', ends_at = now() - interval '2 days'
       WHERE code IN ('$code', '$rcode')" >/dev/null 2>&1
}
trap 'stop_replica; retire; finish' EXIT
replica_linked() { # up when the replica has finished its sync with the stack's Redis
  redis-cli -p "$replica_port" info replication 2>/dev/null | tr -d '\r' |
    awk -F: '$1 == "master_link_status" { print $2 }'
}
replicas_of_master() {
  rcli info replication | tr -d '\r' | awk -F: '$1 == "connected_slaves" { print $2 }'
}

code=$(unique_code FAILOVER)
# The reconciler's voucher sorts before every other code of the stack (the
# digit), so that its pass reaches this voucher first: with no replica each
# pass stops at the first repair it makes.
rcode=$(unique_code 0FAILOVER)
new_voucher "$code" 10 1
new_voucher "$rcode" 10 1
start_writer

redis-server --bind 127.0.0.1 --port "$replica_port" --dir "$scratch" --save "" --appendonly no \
  --replicaof "${redis_host_port%:*}" "$master_port" --daemonize yes \
  --logfile "$scratch/replica.log" >/dev/null
[ "$(wait_for up 30 replica_linked)" = up ] ||
  diag "the replica is not linked after 30 s: $(tail -3 "$scratch/replica.log" 2>/dev/null)"
replica_pid=$(redis-cli -p "$replica_port" info server | tr -d '\r' | awk -F: '$1 == "process_id" { print $2 }')
VOUCHER_ADMIN_TOKEN=$token VOUCHER_REDIS_WAIT_REPLICAS=1 VOUCHER_REDIS_WAIT_TIMEOUT=300ms \
  start_gateway

# ---- 1. A cancel of a release another client began, the replica silent.
reserve "$code" 4 "$code-o4"
[ "$status" = 201 ] || diag "reserving $code-o4: $status $body"
kill -STOP "$replica_pid"
# Another gateway's cancel: X on the master; its own WAIT (not made here) would fail.
rcli EVAL "$(lua_script release_begin)" 3 "voucher:{$code}:orders" "voucher:{$code}:holds" \
  "voucher:{$code}:releasing" "$code-o4" cancel "$(now_ms)" >/dev/null
cancel "$code" "$code-o4"
is "$status" 503 \
  "a cancel that finds the release begun by another, the replica silent: 503 (its WAIT covers that X)"
kill -CONT "$replica_pid"
cancel "$code" "$code-o4"
is "$status" 200 "the replica back, the retry of that cancel: 200"
is "$(wait_status "$code-o4" RELEASED)" RELEASED "and PostgreSQL releases it"

# ---- 2. The replica promoted: what it has is what a failover keeps.
reserve "$code" 1 "$code-o1"
[ "$status" = 201 ] || diag "reserving $code-o1: $status $body"
reserve "$code" 2 "$code-o2"
[ "$status" = 201 ] || diag "reserving $code-o2: $status $body"
# A hold whose event was lost (its 201 never given): reserve.lua alone, on a
# voucher loaded as the gateway loads one.
rcli SET "voucher:{$rcode}:remaining" 10 NX >/dev/null
rcli SET "voucher:{$rcode}:limit" 10 NX >/dev/null
sql "UPDATE voucher SET redis_loaded_at = now() WHERE code = '$rcode'" >/dev/null
rcli EVAL "$(lua_script reserve)" 6 "voucher:{$rcode}:remaining" "voucher:{$rcode}:users" \
  "voucher:{$rcode}:orders" "voucher:{$rcode}:holds" "voucher:{$rcode}:resent" \
  "voucher:{$rcode}:amounts" 3 1 "$rcode-o3" 100000 $(($(now_ms) + 3600000)) "$(now_ms)" 500000 \
  take >/dev/null
[ "$(wait_for H 10 state_on "$replica_port" "$rcode" "$rcode-o3")" = H ] ||
  diag "the replica does not have $rcode-o3"
redis-cli -p "$replica_port" replicaof no one >/dev/null
[ "$(wait_for 0 10 replicas_of_master)" = 0 ] || diag "the stack's Redis still counts a replica"

confirm "$code" "$code-o1"
is "$status" 503 "a confirm no replica took in time: 503"
ok "$(outcome_unknown)" "saying the outcome is unknown ($body)"
cancel "$code" "$code-o2"
is "$status" 503 "a cancel no replica took in time: 503"
ok "$(outcome_unknown)" "saying the outcome is unknown ($body)"

http PATCH "/vouchers/$code" '{"totalLimit":8}' "${auth[@]}"
is "$status" 503 "a PATCH lowering the total, no replica in time: 503 ($body)"
is "$(sql "SELECT total_limit FROM voucher WHERE code = '$code'") $(rcli GET "voucher:{$code}:remaining")" \
  "10 8" "nothing committed, and the uses given back to the counter"

VOUCHER_REDIS_WAIT_REPLICAS=1 VOUCHER_REDIS_WAIT_TIMEOUT=100ms VOUCHER_RECONCILE_GRACE=1s \
  VOUCHER_RECONCILE_INTERVAL=200ms start_reconciler
for ((i = 0; i < 300; i++)); do
  [ "$(state_on "$master_port" "$rcode" "$rcode-o3")" != H ] && break
  sleep 0.1
done
metric_wait "$(reconciler_admin)" voucher_reconciler_redis_wait_short_total 1 10
ok $? "the reconciler counts the release no replica took (voucher_reconciler_redis_wait_short_total)"
daemon_stop "$test_name-reconciler"
is "$(state_on "$master_port" "$rcode" "$rcode-o3")" E \
  "the release of the lost hold is begun (E) and not finished: nothing published"

# ---- 3. A gateway on the promoted replica: what survived.
daemon_stop "$test_name-gateway"
VOUCHER_REDIS_URL="redis://127.0.0.1:$replica_port/0" start_gateway
# An event of each voucher after everything published before (one partition a
# voucher): once its row is there, so is every earlier event of the voucher.
reserve "$code" 5 "$code-o5"
reserve "$rcode" 6 "$rcode-o6"
is "$(wait_status "$code-o5" RESERVED) $(wait_status "$rcode-o6" RESERVED)" "RESERVED RESERVED" \
  "a new reservation of each voucher on the promoted replica reaches PostgreSQL"
is "$(status_of "$code-o1")" RESERVED "the confirm answered 503 published nothing"
is "$(status_of "$code-o2")" RESERVED "the cancel answered 503 published nothing"
is "$(status_of "$rcode-o3")" "" "the reconciler's release published nothing"

confirm "$rcode" "$rcode-o3"
is "$status" 200 "the customer confirms the hold the reconciler had begun to release: 200"
is "$(wait_status "$rcode-o3" CONFIRMED)" CONFIRMED "and PostgreSQL has it CONFIRMED, not RELEASED"
reserve "$code" 2 "$code-o2"
is "$status $(jq -r '.replayed' <<<"$body") $(status_of "$code-o2")" "201 true RESERVED" \
  "the retry of the order whose cancel answered 503: 201 replayed, an order PostgreSQL holds"
confirm "$code" "$code-o1"
is "$status $(wait_status "$code-o1" CONFIRMED)" "200 CONFIRMED" "the confirm retried: 200, CONFIRMED"
cancel "$code" "$code-o2"
is "$status $(wait_status "$code-o2" RELEASED)" "200 RELEASED" "the cancel retried: 200, RELEASED"
