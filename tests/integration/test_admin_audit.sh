#!/usr/bin/env bash
# The admin audit (issue 42, deploy/sql/021_admin_audit.sql): one row per admin
# action, who, when, what, before and after, from where: POST and PATCH
# /vouchers, the campaign routes (create, deactivate, export), voucher-admin's
# campaign commands (actor --operator); a change the audit cannot record is not
# made; the gateway's role may add rows but neither change nor delete them;
# `voucher-admin audit` lists them with its filters. Named admin tokens
# (VOUCHER_ADMIN_TOKENS_FILE): each admin's name in the rows, and a token
# rotated by rewriting the file and sending SIGHUP, without a restart. The
# admin routes on the admin address only: 404 on the API port, token or not.
source "$(dirname "$0")/lib.sh"
plan 51

admin_cli=$VOUCHER_BUILD_DIR/admin/voucher-admin
token=$(new_token admin)
export VOUCHER_ADMIN_TOKEN=$token
start_gateway
unset VOUCHER_ADMIN_TOKEN
auth=(-H "Authorization: Bearer $token")
admin() { http "$@" "${auth[@]}"; }
window='"startsAt":"2020-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z"'
code=$(unique_code AUDIT)
# audit_rows TARGET [ACTION]: how many rows the audit holds for it.
audit_rows() { sql "SELECT count(*) FROM admin_audit WHERE target = '$1' AND action LIKE '${2:-%}'"; }
# audit_last TARGET ACTION EXPR: EXPR of the newest such row.
audit_last() { sql "SELECT $3 FROM admin_audit WHERE target = '$1' AND action = '$2' ORDER BY id DESC LIMIT 1"; }
# Put back what the atomicity check takes away, whatever happens to the test.
restore_grant() { sql "GRANT INSERT (actor, action, target, before, after, detail, source) ON admin_audit TO voucher_gateway" >/dev/null; }
trap 'restore_grant; finish' EXIT

# ---- the admin routes on the admin address only ----
api() { http_base=$base_url http "$@"; } # METHOD PATH [JSON] [CURL ARGS]: on the API port
nocode=$(unique_code AUDIT)
api POST /vouchers "{\"code\":\"$nocode\",\"discountAmount\":1000,\"minOrderAmount\":0,\"totalLimit\":50,\"perUserLimit\":1,$window}" "${auth[@]}"
is "$status $(sql "SELECT count(*) FROM voucher WHERE code = '$nocode'") $(audit_rows "$nocode")" "404 0 0" \
  "POST /vouchers on the API port, with the admin token: 404, no voucher, no row"
new_voucher "$nocode" 5
api PATCH "/vouchers/$nocode" '{"discountAmount":1}' "${auth[@]}"
is "$status $(sql "SELECT discount_amount FROM voucher WHERE code = '$nocode'")" "404 100000" "PATCH on the API port: 404, unchanged"
statuses=""
for path in /vouchers "/vouchers/$nocode" "/vouchers/$nocode/reservations/o-1" /campaigns/1 /campaigns/1/codes; do
  api GET "$path" '' "${auth[@]}"
  statuses+="$status "
done
is "$statuses" "404 404 404 404 404 " "GET list, show, a reservation's lookup, a campaign, its export on the API port: 404"
api POST /campaigns "{\"name\":\"api-port\",\"count\":5,\"discountAmount\":100,$window}" "${auth[@]}"
is "$status" 404 "POST /campaigns on the API port: 404"
api POST /campaigns/1/deactivate '' "${auth[@]}"
is "$status" 404 "POST /campaigns/{id}/deactivate on the API port: 404"
http GET "/vouchers/$nocode" '' "${auth[@]}"
is "$status" 200 "the same GET on the admin address: 200"
http_base=$admin_url http POST "/vouchers/$nocode/reservations" '{"customerId":1,"orderId":"o-1","orderAmount":1000}'
is "$status" 404 "the order service's reserve on the admin address: 404"
api GET /healthz
is "$status" 200 "/healthz stays on the API port"

