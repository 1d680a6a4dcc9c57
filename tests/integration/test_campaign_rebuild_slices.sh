#!/usr/bin/env bash
# A campaign's rebuild in slices (proto/campaigns.md, "A rebuild in slices";
# issue 43): Redis lost a campaign's taken (or users) hash and kept its orders,
# and the campaign has more orders than --orders-scan-above.
# campaign_rebuild.lua, in one script, holds Redis for every order (1.1 s for
# 100,000: tests/bench/repairs.py). In slices, campaign_rebuild_slice.lua
# counts 500 of the pass's orders at a time, each with its code, into staged
# keys, and campaign_rebuild_finish.lua counts again what was written meanwhile
# and puts taken and users in place at one moment. The state must be the one
# campaign_rebuild.lua leaves; a cancel and a confirm landing between two
# slices (users lost: the guarded scripts still run) must end right (the
# cancelled code free and offered again, the customers' counts their orders
# held); notes lost make the last step give up, and the next pass rebuilds; two
# orders on one code refuse the rebuild in slices as they refuse the one script.
source "$(dirname "$0")/lib.sh"
plan 17

source "$(dirname "$0")/campaign_lib.sh"
campaign_test RS '"name":"slices","count":1300,"discountAmount":500,"perCustomerLimit":2'

# Everything Redis holds of the campaign, as a rebuild writes it.
dump() {
  local x
  for x in taken users orders holds; do echo "$x expires $(rcli PEXPIRETIME "$k:$x")"; done
  rcli HGETALL "$k:taken" | paste - - | sed 's/^/taken /' | sort
  rcli HGETALL "$k:users" | paste - - | sed 's/^/user /' | sort
  rcli HGETALL "$k:orders" | paste - - | sort
  rcli ZRANGE "$k:holds" 0 -1 WITHSCORES | paste - - | sed 's/^/hold /' | sort
  rcli ZRANGE "$k:releasing" 0 -1 | sed 's/^/releasing /' | sort
}
staged_pattern() { echo "$k:rebuilding:*"; }
orders_key() { echo "$k:orders"; }
source "$(dirname "$0")/slices_lib.sh"
code_of() { sql "SELECT code FROM campaign_redemption WHERE order_id = '$1'"; }
customer_of() { rcli HGET "$k:orders" "$1" | cut -d: -f1; }
# held_by CUSTOMER: the orders Redis holds of the customer that hold a use.
held_by() { rcli HVALS "$k:orders" | grep -c "^$1:.*:[HCXE]$"; }

# 1,100 orders of 550 customers (two each), 20 confirmed, 10 cancelled.
mapfile -t codes < <(sql "SELECT code FROM campaign_code WHERE campaign_id = $cid ORDER BY seq")
for i in $(seq 1 1100); do
  [ "$i" -gt 1 ] && echo next
  printf 'url = "%s/vouchers/%s/reservations"\nheader = "Content-Type: application/json"\n' \
    "$base_url" "${codes[$i]}"
  printf 'data-binary = "{\\"customerId\\":%d,\\"orderId\\":\\"%s-%d\\",\\"orderAmount\\":10000}"\n' \
    $((base + i / 2)) "$o" "$i"
  printf 'output = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n'
done >"$scratch/reserve.curl"
curl -s -Z --parallel-max 8 -K "$scratch/reserve.curl" >"$scratch/reserved.txt"
is "$(grep -c '^201$' "$scratch/reserved.txt")" 1100 "1,100 codes of the campaign taken, by 550 customers"
for i in $(seq 1 20); do http POST "/vouchers/${codes[$i]}/reservations/$o-$i/confirm" >/dev/null; done
for i in $(seq 21 30); do http DELETE "/vouchers/${codes[$i]}/reservations/$o-$i" >/dev/null; done
is "$(wait_sql "SELECT count(*) FILTER (WHERE status <> 'RELEASED') || ':' || count(*) FILTER (WHERE status = 'CONFIRMED') FROM campaign_redemption WHERE campaign_id = $cid" 1090:20 60)" \
  1090:20 "PostgreSQL has 1,090 live orders, 20 confirmed"

# Redis loses taken and 50 holds, which the rebuild writes back from PostgreSQL.
lose() {
  rcli DEL "$k:taken" >/dev/null
  rcli HDEL "$k:orders" $(seq -f "$o-%g" 1000 1049) >/dev/null
}

# 1. The rebuild in one script, then the same loss rebuilt in slices: the same state.
lose
one_pass once -1
dump >"$scratch/once.dump"
lose
one_pass slices 100
dump >"$scratch/slices.dump"
ok "$(diff "$scratch/once.dump" "$scratch/slices.dump" >"$scratch/dump.diff"; echo $?)" \
  "in slices Redis ends exactly as after campaign_rebuild.lua in one script: taken, users, orders, holds, releases, expiries"
