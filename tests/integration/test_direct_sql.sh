#!/usr/bin/env bash
# Direct mode's SQL (issue 46, slice 1; proto/direct-mode.md, "The functions"):
# the dr_* functions run as the daemons' own roles, as the gateway and the
# reconciler will run them, answer what flash mode answers for each situation,
# take a use only within the limits (total, per customer, window, active),
# leave nothing behind a refusal, write exactly one outbox row per change, and
# meet two requests of one orderId on the unique index. The gateway's role
# writes no table itself. The functions are called with psql, as the daemons
# will (slice 2); then the API of slice 1: a voucher's mode in POST, GET and
# the list, and PATCH refusing to change it.
source "$(dirname "$0")/lib.sh"
plan 72

gw_dsn=${VOUCHER_GATEWAY_PG_DSN:-${VOUCHER_PG_DSN/user=voucher/user=voucher_gateway}}
rc_dsn=${VOUCHER_RECONCILER_PG_DSN:-${VOUCHER_PG_DSN/user=voucher/user=voucher_reconciler}}
# as DSN SQL: one statement in its own session; prints the rows (fields joined
# by |), or the error.
as() { psql -X -q -tA -v ON_ERROR_STOP=1 "$1" -c "$2" 2>&1; }
now=$(now_ms)
held=$((now + 900000))
# reserve CODE ORDER CUSTOMER AMOUNT [NOW [HELD_UNTIL]]: dr_reserve as the
# gateway, a 100 discount; the event names the order, to count outbox rows by.
reserve() {
  as "$gw_dsn" "SELECT * FROM dr_reserve('$1', '$2', '$3', $4, 100, ${5:-$now}, ${6:-$held},
                                         'reserved:$2')"
}
# confirm CODE ORDER TOTAL|NULL DISCOUNT|NULL [NOW]; cancel CODE ORDER
confirm() { as "$gw_dsn" "SELECT * FROM dr_confirm('$1', '$2', $3, $4, ${5:-$now}, 'confirmed:$2')"; }
cancel() { as "$gw_dsn" "SELECT * FROM dr_cancel('$1', '$2', $now, 'released:$2')"; }
first() { cut -d'|' -f1 <<<"$1"; } # the answer alone
# outbox CODE: its outbox rows' payloads, in id order, comma-separated.
outbox() { sql "SELECT string_agg(payload, ',' ORDER BY id) FROM event_outbox WHERE event_key = '$1'"; }
used() { sql "SELECT used_count FROM voucher WHERE code = '$1'"; }
rows() { sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$1'"; }
row() { sql "SELECT status || '|' || coalesce(release_reason, '') FROM voucher_redemption WHERE order_id = '$1'"; }
# direct_voucher CODE LIMIT [PER_CUSTOMER] [STARTS] [ENDS] [ACTIVE]
direct_voucher() {
  sql "INSERT INTO voucher (code, discount_amount, total_limit, per_user_limit, starts_at, ends_at,
                            active, mode)
       VALUES ('$1', 100, $2, ${3:-1}, ${4:-now() - interval '1 hour'},
               ${5:-now() + interval '1 day'}, ${6:-true}, 'direct')"
}
order() { echo "$1-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')"; } # a unique orderId

# ---- least privilege ----
code=$(unique_code DIRECT)
direct_voucher "$code" 3 1
grep -q 'permission denied' <<<"$(as "$gw_dsn" "UPDATE voucher SET used_count = 0 WHERE code = '$code'")"
ok $? "the gateway's role cannot UPDATE voucher.used_count: permission denied"
grep -q 'permission denied' <<<"$(as "$gw_dsn" "INSERT INTO voucher_redemption (voucher_code, customer_id,
  order_id, status) VALUES ('$code', 1, 'by-hand', 'RESERVED')")"
ok $? "the gateway's role cannot INSERT into voucher_redemption: permission denied"
grep -q 'permission denied' <<<"$(as "$gw_dsn" "SELECT count(*) FROM event_outbox")" &&
  grep -q 'permission denied' <<<"$(as "$gw_dsn" "SELECT * FROM dr_expire(1, $now, 0)")"
