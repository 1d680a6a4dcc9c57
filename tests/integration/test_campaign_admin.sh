#!/usr/bin/env bash
# One-time code campaigns through the gateway's admin API (proto/campaigns.md):
# bad input refused with 400 or 422 and nothing written, a small campaign made
# in the request (201), a large one in the background (202, progress seen
# between batches with a pause point), the chunked CSV export equal to the
# database, deactivation, a client that leaves in the middle of an export, and
# two creations with overlapping prefixes racing (one wins, one gets 422).
source "$(dirname "$0")/lib.sh"
plan 47

token=$(new_token admin)
export VOUCHER_ADMIN_TOKEN=$token VOUCHER_PAUSE=campaign-after-batch VOUCHER_PAUSE_DIR=$pause_dir
start_gateway
unset VOUCHER_ADMIN_TOKEN VOUCHER_PAUSE VOUCHER_PAUSE_DIR

admin() { http "$@" -H "Authorization: Bearer $token"; }
answer() { echo "$status $(jq -r '.error // .state // empty' <<<"$body" 2>/dev/null)"; }
window='"startsAt":"2020-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z"'
# A prefix of safe32 unique to this run: QA then 5 random symbols.
pfx=QA$(random_symbols 5)
campaigns() { sql "SELECT count(*) FROM campaign"; }
codes() { sql "SELECT count(*) FROM campaign_code"; }
# The CSV of campaign $1 as the database has it, in the export's order, separators dropped.
db_csv() { sql "SELECT code || ',' || coalesce(customer_id::text, '') FROM campaign_code WHERE campaign_id = $1 ORDER BY seq"; }
export_csv() { # ID: sets $status; $got is the export without its header line and dashes
  status=$(curl -s -D "$scratch/export.h" -o "$scratch/export.csv" -w '%{http_code}' --max-time 60 \
    -H "Authorization: Bearer $token" "$admin_url/campaigns/$1/codes")
  got=$(tail -n +2 "$scratch/export.csv" | tr -d '-')
}

# ---- refused, and nothing written ----
before_c=$(campaigns) before_k=$(codes)
http POST /campaigns "{\"name\":\"x\",\"count\":10,\"discountAmount\":2000,$window}"
is "$(answer)" "401 UNAUTHORIZED" "POST /campaigns without the admin token: 401"
admin POST /campaigns '{"name":"x","count":'
is "$(answer)" "400 BAD_REQUEST" "malformed JSON: 400"
admin POST /campaigns "{\"name\":\"x\",\"count\":\"ten\",\"discountAmount\":2000,$window}"
is "$(answer)" "400 BAD_REQUEST" "count of the wrong type: 400"
admin POST /campaigns "{\"name\":\"x\",\"count\":10,\"colour\":1,\"discountAmount\":2000,$window}"
is "$(answer)" "400 BAD_REQUEST" "an unknown field: 400"
admin POST /campaigns "{\"name\":\"x\",\"count\":0,\"discountAmount\":2000,$window}"
is "$(answer)" "422 UNPROCESSABLE" "count 0: 422"
grep -q 'count' <<<"$(jq -r .detail <<<"$body")"; ok $? "the reason names the count: $(jq -r .detail <<<"$body")"
admin POST /campaigns "{\"name\":\"x\",\"count\":10000001,\"discountAmount\":2000,$window}"
is "$(answer)" "422 UNPROCESSABLE" "count above the documented maximum (10,000,000): 422"
admin POST /campaigns "{\"name\":\"x\",\"count\":10,\"alphabet\":\"base64\",\"discountAmount\":2000,$window}"
is "$(answer)" "422 UNPROCESSABLE" "an unknown alphabet: 422"
grep -q 'alphabet' <<<"$(jq -r .detail <<<"$body")"; ok $? "the reason names the alphabet: $(jq -r .detail <<<"$body")"
admin POST /campaigns "{\"name\":\"x\",\"count\":1000000,\"length\":8,\"discountAmount\":2000,$window}"
is "$(answer)" "422 UNPROCESSABLE" "length 8 for a million codes: 422"
grep -q 'too short.*at least 10' <<<"$(jq -r .detail <<<"$body")"; ok $? "the reason says the length needed: $(jq -r .detail <<<"$body")"
admin POST /campaigns "{\"name\":\"x\",\"count\":10,\"prefix\":\"SPRING\",\"discountAmount\":2000,$window}"
is "$(answer)" "422 UNPROCESSABLE" "a prefix with I (not in safe32): 422"
admin POST /campaigns "{\"name\":\"x\",\"count\":3,\"customerIds\":[5,6,5],\"discountAmount\":2000,$window}"
is "$(answer)" "422 UNPROCESSABLE" "a customerId twice: 422"
admin POST /campaigns "{\"name\":\"x\",\"count\":2,\"customerIds\":[5,6,7],\"discountAmount\":2000,$window}"
is "$(answer)" "422 UNPROCESSABLE" "more customers than codes: 422"
admin POST /campaigns "{\"name\":\"x\",\"count\":10,\"discountAmount\":2000,\"discountPercent\":5,$window}"
is "$(answer)" "422 UNPROCESSABLE" "two discounts: 422"
is "$(campaigns) $(codes)" "$before_c $before_k" "no campaign and no code written by any refused request"

