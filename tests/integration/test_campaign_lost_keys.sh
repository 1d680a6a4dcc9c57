#!/usr/bin/env bash
# A campaign's hashes lost in Redis (proto/campaigns.md, "The reconciler's
# repairs"): while taken or users is missing beside the campaign's other keys
# the gateway takes nothing (503), so no code is used twice and no customer
# passes the campaign's limit on a guess; a confirm or a cancel answers 503
# too (the outcome is unknown: a 404 would tell the order service there is no
# such order while PostgreSQL holds it), and spends no guessing-limit try,
# while an unknown order on an intact campaign keeps its 404, which does; one
# reconciler pass rebuilds them from PostgreSQL's live rows and what Redis
# still holds, and the codes answer as before: a taken code 409, a customer at
# the limit 409, a free code 201, a confirm or cancel 200. All
# the campaign's keys lost at once are told from a campaign never used by
# campaign.redis_loaded_at, set by its first take.
source "$(dirname "$0")/lib.sh"
plan 46

source "$(dirname "$0")/campaign_lib.sh"
# The guessing limits on for the client address only (confirm and cancel spend
# from it), wide enough that this test never meets them: only spending is watched.
campaign_test QL '"name":"lost","count":12,"discountAmount":500' --guard-ip-tries 1000 --guard-ip-window 1h
campaign_codes c1 c2 c3 c4 c5 c6
confirm() { http POST "/vouchers/$1/reservations/$2/confirm"; }
cancel() { http DELETE "/vouchers/$1/reservations/$2"; }
spent() { metric "$(gateway_admin)" voucher_gateway_guard_failed_tries_total; }
state() { rcli HGET "$k:orders" "$1" | cut -d: -f4; }
# One pass; a lost taken hash is rebuilt once it has been lost for the restore delay
# (--once waits it out and passes again).
pass() { "$bin_reconciler" --once --grace 60s --restore-delay 1s >>"$scratch/passes.txt" 2>&1; }

reserve "$c1" $((base + 1)) "$o-a"
s1=$status
http POST "/vouchers/$c1/reservations/$o-a/confirm"
s2=$status
reserve "$c2" $((base + 2)) "$o-b"
is "$s1 $s2 $status" "201 200 201" "customer 1 took and confirmed code 1, customer 2 holds code 2"
is "$(wait_sql "SELECT string_agg(status, ',' ORDER BY order_id) FROM campaign_redemption WHERE campaign_id = $cid" CONFIRMED,RESERVED 30)" \
  CONFIRMED,RESERVED "PostgreSQL has both"

# ---- taken lost: nothing taken until the rebuild, then code 1 is still customer 1's ----
rcli DEL "$k:taken" >/dev/null
reserve "$c1" $((base + 3)) "$o-c"
is "$status" 503 "taken lost: a stranger on code 1 gets 503, not a second use of it"
is "$(rcli EXISTS "$k:taken") $(rcli HEXISTS "$k:orders" "$o-c")" "0 0" "and nothing was written"
spent0=$(spent)
confirm "$c2" "$o-b"
a1=$(answer)
cancel "$c2" "$o-b"
a2=$(answer)
confirm "$c1" "$o-zz"
is "$a1 / $a2 / $(answer)" "503 UNAVAILABLE / 503 UNAVAILABLE / 503 UNAVAILABLE" \
  "taken lost: confirm and cancel of customer 2's hold, and of an order Redis cannot tell, answer 503, not 404"
is "$(state "$o-b") $(sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-b'") $(spent)" \
  "H RESERVED ${spent0:-0}" "the hold is untouched on both sides, and no guessing-limit try was spent"
pass
confirm "$c1" "$o-zz"
is "$(answer) $(spent)" "404 NOT_FOUND $((${spent0:-0} + 1))" \
  "after the rebuild, an unknown order on the intact campaign: 404, one try spent"
is "$(rcli HGET "$k:taken" "$c1") $(rcli HGET "$k:taken" "$c2")" "$o-a $o-b" \
  "one pass rebuilt taken from PostgreSQL: code 1 -> order a, code 2 -> order b"
reserve "$c1" $((base + 3)) "$o-c"
is "$(answer)" "409 ALREADY_USED" "a stranger on code 1 after the rebuild: 409 ALREADY_USED"
reserve "$c3" $((base + 3)) "$o-d"
is "$status" 201 "the stranger takes a free code: 201"

# ---- users lost: 503 until the rebuild, then customer 1 is still at the limit ----
rcli DEL "$k:users" >/dev/null
reserve "$c4" $((base + 1)) "$o-e"
is "$status" 503 "users lost: customer 1 on a free code gets 503, not a pass past the limit"
cancel "$c1" "$o-zz"
is "$(answer)" "503 UNAVAILABLE" "users lost: a cancel of an order taken does not map answers 503, not 404"
pass
is "$(rcli HGET "$k:users" $((base + 1))) $(rcli HGET "$k:users" $((base + 2))) $(rcli HGET "$k:users" $((base + 3)))" \
  "1 1 1" "one pass rebuilt users: each customer holds one use"
