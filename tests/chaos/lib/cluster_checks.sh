# Two checks of tests/chaos/cluster on its stack once the sale scenarios are
# over, with two gateways of their own (VOUCHER_REDIS_WAIT_REPLICAS from the
# environment, 1 there):
#
# The orderId's claim covered by WAIT: a reservation whose claim
# (voucher-order:{ORDERID}) lives on another master than the voucher's keys
# must send WAIT to that master too before its 201 (INFO commandstats there
# counts it; proto/redis-keys.md, "Redis Cluster").
#
# A confirm and a cancel covered by WAIT: each sends one to the voucher's
# master before its event, so before its 200.
#
# A PATCH's own Redis steps (gateway/gw_limit.c): on a voucher whose keys a
# master other than the first seed serves, a lower, a raise and a later
# endsAt each reach that master (and the claims' masters) at once.
#
# The rules listener across gateways (gateway/gw_notify.c): a rules ttl of a
# minute; Redis node 1, the first seed of
# VOUCHER_REDIS_URL, is killed with -9 (whatever its role); both listeners must
# subscribe again on another node, and a PATCH {"active":false} on the first
# gateway must reach the second within a second (it publishes on a live node;
# the cluster bus carries the message to every node). Node 1 is started again
# at the end. Prints one line and exits 1 when a check failed.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${VOUCHER_BUILD_DIR:-$repo/build}
source "$repo/deploy/lib/daemons.sh"
token=chaos-$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n') # 32 hex digits: the gateway wants 32 characters or more
gw1=127.0.0.1:$((VOUCHER_PORT_BASE + 10))
gw2=127.0.0.1:$((VOUCHER_PORT_BASE + 15))
code="R$(printf '%04X' $((RANDOM % 65536)))-RULES"
failures=()
say() { printf '%s chaos: %s\n' "$(date +%T)" "$*" >&2; }
node_port() { echo $((VOUCHER_PORT_BASE + 40 + $1)); }

# The port of the master serving KEY's slot now, from node 2's view (node 1 dies below).
master_port_of() { # KEY
  local slot
  slot=$(redis-cli -p "$(node_port 2)" cluster keyslot "$1")
  redis-cli -p "$(node_port 2)" cluster nodes | awk -v s="$slot" '
    $3 ~ /master/ && $3 !~ /fail/ { for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]
      if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2]; exit } } }'
}
# How many WAIT commands the live nodes have run, summed.
all_wait_calls() {
  local n sum=0 c
  for ((n = 1; n <= 6; n++)); do
    c=$(redis-cli -p "$(node_port "$n")" info commandstats 2>/dev/null | tr -d '\r' |
      sed -n 's/^cmdstat_wait:calls=\([0-9]*\),.*/\1/p')
    sum=$((sum + ${c:-0}))
  done
  echo "$sum"
}

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
# The first gateway's admin address: the only one that serves the admin routes.
admin1() { # METHOD PATH BODY
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X "$1" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' --data-binary "$3" "http://127.0.0.1:$((VOUCHER_PORT_BASE + 14))$2"
}

cleanup() {
  daemon_stop chaos-rules-gw1
  daemon_stop chaos-rules-gw2
  "$repo/deploy/stack" up redis-1 >/dev/null 2>&1
}
trap cleanup EXIT

# Every request comes from 127.0.0.1 without X-Forwarded-For: the per-address
# guessing bucket is off, as in the chaos runs (tests/chaos/run).
export VOUCHER_ADMIN_TOKEN=$token VOUCHER_RULES_TTL=60s VOUCHER_GATEWAY_THREADS=2 VOUCHER_GUARD_IP_TRIES=0
(VOUCHER_HTTP_ADDR=$gw1 VOUCHER_GATEWAY_ADMIN_ADDR=127.0.0.1:$((VOUCHER_PORT_BASE + 14)) \
  daemon_start chaos-rules-gw1 "$build/gateway/voucher-gateway")
