#!/usr/bin/env bash
# A voucher's lifecycle on the real stack (PATCH /vouchers/{code}, issue 18):
# totalLimit raised and lowered in the middle of a sale (nothing oversold, no
# 201 lost, every use the limit allows sold), a lower below the uses taken
# refused with the numbers, the active flag (new reservations refused, holds
# still confirmed and released), the discount for new reservations only, the
# window moving the keys' expiry, a second gateway dropping old rules within
# its rules ttl, and the reconciler's limit sync for totals changed by hand in
# SQL or raised while its snapshot was older.
source "$(dirname "$0")/lib.sh"
plan 81

token=$(new_token admin)
export VOUCHER_ADMIN_TOKEN=$token VOUCHER_GATEWAY_THREADS=4 VOUCHER_SOLDOUT_RECHECK=60s
start_gateway
start_writer
unset VOUCHER_ADMIN_TOKEN

auth=(-H "Authorization: Bearer $token")
admin() { http "$@" "${auth[@]}"; }
answer() { echo "$status $(jq -r '.error // empty' <<<"$body" 2>/dev/null)"; }
reason() { jq -r '.reason // empty' <<<"$body"; }
window='"startsAt":"2020-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z"'
create() { # CODE LIMIT [PER_USER]
  admin POST /vouchers "{\"code\":\"$1\",\"mode\":\"flash\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":$2,\"perUserLimit\":${3:-1},$window}"
  [ "$status" = 201 ] || { echo "Bail out! creating $1: $status $body"; exit 1; }
}
reserve() { # CODE ORDER CUSTOMER
  http POST "/vouchers/$1/reservations" "{\"customerId\":$3,\"orderId\":\"$2\",\"orderAmount\":10000}"
}
remaining() { rcli GET "voucher:{$1}:remaining"; }
# The orderIds a vc-load run was answered 201 for, sorted.
acked() { awk -F'\t' '!/^#/ && $4 == 201 {print $2}' "$1" | sort; }
# The orderIds PostgreSQL holds a use for, sorted.
rows() { sql "SELECT order_id FROM voucher_redemption WHERE voucher_code = '$1' AND status IN ('RESERVED', 'CONFIRMED') ORDER BY 1" | sort; }
p=$(unique_code LC)

# ---- the contract's edges ----
create "${p}_A" 50
http PATCH "/vouchers/${p}_A" '{"totalLimit":60}'
is "$(answer)" "401 UNAUTHORIZED" "PATCH without the admin token: 401"
admin PATCH "/vouchers/${p}_NONE" '{"totalLimit":60}'
is "$(answer)" "404 NOT_FOUND" "PATCH an unknown voucher: 404"
admin PATCH "/vouchers/${p}_A" '{}'
is "$(answer)" "400 BAD_REQUEST" "PATCH changing nothing: 400"
admin PATCH "/vouchers/${p}_A" '{"usedCount":0}'
is "$(answer)" "400 BAD_REQUEST" "PATCH of a field that is not a rule: 400"
is "$(rcli GET "voucher:{${p}_A}:limit")" 50 "POST /vouchers sets the limit key beside the counter"

# ---- a raise in the middle of a sale ----
"$bin_load" --code "${p}_A" --attempts 3000 --connections 20 --rate 400 --order-prefix "${p}_A-o" \
  --out "$scratch/a.tsv" >/dev/null &
load=$!
is "$(wait_for 0 30 remaining "${p}_A")" 0 "the sale sold the first 50"
admin PATCH "/vouchers/${p}_A" '{"totalLimit":120}'
is "$status $(jq -r .totalLimit <<<"$body")" "200 120" "raised to 120 while the sale runs: 200"
is "$(wait_for 0 30 remaining "${p}_A")" 0 "the 70 uses added were sold at once, in the same sale"
admin PATCH "/vouchers/${p}_A" '{"totalLimit":100}'
is "$(answer) $(jq -c '[.totalLimit, .taken, .remaining]' <<<"$body")" "409 LIMIT_CONFLICT [120,120,0]" \
  "lowering below the uses taken: 409 with the numbers"
wait "$load"
is "$(acked "$scratch/a.tsv" | wc -l)" 120 "exactly 120 reservations acknowledged: nothing oversold, nothing undersold"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '${p}_A'" 120 30)" 120 "PostgreSQL counts 120"
is "$(rows "${p}_A" | comm -3 - <(acked "$scratch/a.tsv") | wc -l)" 0 "every 201 is a row, every row a 201"
is "$(sql "SELECT total_limit FROM voucher WHERE code = '${p}_A'")|$(rcli GET "voucher:{${p}_A}:limit")" "120|120" \
  "the refused lower changed neither PostgreSQL nor the limit key"

