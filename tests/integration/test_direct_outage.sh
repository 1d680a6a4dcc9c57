#!/usr/bin/env bash
# A direct voucher while Redis, then Kafka, is away (issue 46, slice 3;
# proto/direct-mode.md, "Guessing limits while Redis is away").
# - The gateway of this test runs on a Redis of its own (started here, on a port
#   of this test), so that stopping it stops nothing another test or daemon uses.
# - Redis stopped, the guessing limits on: a direct voucher answers reserve 201,
#   its retry 201, the customer's second use 409, an order below the minimum
#   422, sold out 409, confirm 200 and cancel 200, with the rows right at each
#   answer; a flash voucher answers 503 (its reservation, quote and confirm).
# - The local limiter: a customer's failed tries (an unknown code, answered 404
#   during the outage, not 503) get 429 after the same number of tries as with
#   Redis; voucher_gateway_guard_local_total counts the decisions.
# - Redis back: the guard decides in Redis again (the flash voucher answers, a
#   failed try is a bucket in Redis) and the local counts are dropped (the
#   customer the local limiter refused gets a 404 again).
# - The stack's Kafka stopped (run it on a private stack): a direct voucher
#   still answers 201 and 200, a flash one 503; its outbox rows wait unsent
#   and the reconciler's voucher_outbox_unsent grows; Kafka back: drained, the
#   events in the topic in order, none lost.
source "$(dirname "$0")/lib.sh"
plan 37

own_port=$((VOUCHER_PORT_BASE + 30))
own() { redis-cli -p "$own_port" "$@"; }
redis_up() {
  redis-server --bind 127.0.0.1 --port "$own_port" --dir "$scratch" --save "" --appendonly no \
    --daemonize yes --logfile "$scratch/redis.log" >/dev/null
  wait_for PONG 10 own ping >/dev/null
}
redis_down() { own shutdown nosave >/dev/null 2>&1 || true; }
# Whatever happens, the stack's Kafka runs again for the tests after this one.
trap 'redis_down; "$VOUCHER_SOURCE_DIR/deploy/stack" up kafka >/dev/null 2>&1; finish' EXIT

# voucher MODE CODE LIMIT: discount 500, minimum 100, one use a customer.
voucher() {
  sql "INSERT INTO voucher (code, mode, discount_amount, min_order_amount, total_limit, per_user_limit,
                            starts_at, ends_at)
       VALUES ('$2', '$1', 500, 100, $3, 1, now() - interval '1 hour', now() + interval '1 day')"
}
# Every request names its client (behind the trusted proxy 127.0.0.1): the address bucket
# applies to confirm and cancel too, where a 404 is a guess at an orderId.
client=(-H 'X-Forwarded-For: 198.51.100.7')
reserve() { # CODE CUSTOMER ORDER [AMOUNT]
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$1-$3\",\"orderAmount\":${4:-1000}}" "${client[@]}"
}
quote() { http POST "/vouchers/$1/quote" "{\"customerId\":$2,\"orderAmount\":1000}" "${client[@]}"; }
confirm() { http POST "/vouchers/$1/reservations/$1-$2/confirm" "" "${client[@]}"; }
cancel() { http DELETE "/vouchers/$1/reservations/$1-$2" "" "${client[@]}"; }
rows() { sql "SELECT used_count || ' ' || coalesce((SELECT string_agg(order_id || ':' || status, ',' ORDER BY order_id)
                FROM voucher_redemption WHERE voucher_code = '$1'), '-') FROM voucher WHERE code = '$1'"; }
local_decided() { metric "$(gateway_admin)" "voucher_gateway_guard_local_total{decision=\"$1\"}"; }
# guesses CUSTOMER N: N reservations of codes nobody has; prints their answers' statuses.
guesses() {
  local i out=
  for ((i = 0; i < $2; i++)); do
    reserve "$(unique_code NOPE)" "$1" g
    out+="$status "
  done
  echo "${out% }"
}

