#!/usr/bin/env bash
# The daemons under ThreadSanitizer: the gateway under a mixed load (ordinary
# and hostile clients; reservations go through Redis, Kafka's producer
# threads and back to the workers), the writer applying what it publishes,
# and the reconciler passing meanwhile; then SIGTERM to each. The gateway runs
# with the customer's guessing limit on, and guesses at unknown codes go on
# beside the load: its workers read the spent set while the listener thread
# and their own spends write it (gw_guard.h). Asserts no
# ThreadSanitizer report in their logs and a clean exit (TSan exits 66 when
# it reported anything).
# Runs only in a build made with -Db_sanitize=thread (tests/run makes one);
# elsewhere it skips. librdkafka's C11 threads are mapped onto pthreads by
# tests/tools/vc_c11threads.c (LD_PRELOAD), which TSan intercepts.
# VOUCHER_TSAN_SECONDS bounds the load (default 15).
source "$(dirname "$0")/lib.sh"

# (Not `ldd | grep -q`: with pipefail, grep's early exit would fail ldd.)
if [[ "$(ldd "$bin_gateway" 2>/dev/null)" != *libtsan* ]]; then
  trap - EXIT
  rm -rf "$scratch"
  echo "1..0 # SKIP $bin_gateway is not built with ThreadSanitizer"
  exit 0
fi
plan 12

shim=$VOUCHER_BUILD_DIR/tests/tools/libvc-c11threads.so
seconds=${VOUCHER_TSAN_SECONDS:-15}
tsan_re='WARNING: ThreadSanitizer|ERROR: ThreadSanitizer|FATAL: ThreadSanitizer|SUMMARY: ThreadSanitizer'
logs=()
for d in gateway writer reconciler; do
  logs+=("$VOUCHER_STACK_DIR/logs/$test_name-$d.log")
  : >"$VOUCHER_STACK_DIR/logs/$test_name-$d.log"
done
# No report in NAME's log: 0, else 1 with the first report as diagnostics.
no_report() {
  local log=$VOUCHER_STACK_DIR/logs/$test_name-$1.log
  if grep -qE "$tsan_re" "$log"; then
    grep -E -A20 "$tsan_re" "$log" | head -40 | sed 's/^/#   /'
    return 1
  fi
  return 0
}
# Sends SIGTERM to NAME and waits (bounded) for its exit status.
term() {
  local pidfile pid i
  pidfile="$(daemon_dir)/$test_name-$1.pid"
  pid=$(cat "$pidfile")
  kill -TERM "$pid"
  for ((i = 0; i < 600; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  wait "$pid"
  local rc=$?
  rm -f "$pidfile"
  return $rc
}

# tsan.supp lists the reports that are librdkafka's own, with the reasons.
export VOUCHER_GATEWAY_THREADS=2 \
  TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1:suppressions=$VOUCHER_SOURCE_DIR/tests/tools/tsan.supp}
VOUCHER_GUARD_CUSTOMER_TRIES=3 LD_PRELOAD=$shim daemon_start "$test_name-gateway" "$bin_gateway"
LD_PRELOAD=$shim daemon_start "$test_name-writer" "$bin_writer" --admin-addr "$(writer_admin)"
LD_PRELOAD=$shim daemon_start "$test_name-reconciler" "$bin_reconciler" \
  --admin-addr "$(reconciler_admin)" --interval 500ms
wait_http_ok "$base_url/healthz" 60
ok $? "the gateway under ThreadSanitizer answers /healthz"

code=$(unique_code TSAN)
new_voucher "$code" 1000000
metric_wait "$(gateway_admin)" voucher_gateway_guard_spent_synced 1 60 >/dev/null
# Guesses at unknown codes by 20 customers for as long as the load runs: each
# 404 is spent, indexed and published (the listener adds it to the set). The
# customers are new ones: buckets emptied earlier on this stack answer 429 and
# spend nothing.
guess_stop=$(($(date +%s) + seconds)) guess_base=$((RANDOM * 100000 + 1000000000))
(
  i=0
  while [ "$(date +%s)" -lt "$guess_stop" ]; do
    i=$((i + 1))
    curl -s -o /dev/null --max-time 5 -X POST -H 'Content-Type: application/json' \
      --data "{\"customerId\":$((guess_base + i % 20)),\"orderId\":\"guess-$i\",\"orderAmount\":1000}" \
      "$base_url/vouchers/$(unique_code NOPE)/reservations" || true
  done
) &
guesser=$!
out=$(python3 "$VOUCHER_SOURCE_DIR/tests/integration/hostile_client.py" load \
  "$VOUCHER_HTTP_ADDR" "$code" "$seconds" 4)
wait "$guesser"
diag "$out"
heard=$(metric "$(gateway_admin)" voucher_gateway_guard_spends_heard_total)
ok $((${heard:-0} >= 1 ? 0 : 1)) "the listener heard spends meanwhile: ${heard:-none}"
memory=$(metric "$(gateway_admin)" 'voucher_gateway_guard_checks_total{source="memory"}')
ok $((${memory:-0} >= 50 ? 0 : 1)) "the workers answered checks from the spent set: ${memory:-none}"
taken=$(rcli HLEN "voucher:{$code}:orders")
ok $((taken >= 50 ? 0 : 1)) "reservations under load: $taken"
got=$(wait_sql "SELECT used_count > 0 FROM voucher WHERE code = '$code'" t 60)
is "$got" t "the writer applied them"
passes=$(metric "$(reconciler_admin)" 'voucher_reconciler_passes_total{result="ok"}')
ok $((${passes:-0} >= 1 ? 0 : 1)) "the reconciler made passes meanwhile: ${passes:-none}"

term gateway
is "$?" 0 "SIGTERM: the gateway exits 0"
no_report gateway
ok $? "no ThreadSanitizer report from the gateway"
term writer
is "$?" 0 "SIGTERM: the writer exits 0"
no_report writer
ok $? "no ThreadSanitizer report from the writer"
term reconciler
is "$?" 0 "SIGTERM: the reconciler exits 0"
no_report reconciler
ok $? "no ThreadSanitizer report from the reconciler"
