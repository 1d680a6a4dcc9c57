#!/usr/bin/env bash
# A campaign's code taken by someone else answers 409 ALREADY_USED, which tells
# a stranger that the code exists: it costs a failed try of the guessing limits
# as an unknown code's 404 does (proto/campaigns.md, "Guessing limits"), on
# reservations and quotes alike. The owner's retry costs nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/campaign_lib.sh"
plan 7

# Here the status and the error alone (campaign_lib.sh's answer adds a reservation's status).
answer() { echo "$status $(jq -r '.error // empty' <<<"$body" 2>/dev/null)"; }
quote() { http POST "/vouchers/$1/quote" "{\"customerId\":$2,\"orderAmount\":10000}"; }

campaign_test QG '"name":"guess","count":2,"discountAmount":500' \
  --threads 1 --guard-customer-tries 3 --guard-customer-window 1h --guard-ip-tries 0
is "$status" 201 "a campaign of two codes"
c1=$(code 1)
owner=$((base + 1)) stranger=$((base + 2))

reserve "$c1" "$owner" "$c1-o1"
is "$(answer)" "201 " "the owner takes code 1"
reserve "$c1" "$owner" "$c1-o1"
is "$(answer)" "201 " "the owner's retry: 201 again, no try spent"
reserve "$c1" "$stranger" "$c1-s1"
quote "$c1" "$stranger"
first=$(answer)
reserve "$c1" "$stranger" "$c1-s2"
is "$first | $(answer)" "409 ALREADY_USED | 409 ALREADY_USED" "a stranger on the taken code: 409 ALREADY_USED (reservation, quote, reservation)"
reserve "$c1" "$stranger" "$c1-s3"
is "$(answer)" "429 TOO_MANY_ATTEMPTS" "after three, the stranger's fourth try is refused before any lookup"
reserve "$c1" "$owner" "$c1-o1"
is "$(answer)" "201 " "the owner's retry still gets its 201"
quote "$(code 2)" "$((base + 3))"
is "$status" 200 "another customer quotes code 2"
finish
