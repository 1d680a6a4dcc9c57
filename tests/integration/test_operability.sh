#!/usr/bin/env bash
# What the platform team relies on: every daemon's /healthz, /readyz and
# /metrics; metrics that move when their event happens; SIGTERM during a
# stream that loses no acknowledged reservation and exits 0; a bad setting
# that stops start-up naming it; librdkafka settings passed through to the
# writer and the reconciler; --help and --version; JSON log lines.
source "$(dirname "$0")/lib.sh"
plan 44

start_gateway
start_writer
start_reconciler "" --interval 500ms
writer_addr=$(writer_admin)
reconciler_addr=$(reconciler_admin 0)
wait_http_ok "http://$writer_addr/readyz" 30
wait_http_ok "http://$(gateway_admin)/readyz" 30
wait_http_ok "http://$reconciler_addr/readyz" 30 # ready after its first pass

# --- Every endpoint answers.
for ep in "http://$(gateway_admin)" "http://$writer_addr" "http://$reconciler_addr"; do
  for path in /healthz /readyz /metrics; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$ep$path")
    is "$code" 200 "$ep$path answers 200"
  done
done

# --- A metric moves when its event happens.
code=$(unique_code OPS)
new_voucher "$code" 1
conflicts() { metric "$(gateway_admin)" 'voucher_gateway_requests_total{route="reserve",status="409"}'; }
http POST "/vouchers/$code/reservations" '{"customerId":1,"orderId":"'"$code"'-1","orderAmount":1}'
before=$(conflicts)
http POST "/vouchers/$code/reservations" '{"customerId":2,"orderId":"'"$code"'-2","orderAmount":1}'
is "$status" 409 "a second customer finds the one use taken"
is "$(conflicts)" "$((${before:-0} + 1))" "the 409 raised the gateway's 409 counter"

dead() { metric "$writer_addr" 'voucher_writer_events_total{outcome="dead_letter"}'; }
before=$(dead)
printf '%s\t{"type":"VoucherReserved","version":1,"code":"%s"' "$code" "$code" |
  kcat -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -P -K $'\t' 2>/dev/null
for ((i = 0; i < 100; i++)); do
  [ "$(dead)" = "$((${before:-0} + 1))" ] && break
  sleep 0.1