# ---- the gateway: voucher create and PATCH ----
admin POST /vouchers "{\"code\":\"$code\",\"discountAmount\":1000,\"minOrderAmount\":0,\"totalLimit\":50,\"perUserLimit\":1,$window}"
is "$status $(audit_rows "$code" voucher.create)" "201 1" "POST /vouchers: 201 and one voucher.create row"
is "$(audit_last "$code" voucher.create "actor || '|' || (before IS NULL) || '|' || (after->>'total_limit') || '|' || (after->>'discount_amount') || '|' || source")" \
  "admin|true|50|1000|127.0.0.1" "its actor (the shared token's 'admin'), no before, after the row created, the client's address"
is "$(audit_last "$code" voucher.create "after ? 'redis_loaded_at'")" "f" "after leaves out redis_loaded_at (bookkeeping)"
admin PATCH "/vouchers/$code" '{"discountAmount":500}'
is "$status $(audit_rows "$code" voucher.update)" "200 1" "PATCH: 200 and one voucher.update row"
is "$(audit_last "$code" voucher.update "(before->>'discount_amount') || '>' || (after->>'discount_amount') || '|' || (before->>'total_limit') || '>' || (after->>'total_limit')")" \
  "1000>500|50>50" "before and after: the discount changed, the total did not"
is "$(audit_last "$code" voucher.update "detail")" '{"discountAmount":500}' "the detail is what the PATCH asked"
admin PATCH "/vouchers/$code" '{"totalLimit":40}'
is "$status $(audit_rows "$code" voucher.update) $(audit_last "$code" voucher.update "(before->>'total_limit') || '>' || (after->>'total_limit')")" \
  "200 2 50>40" "a lower of totalLimit (Redis first): a second row, 50>40"
admin PATCH "/vouchers/$code" '{"totalLimit":0}'
is "$status $(audit_rows "$code" voucher.update)" "400 2" "a PATCH refused (400): no row"
admin PATCH "/vouchers/NOSUCH_$code" '{"discountAmount":1}'
is "$status $(audit_rows "NOSUCH_$code")" "404 0" "a PATCH of no voucher (404): no row"
http PATCH "/vouchers/$code" '{"discountAmount":1}' -H "Authorization: Bearer wrong-$token"
is "$status $(audit_rows "$code" voucher.update)" "401 2" "a wrong token (401): no row"

# ---- a change the audit cannot record is not made ----
sql "REVOKE INSERT ON admin_audit FROM voucher_gateway" >/dev/null
admin PATCH "/vouchers/$code" '{"discountAmount":7}'
is "$status $(sql "SELECT discount_amount FROM voucher WHERE code = '$code'")" "503 500" \
  "PATCH with the audit unwritable: 503, the discount unchanged"
code2=$(unique_code AUDIT)
admin POST /vouchers "{\"code\":\"$code2\",\"discountAmount\":1000,\"minOrderAmount\":0,\"totalLimit\":5,\"perUserLimit\":1,$window}"
is "$status $(sql "SELECT count(*) FROM voucher WHERE code = '$code2'")" "503 0" \
  "POST /vouchers with the audit unwritable: 503, no voucher"
restore_grant

# ---- least privilege ----
gw_sql() { psql -X -q -tA -v ON_ERROR_STOP=1 "$VOUCHER_GATEWAY_PG_DSN" -c "$1" 2>&1; }
grep -q 'permission denied' <<<"$(gw_sql "UPDATE admin_audit SET actor = 'x' WHERE target = '$code'")"
ok $? "the gateway's role may not UPDATE a row"
grep -q 'permission denied' <<<"$(gw_sql "DELETE FROM admin_audit WHERE target = '$code'")"
ok $? "nor DELETE one"
grep -q 'permission denied' <<<"$(gw_sql "SELECT count(*) FROM admin_audit")"
ok $? "nor read them"

# ---- the gateway: campaigns ----
admin POST /campaigns "{\"name\":\"audit\",\"count\":20,\"discountAmount\":100,$window}"
cid=$(jq -r .id <<<"$body")
is "$status $(audit_rows "$cid" campaign.create) $(audit_last "$cid" campaign.create "detail || '|' || (after->>'total_count')")" \
  "201 1 20 codes|20" "POST /campaigns: 201, one campaign.create row with its count"