reserve "$c4" $((base + 1)) "$o-e"
is "$(answer)" "409 ALREADY_USED" "customer 1 after the rebuild: 409 ALREADY_USED (one code a customer)"
reserve "$c4" $((base + 4)) "$o-f"
is "$status" 201 "a new customer takes code 4: 201"

# ---- orders and taken lost together: the orders come back from PostgreSQL ----
wait_sql "SELECT count(*) FROM campaign_redemption WHERE campaign_id = $cid AND status <> 'RELEASED'" 4 30 >/dev/null
rcli DEL "$k:orders" "$k:taken" >/dev/null
reserve "$c5" $((base + 5)) "$o-g"
is "$status" 503 "orders and taken lost: 503"
confirm "$c2" "$o-b"
a1=$(answer)
cancel "$c1" "$o-a"
is "$a1 / $(answer)" "503 UNAVAILABLE / 503 UNAVAILABLE" \
  "orders and taken lost: confirm of the hold and cancel of the confirmed order answer 503, not 404"
pass
is "$(rcli HGET "$k:orders" "$o-a" | cut -d: -f4) $(rcli HGET "$k:orders" "$o-b" | cut -d: -f4) $(rcli HGET "$k:taken" "$c4")" \
  "C H $o-f" "the pass wrote the orders back as PostgreSQL has them (a confirmed, b held) and code 4 taken"
http POST "/vouchers/$c2/reservations/$o-b/confirm"
is "$(answer)" "200 CONFIRMED" "customer 2 confirms the hold Redis had lost: 200"
reserve "$c2" $((base + 5)) "$o-g"
is "$(answer)" "409 ALREADY_USED" "code 2 is still used: 409"
reserve "$c5" $((base + 5)) "$o-g"
is "$status" 201 "a free code after the rebuild: 201"

# ---- every key of the campaign lost (a flushed Redis) ----
is "$(wait_sql "SELECT redis_loaded_at IS NOT NULL FROM campaign WHERE id = $cid" t 30)" t \
  "the campaign's first take marked it loaded in PostgreSQL"
wait_sql "SELECT count(*) FROM campaign_redemption WHERE campaign_id = $cid AND status <> 'RELEASED'" 5 30 >/dev/null
rcli DEL "$k:taken" "$k:users" "$k:orders" "$k:holds" "$k:amounts" "$k:resent" >/dev/null
reserve "$c1" $((base + 6)) "$o-h"
is "$status" 503 "all keys lost: a stranger on code 1 gets 503, not a second use of it"
confirm "$c5" "$o-g"
a1=$(answer)
cancel "$c5" "$o-g"
is "$a1 / $(answer)" "503 UNAVAILABLE / 503 UNAVAILABLE" \
  "all keys lost (the campaign was loaded): confirm and cancel of a hold answer 503, not 404"
is "$(sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-g'")" RESERVED \
  "and PostgreSQL still holds it, untouched"
pass
is "$(rcli HGET "$k:taken" "$c1") $(rcli HGET "$k:users" $((base + 5))) $(rcli HGET "$k:orders" "$o-g" | cut -d: -f4)" \
  "$o-a 1 H" "one pass rebuilt the campaign from PostgreSQL"
reserve "$c1" $((base + 6)) "$o-h"
is "$(answer)" "409 ALREADY_USED" "code 1 after the rebuild: 409 ALREADY_USED"
reserve "$c6" $((base + 6)) "$o-h"
is "$status" 201 "a free code: 201"
cancel "$c5" "$o-g"
a1=$(answer)
confirm "$c6" "$o-h"
is "$a1 / $(answer)" "200 RELEASED / 200 CONFIRMED" "after the rebuild the cancel and the confirm go through: 200"

# ---- a cancel begun and never finished (its gateway died between the two steps), then
# orders and taken lost: the order comes back as being released, never held, so it cannot
# be confirmed (campaign_rebuild.lua, lacking_order()) ----
c7=$(code 7)
reserve "$c7" $((base + 7)) "$o-i"
is "$status $(wait_sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-i'" RESERVED 30)" "201 RESERVED" \
  "customer 7 holds code 7, PostgreSQL has it held"
# The campaign's release_begin as the gateway sends it: campaign_guard.lua takes the
# campaign's users, orders and taken off KEYS and "loaded" and the code off ARGV.
rcli EVAL "$(lua_script campaign_release_begin)" 6 "$k:orders" "$k:holds" "$k:releasing" "$k:users" "$k:orders" "$k:taken" \
  "$o-i" cancel "$(now_ms)" 1 "$c7" >/dev/null
