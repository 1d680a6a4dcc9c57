#!/usr/bin/env bash
# The per-address guessing bucket and an honest order service (issue 42;
# deploy/README.md "Guessing limits", proto/campaigns.md): since a try is
# taken before the lookup, one address's requests in flight beyond its tries
# get 429. An order service that calls from one address for all its shoppers
# would then be refused in a flash sale, so a request from a trusted proxy
# (VOUCHER_TRUSTED_PROXIES) that names no client (no X-Forwarded-For) gets no
# address bucket: the customer's bucket still applies, the request is counted
# in voucher_gateway_guard_unnamed_total, and the gateway says so once in its
# log. An address that is not a trusted proxy keeps its bucket: its requests
# in flight beyond its tries get 429, the bound on its guesses at any
# concurrency (its tries plus 1 per gateway). Before: 100 honest reservations
# at once from the trusted order service got 429 beyond the bucket's 8.
source "$(dirname "$0")/lib.sh"
plan 8

start_gateway --trusted-proxies 127.0.0.1/32 --guard-customer-tries 5 --guard-customer-window 1h \
  --guard-ip-tries 8 --guard-ip-window 1h
gateway_log=$VOUCHER_STACK_DIR/logs/$test_name-gateway.log
log_from=$(wc -l <"$gateway_log")
real=$(unique_code PROXY)
new_voucher "$real" 100000 100000 >/dev/null
guessers() { python3 "$VOUCHER_SOURCE_DIR/tests/integration/hostile_guess.py" "$@"; }
unnamed() { metric "$(gateway_admin)" voucher_gateway_guard_unnamed_total; }
# An address of the loopback of this run's own, for the untrusted shoppers.
untrusted=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
unnamed0=$(unnamed)

# --- 100 shoppers' reservations at once through the order service, which the
# gateway trusts and which sends no X-Forwarded-For.
out=$(guessers "$VOUCHER_HTTP_ADDR" 127.0.0.1 100 "$real" 0 honest)
diag "100 honest reservations at once from the trusted order service: $out"
is "$out" "201:100" "100 at once from a trusted proxy that names no client: 201 each, no 429"
is "$(($(unnamed) - unnamed0))" 100 "voucher_gateway_guard_unnamed_total counts the 100"
is "$(tail -n +"$((log_from + 1))" "$gateway_log" | grep -c 'names no client')" 1 \
  "the gateway says so in its log, once"

# --- The same from an address that is no trusted proxy: its bucket (8) applies.
out=$(guessers "$VOUCHER_HTTP_ADDR" "$untrusted" 100 "$real" 0 honest)
diag "100 honest reservations at once from the untrusted $untrusted (bucket 8): $out"
n201=$(sed -n 's/.*201:\([0-9]*\).*/\1/p' <<<"$out")
n429=$(sed -n 's/.*429:\([0-9]*\).*/\1/p' <<<"$out")
ok "$([ "${n429:-0}" -ge 1 ] && [ $((${n201:-0} + ${n429:-0})) -eq 100 ]; echo $?)" \
  "100 at once from an untrusted address: some 429 (${n429:-0}), the rest 201"
out=$(guessers "$VOUCHER_HTTP_ADDR" "$untrusted" 100 "$(unique_code NOPE)" 0)
diag "100 guesses at once from $untrusted: $out"
n404=$(sed -n 's/.*404:\([0-9]*\).*/\1/p' <<<"$out")
ok "$([ "${n404:-0}" -le 9 ]; echo $?)" \
  "100 guesses at once from it: at most its 8 tries plus 1 get 404 (${n404:-0})"

# --- The customer's bucket still applies to the trusted proxy's requests.
customer=$((RANDOM * 1000 + 7))
codes=""
for i in 1 2 3 4 5 6; do
  http POST "/vouchers/$(unique_code NOPE)/reservations" \
    "{\"customerId\":$customer,\"orderId\":\"px-$customer-$i\",\"orderAmount\":1000}"
  codes="$codes $status"
done
is "$codes" " 404 404 404 404 404 429" \
  "one customer's 6 unknown codes through the order service: the 6th gets 429 (its bucket of 5)"
guesses=$(guessers "$VOUCHER_HTTP_ADDR" 127.0.0.1 50 "$(unique_code NOPE)" 0)
is "$guesses" "404:50" \
  "50 customers' unknown codes at once through it: 404 each (each customer's bucket, not the address's)"
is "$(($(unnamed) - unnamed0))" 156 "and all of them counted as naming no client (100 + 6 + 50)"
# A red run (the rule off) spent the stack's 127.0.0.1 bucket with those 56
# failures, and the next tests' gateways trust or see 127.0.0.1 too: give it
# back whole (deleting a bucket refills it; deploy/README.md).
rcli DEL 'guard:{ip:v:127.0.0.1}' >/dev/null
finish