# ---- a lower in the middle of a sale ----
create "${p}_B" 1000
"$bin_load" --code "${p}_B" --attempts 3000 --connections 20 --rate 300 --order-prefix "${p}_B-o" \
  --out "$scratch/b.tsv" >/dev/null &
load=$!
for ((i = 0; i < 600; i++)); do [ "$(remaining "${p}_B")" -le 950 ] && break; sleep 0.05; done
admin PATCH "/vouchers/${p}_B" '{"totalLimit":400}'
is "$status $(jq -r .totalLimit <<<"$body")" "200 400" "lowered to 400 while the sale runs: 200"
wait "$load"
is "$(acked "$scratch/b.tsv" | wc -l)" 400 "exactly 400 acknowledged after the lower"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '${p}_B'" 400 30)" 400 "PostgreSQL counts 400"
is "$(rows "${p}_B" | comm -3 - <(acked "$scratch/b.tsv") | wc -l)" 0 "every 201 is a row, every row a 201"
is "$(remaining "${p}_B")" 0 "Redis offers nothing more"

# ---- concurrent changes of the total: Redis ends as PostgreSQL does ----
create "${p}_P" 100
reserve "${p}_P" "${p}-p1" 1
pids=()
for i in $(seq 1 40); do
  curl -s -o /dev/null --max-time 20 -X PATCH -H 'Content-Type: application/json' "${auth[@]}" \
    --data-binary "{\"totalLimit\":$((100 + (i * 37) % 90))}" "$admin_url/vouchers/${p}_P" &
  pids+=($!)
done
wait "${pids[@]}"
pg_total=$(sql "SELECT total_limit FROM voucher WHERE code = '${p}_P'")
is "$(rcli GET "voucher:{${p}_P}:limit") $(remaining "${p}_P")" "$pg_total $((pg_total - 1))" \
  "40 PATCHes at once: the limit key is PostgreSQL's total and the counter offers it less the hold"

# ---- a PATCH behind another waits until the first moved Redis ----
# A raise moves Redis after its commit; a change that read the new total before
# that would move the counter from the old one (two raises where one was meant).
create "${p}_Q" 100
gw3="127.0.0.1:$((VOUCHER_PORT_BASE + 16))"
VOUCHER_HTTP_ADDR=$gw3 VOUCHER_GATEWAY_ADMIN_ADDR=127.0.0.1:$((VOUCHER_PORT_BASE + 21)) VOUCHER_ADMIN_TOKEN=$token VOUCHER_PAUSE=gateway-patch-after-commit \
  VOUCHER_PAUSE_DIR=$pause_dir daemon_start "$test_name-gateway3" "$bin_gateway"
wait_http_ok "http://$gw3/healthz" 30 || { echo "Bail out! the third gateway did not start"; exit 1; }
trap 'daemon_stop "$test_name-gateway2"; daemon_stop "$test_name-gateway3"; finish' EXIT
curl -s -o /dev/null --max-time 30 -X PATCH -H 'Content-Type: application/json' "${auth[@]}" \
  --data-binary '{"totalLimit":150}' "http://127.0.0.1:$((VOUCHER_PORT_BASE + 21))/vouchers/${p}_Q" &
first=$!
pause_wait gateway-patch-after-commit 30 || { echo "Bail out! the raise never paused"; exit 1; }
curl -s -o /dev/null --max-time 30 -X PATCH -H 'Content-Type: application/json' "${auth[@]}" \
  --data-binary '{"totalLimit":120}' "$admin_url/vouchers/${p}_Q" &
second=$!
waits=0
for ((i = 0; i < 100; i++)); do
  [ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")" -gt 0 ] && { waits=1; break; }
  sleep 0.1
done
is "$waits" 1 "the second change waits for the limit lock while the first is between its commit and Redis"
pause_go gateway-patch-after-commit
wait "$first" "$second"
daemon_stop "$test_name-gateway3"
is "$(sql "SELECT total_limit FROM voucher WHERE code = '${p}_Q'") $(rcli GET "voucher:{${p}_Q}:limit") $(remaining "${p}_Q")" \
  "120 120 120" "then Redis offers what PostgreSQL's total says, not 150"