# This run's lines of the gateway's log (a reused stack keeps earlier runs' lines).
log=$VOUCHER_STACK_DIR/logs/$test_name-gateway.log
log_from=$(($(cat "$log" 2>/dev/null | wc -l) + 1))
logged() { tail -n "+$log_from" "$log" | grep -q "$1"; echo $?; }

redis_up
unset VOUCHER_API_TOKEN # confirm and cancel guarded too (a 404 there is a guess)
export VOUCHER_GATEWAY_THREADS=1 # "the 4th gets 429" exact (test_guessing_limits.sh says why)
VOUCHER_REDIS_URL=redis://127.0.0.1:$own_port/0 VOUCHER_KAFKA_TIMEOUT=2s start_gateway --trusted-proxies 127.0.0.1/32 \
  --guard-customer-tries 3 --guard-customer-window 1h --guard-ip-tries 1000 --guard-ip-window 1h
f=$(unique_code DOF) d=$(unique_code DOD)
voucher flash "$f" 5
voucher direct "$d" 2

# ---- Redis up: the guard's numbers to compare with ----
is "$(guesses 101 4)" "404 404 404 429" "Redis up: three failed tries, the 4th refused"
reserve "$f" 1 f1
is "$status" 201 "Redis up: the flash voucher reserves"

# ---- Redis stopped ----
redis_down
reserve "$d" 1 o1
is "$(answer) | $(rows "$d")" "201  | 1 $d-o1:RESERVED" "Redis stopped: a direct reservation 201, its row at once"
reserve "$d" 1 o1
is "$(answer) $(jq -r .replayed <<<"$body") | $(rows "$d")" "201  true | 1 $d-o1:RESERVED" \
  "its retry: 201 replayed, nothing more taken"
reserve "$d" 1 o2
is "$(answer)" "409 ALREADY_USED" "the customer's second use: 409"
reserve "$d" 2 o3 50
is "$(answer) $(jq -r .reason <<<"$body")" "422 NOT_ELIGIBLE ORDER_TOO_SMALL" "an order below the minimum: 422"
reserve "$d" 2 o4
is "$(answer) | $(rows "$d")" "201  | 2 $d-o1:RESERVED,$d-o4:RESERVED" "the last use: 201"
reserve "$d" 3 o5
is "$(answer) | $(rows "$d")" "409 OUT_OF_STOCK | 2 $d-o1:RESERVED,$d-o4:RESERVED" \
  "sold out: 409, nothing taken"
quote "$d" 3
is "$(answer)" "409 OUT_OF_STOCK" "a quote of the direct voucher: answered"
confirm "$d" o1
is "$(answer) | $(rows "$d")" "200 CONFIRMED | 2 $d-o1:CONFIRMED,$d-o4:RESERVED" "a confirm: 200, CONFIRMED at once"
cancel "$d" o4
is "$(answer) | $(rows "$d")" "200 RELEASED | 1 $d-o1:CONFIRMED,$d-o4:RELEASED" "a cancel: 200, the use back at once"
reserve "$f" 2 f2
is "$(answer)" "503 UNAVAILABLE" "Redis stopped: the flash voucher's reservation 503"
quote "$f" 2
is "$(answer)" "503 UNAVAILABLE" "the flash voucher's quote 503"
confirm "$f" f1
is "$(answer)" "503 UNAVAILABLE" "the flash voucher's confirm 503 (its order exists)"
is "$(sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$f' AND order_id <> '$f-f1'")" 0 \
  "the flash voucher took nothing during the outage"
is "$(local_decided refused)" 0 "none refused by the local limiter yet"
# The local limiter: the same buckets, the same tries. An unknown code is a failed
# try during the outage too (404, kept), not a 503 that would give its try back.
is "$(guesses 102 4)" "404 404 404 429" "Redis stopped: three failed tries, the 4th refused (429), as with Redis"
is "$(grep -ci '^retry-after: [1-9]' <<<"$headers")" 1 "the 429 says when to retry"
reserve "$d" 102 o6
is "$(answer)" "429 TOO_MANY_ATTEMPTS" "the customer's bucket is empty for a direct voucher too"
reserve "$d" 103 o7
is "$status" 201 "another customer reserves the direct voucher"
confirm "$(unique_code NOPE)" x
is "$status" 404 "a confirm of a code nobody has: 404, a failed try"
is "$(local_decided refused) $(local_decided failed)" "2 4" \
  "voucher_gateway_guard_local_total: 2 refused, 4 failed tries kept"