done
is "$(dead)" "$((${before:-0} + 1))" "a malformed event raised the writer's dead-letter counter"
ok "$([ -n "$(metric "$writer_addr" voucher_writer_consumer_lag_events)" ]; echo $?)" "the writer exports its consumer lag"
# After the reconciler's next pass that reached the voucher (a pass may be under way).
for ((i = 0; i < 300; i++)); do
  [ -n "$(metric "$reconciler_addr" "voucher_reconciler_verdict{code=\"$code\"}")" ] && break
  sleep 0.1
done
ok "$([ -n "$(metric "$reconciler_addr" "voucher_reconciler_verdict{code=\"$code\"}")" ]; echo $?)" \
  "the reconciler exports a verdict for the voucher"
is "$(metric "$reconciler_addr" voucher_reconciler_leader)" 1 "the only reconciler says it acts"

# Waits (bounded) until the stream on CODE has taken some uses, so the
# signal lands in the middle of it rather than before it started.
in_stream() {
  local i left
  for ((i = 0; i < 100; i++)); do
    left=$(rcli GET "voucher:{$1}:remaining")
    [ -n "$left" ] && [ "$left" -lt 99900 ] && return 0
    sleep 0.1
  done
  diag "the stream on $1 had not started (remaining: ${left:-none})"
}

# --- SIGTERM during a stream of reservations: no acknowledged reservation lost, exit 0.
code=$(unique_code TERM)
new_voucher "$code" 100000
"$bin_load" --code "$code" --attempts 4000 --connections 50 --order-prefix "$code-o" \
  --timeout 2s --connect-timeout 2s --out "$scratch/term.tsv" >/dev/null 2>&1 &
load=$!
in_stream "$code"
gw_pid=$(cat "$VOUCHER_STACK_DIR/run/$test_name-gateway.pid")
kill -TERM "$gw_pid"
wait "$gw_pid"
is "$?" 0 "the gateway exits 0 on SIGTERM in the middle of a stream"
rm -f "$VOUCHER_STACK_DIR/run/$test_name-gateway.pid"
wait "$load"
created=$(awk -F'\t' '$4 == "201"' "$scratch/term.tsv" | wc -l)
ok "$([ "$created" -gt 0 ]; echo $?)" "some reservations were acknowledged before the stop ($created)"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'" "$created" 30)" "$created" \
  "every acknowledged reservation has its row"
awk -F'\t' '$4 == "201" {print $2}' "$scratch/term.tsv" | sort >"$scratch/acked.txt"
sql "SELECT order_id FROM voucher_redemption WHERE voucher_code = '$code'" | sort >"$scratch/rows.txt"
is "$(comm -23 "$scratch/acked.txt" "$scratch/rows.txt" | wc -l)" 0 "no acknowledged orderId is missing"

# The writer, stopped by SIGTERM in the middle of a stream, exits 0 and loses nothing.
start_gateway
code=$(unique_code WTERM)
new_voucher "$code" 100000
"$bin_load" --code "$code" --attempts 3000 --connections 50 --order-prefix "$code-o" \
  --out "$scratch/wterm.tsv" >/dev/null 2>&1 &
load=$!
in_stream "$code"
wr_pid=$(cat "$VOUCHER_STACK_DIR/run/$test_name-writer.pid")
kill -TERM "$wr_pid"
wait "$wr_pid"
is "$?" 0 "the writer exits 0 on SIGTERM in the middle of a stream"
rm -f "$VOUCHER_STACK_DIR/run/$test_name-writer.pid"
wait "$load"
created=$(awk -F'\t' '$4 == "201"' "$scratch/wterm.tsv" | wc -l)
start_writer
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'" "$created" 30)" "$created" \
  "after a restart every acknowledged reservation has its row, once"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'")" "$created" "and used_count counts each once"

# --- A bad setting stops start-up, naming it.
"$bin_gateway" --hold-ttl 5x >/dev/null 2>"$scratch/err1"
is "$? $(grep -c -- '--hold-ttl' "$scratch/err1")" "2 1" "voucher-gateway --hold-ttl 5x: exit 2, names --hold-ttl"
VOUCHER_WRITER_BATCH=lots "$bin_writer" >/dev/null 2>"$scratch/err2"
rc=$?
ok "$([ $rc -ne 0 ] && grep -q VOUCHER_WRITER_BATCH "$scratch/err2"; echo $?)" \
  "VOUCHER_WRITER_BATCH=lots stops the writer and names the variable (exit $rc)"
"$bin_reconciler" --interval soon >/dev/null 2>"$scratch/err3"
is "$? $(grep -c -- '--interval' "$scratch/err3")" "2 1" "voucher-reconciler --interval soon: exit 2, names --interval"

# --- librdkafka settings passed through (--kafka, VOUCHER_KAFKA_CONF): a pair that is not
# key=value, that the daemon sets itself, or that librdkafka does not know stops start-up,
# naming it; a harmless one reaches every Kafka client and the daemons work as before.
"$bin_writer" --kafka group.id=elsewhere >/dev/null 2>"$scratch/err4"
is "$? $(grep -c "option --kafka: kafka setting group.id: the writer's consumer sets it itself" "$scratch/err4")" "2 1" \
  "voucher-writer --kafka group.id=elsewhere: exit 2, says the writer sets group.id itself"
VOUCHER_KAFKA_CONF=socket.keepalive.enable=true,client.rack "$bin_writer" >/dev/null 2>"$scratch/err5"
is "$? $(grep -c 'VOUCHER_KAFKA_CONF: kafka setting "client.rack": expected key=value' "$scratch/err5")" "2 1" \
  "VOUCHER_KAFKA_CONF with a pair missing its '=' stops the writer: exit 2, quotes the pair"
"$bin_reconciler" --kafka enable.auto.commit=true >/dev/null 2>"$scratch/err6"
is "$? $(grep -c "kafka setting enable.auto.commit: the reconciler's reader sets it itself" "$scratch/err6")" "2 1" \
  "voucher-reconciler --kafka enable.auto.commit=true: exit 2, says the reconciler sets it itself"
"$bin_reconciler" --once --kafka=no.such.property=1 >/dev/null 2>"$scratch/err7"
is "$? $(grep -c 'kafka setting no.such.property: No such configuration property' "$scratch/err7")" "2 1" \
  "voucher-reconciler --kafka=no.such.property=1: exit 2 with librdkafka's reason"

daemon_stop "$test_name-writer"
VOUCHER_KAFKA_CONF=socket.keepalive.enable=true start_writer --kafka client.rack=r1
code=$(unique_code KCONF)
new_voucher "$code" 10
http POST "/vouchers/$code/reservations" '{"customerId":1,"orderId":"'"$code"'-1","orderAmount":1}'
is "$status $(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'" 1 30)" "201 1" \
  "a writer started with --kafka client.rack=r1 and VOUCHER_KAFKA_CONF=socket.keepalive.enable=true applies a reservation"
"$bin_writer" --kafka client.rack=r1 dlt list >/dev/null 2>"$scratch/dlt"
is "$?" 0 "voucher-writer --kafka client.rack=r1 dlt list reads the dead-letter topic"
daemon_stop "$test_name-reconciler"
VOUCHER_KAFKA_CONF=socket.keepalive.enable=true start_reconciler "" --interval 500ms --kafka client.rack=r1
wait_http_ok "http://$reconciler_addr/readyz" 30
is "$?" 0 "a reconciler started with the same settings passes (its /readyz answers 200)"

