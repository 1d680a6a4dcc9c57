# The faults, one kind per scenario. Each fault_<name> runs in the background
# while the sale runs, at moments drawn from the scenario's seed (bash's
# RANDOM, seeded by tests/chaos/run), and leaves the system whole again:
# whatever it killed or stopped runs again when it returns. A step that could
# not be done is logged with FAILED, and fails the scenario. Sourced by
# tests/chaos/run, which sets $dir, $t0 (the sale's start, ms) and the profile.

# Sleeps until MS milliseconds after the sale started.
at() {
  local wait_ms=$(($1 - ($(now_ms) - t0)))
  [ "$wait_ms" -gt 0 ] && sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))"
  return 0
}

# A number in [LO, HI) from the scenario's seed.
rand() { echo $(($1 + (RANDOM * 32768 + RANDOM) % ($2 - $1))); }

# What a fault did, with its time since the sale started, in $dir/faults.log.
fault_log() { printf '+%6.1fs  %s\n' "$(echo "($(now_ms) - $t0) / 1000" | bc -l)" "$*" >>"$dir/faults.log"; }

daemon_pid() { cat "$VOUCHER_STACK_DIR/run/chaos-$1.pid" 2>/dev/null; }

kill9() { # DAEMON
  local pid
  pid=$(daemon_pid "$1")
  if [ -z "$pid" ] || ! kill -9 "$pid" 2>/dev/null; then
    fault_log "kill -9 $1 FAILED: not running"
    return 1
  fi
  # Wait until it is gone, so the pid file is not mistaken for a live one.
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$VOUCHER_STACK_DIR/run/chaos-$1.pid"
  fault_log "kill -9 $1 (pid $pid)"
}

# ---------------------------------------------------------------- scenarios

fault_baseline() { fault_log "no fault"; }

# kill -9 the gateway twice mid-sale; it is started again 0.5 s later. Requests
# in flight lose their connection, vc-load retries the same orderId.
fault_kill_gateway() {
  at "$(rand 800 2000)"
  kill9 gateway
  sleep 0.5
  start_gateway && fault_log "gateway started again"
  at "$(rand 3000 4500)"
  kill9 gateway
  sleep 0.5
  start_gateway && fault_log "gateway started again"
}

# kill -9 the writer every few seconds while the sale runs; it restarts at once
# and must not lose or double-apply what it read but had not committed.
fault_kill_writer() {
  local t
  t=$(rand 500 1500)
  while [ "$t" -lt "$p_load_ms" ]; do
    at "$t"
    kill9 writer
    start_writer && fault_log "writer started again"
    t=$((t + $(rand "$p_writer_kill_min_ms" "$p_writer_kill_max_ms")))
  done
}

# kill -9 the reconciler's daemon twice; it is started again 1 s later.
fault_kill_reconciler() {
  at "$(rand 800 2000)"
  kill9 reconciler
  sleep 1
  start_reconciler && fault_log "reconciler started again"
  at "$(rand 3000 4500)"
  kill9 reconciler
  sleep 1
  start_reconciler && fault_log "reconciler started again"
}

# SIGSTOP the writer (a long GC pause, a frozen VM), SIGCONT it later: the
# events pile up in Kafka and the reconciler sees the lag.
fault_pause_writer() {
  local pid
  at "$(rand 800 2000)"
  pid=$(daemon_pid writer)
  if [ -z "$pid" ] || ! kill -STOP "$pid" 2>/dev/null; then
    fault_log "SIGSTOP writer FAILED: not running"
    return 1
  fi
  fault_log "SIGSTOP writer (pid $pid) for ${p_pause_s}s"
  sleep "$p_pause_s"
  kill -CONT "$pid"
  fault_log "SIGCONT writer"
}

# Restart Redis mid-sale (AOF on: a clean shutdown keeps every write).
fault_restart_redis() {
  at "$(rand 800 2500)"
  fault_log "restarting Redis"
  deploy_stack restart redis && fault_log "Redis is back" || fault_log "restart redis FAILED"
}