# ---- switched off in the middle of a sale ----
create "${p}_K" 1000
"$bin_load" --code "${p}_K" --attempts 1500 --connections 20 --rate 300 --order-prefix "${p}_K-o" \
  --out "$scratch/k.tsv" >/dev/null &
load=$!
for ((i = 0; i < 600; i++)); do [ "$(remaining "${p}_K")" -le 950 ] && break; sleep 0.05; done
admin PATCH "/vouchers/${p}_K" '{"active":false}'
answered_us=$(( $(date +%s%N) / 1000 ))
is "$status" 200 "switched off while the sale runs: 200"
wait "$load"
# vc-load's startUs is the wall clock when an attempt was due (it was sent then or later).
is "$(awk -F'\t' -v t="$answered_us" '!/^#/ && $4 == 201 && $9 > t' "$scratch/k.tsv" | wc -l)" 0 \
  "no attempt begun after the PATCH was answered took a use, on any of the 4 workers"
ok "$([ "$(awk -F'\t' '!/^#/ && $4 == 422' "$scratch/k.tsv" | wc -l)" -gt 0 ]; echo $?)" \
  "the attempts after it were refused (422)"
kn=$(acked "$scratch/k.tsv" | wc -l)
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '${p}_K'" "$kn" 30)|$(rows "${p}_K" | comm -3 - <(acked "$scratch/k.tsv") | wc -l)" \
  "$kn|0" "the $kn acknowledged before it are all in PostgreSQL, and nothing else"

# ---- active ----
create "${p}_C" 10 2
reserve "${p}_C" "${p}-c1" 1
is "$status" 201 "a hold before the switch"
reserve "${p}_C" "${p}-c2" 2
is "$status" 201 "another hold before the switch"
admin PATCH "/vouchers/${p}_C" '{"active":false}'
is "$status $(jq -r .active <<<"$body")" "200 false" "switched off: 200, active false"
patched=$(jq -c '[.remaining, .holds]' <<<"$body")
admin GET "/vouchers/${p}_C" ""
is "$patched" "$(jq -c '[.remaining, .holds]' <<<"$body")" \
  "a PATCH of a rule alone answers Redis's counters, as the GET after it: $patched"
refused=0
for i in 1 2 3 4 5 6 7 8; do
  reserve "${p}_C" "${p}-c3-$i" 3
  [ "$status $(reason)" = "422 INACTIVE" ] && refused=$((refused + 1))
done
is "$refused" 8 "every new reservation, on any worker, at once: 422 NOT_ELIGIBLE/INACTIVE"
http POST "/vouchers/${p}_C/quote" '{"customerId":3,"orderAmount":10000}'
is "$status $(reason)" "422 INACTIVE" "a quote of an inactive voucher: 422 INACTIVE"
reserve "${p}_C" "${p}-c1" 1
is "$status $(jq -r .replayed <<<"$body")" "201 true" "a retry of a hold taken before is answered as before"
http POST "/vouchers/${p}_C/reservations/${p}-c1/confirm" '{"orderAmount":9000}'
is "$status" 200 "a hold taken before is confirmed (with its final total)"
http DELETE "/vouchers/${p}_C/reservations/${p}-c2"
is "$status" 200 "a hold taken before is released"
admin PATCH "/vouchers/${p}_C" '{"active":true}'
reserve "${p}_C" "${p}-c4" 4
is "$status" 201 "switched on again: new reservations pass"
is "$(sql "SELECT active FROM voucher WHERE code = '${p}_C'")" t "PostgreSQL says active"

# ---- a second gateway drops old rules at once (Redis channel voucher-rules) ----
gw2="127.0.0.1:$((VOUCHER_PORT_BASE + 15))"
# A rules ttl of a minute: only the message can make it drop the rules this soon.
VOUCHER_HTTP_ADDR=$gw2 VOUCHER_GATEWAY_ADMIN_ADDR=127.0.0.1:$((VOUCHER_PORT_BASE + 17)) VOUCHER_RULES_TTL=60s \
  daemon_start "$test_name-gateway2" "$bin_gateway"
wait_http_ok "http://$gw2/healthz" 30 || { echo "Bail out! the second gateway did not start"; exit 1; }
trap 'daemon_stop "$test_name-gateway2"; finish' EXIT
quote2() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -H 'Content-Type: application/json' \
  --data-binary '{"customerId":3,"orderAmount":10000}' "http://$gw2/vouchers/${p}_C/quote"; }