# --- The reconciler's log says when it loses PostgreSQL, and when it works again.
rlog=$VOUCHER_STACK_DIR/logs/$test_name-reconciler.log
# As a superuser: the reconciler has its own role, whose sessions the owner may not end.
VOUCHER_PG_DSN="$VOUCHER_PG_DSN user=postgres" \
  sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'voucher-reconciler'" >/dev/null
for ((i = 0; i < 100; i++)); do grep -q "lost the PostgreSQL session" "$rlog" && break; sleep 0.1; done
ok "$(grep -q "lost the PostgreSQL session" "$rlog"; echo $?)" "the reconciler logs losing its PostgreSQL session"
lost_at=$(grep -n "lost the PostgreSQL session" "$rlog" | tail -1 | cut -d: -f1)
for ((i = 0; i < 100; i++)); do tail -n +"$lost_at" "$rlog" | grep -q "a pass succeeded again" && break; sleep 0.1; done
ok "$(tail -n +"$lost_at" "$rlog" | grep -q "a pass succeeded again"; echo $?)" \
  "and then logs that its passes succeed again"
wait_http_ok "http://$reconciler_addr/readyz" 30
is "$?" 0 "the reconciler is ready again after its session came back"

# ... and when the session ends under the outbox relay, between its produce and
# its marking the rows sent (a statement of the relay fails on it, not the wait).
daemon_stop "$test_name-reconciler"
mkdir -p "$pause_dir"
VOUCHER_PAUSE=reconciler-outbox-produced VOUCHER_PAUSE_DIR=$pause_dir start_reconciler "" --interval 500ms
dcode=$(unique_code OPDIR)
sql "INSERT INTO voucher (code, mode, discount_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at)
     VALUES ('$dcode', 'direct', 100, 0, 10, 1, now() - interval '1 hour', now() + interval '1 day')" >/dev/null
http POST "/vouchers/$dcode/reservations" '{"customerId":1,"orderId":"'"$dcode"'-1","orderAmount":1}'
pause_wait reconciler-outbox-produced 30
ok $? "a direct reservation ($status): the relay stops after its produce, before marking its row sent"
lines=$(wc -l <"$rlog")
VOUCHER_PG_DSN="$VOUCHER_PG_DSN user=postgres" \
  sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'voucher-reconciler'" >/dev/null
pause_go reconciler-outbox-produced
for ((i = 0; i < 100; i++)); do tail -n +"$lines" "$rlog" | grep -q "lost the PostgreSQL session" && break; sleep 0.1; done
ok "$(tail -n +"$lines" "$rlog" | grep -q "lost the PostgreSQL session"; echo $?)" \
  "the session ended under the relay: the reconciler logs losing it"
for ((i = 0; i < 100; i++)); do tail -n +"$lines" "$rlog" | grep -q "a pass succeeded again" && break; sleep 0.1; done
ok "$(tail -n +"$lines" "$rlog" | grep -q "a pass succeeded again"; echo $?)" \
  "and then that its passes succeed again"
(while [ -d "$pause_dir" ]; do pause_go reconciler-outbox-produced; sleep 0.1; done) &
pause_loop=$!
is "$(wait_sql "SELECT count(*) FROM event_outbox WHERE event_key = '$dcode' AND sent_at IS NULL" 0 30)" 0 \
  "the row is relayed again and marked sent once the session is back"
kill "$pause_loop" 2>/dev/null

# --- --help and --version.
for bin in "$bin_gateway" "$bin_writer" "$bin_reconciler"; do
  name=$(basename "$bin")
  "$bin" --help >"$scratch/help" 2>&1
  ok "$(grep -q 'VOUCHER_LOG_LEVEL' "$scratch/help" && grep -q 'default' "$scratch/help" &&
    grep -q -- '--kafka TEXT' "$scratch/help" && grep -q 'VOUCHER_KAFKA_CONF' "$scratch/help"; echo $?)" \
    "$name --help lists settings with their variables and defaults, --kafka and VOUCHER_KAFKA_CONF among them"
done
is "$("$bin_gateway" --version)" "voucher-gateway 0.1.0" "voucher-gateway --version"

# --- Logs: one JSON object per line, with time, level, daemon and message.
bad=0
for d in gateway writer reconciler; do
  while IFS= read -r line; do
    jq -e 'has("time") and has("level") and has("daemon") and has("message")' <<<"$line" >/dev/null 2>&1 ||
      { bad=$((bad + 1)); [ $bad -le 3 ] && diag "not a log object: ${line:0:120}"; }
  done < <(grep -v '^\s*$' "$VOUCHER_STACK_DIR/logs/$test_name-$d.log")
done
is "$bad" 0 "every log line of the three daemons is a JSON object with time, level, daemon, message"