ok $? "nor read the outbox, nor run the reconciler's dr_expire"
grep -q 'permission denied' <<<"$(as "$rc_dsn" "SELECT * FROM dr_reserve('$code', 'x', '1', 1, 1, $now, $held, '')")"
ok $? "the reconciler's role cannot run dr_reserve"

# ---- reserve, retry, conflicts ----
o1=$(order a)
is "$(reserve "$code" "$o1" 7 1000)" "RESERVED|100|1000|$held|2" \
  "a reservation: RESERVED with its figures and the uses left"
is "$(used "$code")/$(row "$o1")/$(outbox "$code")" "1/RESERVED|/reserved:$o1" \
  "one use, one RESERVED row, one outbox row with the gateway's event"
is "$(reserve "$code" "$o1" 7 1000 $((now + 5)) $((held + 5)))" "RETRY|100|1000|$held|2" \
  "the same orderId again: RETRY with the row's figures (its heldUntil), nothing taken"
is "$(used "$code")/$(outbox "$code")" "1/reserved:$o1" "a retry takes no use and writes no outbox row"
other=$(unique_code DIRECT)
direct_voucher "$other" 3
is "$(first "$(reserve "$other" "$o1" 7 1000)")/$(rows "$other")/$(used "$other")" "ORDER_CONFLICT/0/0" \
  "the orderId on another direct voucher: ORDER_CONFLICT, nothing taken there"
is "$(first "$(reserve "$code" "$o1" 8 1000)")" "ORDER_CONFLICT" "the orderId by another customer: ORDER_CONFLICT"
is "$(reserve "$code" "$o1" 7 2000)" "ORDER_CONFLICT||1000||" \
  "with another amount: ORDER_CONFLICT naming the amount it was reserved with"
camp_order=$(order camp)
# A row as the writer applies a campaign's event (campaign_redemption has no
# foreign key): a campaign id no campaign has, so no other test's limits count.
sql "INSERT INTO campaign_redemption (order_id, code, campaign_id, customer_id, status)
     VALUES ('$camp_order', '$(unique_code CAMP)', $((RANDOM * 32768 + RANDOM + 2000000000)), 9,
             'RESERVED')"
is "$(sql "SELECT count(*) FROM campaign_redemption WHERE order_id = '$camp_order'")/$(first "$(reserve "$code" "$camp_order" 9 1000)")/$(rows "$code")" \
  "1/ORDER_CONFLICT/1" "an orderId a campaign's code holds: ORDER_CONFLICT, no row"
is "$(first "$(reserve "$code" "$(order b)" 7 1000)")/$(used "$code")/$(rows "$code")" "ALREADY_USED/1/1" \
  "the customer at the per-customer limit (005's trigger): ALREADY_USED, no row, no use"
o2=$(order c)
reserve "$code" "$o2" 8 1000 >/dev/null
o3=$(order d)
is "$(reserve "$code" "$o3" 9 1000)/$(used "$code")" "RESERVED|100|1000|$held|0/3" "the last use: remaining 0"
is "$(first "$(reserve "$code" "$(order e)" 10 1000)")/$(used "$code")/$(rows "$code")" "OUT_OF_STOCK/3/3" \
  "at the limit (used_count == total_limit): OUT_OF_STOCK, no row, the CHECK never met"
is "$(outbox "$code")" "reserved:$o1,reserved:$o2,reserved:$o3" \
  "outbox: one row per use taken, none for a retry, a conflict or a refusal"

# ---- the rules: inactive, outside the window ----
inactive=$(unique_code DIRECT)
direct_voucher "$inactive" 5 1 "" "" false
is "$(first "$(reserve "$inactive" "$(order f)" 1 1000)")/$(rows "$inactive")" "NOT_ELIGIBLE:INACTIVE/0" \
  "an inactive voucher: NOT_ELIGIBLE:INACTIVE, no row"