# Each call is a new connection, so calls spread over the second gateway's 4
# workers, each with its own cache: warm them all.
warm=0
for ((i = 0; i < 20; i++)); do [ "$(quote2)" = 200 ] && warm=$((warm + 1)); done
is "$warm" 20 "the second gateway has the rules cached (all its workers)"
admin PATCH "/vouchers/${p}_C" '{"active":false}'
start=$(date +%s%N) last_old=0 refused=0
for ((i = 0; i < 200 && refused < 20; i++)); do
  if [ "$(quote2)" = 422 ]; then refused=$((refused + 1)); else refused=0 last_old=$(date +%s%N); fi
  sleep 0.02
done
took=$(( (last_old > 0 ? last_old - start : 0) / 1000000 ))
diag "the second gateway served the old rules until ${took} ms after the change (rules ttl 60 s)"
ok "$([ "$refused" -ge 20 ] && [ "$took" -le 1000 ]; echo $?)" \
  "every worker of the second gateway refuses within a second, long before its rules ttl, and keeps refusing"
daemon_stop "$test_name-gateway2"

# ---- discount, perUserLimit, window ----
create "${p}_D" 10 2
reserve "${p}_D" "${p}-d1" 1
is "$(jq -r .discountAmount <<<"$body")" 100 "a hold with the first discount"
admin PATCH "/vouchers/${p}_D" '{"discountAmount":300}'
is "$status" 200 "the discount changed"
reserve "${p}_D" "${p}-d2" 2
is "$(jq -r .discountAmount <<<"$body")" 300 "a new reservation gets the new discount"
reserve "${p}_D" "${p}-d1" 1
is "$status $(jq -r .discountAmount <<<"$body")" "201 100" "a retry of the earlier hold keeps its discount"
admin PATCH "/vouchers/${p}_D" '{"discountPercent":10,"maxDiscountAmount":500}'
is "$status $(jq -c '[.discountPercent, .maxDiscountAmount, .discountAmount]' <<<"$body")" "200 [10,500,null]" \
  "a percent discount replaces the fixed one"
admin PATCH "/vouchers/${p}_D" '{"perUserLimit":1}'
is "$(answer)" "409 LIMIT_CONFLICT" "perUserLimit lowered: 409 (the writer would refuse holds already acknowledged)"
admin PATCH "/vouchers/${p}_D" '{"perUserLimit":3}'
is "$status $(jq -r .perUserLimit <<<"$body")" "200 3" "perUserLimit raised: 200"
admin PATCH "/vouchers/${p}_D" '{"endsAt":"2098-01-01T00:00:00Z","startsAt":"2099-01-01T00:00:00Z"}'
is "$(answer)" "409 RULES_CONFLICT" "a change that leaves an empty window: 409"
admin PATCH "/vouchers/${p}_D" '{"endsAt":"2099-06-01T00:00:00+02:00"}'
is "$status $(jq -r .endsAt <<<"$body")" "200 2099-05-31T22:00:00.000Z" "endsAt moved later: 200"
want=$(( $(date -d 2099-05-31T22:00:00Z +%s) * 1000 + 72 * 3600 * 1000 ))
is "$(rcli PEXPIRETIME "voucher:{${p}_D}:orders")|$(rcli PEXPIRETIME "voucher:{${p}_D}:remaining")|$(rcli PEXPIRETIME "voucher-order:{${p}-d1}")" \
  "$want|$want|$want" "the voucher's keys and its orders' claims expire a retention after the new end"
is "$(sql "SELECT extract(epoch FROM ends_at)::bigint FROM voucher WHERE code = '${p}_D'")" \
  "$(date -d 2099-05-31T22:00:00Z +%s)" "PostgreSQL has the new end"

