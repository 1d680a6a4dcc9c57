#!/usr/bin/env bash
# Sold out without a Redis round trip (proto/redis-keys.md, "Sold out without a
# round trip"): a sold-out voucher answers new orders from the gateway's
# snapshot while Redis answers nothing; a retry of an order that holds a use
# still gets its 201, also on another gateway whose snapshot is older than the
# order; a use given back is sold again by every gateway within the bound.
source "$(dirname "$0")/lib.sh"
plan 14

token=$(new_token admin)
auth=(-H "Authorization: Bearer $token")
gw2="127.0.0.1:$((VOUCHER_PORT_BASE + 15))"
export VOUCHER_ADMIN_TOKEN=$token VOUCHER_GATEWAY_THREADS=2
trap 'rcli CLIENT UNPAUSE >/dev/null 2>&1; daemon_stop "$test_name-gateway2"; finish' EXIT

# start_both RECHECK: gateway A on the usual addresses, gateway B on base + 15 (admin + 17).
start_both() {
  stop_daemons
  daemon_stop "$test_name-gateway2"
  VOUCHER_SOLDOUT_RECHECK=$1 start_gateway
  VOUCHER_SOLDOUT_RECHECK=$1 VOUCHER_HTTP_ADDR=$gw2 VOUCHER_GATEWAY_ADMIN_ADDR=127.0.0.1:$((VOUCHER_PORT_BASE + 17)) \
    daemon_start "$test_name-gateway2" "$bin_gateway"
  wait_http_ok "http://$gw2/healthz" 30 || { echo "Bail out! the second gateway did not start"; exit 1; }
}
window='"startsAt":"2020-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z"'
create() { # CODE LIMIT
  http POST /vouchers "{\"code\":\"$1\",\"mode\":\"flash\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":$2,\"perUserLimit\":1,$window}" "${auth[@]}"
  [ "$status" = 201 ] || { echo "Bail out! creating $1: $status $body"; exit 1; }
}
# reserve [-b] CODE ORDER CUSTOMER: on gateway A, or B with -b; sets $status, $body, $secs.
reserve() {
  local url=$base_url
  [ "$1" = -b ] && { url="http://$gw2"; shift; }
  base_url=$url http POST "/vouchers/$1/reservations" "{\"customerId\":$3,\"orderId\":\"$2\",\"orderAmount\":10000}"
}
answer() { echo "$status $(jq -r '.error // empty' <<<"$body" 2>/dev/null)"; }
soldout_a() { metric_sum "$(gateway_admin)" voucher_gateway_soldout_total; }
soldout_b() { metric_sum "127.0.0.1:$((VOUCHER_PORT_BASE + 17))" voucher_gateway_soldout_total; }
# resold_on_b CODE ORDER_PREFIX FIRST CUSTOMER_OFFSET WHAT: after a use came back on gateway
# A, new orders on gateway B (ORDER_PREFIX$i, customer CUSTOMER_OFFSET + i, i from FIRST),
# 50 ms apart, until one gets 201; checks that one did within the recheck and the lease.
resold_on_b() {
  local code=$1 prefix=$2 i=$3 offset=$4 start took
  start=$(date +%s%N)
  for ((; i < 200; i++)); do
    reserve -b "$code" "$prefix$i" "$((offset + i))"
    [ "$status" = 201 ] && break
    sleep 0.05
  done
  took=$((($(date +%s%N) - start) / 1000000))
  ok "$([ "$status" = 201 ] && [ "$took" -le 3000 ]; echo $?)" \
    "$5 within the recheck and the lease (${took} ms, bound 1.25 s + slack)"
}
p=$(unique_code SO)

# ---- 1. answered from memory while Redis answers nothing ----
start_both 60s
create "${p}_P" 2
reserve "${p}_P" "${p}-p1" 1
reserve "${p}_P" "${p}-p2" 2
reserve "${p}_P" "${p}-p3" 3
is "$(answer)" "409 OUT_OF_STOCK" "the voucher sold out: a new order gets 409 (the snapshot is taken)"
before=$(soldout_a)
rcli CLIENT PAUSE 4000 ALL >/dev/null
reserve "${p}_P" "${p}-p4" 4
paused_secs=$secs
is "$(answer)" "409 OUT_OF_STOCK" "with Redis paused, a new order still gets 409"
ok "$(awk -v s="$paused_secs" 'BEGIN { exit !(s < 2) }'; echo $?)" \
  "and at once (${paused_secs} s, Redis paused for 4 s): no Redis round trip"
is "$(soldout_a)" "$((${before:-0} + 1))" "counted as answered from the sold-out mark"
for ((i = 0; i < 100; i++)); do [ "$(rcli PING 2>/dev/null)" = PONG ] && break; sleep 0.1; done
reserve "${p}_P" "${p}-p1" 1
is "$(answer)" "201 " "a retry of an order holding a use still gets its 201 on the sold-out gateway"
is "$(jq -r .replayed <<<"$body")" true "replayed"

# ---- 2. a retry on a gateway whose snapshot is older than the order ----
start_both 1s
create "${p}_R" 2
reserve "${p}_R" "${p}-r1" 1
reserve "${p}_R" "${p}-r2" 2
reserve -b "${p}_R" "${p}-r3" 3
is "$(answer)" "409 OUT_OF_STOCK" "gateway B: sold out (B takes its snapshot)"
before=$(soldout_b)
reserve -b "${p}_R" "${p}-r4" 4
is "$(answer) $(soldout_b)" "409 OUT_OF_STOCK $((${before:-0} + 1))" "gateway B answers the next new order from memory"
http DELETE "/vouchers/${p}_R/reservations/${p}-r2" "" "${auth[@]}"
is "$(answer)" "200 " "gateway A releases an order: a use is back"
reserve "${p}_R" "${p}-r5" 5
is "$(answer)" "201 " "gateway A sells it to a new order"
diag "gateway A's 201 took ${secs} s: it waited for gateway B's lease"
reserve -b "${p}_R" "${p}-r5" 5
is "$status $(jq -r .replayed <<<"$body")" "201 true" \
  "a retry of that order on gateway B (its snapshot older than the order) gets its 201 replayed, not 409"

# ---- 3. a use given back is sold again on the other gateway within the bound ----
create "${p}_S" 1
reserve "${p}_S" "${p}-s1" 1
reserve -b "${p}_S" "${p}-s2" 2
is "$(answer)" "409 OUT_OF_STOCK" "gateway B: sold out"
http DELETE "/vouchers/${p}_S/reservations/${p}-s1" "" "${auth[@]}"
resold_on_b "${p}_S" "${p}-s" 3 0 "after a release on gateway A, gateway B sells the use again"
# A limit raised on gateway A: gateway B sells the new use within the same bound.
reserve -b "${p}_S" "${p}-t1" 1001
http PATCH "/vouchers/${p}_S" '{"totalLimit":2}' "${auth[@]}"
resold_on_b "${p}_S" "${p}-t" 2 1000 "after a limit raise on gateway A, gateway B sells the new use"