early=$(unique_code DIRECT)
direct_voucher "$early" 5 1 "now() + interval '1 hour'" "now() + interval '1 day'"
is "$(first "$(reserve "$early" "$(order g)" 1 1000)")" "NOT_ELIGIBLE:NOT_STARTED" "before startsAt: NOT_STARTED"
late=$(unique_code DIRECT)
direct_voucher "$late" 5 1 "now() - interval '1 day'" "now() - interval '1 hour'"
is "$(first "$(reserve "$late" "$(order h)" 1 1000)")/$(used "$late")/$(rows "$late")" \
  "NOT_ELIGIBLE:EXPIRED/0/0" "after endsAt: EXPIRED, nothing taken"
sql "UPDATE voucher SET active = false WHERE code = '$code'"
is "$(first "$(reserve "$code" "$o1" 7 1000)")" "RETRY" "a retry once the voucher is inactive: RETRY (its replay)"
is "$(first "$(reserve "$code" "$o1" 7 1000)")" "RETRY" "and again"
customer_at_limit=$(first "$(reserve "$code" "$(order i)" 7 1000)")
sql "UPDATE voucher SET active = true WHERE code = '$code'"
is "$customer_at_limit" "NOT_ELIGIBLE:INACTIVE" \
  "a customer at the limit on an inactive voucher: NOT_ELIGIBLE first, as flash mode's rules"

# ---- a flash voucher is not touched ----
flash=$(unique_code FLASHD)
new_voucher "$flash" 5
for call in "reserve $flash $(order j) 1 1000" "confirm $flash $o1 NULL NULL" "cancel $flash $o1"; do
  out+="$(first "$($call)") "
done
is "$out$(used "$flash")/$(rows "$flash")/$(outbox "$flash")" "NOT_DIRECT NOT_DIRECT NOT_DIRECT 0/0/" \
  "a flash voucher: reserve, confirm and cancel answer NOT_DIRECT and change nothing"
is "$(first "$(reserve NO_SUCH_CODE "$(order k)" 1 1000)")/$(as "$gw_dsn" "SELECT * FROM dr_quote('NO_SUCH_CODE', $now)")" \
  "NOT_FOUND/NOT_FOUND|" "an unknown code: NOT_FOUND"
is "$(as "$gw_dsn" "SELECT * FROM dr_quote('$code', $now)")/$(as "$gw_dsn" "SELECT * FROM dr_quote('$flash', $now)")" \
  "OK|0/NOT_DIRECT|" "dr_quote: the uses left of a direct voucher; a flash one NOT_DIRECT"

# ---- confirm ----
is "$(confirm "$code" "$o1" NULL NULL)" "CONFIRMED|100|1000|$held|CONFIRMED" \
  "confirm without a total: CONFIRMED at the reservation's figures"
is "$(confirm "$code" "$o1" NULL NULL)/$(confirm "$code" "$o1" 1000 100)" \
  "RETRY|100|1000|$held|CONFIRMED/RETRY|100|1000|$held|CONFIRMED" \
  "again, without a total or at the reservation's: RETRY, nothing written"
is "$(confirm "$code" "$o1" 900 90)" "ALREADY_CONFIRMED|100|1000|$held|CONFIRMED" \
  "confirmed, then a confirm at another total: ALREADY_CONFIRMED with the figures it was confirmed at"
is "$(confirm "$code" "$o2" 500 NULL)/$(row "$o2")" "NOT_ELIGIBLE:ORDER_TOO_SMALL|100|1000|$held|RESERVED/RESERVED|" \
  "another total the rules refuse: NOT_ELIGIBLE:ORDER_TOO_SMALL with the quote, the hold stands"
is "$(confirm "$code" "$o2" 800 80)" "CONFIRMED|80|800|$held|CONFIRMED" \
  "a confirm with a final total: CONFIRMED at it"
is "$(sql "SELECT confirmed_order_amount || '|' || confirmed_discount_amount || '|' || order_amount FROM voucher_redemption WHERE order_id = '$o2'")/$(confirm "$code" "$o2" 800 80 | cut -d'|' -f1)/$(confirm "$code" "$o2" NULL NULL | cut -d'|' -f1)" \
  "800|80|1000/RETRY/RETRY" "the row keeps the final figures beside the quote; repeats are RETRY"
