#!/usr/bin/env bash
# Guessing limits (issue 16, seeds decision 5, proto/openapi.yaml "Guessing
# limits"), through real HTTP on the real stack:
# - a customer's 6th failed try (unknown code) within the window gets 429
#   TOO_MANY_ATTEMPTS with Retry-After, also for a real code (nothing is looked
#   up once the bucket is empty);
# - a success between failures spends nothing; a correct code after a few
#   typos still works;
# - another customer behind the same IP is not blocked by one guesser's
#   customer bucket, until the IP's own (larger) bucket empties; another IP
#   behind the same proxy still works;
# - quote spends like a reservation (one bucket for both);
# - two gateways share the buckets (Redis); a forged X-Forwarded-For from an
#   untrusted peer is ignored;
# - a bucket refills (a short window; polled, bounded by the configured time);
# - confirm and DELETE: an unknown code and a real code's unknown orderId get
#   the same answer, and their 404s spend the IP bucket while the routes are
#   open (no VOUCHER_API_TOKEN);
# - the refusals are counted by bucket kind.
# Client addresses are made up per run (198.18.0.0/15) and sent in
# X-Forwarded-For through a gateway that trusts 127.0.0.1, so that the
# stack's own 127.0.0.1 bucket is not emptied for the other tests.
source "$(dirname "$0")/lib.sh"
plan 41

gw2_addr=127.0.0.1:$((VOUCHER_PORT_BASE + 20))
gw3_addr=127.0.0.1:$((VOUCHER_PORT_BASE + 21)) gw3_admin=127.0.0.1:$((VOUCHER_PORT_BASE + 22))
# /metrics is on the gateway's admin address where the tree has one (lib.sh's
# gateway_admin), else on the API's; the second gateway then needs its admin
# address off.
if declare -F gateway_admin >/dev/null; then
  metrics_addr=$(gateway_admin) gw2_extra=(--admin-addr "")
else
  metrics_addr=$VOUCHER_HTTP_ADDR gw2_extra=()
fi
trap 'daemon_stop "$test_name-gateway2"; daemon_stop "$test_name-gateway3"; finish' EXIT

unset VOUCHER_API_TOKEN
# One worker: a failed try is spent just after its answer goes out (gw_guard.h);
# on one worker the next request's check is queued behind that spend on the same
# Redis connection, so "the 6th gets 429" is exact. With several workers the 6th
# of a sequence this tight may pass and the 7th pays the debt (the long-run rate
# holds either way).
export VOUCHER_GATEWAY_THREADS=1
start_gateway --trusted-proxies 127.0.0.1/32 --guard-customer-tries 5 --guard-customer-window 1h \
  --guard-ip-tries 8 --guard-ip-window 1h
start_writer

p=$(unique_code GUARD)
real=${p}_REAL
new_voucher "$real" 100000 100000
rnd() { od -An -N2 -tu2 /dev/urandom | tr -d ' '; }
ip() { echo "198.$((18 + $(rnd) % 2)).$(($(rnd) % 256)).$(($(rnd) % 254 + 1))"; }
ip1=$(ip) ip2=$(ip) ip3=$(ip) ip4=$(ip) ip5=$(ip) ip7=$(ip)
base_customer=$(($(rnd) * 1000 + 1000000))
c1=$((base_customer + 1)) c2=$((base_customer + 2)) c3=$((base_customer + 3))
c4=$((base_customer + 4)) c5=$((base_customer + 5)) c6=$((base_customer + 6))
c7=$((base_customer + 7)) c8=$((base_customer + 8)) c9=$((base_customer + 9))
n=0