rcli DEL "$k:orders" "$k:taken" >/dev/null
pass
st=$(state "$o-i")
ok "$([ "$st" = X ] || [ "$st" = R ]; echo $?)" \
  "the pass wrote the order back as being released ($st: X, or R once it finished it), not held"
http POST "/vouchers/$c7/reservations/$o-i/confirm"
is "$status" 409 "a confirm of the cancelled order is refused"

# ---- a cancelled order, then orders lost with taken and users kept: amounts
# (an entry per order a reservation wrote) tells the loss, so the retry of the
# cancelled orderId is refused (503) instead of taking its code anew for a 201
# that PostgreSQL keeps RELEASED; after the rebuild it is the order it was ----
c8=$(code 8) c9=$(code 9)
reserve "$c8" $((base + 8)) "$o-j"
is "$status" 201 "customer 8 holds code 8"
cancel "$c8" "$o-j"
is "$(answer) $(wait_sql "SELECT status FROM campaign_redemption WHERE order_id = '$o-j'" RELEASED 30)" \
  "200 RELEASED RELEASED" "cancelled: 200, PostgreSQL has it released"
rcli DEL "$k:orders" >/dev/null
reserve "$c8" $((base + 8)) "$o-j"
is "$(answer)" "503 UNAVAILABLE" "orders lost: the retry of the cancelled order is refused, not a new 201"
confirm "$c8" "$o-j"
is "$(answer)" "503 UNAVAILABLE" "and its confirm answers 503, not 404"
pass
reserve "$c8" $((base + 8)) "$o-j"
is "$(answer)" "409 HOLD_EXPIRED" "after the rebuild the retry is answered as the cancelled order it is"
# A forgotten hold (taken under another claim, no event) takes its amount with it, so that
# forgetting the last order is never read as orders lost.
reserve "$c9" $((base + 9)) "$o-k"
rcli EVAL "$(lua_script campaign_forget)" 8 "$k:remaining" "$k:users" "$k:orders" "$k:holds" "$k:resent" \
  "$k:users" "$k:orders" "$k:taken" "$o-k" 1 "$c9" >/dev/null
is "$status $(rcli HEXISTS "$k:orders" "$o-k") $(rcli HEXISTS "$k:amounts" "$o-k")" "201 0 0" \
  "a forgotten hold leaves neither its order nor its amount"

# ---- a hold whose event Kafka never stored (the gateway answered 503 and kept it;
# here the claim and campaign_reserve.lua as the gateway runs them, no event), then a
# hash lost beside it: the explorer's campaign-keys-not-rebuilt and
# campaign-taken-orphan. No row, no event names its code ----
c10=$(code 10) c11=$(code 11) c12=$(code 12)
now=$(now_ms)
stranded() { # CODE CUSTOMER ORDER
  rcli SET "voucher-order:{$3}" "$1:0123456789abcdef0000000000000001" >/dev/null
  rcli EVAL "$(lua_script campaign_reserve)" 6 "$k:taken" "$k:users" "$k:orders" "$k:holds" \
    "$k:resent" "$k:amounts" "$2" 1 "$3" 500 $((now + 600000)) "$now" 100000 take "$1" \
    "$((now + 86400000)):1" | head -1
}
is "$(stranded "$c10" $((base + 10)) "$o-l")" 1 "customer 10 holds code 10 in Redis only"
rcli DEL "$k:taken" >/dev/null
reserve "$c11" $((base + 11)) "$o-m"
is "$status" 503 "taken lost beside it: new orders are refused"
pass
is "$(rcli HGET "$k:taken" "$c10")" "$o-l" \
  "one pass rebuilt taken, the hold's code named by its orderId's claim"
reserve "$c11" $((base + 11)) "$o-m"
is "$status" 201 "the campaign takes new orders again (before: 503 for good)"
reserve "$c10" $((base + 12)) "$o-n"
is "$(answer)" "409 ALREADY_USED" "code 10 is still held: 409"
is "$(stranded "$c12" $((base + 12)) "$o-p")" 1 "customer 12 holds code 12 in Redis only"
rcli DEL "$k:orders" >/dev/null
pass
is "$(rcli HEXISTS "$k:taken" "$c12") $(rcli HEXISTS "$k:taken" "$c10") $(rcli HGET "$k:users" $((base + 12))) $(rcli HGET "$k:taken" "$c11")" \
  "0 0  $o-m" "orders lost beside them: the pass frees codes 12 and 10 and uncounts customer 12; code 11 (a row) stays taken"
reserve "$c12" $((base + 13)) "$o-q"
is "$status" 201 "code 12 is offered again: 201 (before: taken for good)"
finish