is "$(first "$(confirm "$code" "$o3" NULL NULL $((held + 1)))")/$(row "$o3")" "HOLD_EXPIRED/RESERVED|" \
  "a confirm after heldUntil: HOLD_EXPIRED, nothing changed"
is "$(first "$(confirm "$code" "no-such-order" NULL NULL)")/$(first "$(confirm "$other" "$o1" NULL NULL)")" \
  "NOT_FOUND/NOT_FOUND" "an unknown order, or another voucher's: NOT_FOUND"

# ---- cancel ----
is "$(cancel "$code" "$o3")/$(row "$o3")/$(used "$code")" "RELEASED|RESERVED/RELEASED|CANCELLED/2" \
  "cancel of a hold: RELEASED, release_reason CANCELLED, its use back"
is "$(cancel "$code" "$o3")/$(used "$code")" "RETRY|RELEASED/2" "cancel again: RETRY, nothing given back twice"
is "$(first "$(confirm "$code" "$o3" NULL NULL)")/$(first "$(reserve "$code" "$o3" 9 1000)")" \
  "HOLD_EXPIRED/HOLD_EXPIRED" "a confirm or a retry of a released order: HOLD_EXPIRED"
is "$(cancel "$code" "$o1")/$(row "$o1")/$(used "$code")" "RELEASED|CONFIRMED/RELEASED|CANCELLED/1" \
  "cancel of a confirmed order: RELEASED, its use back (as flash mode's cancel)"
is "$(outbox "$code")" \
  "reserved:$o1,reserved:$o2,reserved:$o3,confirmed:$o1,confirmed:$o2,released:$o3,released:$o1" \
  "outbox: exactly one row per change, in order; none for a retry or a refusal"
is "$(as "$gw_dsn" "SELECT * FROM dr_quote('$code', $now)")" "OK|2" "dr_quote: two uses back in the pool"

# ---- expiry (the reconciler's role) ----
exp=$(unique_code DIRECT)
direct_voucher "$exp" 5 1
o_due=$(order due)
o_grace=$(order grace)
o_flash=$(order flash)
reserve "$exp" "$o_due" 1 1000 "$now" $((now - 60000)) >/dev/null
reserve "$exp" "$o_grace" 2 1000 "$now" $((now - 1000)) >/dev/null
sql "INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status, held_until)
     VALUES ('$flash', 3, '$o_flash', 'RESERVED', now() - interval '1 hour')"
