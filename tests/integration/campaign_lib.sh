# Shared by the campaign redemption tests (sourced after lib.sh): a gateway
# with an admin token and a writer, a campaign made through the API, and a
# reservation on the voucher routes.

# $base: customer and order ids apart from other runs.
base=$(( (RANDOM * 32768 + RANDOM) * 1000 ))

# new_campaign PREFIX2 JSON-FIELDS: a campaign in its window with a prefix of PREFIX2 then 5
# random symbols; sets $status, $body, $pfx and $cid.
new_campaign() {
  pfx=$1$(random_symbols 5)
  http POST /campaigns "{\"prefix\":\"$pfx\",$2,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"}" \
    -H "Authorization: Bearer $token"
  cid=$(jq -r .id <<<"$body")
}

# code N: the campaign's N-th code (stored form).
code() { sql "SELECT code FROM campaign_code WHERE campaign_id = $cid AND seq = $1"; }

# start_campaign_stack [GATEWAY ARGS...]: the gateway with the admin token $token, and the
# writer.
start_campaign_stack() {
  token=$(new_token admin)
  export VOUCHER_ADMIN_TOKEN=$token
  start_gateway "$@"
  unset VOUCHER_ADMIN_TOKEN
  start_writer
}

# campaign_test PREFIX2 JSON-FIELDS [GATEWAY ARGS...]: how a redemption test starts: the
# daemons (start_campaign_stack), a campaign made through the API (new_campaign; no
# campaign, no test: it bails out), $k the prefix of its Redis keys and $o an orderId
# prefix apart from other runs (PREFIX2 in lower case, then $base).
campaign_test() {
  local pfx2=$1 fields=$2
  shift 2
  start_campaign_stack "$@"
  new_campaign "$pfx2" "$fields"
  if [ "$status" != 201 ]; then
    echo "Bail out! the campaign was not made: $status $body"
    exit 1
  fi
  k="campaign:{c$cid}"
  o=${pfx2,,}$base
}

# campaign_codes NAME...: sets the first NAME to the campaign's code 1, the next to code 2...
campaign_codes() {
  local i=0 name
  for name in "$@"; do
    i=$((i + 1))
    printf -v "$name" %s "$(code "$i")"
  done
}

reserve() { # CODE CUSTOMER ORDER
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":10000}"
}
