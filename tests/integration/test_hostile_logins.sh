#!/usr/bin/env bash
# Failed admin logins are limited per address (issue 42, item 8;
# deploy/README.md, "Admin logins"): an address that sent
# VOUCHER_ADMIN_LOGIN_TRIES wrong tokens gets 429 with Retry-After on the
# admin routes, whatever its token (so its right token too, until a try
# refills), counted in voucher_gateway_admin_logins_refused_total; another
# address's right token still gets 200, and a right token spends nothing.
# Before, 40 wrong tokens in a row all got 401: nothing bounded the guessing
# of an admin token but the network.
#
# The counts live in Redis (guard:{login:ADDRESS}, admin_login.lua), shared by
# every gateway: wrong tokens spread over two gateways get the tries of one,
# and a restarted gateway remembers them. Before, each gateway process counted
# in its own memory: the second gateway let 5 more through, and a restart let
# 5 more through again. When Redis does not answer, each gateway counts in its
# own memory (the fallback, gw_login.h): the limit is then per gateway, never
# off, and an admin is not locked out by the outage.
source "$(dirname "$0")/lib.sh"
plan 20

# The addresses this test sends from; their buckets are the stack's Redis's,
# emptied before and after so that a run starts full and leaves nothing.
addrs="127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5 127.0.0.6"
forget_buckets() { for a in $addrs; do rcli DEL "guard:{login:$a}" >/dev/null; done; }
forget_buckets
gw2_addr=127.0.0.1:$((VOUCHER_PORT_BASE + 26)) gw2_admin=127.0.0.1:$((VOUCHER_PORT_BASE + 27))
gw3_addr=127.0.0.1:$((VOUCHER_PORT_BASE + 28)) gw3_admin=127.0.0.1:$((VOUCHER_PORT_BASE + 29))
stop_all() { daemon_stop "$test_name-gateway2"; daemon_stop "$test_name-gateway3"; }
trap 'stop_all; forget_buckets; finish' EXIT

token=$(new_token admin)
login_flags=(--admin-login-tries 5 --admin-login-window 60s)
VOUCHER_ADMIN_TOKEN=$token start_gateway "${login_flags[@]}"
admin=$(gateway_admin)
# One admin GET to ADMIN from address FROM with TOKEN: prints the status and the Retry-After.
get_at() { # ADMIN FROM TOKEN
  curl -s -o /dev/null -D - --max-time 10 --interface "$2" -H "Authorization: Bearer $3" \
    "http://$1/vouchers?limit=1" |
    awk 'NR == 1 { s = $2 } tolower($1) == "retry-after:" { r = $2 + 0 } END { print s, r + 0 }'
}
get() { get_at "$admin" "$@"; } # FROM TOKEN, to the first gateway
# The statuses of lines on stdin, counted: "401:5 429:15 ".
tally() { cut -d' ' -f1 | sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }'; }
refused() { metric "$admin" voucher_gateway_admin_logins_refused_total; }
refused0=$(refused)
good=

# A right token, many times: nothing spent.
for i in 1 2 3 4 5 6; do good="$good $(get 127.0.0.1 "$token" | cut -d' ' -f1)"; done
is "$good" " 200 200 200 200 200 200" "a right token 6 times (above the 5 tries): 200 each"

