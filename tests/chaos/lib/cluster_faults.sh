# The cluster scenarios of tests/chaos/cluster, sourced by tests/chaos/run when
# VOUCHER_CHAOS_EXTRA names this file: they join the scenario list, and their
# faults work on the nodes of a stack started with deploy/stack up --cluster.

all_scenarios+=(kill-kafka-broker kill-redis-master restart-redis-master)

# The scenarios of this file first, then tests/chaos/run's own.
eval "describe_single() $(declare -f describe | tail -n +2)"
describe() {
  case $1 in
    kill-kafka-broker) echo "kill -9 one of three Kafka brokers mid-sale, start it again later" ;;
    kill-redis-master) echo "kill -9 the Redis master of the voucher's slot mid-sale (its replica is promoted), start it again (it rejoins as a replica)" ;;
    restart-redis-master) echo "deploy/stack restart redis-N of the voucher's master mid-sale (SHUTDOWN, started again from its AOF)" ;;
    *) describe_single "$1" ;;
  esac
}

# The Redis Cluster node (1..6) that is master of the voucher's slot now.
master_node_of() { # CODE
  local slot= line port n
  # The slot from any live node: node 1 may be the one killed.
  for ((n = 1; n <= 6; n++)); do
    slot=$(redis-cli -p $((VOUCHER_PORT_BASE + 40 + n)) cluster keyslot "voucher:{$1}:remaining" 2>/dev/null)
    [ -n "$slot" ] && break
  done
  [ -n "$slot" ] || return 0
  for ((n = 1; n <= 6; n++)); do
    port=$((VOUCHER_PORT_BASE + 40 + n))
    line=$(redis-cli -p "$port" cluster nodes 2>/dev/null | awk -v s="$slot" '
      $3 ~ /master/ && $3 !~ /fail/ { for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]; if (s >= r[1] && s <= r[2]) print $2 } }' | head -n1)
    [ -n "$line" ] && break
  done
  port=${line#*:}
  port=${port%@*}
  [ -n "$port" ] && echo $((port - VOUCHER_PORT_BASE - 40))
}

# kill -9 the process of a pid file and wait until it is gone; WHAT names it in the log.
kill9_pidfile() { # PIDFILE WHAT
  local pid
  pid=$(cat "$1" 2>/dev/null)
  if [ -z "$pid" ] || ! kill -9 "$pid" 2>/dev/null; then
    fault_log "kill -9 $2 FAILED: not running"
    return 1
  fi
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  fault_log "kill -9 $2 (pid $pid)"
}

# kill -9 one Kafka node mid-sale (each is broker and controller); the
# partitions it led elect new leaders among the in-sync replicas, and acks=all
# with min.insync.replicas=2 keeps every acknowledged event. Started again later.
fault_kill_kafka_broker() {
  local node
  node=$(rand 1 4)
  at "$(rand 800 2500)"
  kill9_pidfile "$VOUCHER_STACK_DIR/kafka-$node/kafka.pid" "Kafka node $node" || return 1
  sleep $((p_kafka_down_s + 2))
  deploy_stack up "kafka-$node" && fault_log "Kafka node $node is back" || fault_log "start kafka-$node FAILED"
}

# kill -9 the master of the voucher's slot mid-sale: the cluster promotes its
# replica after cluster-node-timeout (2 s); the gateway reads the new map. The
# node is started again once the replica took over, and rejoins as a replica.
fault_kill_redis_master() {
  local node i
  at "$(rand 800 2500)"
  node=$(master_node_of "$code")
  [ -n "$node" ] || { fault_log "kill -9 the Redis master of $code FAILED: not found"; return 1; }
  kill9_pidfile "$VOUCHER_STACK_DIR/redis-$node/redis.pid" "Redis node $node, master of voucher:{$code}" ||
    return 1
  for ((i = 0; i < 300; i++)); do
    [ "$(master_node_of "$code")" != "$node" ] && [ -n "$(master_node_of "$code")" ] && break
    sleep 0.1
  done
  if [ "$i" -ge 300 ]; then
    fault_log "replica promotion FAILED: no new master within 30 s"
  else
    fault_log "Redis node $(master_node_of "$code") promoted after $((i / 10)).$((i % 10))s"
  fi
  deploy_stack up "redis-$node" && fault_log "Redis node $node is back (a replica)" ||
    fault_log "start redis-$node FAILED"
}

# deploy/stack restart of the voucher's master mid-sale: SHUTDOWN (Redis
# first lets its replica catch up), then started again from its AOF before
# the cluster's node timeout, so it comes back as the master it was.
fault_restart_redis_master() {
  local node
  at "$(rand 800 2500)"
  node=$(master_node_of "$code")
  [ -n "$node" ] || { fault_log "restart the Redis master of $code FAILED: not found"; return 1; }
  fault_log "restart Redis node $node, master of voucher:{$code}"
  if deploy_stack restart "redis-$node"; then
    fault_log "Redis node $node is back; master of the slot now: node $(master_node_of "$code")"
  else
    fault_log "restart redis-$node FAILED"
  fi
}