sql "UPDATE voucher SET used_count = 1 WHERE code = '$flash'"
# (Holds an earlier run left due are released too, oldest first: the limit takes them all,
# and only this run's are looked at.)
expired=$(as "$rc_dsn" "SELECT code, order_id, held_until_ms FROM dr_expire(1000000, $now, 30000)
                         WHERE code IN ('$exp', '$flash')")
is "$expired" "$exp|$o_due|$((now - 60000))" \
  "dr_expire: the hold past heldUntil + grace only (not the one within the grace, not a flash voucher's)"
is "$(row "$o_due")/$(row "$o_grace")/$(row "$o_flash")/$(used "$exp")/$(used "$flash")" \
  "RELEASED|EXPIRED/RESERVED|/RESERVED|/1/1" "released with reason EXPIRED, its use back; the others untouched"
event=$(sql "SELECT payload FROM event_outbox WHERE event_key = '$exp' ORDER BY id DESC LIMIT 1")
is "$(jq -c '[.type, .version, .code, .customerId, .orderId, .reason]' <<<"$event")" \
  "[\"VoucherReleased\",1,\"$exp\",1,\"$o_due\",\"EXPIRED\"]" \
  "its outbox row: the VoucherReleased (reason EXPIRED) the reconciler publishes for an expiry"
is "$(jq -r .releasedAt <<<"$event")" "$(date -u -d "@$((now / 1000))" +%Y-%m-%dT%H:%M:%S).$(printf %03d $((now % 1000)))Z" \
  "releasedAt in the events' format, to the millisecond"
is "$(as "$rc_dsn" "SELECT count(*) FROM dr_expire(100, $now, 30000) WHERE code = '$exp'")/$(used "$exp")" "0/1" \
  "dr_expire again: nothing more"

# ---- the outbox relay's two functions ----
# Every unsent row is taken (earlier runs leave theirs unsent: no relay runs yet).
unsent=$(sql "SELECT count(*) FROM event_outbox WHERE sent_at IS NULL")
ids=$(as "$rc_dsn" "SELECT string_agg(id::text, ',') FROM dr_outbox_take($unsent) WHERE event_key = '$code'")
is "$(as "$rc_dsn" "SELECT dr_outbox_sent('{$ids}')")/$(as "$rc_dsn" "SELECT dr_outbox_sent('{$ids}')")" "7/0" \
  "dr_outbox_sent marks the voucher's 7 rows once"
is "$(as "$rc_dsn" "SELECT count(*) FROM dr_outbox_take($unsent) WHERE event_key = '$code'")" 0 \
  "dr_outbox_take no longer returns them"

# ---- two requests with one orderId, at once ----
race=$(unique_code DIRECT)
direct_voucher "$race" 5 1
o_race=$(order race)
coproc first_session { psql -X -q -tA -v ON_ERROR_STOP=1 "$gw_dsn" 2>&1; }
echo "BEGIN; SELECT * FROM dr_reserve('$race', '$o_race', '11', 1000, 100, $now, $held, 'reserved:$o_race');" >&"${first_session[1]}"
read -r -t 30 first_answer <&"${first_session[0]}"
as "$gw_dsn" "SELECT * FROM dr_reserve('$race', '$o_race', '11', 1000, 100, $now, $held, 'reserved:$o_race')" \
  >"$scratch/second" &
second_pid=$!
# The second waits on the first's uncommitted row in the unique index.
is "$(wait_sql "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'" 1 20)" 1 \
  "the second request with the orderId waits on the first's transaction"
echo "COMMIT;" >&"${first_session[1]}"
eval "exec ${first_session[1]}>&-"
wait "$second_pid"
is "$(first "$first_answer")/$(first "$(cat "$scratch/second")")/$(used "$race")/$(rows "$race")/$(outbox "$race")" \
  "RESERVED/RETRY/1/1/reserved:$o_race" \
  "one orderId twice at once: RESERVED and RETRY, one use, one row, one outbox row"

# ---- N requests at once on a voucher of limit L < N ----
crowd=$(unique_code DIRECT)
direct_voucher "$crowd" 5 1
# A starting gate: the 4 sessions wait on an advisory lock this session holds,
# so their reservations run together once it lets go.
gate=$(( $(head -c3 /dev/urandom | od -An -tu4 | tr -d ' ') + 46000000 ))
coproc gate_session { psql -X -q -tA -v ON_ERROR_STOP=1 "$VOUCHER_PG_DSN" 2>&1; }
echo "SELECT pg_advisory_lock($gate);" >&"${gate_session[1]}"
read -r -t 30 _ <&"${gate_session[0]}"
crowd_pids=()
for w in 1 2 3 4; do
  {
    echo "SELECT pg_advisory_lock_shared($gate);"
    for i in 1 2 3 4 5; do
      echo "SELECT answer FROM dr_reserve('$crowd', 'crowd-$crowd-$w-$i', '$((w * 10 + i))', 1000, 100, $now, $held, 'reserved:crowd-$w-$i');"
    done
  } | psql -X -q -tA -v ON_ERROR_STOP=1 "$gw_dsn" 2>&1 | grep -v '^$' >"$scratch/crowd.$w" &
  crowd_pids+=($!)
done
is "$(wait_sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $gate AND NOT granted" 4 20)" 4 \
  "4 sessions wait at the starting gate"
echo "SELECT pg_advisory_unlock($gate);" >&"${gate_session[1]}"
eval "exec ${gate_session[1]}>&-"
wait "${crowd_pids[@]}"
answers=$(cat "$scratch"/crowd.* | sort | uniq -c | awk '{print $2 ":" $1}' | tr '\n' ' ')
is "$answers" "OUT_OF_STOCK:15 RESERVED:5 " "20 reservations at once from 4 sessions on a limit of 5: 5 RESERVED, 15 OUT_OF_STOCK"
is "$(used "$crowd")/$(rows "$crowd")/$(sql "SELECT count(*) FROM event_outbox WHERE event_key = '$crowd'")" "5/5/5" \
  "used_count 5, 5 rows, 5 outbox rows: never oversold"