(VOUCHER_HTTP_ADDR=$gw2 VOUCHER_GATEWAY_ADMIN_ADDR=127.0.0.1:$((VOUCHER_PORT_BASE + 16)) \
  daemon_start chaos-rules-gw2 "$build/gateway/voucher-gateway")
wait_http_ok "http://$gw1/healthz" 30 && wait_http_ok "http://$gw2/healthz" 30 ||
  { echo "cluster checks: FAIL (a gateway did not start; see $VOUCHER_STACK_DIR/logs/chaos-rules-gw*.log)"; exit 1; }
# Ready: every master's connection up (a gateway started beside a cluster just
# formed may wait for its slot map).
wait_http_ok "http://127.0.0.1:$((VOUCHER_PORT_BASE + 14))/readyz" 30 &&
  wait_http_ok "http://127.0.0.1:$((VOUCHER_PORT_BASE + 16))/readyz" 30 ||
  failures+=("a gateway was not ready (/readyz) within 30 s")
before=$(subscribers)
wait_subscribers 2 10 || failures+=("the two gateways' listeners are not subscribed (voucher-rules has $(subscribers) subscribers)")
[ "$(admin1 POST /vouchers "{\"code\":\"$code\",\"mode\":\"flash\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":10,\"perUserLimit\":1,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"}")" = 201 ] ||
  failures+=("could not create $code on the first gateway")
# Each call is a new connection, so calls spread over the workers, each with its own cache.
warm=0
for ((i = 0; i < 10; i++)); do [ "$(quote2)" = 200 ] && warm=$((warm + 1)); done
[ "$warm" = 10 ] || failures+=("the second gateway answered $warm of 10 quotes with 200 before the change")

# ---- the claim's master gets a WAIT too
# WAITs are counted over all six nodes (roles may move within a pair while
# the cluster settles): a reservation whose claim is on another master than
# the voucher's sends two, the gateway before this check one. Only a 201 on
# the first try counts (a retry is answered as a replay, without WAIT), so a
# 503 moves on to another orderId.
voucher_port=$(master_port_of "voucher:{$code}:remaining")
measured=0
for ((i = 0; i < 64 && measured == 0; i++)); do
  o="$code-claim-$i"
  claim_port=$(master_port_of "voucher-order:{$o}")
  [ -n "$claim_port" ] && [ -n "$voucher_port" ] && [ "$claim_port" != "$voucher_port" ] || continue
  waits_before=$(all_wait_calls)
  status=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -H 'Content-Type: application/json' \
    --data-binary "{\"customerId\":$((100 + i)),\"orderId\":\"$o\",\"orderAmount\":10000}" \
    "http://$gw1/vouchers/$code/reservations")
  waits_after=$(all_wait_calls)
  say "claim: $o (claim's master on $claim_port, the voucher's on $voucher_port) answered $status; WAITs $waits_before -> $waits_after"
  case $status in
    201) measured=1
      [ "$((waits_after - waits_before))" -ge 2 ] ||
        failures+=("the claim of $o (master on port $claim_port, the voucher's on $voucher_port): $((waits_after - waits_before)) WAIT(s) before the 201, want 2") ;;
    503) [ "$measured" = 0 ] && [ "$i" -lt 5 ] || break ;;
    *) failures+=("the reservation of $o answered $status, want 201"); break ;;
  esac
done
[ "$measured" = 1 ] || failures+=("no reservation with its claim on another master was answered 201 on its first try")

