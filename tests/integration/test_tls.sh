#!/usr/bin/env bash
# TLS to PostgreSQL and to Kafka, set as deploy/README.md ("TLS") says, against
# the stack's private CA (deploy/stack up makes it, turns ssl on in PostgreSQL
# and opens an SSL listener on the broker): the three daemons with
# sslmode=verify-full and security.protocol=ssl sell a use, apply it and
# reconcile, every PostgreSQL session of theirs encrypted. Given another CA,
# each refuses the server, stays unready and names the cause in its log. And
# rediss:// stops the gateway at start, as the runbook says of Debian's hiredis.
source "$(dirname "$0")/lib.sh"
plan 17

if [ ! -r "${VOUCHER_TLS_CA:-}" ] || [ -z "${VOUCHER_KAFKA_TLS_BROKERS:-}" ]; then
  echo "Bail out! the stack has no TLS (VOUCHER_TLS_CA, VOUCHER_KAFKA_TLS_BROKERS): run deploy/stack up and eval \"\$(deploy/stack env)\" again"
  exit 1
fi
if ! (exec 3<>"/dev/tcp/${VOUCHER_KAFKA_TLS_BROKERS%:*}/${VOUCHER_KAFKA_TLS_BROKERS#*:}") 2>/dev/null; then
  echo "Bail out! nothing listens on Kafka's TLS port $VOUCHER_KAFKA_TLS_BROKERS: a broker started before the stack had one; run deploy/stack restart kafka"
  exit 1
fi

# A CA of the test's own: a server certificate it did not sign must be refused.
other_ca=$scratch/other-ca.crt
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -days 1 \
  -subj "/CN=not the stack's CA" -keyout "$scratch/other-ca.key" -out "$other_ca" 2>/dev/null ||
  { echo "Bail out! openssl could not make a CA"; exit 1; }

# pg_dsn ROLE CA: the documented DSN, verifying the server against CA.
pg_dsn() {
  echo "host=127.0.0.1 port=$VOUCHER_PORT_BASE dbname=voucher user=$1 sslmode=verify-full sslrootcert=$2"
}
kafka_conf() { echo "security.protocol=ssl,ssl.ca.location=$1"; }
# The superuser sees every session's pg_stat_ssl row (the owner sees only its own).
su_sql() {
  psql -X -q -tA -v ON_ERROR_STOP=1 \
    "host=127.0.0.1 port=$VOUCHER_PORT_BASE dbname=voucher user=postgres sslmode=disable" -c "$1"
}
log_of() { echo "$VOUCHER_STACK_DIR/logs/$test_name-$1.log"; }
# wait_log NAME TEXT [SECONDS]: 0 once the daemon's log holds TEXT.
wait_log() {
  local i
  for ((i = 0; i < ${3:-15} * 10; i++)); do
    grep -qF "$2" "$(log_of "$1")" 2>/dev/null && return 0
    sleep 0.1
  done
  diag "$(log_of "$1") has no \"$2\"; its last lines:"
  diag "$(tail -5 "$(log_of "$1")" 2>/dev/null)"
  return 1
}
readyz() { curl -s --max-time 2 "http://$1/readyz"; }
# wait_ready ADDR TEXT [SECONDS]: 0 once ADDR's /readyz answer holds TEXT.
wait_ready() {
  local i
  for ((i = 0; i < ${3:-15} * 10; i++)); do
    [[ "$(readyz "$1")" == *"$2"* ]] && return 0
    sleep 0.1
  done
  diag "last /readyz of $1: $(readyz "$1")"
  return 1
}
for d in gateway writer reconciler; do : >"$(log_of "$d")"; done # this run's lines only

# --- Everything over TLS: PostgreSQL verify-full, Kafka's SSL listener.
export VOUCHER_KAFKA_BROKERS=$VOUCHER_KAFKA_TLS_BROKERS
VOUCHER_KAFKA_CONF=$(kafka_conf "$VOUCHER_TLS_CA")
export VOUCHER_KAFKA_CONF
VOUCHER_GATEWAY_PG_DSN=$(pg_dsn voucher_gateway "$VOUCHER_TLS_CA") start_gateway
VOUCHER_WRITER_PG_DSN=$(pg_dsn voucher_writer "$VOUCHER_TLS_CA") start_writer
VOUCHER_RECONCILER_PG_DSN=$(pg_dsn voucher_reconciler "$VOUCHER_TLS_CA") start_reconciler "" \
  --interval 200ms