# ---- how long a reservation takes: one call, one round trip ----
cost=$(unique_code DIRECT)
direct_voucher "$cost" 1000 1000
for i in $(seq 1 50); do
  echo "SELECT answer FROM dr_reserve('$cost', 'cost-$cost-$i', '$i', 1000, 100, $now, $held, 'e');"
done >"$scratch/cost.sql"
start=$(now_ms)
psql -X -q -tA -v ON_ERROR_STOP=1 "$gw_dsn" -f "$scratch/cost.sql" >/dev/null
spent=$(($(now_ms) - start))
is "$(used "$cost")" 50 "50 reservations in one session, one statement each"
diag "50 reservations, one round trip each: ${spent} ms in all ($((spent / 50)) ms each, psql's start included)"

# ---- the API: a voucher's mode (slice 1 stores and shows it) ----
token=$(new_token admin)
export VOUCHER_ADMIN_TOKEN=$token
start_gateway
unset VOUCHER_ADMIN_TOKEN
admin() { http "$@" -H "Authorization: Bearer $token"; }
# create CODE [, "mode": ...]: POST /vouchers with the rest of a valid body.
create() {
  admin POST /vouchers "{\"code\":\"$1\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":5,
    \"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"${2:-}}"
}
api_direct=$(unique_code APIDIRECT)
create "$api_direct" ',"mode":"direct"'
is "$status $(jq -r .mode <<<"$body") $(sql "SELECT mode FROM voucher WHERE code = '$api_direct'")" \
  "201 direct direct" "POST /vouchers with mode direct: 201, stored and answered"
is "$(sql "SELECT after->>'mode' FROM admin_audit WHERE target = '$api_direct' AND action = 'voucher.create'")" \
  direct "the admin audit's voucher.create row records the mode"
api_flash=$(unique_code APIFLASH)
create "$api_flash" ',"mode":"flash"'
is "$status $(jq -r .mode <<<"$body") $(sql "SELECT mode FROM voucher WHERE code = '$api_flash'")" \
  "201 flash flash" "POST /vouchers with mode flash: 201, stored"
api_default=$(unique_code APIDEFAULT)
create "$api_default"
is "$status $(jq -r .mode <<<"$body") $(sql "SELECT mode FROM voucher WHERE code = '$api_default'")" \
  "201 flash flash" "POST /vouchers without a mode: the column's default, flash until slice 2, answered"
api_bogus=$(unique_code APIBOGUS)
create "$api_bogus" ',"mode":"turbo"'
is "$(answer) $(jq -r .detail <<<"$body") $(sql "SELECT count(*) FROM voucher WHERE code = '$api_bogus'")" \
  '400 BAD_REQUEST field "mode" must be "direct" or "flash" 0' \
  "another mode: 400 BAD_REQUEST naming the field, as any bad field; nothing created"
create "$api_bogus" ',"mode":1'
is "$(answer) $(sql "SELECT count(*) FROM voucher WHERE code = '$api_bogus'")" "400 BAD_REQUEST 0" "a mode not a string: 400"
admin GET "/vouchers/$api_direct" ''
is "$status $(jq -r .mode <<<"$body")" "200 direct" "GET /vouchers/{code} shows the mode"
admin GET "/vouchers?after=$(sed 's/_.*//' <<<"$api_direct")&limit=100" ''

is "$(jq -r --arg c "$api_direct" '.vouchers[] | select(.code == $c) | .mode' <<<"$body")" direct \
  "GET /vouchers (the list) shows it"
admin PATCH "/vouchers/$api_direct" '{"mode":"flash"}'
is "$(answer)|$(jq -r .detail <<<"$body")|$(sql "SELECT mode FROM voucher WHERE code = '$api_direct'")" \
  "409 MODE_LOCKED|a voucher's mode is fixed at creation: create a new voucher|direct" \
  "PATCH to another mode: 409 MODE_LOCKED, the mode unchanged"