# ---- a confirm and a cancel wait for the voucher's replica
# Each must send WAIT to the voucher's master before it publishes, so that a
# failover cannot bring back held an order whose 200 said confirmed or
# released (proto/redis-keys.md, "Redis Cluster"); the gateway before this
# sent none. One order each, reserved first (a 503 is tried again).
wait_calls_on() { # PORT
  redis-cli -p "$1" info commandstats 2>/dev/null | tr -d '\r' |
    sed -n 's/^cmdstat_wait:calls=\([0-9]*\),.*/\1/p'
}
customer=200
for op in confirm cancel; do
  o="$code-$op" status= customer=$((customer + 1))
  for ((i = 0; i < 5 && status != 201; i++)); do
    status=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -H 'Content-Type: application/json' \
      --data-binary "{\"customerId\":$customer,\"orderId\":\"$o\",\"orderAmount\":10000}" \
      "http://$gw1/vouchers/$code/reservations")
  done
  [ "$status" = 201 ] || { failures+=("the reservation $o answered $status, want 201"); continue; }
  url="http://$gw1/vouchers/$code/reservations/$o"
  waits_before=$(wait_calls_on "$voucher_port")
  if [ "$op" = confirm ]; then
    status=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST "$url/confirm")
  else
    status=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X DELETE "$url")
  fi
  waits_after=$(wait_calls_on "$voucher_port")
  waits=$((${waits_after:-0} - ${waits_before:-0}))
  say "$op: $o answered $status; WAITs on the voucher's master ($voucher_port): $waits"
  [ "$status" = 200 ] && [ "$waits" -ge 1 ] ||
    failures+=("the $op of $o answered $status after $waits WAIT(s) on the voucher's master (port $voucher_port), want 200 after 1 or more")
done

# ---- a PATCH's own Redis steps on the voucher's master
# A PATCH moves the voucher's counter (a lower before PostgreSQL, a raise
# after) and, for a later endsAt, the expiry of its keys and of its orders'
# claims. On a cluster each step must reach the master of the keys it touches,
# not the first seed (node 1): a voucher served by another master is chosen.
seed_port=$(node_port 1)
for ((i = 0; i < 64; i++)); do
  code2="P$(printf '%04X' $(((RANDOM + i) % 65536)))-LIMIT"
  patch_port=$(master_port_of "voucher:{$code2}:remaining")
  [ -n "$patch_port" ] && [ "$patch_port" != "$seed_port" ] && break
done
order2="$code2-o1"
claim2_port=$(master_port_of "voucher-order:{$order2}")
pttl() { redis-cli -p "$1" pttl "$2" 2>/dev/null; }
[ "$(admin1 POST /vouchers "{\"code\":\"$code2\",\"mode\":\"flash\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":10,\"perUserLimit\":1,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"}")" = 201 ] ||
  failures+=("could not create $code2 on the first gateway")
status=
for ((i = 0; i < 5 && status != 201; i++)); do
  status=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -H 'Content-Type: application/json' \
    --data-binary "{\"customerId\":7,\"orderId\":\"$order2\",\"orderAmount\":10000}" \
    "http://$gw1/vouchers/$code2/reservations")
done
[ "$status" = 201 ] || failures+=("the reservation $order2 of $code2 answered $status, want 201")
got=$(admin1 PATCH "/vouchers/$code2" '{"totalLimit":6}')
left=$(redis-cli -p "$patch_port" get "voucher:{$code2}:remaining")
say "patch: $code2 on master $patch_port (first seed $seed_port): lower 10 -> 6 answered $got, remaining $left"
[ "$got" = 200 ] && [ "$left" = 5 ] ||
  failures+=("lowering $code2 (master $patch_port, not the first seed) from 10 to 6 answered $got with remaining $left (want 200 and 5)")
got=$(admin1 PATCH "/vouchers/$code2" '{"totalLimit":9}')
left=$(redis-cli -p "$patch_port" get "voucher:{$code2}:remaining")
say "patch: raise 6 -> 9 answered $got, remaining $left"
[ "$got" = 200 ] && [ "$left" = 8 ] ||
  failures+=("raising $code2 from 6 to 9 answered $got with remaining $left (want 200 and 8)")