# ---- a total changed by hand in SQL: the reconciler's limit sync ----
create "${p}_E" 3
for i in 1 2 3; do reserve "${p}_E" "${p}-e$i" "$i"; done
reserve "${p}_E" "${p}-e4" 4
is "$(answer)" "409 OUT_OF_STOCK" "sold out at 3"
wait_sql "SELECT used_count FROM voucher WHERE code = '${p}_E'" 3 30 >/dev/null
sql "UPDATE voucher SET total_limit = 5 WHERE code = '${p}_E'"
create "${p}_F" 10
for i in 1 2; do reserve "${p}_F" "${p}-f$i" "$i"; done
wait_sql "SELECT used_count FROM voucher WHERE code = '${p}_F'" 2 30 >/dev/null
sql "UPDATE voucher SET total_limit = 4 WHERE code = '${p}_F'"
"$bin_reconciler" --once --grace 60s --restore-delay 0s >"$scratch/rc1.txt" 2>"$scratch/rc1.log"
is "$(remaining "${p}_E")|$(rcli GET "voucher:{${p}_E}:limit")" "2|5" \
  "a total raised by hand: the reconciler adds the 2 uses (it used to leave them unsold)"
is "$(remaining "${p}_F")|$(rcli GET "voucher:{${p}_F}:limit")" "2|4" \
  "a total lowered by hand: the counter goes to the rule's bound (4 - 2 held)"
grep -q '"repair":"limit"' "$scratch/rc1.log"
ok $? "the reconciler logs the limit repair"
admin PATCH "/vouchers/${p}_E" '{"totalLimit":5}'
is "$status" 200 "the gateway's sold-out mark is cleared by a change through it"
reserve "${p}_E" "${p}-e5" 5
is "$status" 201 "a use added by hand is sold"
reserve "${p}_E" "${p}-e6" 6
is "$status" 201 "and the second"
reserve "${p}_E" "${p}-e7" 7
is "$(answer)" "409 OUT_OF_STOCK" "and no more"
"$bin_reconciler" --once --grace 60s --restore-delay 0s >"$scratch/rc2.txt" 2>"$scratch/rc2.log"
is "$(remaining "${p}_E")|$(remaining "${p}_F")" "0|2" "a second pass changes nothing"

# ---- a raise while the reconciler's snapshot is older ----
create "${p}_G" 5
for i in 1 2 3 4 5; do reserve "${p}_G" "${p}-g$i" "$i"; done
wait_sql "SELECT used_count FROM voucher WHERE code = '${p}_G'" 5 30 >/dev/null
VOUCHER_PAUSE=reconciler-after-tail VOUCHER_PAUSE_DIR=$pause_dir \
  "$bin_reconciler" --once --grace 60s --restore-delay 0s --full-every 0s >"$scratch/rc3.txt" 2>"$scratch/rc3.log" &
rc=$!
pause_wait reconciler-after-tail 30 || { echo "Bail out! the reconciler never paused"; exit 1; }
admin PATCH "/vouchers/${p}_G" '{"totalLimit":8}'
is "$status $(jq -r .remaining <<<"$body")" "200 3" "raised to 8 after the reconciler read total_limit 5"
for ((i = 0; i < 1200; i++)); do
  kill -0 "$rc" 2>/dev/null || break
  rm -f "$pause_dir"/reconciler-*
  sleep 0.05
done
wait "$rc"
is "$(remaining "${p}_G")|$(rcli GET "voucher:{${p}_G}:limit")" "3|8" \
  "the reconciler's lower, judged against the limit key, did not take the 3 new uses back"
sold=0
for i in 6 7 8; do reserve "${p}_G" "${p}-g$i" "$i"; [ "$status" = 201 ] && sold=$((sold + 1)); done
reserve "${p}_G" "${p}-g9" 9
is "$sold $(answer)" "3 409 OUT_OF_STOCK" "the 3 uses were sold, then no more"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '${p}_G'" 8 30)" 8 "PostgreSQL counts 8 of 8"

# ---- PostgreSQL refuses a lower Redis allowed (uses counted without rows) ----
create "${p}_H" 10
sql "UPDATE voucher SET used_count = 6 WHERE code = '${p}_H'"
admin PATCH "/vouchers/${p}_H" '{"totalLimit":5}'
is "$(answer)" "409 LIMIT_CONFLICT" "a lower below PostgreSQL's used_count: 409"
is "$(remaining "${p}_H")|$(rcli GET "voucher:{${p}_H}:limit")|$(sql "SELECT total_limit FROM voucher WHERE code = '${p}_H'")" \
  "10|10|10" "the uses Redis took first are given back: Redis and PostgreSQL unchanged"

# ---- a voucher whose keys went by retention sells again once its end moves later ----
admin POST /vouchers "{\"code\":\"${p}_R\",\"mode\":\"flash\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":3,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2020-01-02T00:00:00Z\"}"
is "$status $(jq -r .remaining <<<"$body") $(rcli EXISTS "voucher:{${p}_R}:remaining")" "201 null 0" \
  "created ended long ago: its keys expire at once, and the 201 says so"