# try URL_BASE IP CUSTOMER CODE: a reservation; sets $status, $body, $headers.
try() {
  n=$((n + 1))
  local saved=$base_url
  base_url=$1
  http POST "/vouchers/$4/reservations" \
    '{"customerId":'"$3"',"orderId":"'"$p-$n"'","orderAmount":1000}' -H "X-Forwarded-For: $2"
  base_url=$saved
}
guess() { try "$base_url" "$1" "$2" "${p}_NO$n"; }
real_try() { try "$base_url" "$1" "$2" "$real"; }
quote() {
  http POST "/vouchers/$3/quote" '{"customerId":'"$2"',"orderAmount":1000}' -H "X-Forwarded-For: $1"
}
retry_after() { awk -F': ' 'tolower($1) == "retry-after" {print $2}' <<<"$headers"; }
statuses() { # N CMD...: runs CMD N times, prints the statuses
  local i out=
  for ((i = 0; i < $1; i++)); do "${@:2}"; out+="$status "; done
  echo "${out% }"
}

# --- One customer's bucket.
is "$(statuses 5 guess "$ip1" "$c1")" "404 404 404 404 404" "five failed tries of one customer: 404 each"
guess "$ip1" "$c1"
is "$status $(jq -r .error <<<"$body")" "429 TOO_MANY_ATTEMPTS" "the sixth within the hour: 429 TOO_MANY_ATTEMPTS"
ra=$(retry_after)
ok "$([ -n "$ra" ] && [ "$ra" -ge 1 ] && [ "$ra" -le 720 ]; echo $?)" \
  "Retry-After says when the next try comes (1..720 s for 5 an hour): '$ra'"
real_try "$ip1" "$c1"
is "$status" 429 "with the bucket empty even a real code gets 429: nothing is looked up"

# --- A success spends nothing; a correct code after typos works.
is "$(statuses 4 guess "$ip2" "$c2")" "404 404 404 404" "four typos of another customer: 404"
real_try "$ip2" "$c2"
is "$status" 201 "the correct code after four typos is reserved"
held_order=$p-$n
quote "$ip2" "$c2" "$real"
is "$status" 200 "and quoted"
guess "$ip2" "$c2"
is "$status" 404 "the fifth typo after the successes still gets 404: the successes spent nothing"
guess "$ip2" "$c2"
is "$status" 429 "the sixth failure gets 429"

# --- Another customer behind the guesser's IP (5 of its 8 spent by c1).
guess "$ip1" "$c3"
is "$status" 404 "another customer on the guesser's IP is not blocked by the guesser's bucket"
real_try "$ip1" "$c3"
is "$status" 201 "and reserves a real code"
is "$(statuses 2 guess "$ip1" "$c4")" "404 404" "failures of a third customer on that IP spend the IP's last tries"
guess "$ip1" "$c5"
is "$status" 429 "the IP's bucket empty (8 failures from 3 accounts): a fresh account on it gets 429"
real_try "$ip1" "$c5"
is "$status" 429 "even with a real code"
real_try "$ip4" "$c5"
is "$status" 201 "the same account from another address behind the trusted proxy works"

# --- Honest requests in flight together from the trusted proxy (the order
# service calling for its shoppers without X-Forwarded-For): it names no
# client, so it has no address bucket (its shoppers' customer buckets still
# apply) and 40 at once all get 201. From an untrusted address each takes a
# try before its lookup and those beyond the bucket's 8 (plus one from
# memory) get 429: test_hostile_proxy.
"$bin_load" --code "$real" --attempts 40 --connections 40 --customers 40 \
  --customer-base "$((base_customer + 100))" --order-prefix "$p-burst" --out "$scratch/burst.tsv" >/dev/null
burst_201=$(awk -F'\t' '$4 == "201"' "$scratch/burst.tsv" | wc -l)
burst_429=$(awk -F'\t' '$4 == "429"' "$scratch/burst.tsv" | wc -l)
diag "40 honest reservations at once from the trusted proxy, no X-Forwarded-For: $burst_201 201, $burst_429 429"
is "$burst_201" 40 "40 reservations at once from the trusted proxy naming no client: 201 each"
"$bin_load" --code "$real" --attempts 12 --connections 1 --customers 12 \
  --customer-base "$((base_customer + 200))" --order-prefix "$p-after" --out "$scratch/after.tsv" >/dev/null
is "$(awk -F'\t' '$4 == "201"' "$scratch/after.tsv" | wc -l)" 12 \
  "12 more from it, one at a time: all 201"