# ---- a small campaign: generated in the request ----
admin POST /campaigns "{\"name\":\"small\",\"count\":50,\"prefix\":\"$pfx\",\"checkSymbol\":true,\"length\":13,\"customerIds\":[11,12,13],\"discountAmount\":2000,$window}"
is "$(answer)" "201 ACTIVE" "a campaign of 50 codes: 201, ACTIVE"
small=$(jq -r .id <<<"$body")
grep -qx "Location: /campaigns/$small" <<<"$headers"; ok $? "Location names it"
is "$(jq -r '"\(.generated)/\(.total)"' <<<"$body")" "50/50" "all 50 generated"
is "$(sql "SELECT count(*), count(customer_id), count(*) FILTER (WHERE code ~ '^$pfx[2-9A-HJ-NP-Z]{13}\$') FROM campaign_code WHERE campaign_id = $small")" \
  "50|3|50" "50 rows, 3 bound, all prefix + 13 symbols of safe32"
is "$(sql "SELECT string_agg(customer_id::text, ',' ORDER BY seq) FROM campaign_code WHERE campaign_id = $small AND seq <= 3")" \
  "11,12,13" "the first three codes are bound to the customers in order"

# ---- overlapping prefixes ----
for other in "$pfx" "${pfx}X" "${pfx:0:4}"; do
  before_c=$(campaigns)
  admin POST /campaigns "{\"name\":\"x\",\"count\":10,\"prefix\":\"$other\",\"discountAmount\":2000,$window}"
  is "$(answer) $(campaigns)" "422 UNPROCESSABLE $before_c" "prefix $other overlaps $pfx: 422, nothing written"
done
grep -q "overlaps the prefix \"$pfx\" of campaign $small" <<<"$(jq -r .detail <<<"$body")"
ok $? "the reason names the campaign whose prefix it overlaps"

# ---- the export ----
export_csv "$small"
is "$status" 200 "GET /campaigns/{id}/codes: 200"
grep -qi '^Transfer-Encoding: chunked' "$scratch/export.h"; ok $? "sent chunked"
is "$(head -1 "$scratch/export.csv")" "code,customerId" "the CSV's header"
grep -q "^$pfx-[^-]\{4\}-[^-]\{4\}-[^-]\{4\}-[^-]," <(tail -n +2 "$scratch/export.csv"); ok $? "codes shown as PREFIX-XXXX-XXXX-XXXX-X"
[ "$got" = "$(db_csv "$small")" ]; ok $? "the export equals the database, row for row"

# ---- a large campaign: 202, generated in the background ----
admin POST /campaigns "{\"name\":\"large\",\"count\":120000,\"discountPercent\":10,\"maxDiscountAmount\":2000,$window}"
is "$(answer)" "202 GENERATING" "a campaign of 120,000 codes: 202, GENERATING"
large=$(jq -r .id <<<"$body")
grep -qx "Location: /campaigns/$large" <<<"$headers"; ok $? "Location names it"
pause_wait campaign-after-batch; ok $? "the first batch of 50,000 was committed"
admin GET "/campaigns/$large" ""
is "$(jq -r '"\(.state) \(.generated)/\(.total)"' <<<"$body")" "GENERATING 50000/120000" "GET shows the progress between batches"
admin GET "/campaigns/$large/codes" ""
is "$(answer)" "409 NOT_READY" "its export waits for the last code"
pause_go campaign-after-batch
pause_wait campaign-after-batch && pause_go campaign-after-batch
pause_wait campaign-after-batch && pause_go campaign-after-batch
for ((i = 0; i < 600; i++)); do
  admin GET "/campaigns/$large" ""
  [ "$(jq -r .state <<<"$body")" = ACTIVE ] && break
  sleep 0.1