admin PATCH "/vouchers/${p}_R" '{"endsAt":"2099-01-01T00:00:00Z"}'
is "$status $(jq -r .remaining <<<"$body") $(sql "SELECT redis_loaded_at IS NULL FROM voucher WHERE code = '${p}_R'")" \
  "200 null t" "moved into the future: loaded anew on first use (not 'being restored' for ever)"
reserve "${p}_R" "${p}-r1" 1
is "$status $(remaining "${p}_R")|$(rcli GET "voucher:{${p}_R}:limit")" "201 2|3" "the first reservation loads it from PostgreSQL"
admin PATCH "/vouchers/${p}_R" '{"totalLimit":1}'
reserve "${p}_R" "${p}-r2" 2
is "$(answer) $(remaining "${p}_R")" "409 OUT_OF_STOCK 0" "and a lower reaches the reloaded counter"

# ---- listing, a page at a time ----
admin GET "/vouchers?after=${p}&limit=2" ""
is "$status $(jq -c '[.vouchers[].code, .next]' <<<"$body")" "200 [\"${p}_A\",\"${p}_B\",\"${p}_B\"]" \
  "the first page: two codes in order, next names the last"
admin GET "/vouchers?after=$(jq -r .next <<<"$body")&limit=2" ""
is "$(jq -c '[.vouchers[].code]' <<<"$body")" "[\"${p}_C\",\"${p}_D\"]" "the next page starts after the cursor"
admin GET "/vouchers?active=false&after=${p}&limit=100" ""
is "$(jq -c "[.vouchers[] | select(.code | startswith(\"${p}_\")) | [.code, .active, .usedCount]]" <<<"$body")" \
  "[[\"${p}_C\",false,2],[\"${p}_K\",false,$kn]]" \
  "active=false lists the switched-off vouchers only, with their usedCount"
admin GET "/vouchers?limit=0" ""
is "$(answer)" "400 BAD_REQUEST" "limit 0: 400"
http GET "/vouchers?limit=2"
is "$(answer)" "401 UNAUTHORIZED" "listing without the admin token: 401"

# ---- one order as each store knows it (support) ----
o=$(acked "$scratch/a.tsv" | head -1)
admin GET "/vouchers/${p}_A/reservations/$o" ""
is "$status $(jq -c '[.redis.state, .postgres.status, .redis.customerId == .postgres.customerId, .redis.discountAmount, .redis.orderAmount > 0 and .redis.orderAmount == .postgres.orderAmount]' <<<"$body")" \
  "200 [\"HELD\",\"RESERVED\",true,100,true]" "a hold of the sale: HELD in Redis, RESERVED in PostgreSQL, one customer, one order amount"
wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '${p}-c2'" RELEASED 30 >/dev/null
admin GET "/vouchers/${p}_C/reservations/${p}-c1" ""
is "$(jq -c '[.redis.state, .postgres.status, .postgres.orderAmount, .postgres.confirmedOrderAmount, .postgres.confirmedDiscountAmount]' <<<"$body")" \
  '["CONFIRMED","CONFIRMED",10000,9000,100]' "a confirmed order, with the figures it was confirmed at"
admin GET "/vouchers/${p}_C/reservations/${p}-c2" ""
is "$(jq -c '[.redis.state, .postgres.status, .postgres.releaseReason]' <<<"$body")" '["RELEASED","RELEASED","CANCELLED"]' \
  "a released order, with why"
admin GET "/vouchers/${p}_C/reservations/${p}-none" ""
is "$(answer)" "404 NOT_FOUND" "an order neither store knows: 404"
http GET "/vouchers/${p}_C/reservations/${p}-c1"
is "$(answer)" "401 UNAUTHORIZED" "without the admin token: 401"

# ---- the admin view after it all ----
admin GET "/vouchers/${p}_A" ""
is "$status $(jq -c '[.totalLimit, .usedCount, .remaining, .active]' <<<"$body")" "200 [120,120,0,true]" \
  "GET shows the new total, the counters and active"
is "$(grep -c '"level":"error"' "$VOUCHER_STACK_DIR/logs/$test_name-gateway.log")" 0 "the gateway logged no error"
is "$(sql "SELECT count(*) FROM dead_letter WHERE voucher_code LIKE '${p}_%'")" 0 \
  "the writer refused no event of these sales"