# --- quote spends like a reservation, from the same bucket.
is "$(statuses 5 quote "$ip3" "$c6" "${p}_QUOTE_NO")" "404 404 404 404 404" "five quotes of unknown codes: 404"
quote "$ip3" "$c6" "${p}_QUOTE_NO"
is "$status" 429 "the sixth quote of an unknown code: 429"
guess "$ip3" "$c6"
is "$status" 429 "and a reservation of that customer: one bucket for quote and reservation"

# --- Two gateways share the buckets; an untrusted peer's X-Forwarded-For is ignored.
daemon_start "$test_name-gateway2" "$bin_gateway" --http-addr "$gw2_addr" "${gw2_extra[@]}" \
  --guard-customer-tries 5 --guard-customer-window 1h --guard-ip-tries 8 --guard-ip-window 1h
wait_http_ok "http://$gw2_addr/healthz" 30 || { echo "Bail out! the second gateway did not start"; exit 1; }
try "http://$gw2_addr" "$ip4" "$c1" "$real"
is "$status" 429 "the second gateway refuses the customer the first one emptied"
try "http://$gw2_addr" "$ip1" "$c7" "$real"
is "$status" 201 "a forged X-Forwarded-For naming an empty IP bucket, from an untrusted peer: ignored"

# --- A gateway answers a check from memory after a try was found there
# (gw_guard.h, the check cache) and forgets it at its own first failure: a
# guesser who primed it, then emptied the bucket on another gateway, gets at
# most the tries in flight (here one) past the empty bucket, and that one is
# spent (the bucket owes it).
daemon_start "$test_name-gateway3" "$bin_gateway" --http-addr "$gw3_addr" --admin-addr "$gw3_admin" \
  --trusted-proxies 127.0.0.1/32 --guard-customer-tries 5 --guard-customer-window 1h \
  --guard-ip-tries 8 --guard-ip-window 1h
wait_http_ok "http://$gw3_addr/healthz" 30 || { echo "Bail out! the third gateway did not start"; exit 1; }
try "http://$gw3_addr" "$ip7" "$c9" "$real"
is "$status" 201 "a success on the third gateway (it now remembers a try in both buckets)"
statuses 5 guess "$ip7" "$c9" >/dev/null
guess "$ip7" "$c9"
memory_before=$(curl -s "http://$gw3_admin/metrics" | awk '/^voucher_gateway_guard_checks_total\{source="memory"\}/ { print $2 }')
stale=
for i in 1 2 3 4; do try "http://$gw3_addr" "$ip7" "$c9" "${p}_NO3$i"; stale+="$status "; done
memory_after=$(curl -s "http://$gw3_admin/metrics" | awk '/^voucher_gateway_guard_checks_total\{source="memory"\}/ { print $2 }')
passed=$(grep -o 404 <<<"$stale" | wc -l)
level=$(rcli HGET "guard:{cu:v:$c9}" level)
ok "$([ "$status" = 429 ] && [ "$passed" -le 1 ] && { [ "$passed" = 0 ] || [ "${level:-0}" -lt 0 ]; }; echo $?)" \
  "emptied on the first gateway, the third lets at most one try past it, spent: $stale(level $level)"
ok "$([ "${memory_after:-0}" -gt "${memory_before:-0}" ] || [ "$passed" = 0 ]; echo $?)" \
  "that try passed from memory (checks from memory $memory_before -> $memory_after)"
try "http://$gw3_addr" "$ip7" "$c9" "$real"
is "$status" 429 "and a real code of that customer is refused there too"