keys_before=$(pttl "$patch_port" "voucher:{$code2}:orders") claim_before=$(pttl "$claim2_port" "voucher-order:{$order2}")
got=$(admin1 PATCH "/vouchers/$code2" '{"endsAt":"2099-12-01T00:00:00Z"}')
keys_after=$(pttl "$patch_port" "voucher:{$code2}:orders") claim_after=$(pttl "$claim2_port" "voucher-order:{$order2}")
say "patch: endsAt later answered $got; orders ttl ${keys_before} -> ${keys_after} ms, claim (master $claim2_port) ${claim_before} -> ${claim_after} ms"
# Eleven months later: far more than the seconds this check takes.
grew() { [ "${1:-0}" -gt 0 ] && [ "${2:-0}" -gt $(( ${1:-0} + 86400000 )) ]; }
[ "$got" = 200 ] && grew "$keys_before" "$keys_after" && grew "$claim_before" "$claim_after" ||
  failures+=("a later endsAt of $code2 answered $got; the orders' ttl went $keys_before -> $keys_after ms, the claim's $claim_before -> $claim_after ms (want both a day or more later)")

# ---- a PATCH on one gateway seen by the other, Redis node 1 dead
pid=$(cat "$VOUCHER_STACK_DIR/redis-1/redis.pid" 2>/dev/null)
if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  say "rules: kill -9 Redis node 1 (pid $pid), the first seed; $before subscriber(s) before"
else
  failures+=("kill -9 Redis node 1 FAILED: not running")
fi
# Until the others mark node 1 failed (the node timeout, 2 s) and, if it was
# a master, its replica took its slots: only then do quotes of any code answer
# again, whatever the rules listener does.
for ((i = 0; i < 300; i++)); do
  redis-cli -p "$(node_port 2)" cluster nodes 2>/dev/null |
    awk -v p=":$(node_port 1)@" 'index($2, p) && $3 ~ /(^|,)fail(,|$)/ { f = 1 } END { exit !f }' &&
    redis-cli -p "$(node_port 2)" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && break
  sleep 0.1
done
[ "$i" -lt 300 ] || failures+=("the cluster did not mark node 1 failed and recover within 30 s")
# The gateways answer 503 for a slot of node 1 until they have read the new
# map: wait until the second one quotes again (5 in a row), so that what
# follows measures the rule change, not the failover.
ok_row=0
for ((i = 0; i < 150 && ok_row < 5; i++)); do
  if [ "$(quote2)" = 200 ]; then ok_row=$((ok_row + 1)); else ok_row=0; sleep 0.1; fi
done
[ "$ok_row" -ge 5 ] || failures+=("the second gateway did not quote again within 15 s of node 1's death")
wait_subscribers 2 10 ||
  failures+=("with node 1 dead the listeners did not subscribe on another node within 10 s ($(subscribers) subscribers)")
[ "$(admin1 PATCH "/vouchers/$code" '{"active":false}')" = 200 ] || failures+=("PATCH on the first gateway did not answer 200")
start=$(date +%s%N) last_old=$start refused=0 last_status=none
for ((i = 0; i < 200 && refused < 10; i++)); do
  q=$(quote2)
  if [ "$q" = 422 ]; then refused=$((refused + 1)); else refused=0 last_old=$(date +%s%N) last_status=$q; fi
  sleep 0.02
done
took=$(((last_old - start) / 1000000))
[ "$refused" -ge 10 ] && [ "$took" -le 1000 ] ||
  failures+=("the second gateway answered $last_status (not 422 INACTIVE) ${took} ms after the PATCH (want <= 1000 ms; rules ttl 60 s)")

if "$repo/deploy/stack" up redis-1 >/dev/null 2>&1; then
  say "rules: Redis node 1 is back"
else
  failures+=("Redis node 1 did not come back")
fi
if [ ${#failures[@]} -eq 0 ]; then
  echo "cluster checks: PASS (the claim's master waited for; a confirm and a cancel waited for the voucher's replica; a PATCH's steps on the voucher's master; node 1 dead: the second gateway refused ${took} ms after the PATCH on the first)"
  exit 0
fi
echo "cluster checks: FAIL"
printf '  - %s\n' "${failures[@]}"
exit 1