done
is "$(jq -r '"\(.state) \(.generated)/\(.total)"' <<<"$body")" "ACTIVE 120000/120000" "then ACTIVE with every code"
export_csv "$large"
is "$status $(wc -l <<<"$got")" "200 120000" "the export has 120,000 codes (24 pages)"
[ "$got" = "$(db_csv "$large")" ]; ok $? "and equals the database, row for row"
is "$(sort -u <<<"$got" | wc -l)" 120000 "every code once"

# A client that leaves in the middle of an export harms nothing.
curl -s -H "Authorization: Bearer $token" "$admin_url/campaigns/$large/codes" | head -c 1000 >/dev/null
http GET /healthz
is "$status" 200 "the gateway answers after a client left mid-export"

# ---- deactivate, and routes ----
admin POST "/campaigns/$small/deactivate" ""
is "$(answer)" "200 INACTIVE" "deactivate: 200, INACTIVE"
admin POST "/campaigns/$small/deactivate" ""
is "$(answer)" "200 INACTIVE" "again: 200, INACTIVE"
admin GET "/campaigns/999999999" ""
is "$(answer)" "404 NOT_FOUND" "an unknown campaign: 404"
admin DELETE "/campaigns/$small" ""
is "$status" 405 "DELETE /campaigns/{id}: 405"

# ---- two creations with overlapping prefixes, at once ----
# The first stops between its prefix check and its insert (holding the lock);
# the second, with a prefix that starts the first's, must wait and then see it.
daemon_stop "$test_name-gateway"
export VOUCHER_ADMIN_TOKEN=$token VOUCHER_PAUSE=campaign-after-prefix-check VOUCHER_PAUSE_DIR=$pause_dir
start_gateway
unset VOUCHER_ADMIN_TOKEN VOUCHER_PAUSE VOUCHER_PAUSE_DIR
race=QB$(random_symbols 5)
curl -s -o "$scratch/race1" -w '%{http_code}' --max-time 30 -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/json' -X POST "$admin_url/campaigns" \
  --data-binary "{\"name\":\"race 1\",\"count\":5,\"prefix\":\"${race}\",\"discountAmount\":2000,$window}" \
  >"$scratch/race1.status" &
first=$!
pause_wait campaign-after-prefix-check; ok $? "the first creation checked its prefix and waits before its insert"
# The second passes its own check only after the first committed; let every later stop go.
curl -s -o "$scratch/race2" -w '%{http_code}' --max-time 30 -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/json' -X POST "$admin_url/campaigns" \
  --data-binary "{\"name\":\"race 2\",\"count\":5,\"prefix\":\"${race}X\",\"discountAmount\":2000,$window}" \
  >"$scratch/race2.status" &
second=$!
# Let the first go only once the second waits for the lock, or (were there no lock)
# has passed its own check and stopped at the same point.
log=$VOUCHER_STACK_DIR/logs/$test_name-gateway.log
stops=$(grep -c 'pause point campaign-after-prefix-check: waiting' "$log")
for ((i = 0; i < 600; i++)); do
  [ "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")" -gt 0 ] && break
  [ "$(grep -c 'pause point campaign-after-prefix-check: waiting' "$log")" -gt "$stops" ] && break
  sleep 0.05
done
pause_go campaign-after-prefix-check
for ((i = 0; i < 600; i++)); do
  [ -e "$pause_dir/campaign-after-prefix-check" ] && pause_go campaign-after-prefix-check
  kill -0 "$second" 2>/dev/null || break
  sleep 0.05
done
wait "$first" "$second"
is "$(cat "$scratch/race1.status") $(cat "$scratch/race2.status")" "201 422" "the first is created, the second refused"
is "$(sql "SELECT count(*) FROM campaign WHERE prefix LIKE '$race%'")" 1 "one campaign with either prefix"