admin GET "/campaigns/$cid/codes" ''
is "$status $(audit_rows "$cid" campaign.export) $(audit_last "$cid" campaign.export "actor || '|' || detail")" \
  "200 1 admin|20 codes" "GET .../codes: 200, one campaign.export row with the count exported"
admin POST "/campaigns/$cid/deactivate" ''
is "$status $(audit_rows "$cid" campaign.deactivate) $(audit_last "$cid" campaign.deactivate "(before->>'state') || '>' || (after->>'state')")" \
  "200 1 ACTIVE>INACTIVE" "POST .../deactivate: 200, one row, ACTIVE>INACTIVE"

# ---- voucher-admin ----
operator=alice-$RANDOM
# voucher-admin as its own role (021), the tests' owner DSN left to sql().
admin_cli() { VOUCHER_PG_DSN=$VOUCHER_ADMIN_PG_DSN "$admin_cli" "$@"; }
cli=$(admin_cli --operator "$operator" campaign create --name audit-cli --count 30 --discount-amount 100 \
  --ends-at 2099-01-01T00:00:00Z 2>/dev/null)
is "$? $(audit_rows "$cli" campaign.create) $(audit_last "$cli" campaign.create "actor || '|' || source")" \
  "0 1 $operator|voucher-admin@$(hostname)" "voucher-admin campaign create (its own role): one row, actor --operator, source voucher-admin@host"
admin_cli --operator "$operator" campaign export "$cli" >/dev/null
is "$? $(audit_last "$cli" campaign.export "actor || '|' || detail")" "0 $operator|30 codes" "voucher-admin campaign export: one row with the count"
admin_cli --operator "$operator" campaign deactivate "$cli" >/dev/null
is "$? $(audit_last "$cli" campaign.deactivate "(before->>'state') || '>' || (after->>'state')")" "0 ACTIVE>INACTIVE" \
  "voucher-admin campaign deactivate: one row, ACTIVE>INACTIVE"
admin_cli --operator "$operator" campaign resume "$cli" >/dev/null 2>&1
is "$(audit_rows "$cli" campaign.resume)" 1 "voucher-admin campaign resume: one row, as it starts"
USER= admin_cli --operator '' campaign deactivate "$cli" >/dev/null 2>&1
is "$? $(audit_rows "$cli" campaign.deactivate)" "2 1" "an empty --operator: refused (exit 2), no row"

# ---- voucher-admin audit: the filters ----
list() { admin_cli audit "$@" 2>&1; }
is "$(list --actor "$operator" --json | jq -r .action | sort | tr '\n' ' ')" \
  "campaign.create campaign.deactivate campaign.export campaign.resume " "--actor: that admin's rows only"
is "$(list --target "$code" --json | jq -r .action | tr '\n' ' ')" "voucher.update voucher.update voucher.create " \
  "--target: the voucher's rows, newest first"
is "$(list --target "$code" --action voucher.create --json | jq -r '[.actor, .after.total_limit, .before] | @tsv')" \
  "admin	50	" "--action with --target: the one row, before and after in full (--json)"
list --target "$code" --action voucher.update --limit 1 >"$scratch/table"
is "$(wc -l <"$scratch/table")" 2 "--limit 1: a header and one row"
grep -q 'total_limit: 50 -> 40' "$scratch/table"; ok $? "the table shows what changed: $(tail -1 "$scratch/table" | tr -s ' ')"
is "$(list --target "$code" --since 1h --json | wc -l) $(list --target "$code" --since 2099-01-01T00:00:00Z --json | wc -l)" \
  "3 0" "--since: an age (1h) and an RFC 3339 time"
list --since yesterday >/dev/null
is "$?" 2 "--since of neither form: exit 2"
VOUCHER_PG_DSN=$VOUCHER_GATEWAY_PG_DSN "$admin_cli" audit --target "$code" >/dev/null 2>&1
is "$?" 1 "voucher-admin audit with the gateway's role: refused (it may not read the audit)"