# FLUSHALL mid-sale: Redis forgets every remaining count, hold and order.
# Rebuilding it needs what PostgreSQL knows plus what is still in flight.
fault_flushall_redis() {
  at "$(rand 800 2500)"
  if [ "$(rcli FLUSHALL)" = OK ]; then fault_log "Redis FLUSHALL"; else fault_log "FLUSHALL FAILED"; fi
}

# Partial loss: one key of the voucher vanishes at a time mid-sale (as a
# failover to a replica that missed writes, or an operator's DEL, would do),
# while vc-load retries and the order service confirms and cancels: its
# counter, then its orders. The reconciler must restore and retake without
# overselling, dropping a 201, counting a use twice or reviving a cancel. It
# runs with a restore delay of 1 s meanwhile, so the counter is back before
# the orders go: the delay covers reservations whose orders went with the
# counter, and here the orders stay (the restore merges them), so a short one
# is safe. The usual reconciler runs again afterwards.
#
# Not the users hash: reserve.lua reads a missing customer count as 0, so
# until the reconciler's next pass counts them again (retake) a customer may
# take a use beyond per_user_limit, which PostgreSQL refuses after the 201
# (dead-lettered). A repair cannot close that window; the gateway's script
# would have to refuse while the hash is missing.
fault_partial_loss() {
  local key
  daemon_stop chaos-reconciler
  VOUCHER_RECONCILE_RESTORE_DELAY=1s start_reconciler && fault_log "reconciler with a restore delay of 1 s"
  for key in remaining orders; do
    case $key in
      remaining) at "$(rand 800 1500)" ;;
      orders) at "$(rand 4000 5500)" ;;
    esac
    if [ "$(rcli DEL "voucher:{$code}:$key")" = 1 ]; then
      fault_log "DEL voucher:{$code}:$key"
    else
      fault_log "DEL voucher:{$code}:$key FAILED: no such key"
    fi
  done
  at "$p_load_ms"
  daemon_stop chaos-reconciler
  start_reconciler && fault_log "the usual reconciler again"
}

# Restart the Kafka broker mid-sale: the gateway cannot get acks meanwhile.
fault_restart_kafka() {
  at "$(rand 800 2500)"
  fault_log "restarting Kafka"
  deploy_stack restart kafka && fault_log "Kafka is back" || fault_log "restart kafka FAILED"
}

# kill -9 the Kafka broker mid-sale and start it again after a while: unlike a
# clean restart (the broker keeps serving while it shuts down), the produce
# requests in flight get no answer, so the gateway's outcome is unknown for
# them, and the holds of the reservations waiting meanwhile may expire before
# the broker is back. The broker recovers its log from the page cache.
fault_kill_kafka() {
  local pid pidfile=$VOUCHER_STACK_DIR/kafka/kafka.pid
  at "$(rand 800 2500)"
  pid=$(cat "$pidfile" 2>/dev/null)
  if [ -z "$pid" ] || ! kill -9 "$pid" 2>/dev/null; then
    fault_log "kill -9 Kafka FAILED: not running"
    return 1
  fi
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  fault_log "kill -9 Kafka (pid $pid), down for ${p_kafka_down_s}s"
  sleep "$p_kafka_down_s"
  deploy_stack up kafka && fault_log "Kafka is back" || fault_log "start kafka FAILED"
}

# direct-outage: Redis stopped for a while and started again, then Kafka stopped
# for a while and started again, under the sale of a flash voucher and of a
# direct one at once. Each outage's window (epoch ms, from the stop to the
# start command) goes to $dir/outages.tsv: the direct voucher must have answered
# 201s to attempts begun inside each.
outage() { # SERVICE NAME
  local down
  if ! deploy_stack down "$1"; then
    fault_log "stop $2 FAILED"
    return 1
  fi
  down=$(now_ms)
  fault_log "$2 stopped for ${p_outage_s}s"
  sleep "$p_outage_s"
  printf '%s\t%s\t%s\n' "$1" "$down" "$(now_ms)" >>"$dir/outages.tsv"
  deploy_stack up "$1" && fault_log "$2 is back" || fault_log "start $2 FAILED"
}