ok "$(awk -v g="$(local_decided go)" 'BEGIN { exit !(g >= 17) }'; echo $?)" \
  "voucher_gateway_guard_local_total{decision=\"go\"} counts the requests let on ($(local_decided go))"
ok "$(logged 'guessing limits: redis cannot take a try')" \
  "the take-over is logged"
is "$(rows "$d")" "2 $d-o1:CONFIRMED,$d-o4:RELEASED,$d-o7:RESERVED" "the direct voucher's rows: none lost, none oversold"

# ---- Redis back ----
redis_up
# A flash voucher new to this Redis (the stopped one kept nothing): its first
# reservation loads it, once the guard takes its tries in Redis again.
g=$(unique_code DOG)
voucher flash "$g" 5
is "$(wait_for 201 30 eval 'reserve "$g" 4 b1; echo $status')" 201 "Redis back: a flash voucher reserves again"
ok "$(logged 'guessing limits: redis takes tries again')" \
  "the hand-back is logged"
before=$(local_decided go)
is "$(guesses 102 1)" 404 "the customer the local limiter refused: a try again (the local counts dropped)"
is "$(own exists "guard:{cu:v:102}") $(local_decided go)" "1 $before" \
  "the failed try is a bucket in Redis, not a local decision"

# ---- Kafka stopped (the stack's: run this test on a private stack, as tests/run does) ----
# The acting reconciler relays the outbox; with Kafka away its rows wait unsent and
# voucher_outbox_unsent grows; once Kafka is back they are published in order.
# (The settings of test_direct_relay.sh: a pass that waits on Kafka gives up in 2 s.)
VOUCHER_OUTBOX_POLL=200ms VOUCHER_RECONCILE_INTERVAL=500ms VOUCHER_RECONCILE_TIMEOUT=2s start_reconciler
k=$(unique_code DOK)
voucher direct "$k" 5
stack=$VOUCHER_SOURCE_DIR/deploy/stack
"$stack" down kafka >"$scratch/kafka-down.log" 2>&1
ok $? "Kafka stopped"
reserve "$k" 104 k1
a1=$(answer)
reserve "$k" 105 k2
a2=$(answer)
confirm "$k" k1
is "$a1 | $a2 | $(answer) | $(rows "$k")" "201  | 201  | 200 CONFIRMED | 2 $k-k1:CONFIRMED,$k-k2:RESERVED" \
  "Kafka stopped: a direct voucher answers 201, 201, 200, its rows at once"
reserve "$f" 104 k3
is "$(answer)" "503 UNAVAILABLE" "Kafka stopped: the flash voucher's reservation 503"
metric_wait "$(reconciler_admin 0)" voucher_outbox_unsent 3 60
ok $? "voucher_outbox_unsent counts the three rows Kafka cannot take"
is "$(sql "SELECT count(*) FROM event_outbox WHERE event_key = '$k' AND sent_at IS NULL")" 3 \
  "the three rows wait unsent"
"$stack" up kafka >"$scratch/kafka-up.log" 2>&1
ok $? "Kafka started again"
is "$(wait_sql "SELECT count(*) FROM event_outbox WHERE event_key = '$k' AND sent_at IS NULL" 0 120)" 0 \
  "once Kafka is back, the outbox drains"
topic_order() {
  kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -o beginning -e -q -f '%k\t%s\n' 2>/dev/null |
    awk -F'\t' -v k="$1" '$1 == k { print $2 }' | jq -r '.type + " " + .orderId'
}
# Kafka may hold a copy sent before the outage ended (re-sent, not marked): the first of each is in order.
is "$(topic_order "$k" | awk '!seen[$0]++' | tr '\n' ,)" \
  "VoucherReserved $k-k1,VoucherReserved $k-k2,VoucherConfirmed $k-k1," \
  "every event reached the topic, in order: nothing lost"
finish
