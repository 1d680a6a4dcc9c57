# The rules listener across gateways on a Redis Cluster (gateway/gw_notify.c),
# run by tests/chaos/cluster on its stack once the sale scenarios are over.
# Two gateways with a rules ttl of a minute; Redis node 1, the first seed of
# VOUCHER_REDIS_URL, is killed with -9 (whatever its role); both listeners must
# subscribe again on another node, and a PATCH {"active":false} on the first
# gateway must reach the second within a second (it publishes on a live node;
# the cluster bus carries the message to every node). Node 1 is started again
# at the end. Prints one line and exits 1 when a check failed.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${VOUCHER_BUILD_DIR:-$repo/build}
source "$repo/deploy/lib/daemons.sh"
token=chaos-$RANDOM$RANDOM
gw1=127.0.0.1:$((VOUCHER_PORT_BASE + 10))
gw2=127.0.0.1:$((VOUCHER_PORT_BASE + 15))
code="R$(printf '%04X' $((RANDOM % 65536)))-RULES"
failures=()
say() { printf '%s chaos: %s\n' "$(date +%T)" "$*" >&2; }
node_port() { echo $((VOUCHER_PORT_BASE + 40 + $1)); }

# Subscribers of the channel voucher-rules over the live nodes (each node counts its own).
subscribers() {
  local n sum=0 c
  for ((n = 1; n <= 6; n++)); do
    c=$(redis-cli -p "$(node_port "$n")" pubsub numsub voucher-rules 2>/dev/null | sed -n 2p)
    sum=$((sum + ${c:-0}))
  done
  echo "$sum"
}
wait_subscribers() { # N SECONDS
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [ "$(subscribers)" -ge "$1" ] && return 0
    sleep 0.1
  done
  return 1
}
quote2() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -H 'Content-Type: application/json' \
    --data-binary '{"customerId":3,"orderAmount":10000}' "http://$gw2/vouchers/$code/quote"
}
admin1() { # METHOD PATH BODY
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X "$1" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' --data-binary "$3" "http://$gw1$2"
}

cleanup() {
  daemon_stop chaos-rules-gw1
  daemon_stop chaos-rules-gw2
  "$repo/deploy/stack" up redis-1 >/dev/null 2>&1
}
trap cleanup EXIT

export VOUCHER_ADMIN_TOKEN=$token VOUCHER_RULES_TTL=60s VOUCHER_GATEWAY_THREADS=2
(VOUCHER_HTTP_ADDR=$gw1 VOUCHER_GATEWAY_ADMIN_ADDR=127.0.0.1:$((VOUCHER_PORT_BASE + 14)) \
  daemon_start chaos-rules-gw1 "$build/gateway/voucher-gateway")
(VOUCHER_HTTP_ADDR=$gw2 VOUCHER_GATEWAY_ADMIN_ADDR=127.0.0.1:$((VOUCHER_PORT_BASE + 16)) \
  daemon_start chaos-rules-gw2 "$build/gateway/voucher-gateway")
wait_http_ok "http://$gw1/healthz" 30 && wait_http_ok "http://$gw2/healthz" 30 ||
  { echo "rules across gateways: FAIL (a gateway did not start; see $VOUCHER_STACK_DIR/logs/chaos-rules-gw*.log)"; exit 1; }
before=$(subscribers)
wait_subscribers 2 10 || failures+=("the two gateways' listeners are not subscribed (voucher-rules has $(subscribers) subscribers)")
[ "$(admin1 POST /vouchers "{\"code\":\"$code\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":10,\"perUserLimit\":1,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"}")" = 201 ] ||
  failures+=("could not create $code on the first gateway")
# Each call is a new connection, so calls spread over the workers, each with its own cache.
warm=0
for ((i = 0; i < 10; i++)); do [ "$(quote2)" = 200 ] && warm=$((warm + 1)); done
[ "$warm" = 10 ] || failures+=("the second gateway answered $warm of 10 quotes with 200 before the change")

pid=$(cat "$VOUCHER_STACK_DIR/redis-1/redis.pid" 2>/dev/null)
if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  say "rules: kill -9 Redis node 1 (pid $pid), the first seed; $before subscriber(s) before"
else
  failures+=("kill -9 Redis node 1 FAILED: not running")
fi
# Node 1 may have been a master: its replica takes over after the node timeout (2 s).
for ((i = 0; i < 300; i++)); do
  redis-cli -p "$(node_port 2)" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && break
  sleep 0.1
done
wait_subscribers 2 10 ||
  failures+=("with node 1 dead the listeners did not subscribe on another node within 10 s ($(subscribers) subscribers)")
[ "$(admin1 PATCH "/vouchers/$code" '{"active":false}')" = 200 ] || failures+=("PATCH on the first gateway did not answer 200")
start=$(date +%s%N) last_old=$start refused=0
for ((i = 0; i < 200 && refused < 10; i++)); do
  if [ "$(quote2)" = 422 ]; then refused=$((refused + 1)); else refused=0 last_old=$(date +%s%N); fi
  sleep 0.02
done
took=$(((last_old - start) / 1000000))
[ "$refused" -ge 10 ] && [ "$took" -le 1000 ] ||
  failures+=("the second gateway served the old rules ${took} ms after the PATCH (want <= 1000 ms; rules ttl 60 s)")

if "$repo/deploy/stack" up redis-1 >/dev/null 2>&1; then
  say "rules: Redis node 1 is back"
else
  failures+=("Redis node 1 did not come back")
fi
if [ ${#failures[@]} -eq 0 ]; then
  echo "rules across gateways: PASS (node 1 dead: the second gateway refused ${took} ms after the PATCH on the first)"
  exit 0
fi
echo "rules across gateways: FAIL"
printf '  - %s\n' "${failures[@]}"
exit 1
