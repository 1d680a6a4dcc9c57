#!/usr/bin/env bash
# Failed admin logins are limited per address (issue 42, item 8;
# deploy/README.md, "Admin logins"): an address that sent
# VOUCHER_ADMIN_LOGIN_TRIES wrong tokens gets 429 with Retry-After on the
# admin routes, before its token is looked at (so its right token too, until
# a try refills), counted in voucher_gateway_admin_logins_refused_total;
# another address's right token still gets 200, and a right token spends
# nothing. Before, 40 wrong tokens in a row all got 401: nothing bounded the
# guessing of an admin token but the network.
source "$(dirname "$0")/lib.sh"
plan 8

token=$(new_token admin)
VOUCHER_ADMIN_TOKEN=$token start_gateway --admin-login-tries 5 --admin-login-window 60s
admin=$(gateway_admin)
# One admin GET from address FROM with TOKEN: prints the status and the Retry-After.
get() { # FROM TOKEN
  curl -s -o /dev/null -D - --interface "$1" -H "Authorization: Bearer $2" \
    "http://$admin/vouchers?limit=1" |
    awk 'NR == 1 { s = $2 } tolower($1) == "retry-after:" { r = $2 + 0 } END { print s, r + 0 }'
}
refused() { metric "$admin" voucher_gateway_admin_logins_refused_total; }
refused0=$(refused)
good=

# A right token, many times: nothing spent.
for i in 1 2 3 4 5 6; do good="$good $(get 127.0.0.1 "$token" | cut -d' ' -f1)"; done
is "$good" " 200 200 200 200 200 200" "a right token 6 times (above the 5 tries): 200 each"

# 40 wrong tokens from 127.0.0.1: 5 get 401, the rest 429.
statuses=$(for i in $(seq 1 40); do get 127.0.0.1 "$(new_token wrong)" | cut -d' ' -f1; done |
  sort | uniq -c | awk '{ printf "%s:%s ", $2, $1 }')
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
finish
