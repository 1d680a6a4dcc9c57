#!/usr/bin/env bash
# voucher-admin campaign ...: create with bound customers (plain progress lines
# when not on a terminal), export equal to the database, show, deactivate, bad
# input refused with nothing written, and a generation whose gateway was killed
# between two batches finished by `resume` with every place filled once.
source "$(dirname "$0")/lib.sh"
plan 17

admin_cli=$VOUCHER_BUILD_DIR/admin/voucher-admin
ends=2099-01-01T00:00:00Z

# ---- create, export, show, deactivate ----
printf '41\n42\n43\n' >"$scratch/customers"
id=$("$admin_cli" campaign create --name cli --count 60000 --customers "$scratch/customers" \
  --discount-amount 2000 --ends-at $ends 2>"$scratch/create.err")
is "$?" 0 "create: exit 0"
grep -q '^generated 50000 of 60000 codes' "$scratch/create.err"; ok $? "plain progress lines when stderr is not a terminal"
is "$(sql "SELECT state, generated_count, (SELECT count(*) FROM campaign_code WHERE campaign_id = $id) FROM campaign WHERE id = $id")" \
  "ACTIVE|60000|60000" "ACTIVE with 60,000 codes"
"$admin_cli" campaign export "$id" >"$scratch/codes.csv"
is "$(head -4 "$scratch/codes.csv" | cut -d, -f2 | tr '\n' ' ')" "customerId 41 42 43 " "the bound codes come first, in the file's order"
tail -n +2 "$scratch/codes.csv" | tr -d '-' >"$scratch/got"
sql "SELECT code || ',' || coalesce(customer_id::text, '') FROM campaign_code WHERE campaign_id = $id ORDER BY seq" >"$scratch/want"
cmp -s "$scratch/got" "$scratch/want"; ok $? "the export equals the database"
"$admin_cli" campaign show "$id" >"$scratch/show.txt"
is "$(sed -n 's/^\(generated\|held\|redeemed\|free\|discountAmount\|minOrderAmount\): //p' "$scratch/show.txt" | tr '\n' ' ')" \
  "60000 0 0 60000 2000 0 " "show: generated, the codes held, redeemed and free, the discount and the minimum order"
is "$("$admin_cli" campaign deactivate "$id" | sed -n 's/^state: //p')" INACTIVE "deactivate: INACTIVE"

# ---- refused, nothing written ----
before=$(sql "SELECT count(*) FROM campaign")
"$admin_cli" campaign create --name x --count 1000000 --length 8 --discount-amount 1 --ends-at $ends 2>"$scratch/err"
is "$?" 2 "a length too short for the count: exit 2"
grep -q 'at least 10' "$scratch/err"; ok $? "and says the length needed"
"$admin_cli" campaign create --name x --count 5 --alphabet base64 --discount-amount 1 --ends-at $ends 2>/dev/null
is "$? $(sql "SELECT count(*) FROM campaign")" "2 $before" "an unknown alphabet: exit 2, no campaign written"

# ---- a generation cut short, then resumed ----
token=$(new_token admin)
export VOUCHER_ADMIN_TOKEN=$token VOUCHER_PAUSE=campaign-after-batch VOUCHER_PAUSE_DIR=$pause_dir
start_gateway
unset VOUCHER_ADMIN_TOKEN VOUCHER_PAUSE VOUCHER_PAUSE_DIR
http POST /campaigns '{"name":"cut","count":120000,"discountAmount":2000,"startsAt":"2020-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z"}' \
  -H "Authorization: Bearer $token"
cut=$(jq -r .id <<<"$body")
pause_wait campaign-after-batch; ok $? "the gateway committed its first batch"
daemon_stop "$test_name-gateway" KILL
pause_go campaign-after-batch
is "$(sql "SELECT state, generated_count FROM campaign WHERE id = $cut")" "GENERATING|50000" "killed: GENERATING with 50,000 codes kept"
"$admin_cli" campaign export "$cut" >"$scratch/cut.csv" 2>"$scratch/cut.err"
is "$? $(wc -c <"$scratch/cut.csv")" "1 0" "export of the unfinished campaign: refused (exit 1), nothing on stdout"
grep -q "GENERATING: 50000 of 120000 codes generated" "$scratch/cut.err"; ok $? "and says why: $(head -1 "$scratch/cut.err")"
"$admin_cli" campaign export "$cut" --partial >"$scratch/cut.csv" 2>"$scratch/cut.err"
is "$? $(($(wc -l <"$scratch/cut.csv") - 1)) $(grep -c 'PARTIAL export' "$scratch/cut.err")" "0 50000 1" \
  "export --partial: the 50,000 codes made, and the warning"
"$admin_cli" campaign resume "$cut" 2>/dev/null
is "$?" 0 "resume: exit 0"
is "$(sql "SELECT c.state, c.generated_count, count(k.code), count(DISTINCT k.seq), min(k.seq), max(k.seq)
           FROM campaign c JOIN campaign_code k ON k.campaign_id = c.id WHERE c.id = $cut GROUP BY c.state, c.generated_count")" \
  "ACTIVE|120000|120000|120000|1|120000" "ACTIVE, 120,000 codes, every place 1..120000 once"