code=$(unique_code TLS)
new_voucher "$code" 5
wait_ready "$(gateway_admin)" '"status":"ready"' 30
ok $? "the gateway is ready with its Kafka producer on the SSL listener"
http POST "/vouchers/$code/reservations" "{\"customerId\":1,\"orderId\":\"$code-1\",\"orderAmount\":1}"
is "$status" 201 "a reservation gets 201: its rules read over verify-full, its event acknowledged over SSL"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE order_id = '$code-1'" 1 30)" 1 \
  "the writer, reading Kafka over SSL and writing over verify-full, applies it"
wait_ready "$(writer_admin)" '"status":"ready"' 30
ok $? "the writer is ready"
metric_wait "$(reconciler_admin 0)" 'voucher_reconciler_passes_total{result="ok"}' 1 30
ok $? "the reconciler completes passes (PostgreSQL over verify-full, Kafka over SSL)"
sessions="SELECT a.usename || ':' || count(*) FILTER (WHERE s.ssl) || '/' || count(*)
  FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
  WHERE a.usename IN ('voucher_gateway', 'voucher_writer', 'voucher_reconciler')
  GROUP BY a.usename ORDER BY a.usename"
encrypted=$(su_sql "$sessions" | awk -F'[:/]' '$2 > 0 && $2 == $3 { print $1 }' | paste -sd, -)
is "$encrypted" voucher_gateway,voucher_reconciler,voucher_writer \
  "every PostgreSQL session of the three daemons is encrypted"
diag "sessions (role:encrypted/all): $(su_sql "$sessions" | paste -sd' ' -)"
stop_daemons
unset VOUCHER_KAFKA_CONF
export VOUCHER_KAFKA_BROKERS=127.0.0.1:$((VOUCHER_PORT_BASE + 2))

# --- PostgreSQL's certificate checked against another CA: refused, unready, said.
: >"$(log_of writer)"
VOUCHER_WRITER_PG_DSN=$(pg_dsn voucher_writer "$other_ca") start_writer
wait_ready "$(writer_admin)" "no PostgreSQL session" 15
ok $? "writer, PostgreSQL's certificate from another CA: not ready (no PostgreSQL session)"
wait_log writer "certificate verify failed"
ok $? "and its log says why: certificate verify failed"

: >"$(log_of reconciler)"
VOUCHER_RECONCILER_PG_DSN=$(pg_dsn voucher_reconciler "$other_ca") start_reconciler "" --interval 200ms
wait_log reconciler "certificate verify failed"
ok $? "reconciler, another CA: its log says certificate verify failed"
ready=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$(reconciler_admin 0)/readyz")
is "$ready" 503 "and its /readyz answers 503"

: >"$(log_of gateway)"
VOUCHER_GATEWAY_PG_DSN=$(pg_dsn voucher_gateway "$other_ca") start_gateway
code2=$(unique_code TLS)
new_voucher "$code2" 5
http POST "/vouchers/$code2/reservations" "{\"customerId\":1,\"orderId\":\"$code2-1\",\"orderAmount\":1}"
is "$status" 503 "gateway, another CA: a voucher whose rules it cannot read gets 503"
wait_log gateway "certificate verify failed"
ok $? "and its log says PostgreSQL is unreachable: certificate verify failed"
stop_daemons

# --- Kafka's certificate checked against another CA: refused, unready, said.
: >"$(log_of gateway)"
VOUCHER_KAFKA_BROKERS=$VOUCHER_KAFKA_TLS_BROKERS VOUCHER_KAFKA_CONF=$(kafka_conf "$other_ca") \
  start_gateway
wait_log gateway "certificate verify failed"
ok $? "gateway, the broker's certificate from another CA: its log says certificate verify failed"
wait_ready "$(gateway_admin)" "no kafka broker connected" 15
ok $? "and it is not ready: no kafka broker connected"

: >"$(log_of writer)"
VOUCHER_KAFKA_BROKERS=$VOUCHER_KAFKA_TLS_BROKERS VOUCHER_KAFKA_CONF=$(kafka_conf "$other_ca") \
  start_writer
wait_log writer "certificate verify failed"
ok $? "writer, another CA for the broker: its log says certificate verify failed"
wait_ready "$(writer_admin)" "not a member of the consumer group" 15
ok $? "and it is not ready: not a member of the consumer group"
stop_daemons

# --- Redis: no TLS in Debian's hiredis 0.14. rediss:// stops the gateway at start.
out=$(VOUCHER_REDIS_URL="rediss://127.0.0.1:$((VOUCHER_PORT_BASE + 1))/0" timeout 10 "$bin_gateway" \
  --admin-addr "$(gateway_admin)" 2>&1)
rc=$?
is "$rc $(grep -c 'TLS (rediss://) is not supported' <<<"$out")" "2 1" \
  "a gateway given rediss:// exits 2 saying TLS (rediss://) is not supported"
