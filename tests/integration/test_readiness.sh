#!/usr/bin/env bash
# The writer's /readyz means what the runbook says: a live PostgreSQL session
# and membership in its consumer group. Each dependency is made unreachable in
# turn (a closed port at start, then the running server stopped), and
# readiness must say so, then come back once the server does.
source "$(dirname "$0")/lib.sh"
plan 15

addr=$(writer_admin)
readyz() { curl -s --max-time 2 "http://$addr/readyz"; }
# Until /readyz's answer contains TEXT, or SECONDS pass; 0 when it did.
wait_ready_text() { # TEXT SECONDS
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [[ "$(readyz)" == *"$1"* ]] && return 0
    sleep 0.1
  done
  diag "last /readyz: $(readyz)"
  return 1
}
closed_port=$((VOUCHER_PORT_BASE + 19)) # nothing of the stack listens there

# --- A closed PostgreSQL port at start: running, but not ready.
VOUCHER_WRITER_PG_DSN="host=127.0.0.1 port=$closed_port dbname=voucher user=voucher_writer" start_writer
wait_http_ok "http://$addr/healthz" 30
wait_ready_text "no PostgreSQL session" 15
ok $? "a writer whose PostgreSQL port is closed says it is not ready: no PostgreSQL session"
daemon_stop "$test_name-writer"

# --- A closed Kafka port at start.
VOUCHER_KAFKA_BROKERS="127.0.0.1:$closed_port" start_writer
wait_http_ok "http://$addr/healthz" 30
wait_ready_text "not a member of the consumer group" 15
ok $? "a writer whose broker port is closed says it is not ready: not a member of the group"
daemon_stop "$test_name-writer"

# --- Both reachable: ready.
start_writer
wait_ready_text '"status":"ready"' 30
ok $? "with PostgreSQL and Kafka up the writer is ready"

# --- PostgreSQL stops under a running writer, then comes back.
"$VOUCHER_SOURCE_DIR/deploy/stack" down postgres >/dev/null 2>&1
wait_ready_text "no PostgreSQL session" 15
ok $? "PostgreSQL stopped: the writer is no longer ready, within seconds"
"$VOUCHER_SOURCE_DIR/deploy/stack" up postgres >/dev/null 2>&1
wait_ready_text '"status":"ready"' 30
ok $? "PostgreSQL back: ready again without an event to apply"

# --- Kafka stops under a running writer, then comes back.
"$VOUCHER_SOURCE_DIR/deploy/stack" down kafka >/dev/null 2>&1
wait_ready_text "not a member of the consumer group" 60
ok $? "Kafka stopped: the writer is no longer ready"
"$VOUCHER_SOURCE_DIR/deploy/stack" up kafka >/dev/null 2>&1
wait_ready_text '"status":"ready"' 90
ok $? "Kafka back: ready again"

# The writer still works: an event is applied after both outages.
code=$(unique_code READY)
new_voucher "$code" 5
start_gateway
http POST "/vouchers/$code/reservations" "{\"customerId\":1,\"orderId\":\"$code-1\",\"orderAmount\":1}"
is "$status" 201 "a reservation after the outages gets 201"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE order_id = '$code-1'" 1 60)" 1 \
  "and the writer applies it"
log=$VOUCHER_STACK_DIR/logs/$test_name-writer.log
grep -q "PostgreSQL session lost" "$log"
ok $? "the writer logged losing its PostgreSQL session"

# --- The gateway with Redis refusing connections says so (it said "no reply for 2000 ms").
daemon_stop "$test_name-gateway"
glog=$VOUCHER_STACK_DIR/logs/$test_name-gateway2.log
: >"$glog" # this run's lines only
VOUCHER_REDIS_URL="redis://127.0.0.1:$closed_port/0" daemon_start "$test_name-gateway2" "$bin_gateway" \
  --admin-addr "$(gateway_admin)"
for ((i = 0; i < 100; i++)); do grep -q "cannot connect: Connection refused" "$glog" 2>/dev/null && break; sleep 0.1; done
ok "$(grep -q "redis 127.0.0.1:$closed_port: cannot connect: Connection refused" "$glog"; echo $?)" \
  "a gateway whose Redis refuses connections logs 'cannot connect: Connection refused'"
for ((i = 0; i < 50; i++)); do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$(gateway_admin)/readyz")
  [ "$code" = 000 ] || break # until it listens
  sleep 0.1
done
is "$code" 503 "and is not ready"
daemon_stop "$test_name-gateway2"

# --- The gateway with PostgreSQL unreachable warns, and says so in a metric.
: >"$glog"
VOUCHER_GATEWAY_PG_DSN="host=127.0.0.1 port=$closed_port dbname=voucher user=voucher_gateway" \
  daemon_start "$test_name-gateway2" "$bin_gateway" --admin-addr "$(gateway_admin)"
wait_http_ok "$base_url/healthz" 30
wait_http_ok "http://$(gateway_admin)/healthz" 30
http POST "/vouchers/$(unique_code NOPG)/reservations" '{"customerId":1,"orderId":"nopg-1","orderAmount":1}'
is "$status" 503 "a voucher the gateway has not cached gets 503 while PostgreSQL is unreachable"
for ((i = 0; i < 50; i++)); do grep -q "PostgreSQL unreachable" "$glog" && break; sleep 0.1; done
ok "$(grep -q "PostgreSQL unreachable" "$glog"; echo $?)" "the gateway logs that PostgreSQL is unreachable"
is "$(metric "$(gateway_admin)" voucher_gateway_pg_up)" 0 "and voucher_gateway_pg_up says 0"
daemon_stop "$test_name-gateway2"
