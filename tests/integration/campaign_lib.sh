# Shared by the campaign redemption tests (sourced after lib.sh): a gateway
# with an admin token and a writer, a campaign made through the API, and a
# reservation on the voucher routes.

# start_campaign_stack [GATEWAY ARGS...]: sets $token and $base (customer and order ids apart
# from other runs).
start_campaign_stack() {
  token=admin-$RANDOM$RANDOM
  export VOUCHER_ADMIN_TOKEN=$token
  start_gateway "$@"
  unset VOUCHER_ADMIN_TOKEN
  start_writer
  base=$(( (RANDOM * 32768 + RANDOM) * 1000 ))
}

# new_campaign PREFIX2 JSON-FIELDS: a campaign in its window with a prefix of PREFIX2 then 5
# random symbols; sets $status, $body, $pfx and $cid.
new_campaign() {
  pfx=$1$(head -c 64 /dev/urandom | tr -dc '2-9A-HJ-NP-Z' | head -c 5)
  http POST /campaigns "{\"prefix\":\"$pfx\",$2,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"}" \
    -H "Authorization: Bearer $token"
  cid=$(jq -r .id <<<"$body")
}

# code N: the campaign's N-th code (stored form).
code() { sql "SELECT code FROM campaign_code WHERE campaign_id = $cid AND seq = $1"; }

reserve() { # CODE CUSTOMER ORDER
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":10000}"
}