# --- Confirm and DELETE: one answer for an unknown code and a real code's unknown orderId.
http POST "/vouchers/${p}_NONE/reservations/$p-never/confirm" '{"orderAmount":1000}' -H "X-Forwarded-For: $ip5"
unknown_code="$status $body"
http POST "/vouchers/$real/reservations/$p-never/confirm" '{"orderAmount":1000}' -H "X-Forwarded-For: $ip5"
is "$unknown_code" "$status $body" "confirm with a total: an unknown code answers as a real code's unknown orderId"
http DELETE "/vouchers/${p}_NONE/reservations/$p-never" "" -H "X-Forwarded-For: $ip5"
unknown_code="$status $body"
http DELETE "/vouchers/$real/reservations/$p-never" "" -H "X-Forwarded-For: $ip5"
is "$unknown_code" "$status $body" "DELETE: an unknown code answers as a real code's unknown orderId"
ok "$([ "$status" = 404 ]; echo $?)" "both 404 ($status)"
cancel_ip5() { http DELETE "/vouchers/$real/reservations/$p-guess$RANDOM" "" -H "X-Forwarded-For: $ip5"; }
is "$(statuses 4 cancel_ip5)" "404 404 404 404" "guessed orderIds 5-8 from one address: 404"
cancel_ip5
is "$status" 429 "the 9th guessed orderId from that address (no API token): 429"
http DELETE "/vouchers/$real/reservations/$held_order" "" -H "X-Forwarded-For: $ip5"
is "$status" 429 "a held order's DELETE from that address: 429, the order is not looked up"
http POST "/vouchers/$real/reservations/$held_order/confirm" "" -H "X-Forwarded-For: $ip2"
is "$status" 200 "and the order is still held: its confirm from another address succeeds"

# --- The refusals counted by bucket kind, with no per-IP or per-customer label.
customer_refused=$(metric "$metrics_addr" 'voucher_gateway_guard_refused_total{bucket="customer"}')
ip_refused=$(metric "$metrics_addr" 'voucher_gateway_guard_refused_total{bucket="ip"}')
ok "$([ "${customer_refused:-0}" -ge 4 ] && [ "${ip_refused:-0}" -ge 3 ]; echo $?)" \
  "refusals counted: customer $customer_refused, ip $ip_refused"
ok "$(curl -s "http://$metrics_addr/metrics" | grep '^voucher_gateway_guard' | grep -qE "$ip1|$c1"; [ $? -ne 0 ]; echo $?)" \
  "no metric names an address or a customer"
is "$(metric "$metrics_addr" 'voucher_gateway_requests_total{route="reserve",status="429"}' | grep -c .)" 1 \
  "429 has its own series in the requests metric"

# --- Refill: 2 tries per 4 s, one back every 2 s; no lockout.
daemon_stop "$test_name-gateway2"
daemon_stop "$test_name-gateway"
start_gateway --trusted-proxies 127.0.0.1/32 --guard-customer-tries 2 --guard-customer-window 4s \
  --guard-ip-tries 8 --guard-ip-window 1h
ip6=$(ip)
is "$(statuses 2 guess "$ip6" "$c8")" "404 404" "two tries per 4 s: two failures"
guess "$ip6" "$c8"
ra=$(retry_after)
is "$status $ra" "429 2" "the third gets 429, Retry-After 2 (one try's refill time, in whole seconds)"
start=$(date +%s%N)
# Poll (each 429 spends nothing) for at most the window plus a margin.
for ((i = 0; i < 60; i++)); do
  real_try "$ip6" "$c8"
  [ "$status" != 429 ] && break
  sleep 0.1
done
waited=$((($(date +%s%N) - start) / 1000000))
is "$status" 201 "the bucket refilled: the customer reserves again (after $waited ms; Retry-After was $ra)"
ok "$([ "$waited" -ge 1000 ] && [ "$waited" -le 6000 ]; echo $?)" \
  "it came back after about one try's refill time (2 s): $waited ms"

# --- With VOUCHER_API_TOKEN only the order service reaches confirm and DELETE,
# and it knows its orderIds: they are not limited (the address above is empty).
daemon_stop "$test_name-gateway"
token=$(new_token tok)
VOUCHER_API_TOKEN=$token start_gateway --trusted-proxies 127.0.0.1/32 --guard-customer-tries 5 --guard-ip-tries 8
http DELETE "/vouchers/$real/reservations/$p-guess-token" "" -H "X-Forwarded-For: $ip5" -H "Authorization: Bearer $token"
is "$status" 404 "with an API token, DELETE from the emptied address is answered (404), not limited"