admin PATCH "/vouchers/$api_direct" '{"mode":"direct","totalLimit":9}'
is "$(answer) $(sql "SELECT mode || total_limit FROM voucher WHERE code = '$api_direct'")" "409 MODE_LOCKED direct5" \
  "PATCH naming the mode it has, beside another change: 409 MODE_LOCKED, nothing changed"
is "$(sql "SELECT count(*) FROM admin_audit WHERE target = '$api_direct' AND action = 'voucher.update'")" 0 \
  "a refused PATCH writes no audit row"
admin PATCH "/vouchers/NOSUCH_$api_direct" '{"mode":"flash"}'
is "$(answer)" "404 NOT_FOUND" "PATCH with a mode of no voucher: 404"

# ---- voucher-admin, as its own role: the mode in show and list (read only) ----
admin_cli() { VOUCHER_PG_DSN=${VOUCHER_ADMIN_PG_DSN:-${VOUCHER_PG_DSN/user=voucher/user=voucher_admin}} \
  "$VOUCHER_BUILD_DIR/admin/voucher-admin" --operator test "$@"; }
is "$(admin_cli voucher show "$api_direct" | grep -E '^(code|mode|totalLimit):' | tr '\n' ' ')" \
  "code: $api_direct mode: direct totalLimit: 5 " "voucher-admin voucher show: its mode"
listed=$(admin_cli voucher list --mode direct)
grep -qx "$api_direct,direct,true,0,5" <<<"$listed" && ! grep -q "^$api_flash," <<<"$listed"
ok $? "voucher-admin voucher list --mode direct: the direct voucher, not the flash one"
admin_cli voucher list --mode turbo >/dev/null 2>&1
is "$?/$(admin_cli voucher show "NOSUCH_$api_direct" 2>&1; echo "/$?")" \
  "2/voucher-admin: no voucher NOSUCH_$api_direct
/1" "another --mode: usage (2); show of no voucher: 1, said"

# ---- voucher-admin voucher create: the body of POST /vouchers, its checks, its audit ----
cli_code=$(unique_code CLIMODE)
cli_body() { echo "{\"code\":\"$cli_code\",\"discountAmount\":1000,\"minOrderAmount\":0,\"totalLimit\":7,$1\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"}"; }
out=$(cli_body '"mode":"direct",' | admin_cli voucher create - 2>&1)
is "$?|$(grep -E '^(mode|totalLimit):' <<<"$out" | tr '\n' ' ')|$(sql "SELECT mode || ':' || total_limit || ':' || (redis_loaded_at IS NULL) FROM voucher WHERE code = '$cli_code'")" \
  "0|mode: direct totalLimit: 7 |direct:7:true" \
  "voucher-admin voucher create - with \"mode\":\"direct\": the row stored direct, nothing loaded into Redis"
is "$(sql "SELECT actor || ':' || (after->>'mode') FROM admin_audit WHERE target = '$cli_code' AND action = 'voucher.create'")" \
  "test:direct" "its audit row: voucher.create by the operator, the row as written with its mode"
out=$(admin_cli voucher create "$(cli_body '"mode":"flash",')" 2>&1)
is "$?|$out" "1|voucher-admin: a voucher with the code $cli_code exists" "the same code again: 1, said, nothing written"
cli_code=${cli_code}F
out=$(admin_cli voucher create "$(cli_body '"mode":"turbo",')" 2>&1)
is "$?|$out|$(sql "SELECT count(*) FROM voucher WHERE code = '$cli_code'")" \
  "2|voucher-admin: field \"mode\" must be \"direct\" or \"flash\"|0" \
  "another mode: the API's own message, usage (2), no row"
admin_cli voucher create "$(cli_body '"mode":"flash",')" >/dev/null
reserve_flash=$(http POST "/vouchers/$cli_code/reservations" '{"customerId":77,"orderId":"'"$cli_code"'-1","orderAmount":5000}'; echo "$status")
is "$(sql "SELECT mode || ':' || (redis_loaded_at IS NOT NULL) FROM voucher WHERE code = '$cli_code'"):$reserve_flash" \
  "flash:true:201" "a flash voucher made by the CLI: its first reservation loads it into Redis and takes a use (201)"