fault_direct_outage() {
  : >"$dir/outages.tsv"
  at "$(rand 800 1500)"
  outage redis Redis
  sleep 0.5
  outage kafka Kafka
}

# Restart PostgreSQL mid-sale: the writer's batches and the gateway's rule
# loads fail meanwhile.
fault_restart_postgres() {
  at "$(rand 800 2500)"
  fault_log "restarting PostgreSQL"
  deploy_stack restart postgres && fault_log "PostgreSQL is back" || fault_log "restart postgres FAILED"
}

# Re-deliver everything: stop the writer mid-sale, move its consumer group back
# to the topic's beginning, start it again. Every event of every scenario so
# far is applied a second time, and must change nothing.
fault_redeliver() {
  local i
  at "$(rand 800 2500)"
  daemon_stop chaos-writer
  fault_log "writer stopped"
  for ((i = 0; i < 10; i++)); do
    if "$repo/deploy/stack" kafka org.apache.kafka.tools.consumer.group.ConsumerGroupCommand \
      --bootstrap-server "$VOUCHER_KAFKA_BROKERS" --group voucher-writer \
      --reset-offsets --to-earliest --topic voucher-events --execute >"$dir/reset.log" 2>&1; then
      fault_log "consumer group voucher-writer reset to the earliest offsets"
      break
    fi
    sleep 1 # the group may not be empty yet
  done
  [ "$i" -lt 10 ] || fault_log "RESET FAILED (see reset.log)"
  start_writer && fault_log "writer started again"
}

# Events the codec must refuse, on the voucher's own partition (key = the
# code), between the real ones: the writer dead-letters them and goes on.
malformed_events() { # CODE
  local long
  long=$(printf 'x%.0s' {1..200})
  cat <<EOF
this is not JSON
{"type":"VoucherReserved","version":1,"code":"$1",
{"type":"VoucherReserved","version":99,"code":"$1","customerId":1,"orderId":"bad-version","discountAmount":1,"orderAmount":1,"reservedAt":"2026-01-01T00:00:00Z"}
{"type":"VoucherStolen","version":1,"code":"$1","customerId":1,"orderId":"bad-type"}
{"type":"VoucherReserved","version":1,"code":"$1","customerId":1,"discountAmount":1,"orderAmount":1,"reservedAt":"2026-01-01T00:00:00Z"}
{"type":"VoucherReserved","version":1,"code":"$1","customerId":-5,"orderId":"bad-customer","discountAmount":1,"orderAmount":1,"reservedAt":"2026-01-01T00:00:00Z"}
{"type":"VoucherReserved","version":1,"code":"$1","customerId":1,"orderId":"$long","discountAmount":1,"orderAmount":1,"reservedAt":"2026-01-01T00:00:00Z"}
{"type":"VoucherReserved","version":1,"code":"NO_SUCH_VOUCHER","customerId":1,"orderId":"unknown-voucher-$1","discountAmount":1,"orderAmount":1,"reservedAt":"2026-01-01T00:00:00Z"}
{"type":"VoucherConfirmed","version":1,"code":"$1","customerId":1,"orderId":"bad-time","confirmedAt":"yesterday"}
[1,2,3]
EOF
  printf '\xff\xfe\x00\x01binary\n'
}

inject_malformed() { # COUNT
  if malformed_events "$code" | kcat -P -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -k "$code" 2>>"$dir/kcat.err"; then
    fault_log "injected $1 malformed events keyed $code"
  else
    fault_log "injecting malformed events FAILED (see kcat.err)"
  fi
}

fault_malformed_events() {
  local n
  n=$(malformed_events "$code" | wc -l)
  echo "$n" >"$dir/malformed.count"
  at "$(rand 500 1500)"
  inject_malformed "$n"
  at "$(rand 2500 3500)"
  inject_malformed "$n"
}

# No fault during the sale; afterwards the holds nobody confirmed must expire
# (checked by check_hold_expiry in tests/chaos/run).
fault_hold_expiry() { fault_log "no fault; unconfirmed holds must expire after ${p_hold_ttl}"; }