# ---- named admin tokens (VOUCHER_ADMIN_TOKENS_FILE), rotated on SIGHUP ----
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
tok_a=alice-$RANDOM$RANDOM-0123456789abcdef0123456789 tok_b=bob-$RANDOM$RANDOM-0123456789abcdef0123456789
tok_a2=alice2-$RANDOM$RANDOM-0123456789abcdef01234567
name_a=alice-$RANDOM name_b=bob-$RANDOM
printf '# the admins of this test\n%s %s\n\n%s %s  # bob\n' "$name_a" "$(sha "$tok_a")" "$name_b" "$(sha "$tok_b")" >"$scratch/admins"
daemon_stop "$test_name-gateway"
export VOUCHER_ADMIN_TOKEN=$token VOUCHER_ADMIN_TOKENS_FILE=$scratch/admins
start_gateway
unset VOUCHER_ADMIN_TOKEN VOUCHER_ADMIN_TOKENS_FILE
pid=$(cat "$VOUCHER_STACK_DIR/run/$test_name-gateway.pid")
as() { local t=$1; shift; http "$@" -H "Authorization: Bearer $t"; } # TOKEN METHOD PATH JSON
as "$tok_a" PATCH "/vouchers/$code" '{"discountAmount":401}'
is "$status $(audit_last "$code" voucher.update "actor || '|' || (after->>'discount_amount')")" "200 $name_a|401" \
  "a PATCH with alice's named token: 200, the row names her"
as "$tok_b" PATCH "/vouchers/$code" '{"discountAmount":402}'
is "$status $(audit_last "$code" voucher.update "actor || '|' || (after->>'discount_amount')")" "200 $name_b|402" \
  "with bob's: 200, the row names him"
as "$token" PATCH "/vouchers/$code" '{"discountAmount":403}'
is "$status $(audit_last "$code" voucher.update "actor")" "200 admin" "VOUCHER_ADMIN_TOKEN still works beside the file, as 'admin'"
as "$(sha "$tok_a")" PATCH "/vouchers/$code" '{"discountAmount":1}'
is "$status" 401 "the hash in the file is no token"

# Rotate alice's token, revoke bob's: rewrite the file, SIGHUP, same process.
printf '%s %s\n' "$name_a" "$(sha "$tok_a2")" >"$scratch/admins.new"
mv "$scratch/admins.new" "$scratch/admins"
kill -HUP "$pid"
status_of() { as "$1" GET "/vouchers/$code" ''; echo "$status"; }
is "$(wait_for 401 10 status_of "$tok_a")" 401 "after SIGHUP: alice's old token gets 401"
is "$(status_of "$tok_a2")" 200 "her new one 200"
is "$(status_of "$tok_b")" 401 "bob's, gone from the file, 401"
as "$tok_a2" PATCH "/vouchers/$code" '{"discountAmount":404}'
is "$status $(audit_last "$code" voucher.update "actor")" "200 $name_a" "a change with the new token names alice"
kill -0 "$pid" 2>/dev/null
is "$? $(cat "$VOUCHER_STACK_DIR/run/$test_name-gateway.pid")" "0 $pid" "no restart: the same process"

# A file that does not parse: the tokens in use stay, and the log says why.
log=$VOUCHER_STACK_DIR/logs/$test_name-gateway.log
said=$(grep -c 'not reloaded' "$log") # the log is kept across runs
printf 'alice not-a-hash\n' >"$scratch/admins"
kill -HUP "$pid"
is "$(wait_for $((said + 1)) 10 grep -c 'not reloaded' "$log")" $((said + 1)) "a bad file on SIGHUP: logged as not reloaded"
is "$(status_of "$tok_a2")" 200 "and the tokens in use stay"
daemon_stop "$test_name-gateway"
VOUCHER_ADMIN_TOKENS_FILE=$scratch/admins "$bin_gateway" >"$scratch/bad.out" 2>&1
is "$? $(grep -c 'VOUCHER_ADMIN_TOKENS_FILE.*line 1' "$scratch/bad.out")" "2 1" "at start, a bad file: exit 2, naming the setting and the line"