# 40 wrong tokens from 127.0.0.1: 5 get 401, the rest 429.
statuses=$(for i in $(seq 1 40); do get 127.0.0.1 "$(new_token wrong)"; done | tally)
diag "40 wrong tokens from one address: $statuses"
is "$statuses" "401:5 429:35 " "40 wrong tokens from one address: 5 get 401, then 429"
last=$(get 127.0.0.1 "$(new_token wrong)")
ok "$([ "${last% *}" = 429 ] && [ "${last#* }" -ge 1 ] && [ "${last#* }" -le 12 ]; echo $?)" \
  "the 429 says when a try refills (Retry-After ${last#* } s: 60 s / 5 tries at most)"
is "$(get 127.0.0.1 "$token" | cut -d' ' -f1)" 429 \
  "the address's right token waits too (it would tell a guess right from wrong)"
is "$(get 127.0.0.2 "$token" | cut -d' ' -f1)" 200 "a right token from another address: 200"
is "$(get 127.0.0.2 "$(new_token wrong)" | cut -d' ' -f1)" 401 \
  "a wrong token from another address: 401 (its own bucket)"
is "$(($(refused) - refused0))" 37 "voucher_gateway_admin_logins_refused_total counts the 37 429s"
# The probes are not admin routes: an address out of tries still reads them.
is "$(curl -s -o /dev/null -w '%{http_code}' --interface 127.0.0.1 "http://$admin/healthz")" 200 \
  "the locked address still gets /healthz (no token asked)"

# --- Two gateways on one Redis: wrong tokens spread over both get the tries of one.
VOUCHER_ADMIN_TOKEN=$token daemon_start "$test_name-gateway2" "$bin_gateway" \
  --http-addr "$gw2_addr" --admin-addr "$gw2_admin" "${login_flags[@]}"
wait_http_ok "http://$gw2_admin/healthz" 30 ||
  { echo "Bail out! the second gateway did not start"; exit 1; }
statuses=$(for i in $(seq 1 10); do
  get_at "$admin" 127.0.0.3 "$(new_token wrong)"
  get_at "$gw2_admin" 127.0.0.3 "$(new_token wrong)"
done | tally)
diag "20 wrong tokens from one address, every other one to the second gateway: $statuses"
is "$statuses" "401:5 429:15 " \
  "20 wrong tokens over two gateways: 5 get 401 in all, as on one gateway (shared in Redis)"
is "$(get_at "$gw2_admin" 127.0.0.3 "$token" | cut -d' ' -f1)" 429 \
  "the address's right token waits on the second gateway too"

# Sent together, 10 to each gateway: each wrong token takes its try in the
# step that checks for it, so no more pass than the tries, at any concurrency.
statuses=$(for i in $(seq 1 10); do
  get_at "$admin" 127.0.0.6 "$(new_token wrong)" &
  get_at "$gw2_admin" 127.0.0.6 "$(new_token wrong)" &
done | tally) # the pipe's end waits for every curl (a bare wait would wait for the daemons)
diag "20 wrong tokens at once from one address over two gateways: $statuses"
is "$statuses" "401:5 429:15 " "20 wrong tokens at once over two gateways: 5 get 401"

# --- A restarted gateway does not forget: the count is Redis's, not the process's.
daemon_stop "$test_name-gateway"
VOUCHER_ADMIN_TOKEN=$token start_gateway "${login_flags[@]}"
is "$(get 127.0.0.3 "$(new_token wrong)" | cut -d' ' -f1)" 429 \
  "a wrong token from the address after the first gateway's restart: still 429"
is "$(get 127.0.0.2 "$token" | cut -d' ' -f1)" 200 \
  "a right token from another address after the restart: 200"

# --- Redis late (paused past the gateway's timeout, VOUCHER_REDIS_TIMEOUT 500 ms): the
# gateway decides from its own count at the timeout, without waiting for Redis.
fallback0=$(metric "$admin" voucher_gateway_admin_login_fallback_total)
rcli CLIENT PAUSE 2000 ALL >/dev/null
is "$(get 127.0.0.5 "$(new_token wrong)" | cut -d' ' -f1)" 401 \
  "Redis late: a wrong token from a fresh address gets 401 (the gateway's own count)"
rcli PING >/dev/null # waits behind the pause: Redis answers again
is "$(($(metric "$admin" voucher_gateway_admin_login_fallback_total) - ${fallback0:-0}))" 1 \
  "Redis late: voucher_gateway_admin_login_fallback_total counts it"

# --- Redis unreachable (a gateway whose Redis port is closed): each gateway
# counts in its own memory, the limit per gateway, and a right token still
# works: the admin routes stay open to operators during an outage.
gw3_log=$VOUCHER_STACK_DIR/logs/$test_name-gateway3.log
gw3_log_from=$(($( (cat "$gw3_log" 2>/dev/null || true) | wc -l) + 1)) # this run's lines only
VOUCHER_ADMIN_TOKEN=$token VOUCHER_REDIS_URL=redis://127.0.0.1:$((VOUCHER_PORT_BASE + 19)) \
  daemon_start "$test_name-gateway3" "$bin_gateway" --http-addr "$gw3_addr" \
  --admin-addr "$gw3_admin" "${login_flags[@]}"
wait_http_ok "http://$gw3_admin/healthz" 30 ||
  { echo "Bail out! the third gateway did not start"; exit 1; }
statuses=$(for i in $(seq 1 8); do get_at "$gw3_admin" 127.0.0.4 "$(new_token wrong)"; done | tally)
diag "8 wrong tokens from one address to a gateway without Redis: $statuses"
is "$statuses" "401:5 429:3 " \
  "Redis unreachable: 8 wrong tokens get 401 5 times, then 429 (the gateway's own count)"
is "$(get_at "$gw3_admin" 127.0.0.5 "$token" | cut -d' ' -f1)" 200 \
  "Redis unreachable: a right token from another address gets 200"
fallback=$(metric "$gw3_admin" voucher_gateway_admin_login_fallback_total)
ok "$([ "${fallback:-0}" -ge 9 ]; echo $?)" \
  "voucher_gateway_admin_login_fallback_total counts the requests decided alone (${fallback:-0})"
status=$(curl -s -o /dev/null -w '%{http_code}' --interface 127.0.0.4 "http://$gw3_admin/metrics")
is "$status" 200 \
  "Redis unreachable: the locked address still reads /metrics (no token asked)"
ok "$(tail -n +"$gw3_log_from" "$gw3_log" |
  grep -q 'admin logins: redis did not run the admin-login script'; echo $?)" \
  "the gateway says in its log that it counts admin logins alone"
finish