diag "$(wc -l <"$scratch/once.dump") lines of Redis's state compared"
[ -s "$scratch/dump.diff" ] && diag "$(head -20 "$scratch/dump.diff")"
steps=$(grep "campaign $cid: rebuilt" "$scratch/slices.txt" | grep -o "in slices, in [0-9]* steps" | grep -o "[0-9]*")
ok "$( [ "${steps:-0}" -ge 5 ]; echo $?)" \
  "the log says the campaign was rebuilt in slices, in ${steps:-no} steps (the notes begun, 3 slices of 500 for 1,100 orders, the last step)"
is "$(grep "campaign $cid: rebuilt" "$scratch/once.txt" | grep -c "in slices") $(grep -c "campaign $cid: rebuilt" "$scratch/once.txt")" \
  "0 1" "with --orders-scan-above -1 it was rebuilt in one script"
is "$(rcli HLEN "$k:taken") $(rcli HGET "$k:taken" "${codes[1000]}") $(staged_keys) $(rcli EXISTS "$k:scan" "$k:touched" "$k:touched_codes")" \
  "1091 $o-1000 0 0" "taken maps the 1,090 codes held (and !), a hold written back among them; no staged key or note left"

# 2. users lost alone: confirms and cancels still run. A cancel and a confirm
# between two slices, of orders a slice already counted held: the last step counts
# them as they are then.
rcli DEL "$k:users" >/dev/null
one_pass_paused writes
staged_until -ge 500
ok $? "the reconciler counted 500 orders or more in slices and stops before its next step"
gone=$(staged_hold)
paid=$(staged_hold "$gone")
gone_code=$(code_of "$gone")
gone_customer=$(customer_of "$gone")
http DELETE "/vouchers/$gone_code/reservations/$gone"
s1=$status
http POST "/vouchers/$(code_of "$paid")/reservations/$paid/confirm"
is "$s1 $status $(rcli HGET "$k:orders" "$gone" | cut -d: -f4) $(rcli HGET "$k:orders" "$paid" | cut -d: -f4)" \
  "200 200 R C" "between the slices a cancel (R, its code given back) and a confirm (C) are answered 200"
run_out
is "$(rcli HGET "$k:users" "$gone_customer") $(rcli HEXISTS "$k:taken" "$gone_code") $(rcli HGET "$k:taken" "$(code_of "$paid")") $(staged_keys)" \
  "$(held_by "$gone_customer") 0 $paid 0" \
  "the cancelling customer's count is their orders held, not what the slice counted; the cancelled code is free, the confirmed one still its order's"
grep -q "campaign $cid: rebuilt.*in slices" "$scratch/writes.txt" ||
  diag "$(grep "campaign $cid" "$scratch/writes.txt" | tail -5)"
reserve "$gone_code" $((base + 5000)) "$o-again"
is "$status" 201 "the cancelled code is offered again: a new customer takes it"
bad=0
for c in $(rcli HKEYS "$k:users" | grep -v '!' | shuf -n 40 --random-source=<(yes)); do
  [ "$(rcli HGET "$k:users" "$c")" = "$(held_by "$c")" ] || bad=$((bad + 1))
done
is "$bad" 0 "40 customers' counts are each their orders held"

# 3. The notes lost between two slices (the read's token gone): the last step
# gives up and writes nothing; the next pass rebuilds.
lose
one_pass_paused notes-lost
staged_until -ge 500
ok $? "again the reconciler stops between two slices"
rcli DEL "$k:scan" >/dev/null
run_out
is "$(rcli EXISTS "$k:taken") $(staged_keys)" "0 0" \
  "its read's token gone, the last step writes no taken and drops what was staged"
ok "$(grep -q "campaign $cid: the rebuild in slices found its notes of what was written meanwhile lost" \
  "$scratch/notes-lost.txt"; echo $?)" "and the reconciler says why"
one_pass again 100
is "$(rcli HGET "$k:taken" "${codes[1000]}") $(rcli HLEN "$k:taken") $(staged_keys)" "$o-1000 1091 0" \
  "the next pass rebuilds it in slices"

# 4. campaign_rebuild.lua's refusals hold in slices: a hold only Redis has (no row,
# no event) whose orderId's claim names a code another order holds is a second
# order on one code: nothing rebuilt, logged; without it the next pass rebuilds.
lose
twice=$o-twice
held=$(rcli HGET "$k:orders" "$o-100" | cut -d: -f3)
rcli HSET "$k:orders" "$twice" "$((base + 7000)):500:$held:H" >/dev/null
rcli SET "voucher-order:{$twice}" "${codes[100]}:t0ken" >/dev/null
one_pass twice 100
is "$(rcli EXISTS "$k:taken") $(staged_keys) $(grep -c "campaign $cid: not rebuilt (two orders hold code ${codes[100]}), in slices" "$scratch/twice.txt")" \
  "0 0 1" "two orders on one code: the slices refuse, taken stays lost, nothing staged is left, the log says why"
rcli HDEL "$k:orders" "$twice" >/dev/null
rcli DEL "voucher-order:{$twice}" >/dev/null
one_pass after-twice 100
is "$(rcli HGET "$k:taken" "${codes[100]}") $(rcli HLEN "$k:taken") $(staged_keys)" "$o-100 1091 0" \
  "without the second order the next pass rebuilds in slices"

finish
