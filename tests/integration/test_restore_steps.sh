#!/usr/bin/env bash
# A restore in steps (proto/redis-keys.md, "A restore in steps"; issue 17):
# Redis lost a voucher's counter and its orders hash, and the voucher has more
# orders than --orders-scan-above. restore.lua, in one script, holds Redis for
# every order (0.7-1 s for 100,000: tests/bench/repairs.py), longer than the
# gateways' Redis timeout. In steps, restore_stage.lua writes the snapshot's
# orders, holds and customers' counts into staging keys, 1,000 a call, and
# restore_swap.lua puts them in place with the counter at one moment.
# A lost orders hash alone (the counter kept) is rebuilt in steps the same way,
# rebuild_swap.lua doing rebuild.lua's last part. The state each leaves must be
# exactly the one the script in one step leaves; the sale goes on from it
# without overselling; and a counter or orders hash that comes back before the
# last step makes it drop what it staged.
# Red with the swap's checks taken out (checks 13-16), with the customers'
# counts staged wrong (3), with the holds not staged (3, 6, 7, 13, 15), with
# rebuild_swap.lua not moving the staged users or not filtering releasing (8).
source "$(dirname "$0")/lib.sh"
plan 16

source "$(dirname "$0")/restore_lib.sh"

# Redis loses the voucher, as a restart without its data would.
lose() {
  rcli DEL "$(key remaining)" "$(key limit)" "$(key orders)" "$(key users)" "$(key holds)" \
    "$(key amounts)" "$(key resent)" >/dev/null
}

start_gateway
start_writer

# A voucher of 3,000 uses with 2,100 holds, 40 confirmed and 20 cancelled (restore_lib.sh).
fill_voucher STEPS 8000000

# 1. The restore in one script, then the same loss restored in steps: the same state.
lose
one_pass once -1
dump >"$scratch/once.dump"
lose
one_pass steps 100
dump >"$scratch/steps.dump"
ok "$(diff "$scratch/once.dump" "$scratch/steps.dump" >"$scratch/dump.diff"; echo $?)" \
  "in steps Redis ends exactly as after the restore in one script: counter, limit, orders, customers' counts, holds, expiries"
diag "$(wc -l <"$scratch/once.dump") lines of Redis's state compared"
[ -s "$scratch/dump.diff" ] && diag "$(head -20 "$scratch/dump.diff")"
is "$(grep -c "\"code\":\"$code\".*in 4 steps\|in 4 steps.*\"code\":\"$code\"" "$scratch/steps.txt")" 1 \
  "the log says the voucher was restored in 4 steps (2,100 orders and 1,500 customers, 1,000 a step, then the swap)"
is "$(grep -c "restored a lost counter" "$scratch/once.txt") $(grep -c "in [0-9]* steps" "$scratch/once.txt")" \
  "1 0" "with --orders-scan-above -1 it was restored in one script"
is "$(rcli GET "$(key remaining)") $(rcli HLEN "$(key orders)") $(rcli ZCARD "$(key holds)")" "920 2100 2040" \
  "the counter offers 3,000 - 2,080 uses; 2,100 orders (20 released); 2,040 holds"
is "$(staged_keys)" 0 "no staged key is left"

# 2. The orders hash alone lost, the counter kept: rebuilt in one script, then in steps.
# Holds and a release begun that no order written holds (a ghost, a confirmed order)
# go; a release begun of a confirmed order writes it back as being released (X).
lose_orders() {
  rcli SET "$(key remaining)" 931 KEEPTTL >/dev/null
  rcli DEL "$(key orders)" >/dev/null
  rcli ZADD "$(key holds)" 5 "$code-ghost" 6 "$code-1" >/dev/null
  rcli ZADD "$(key releasing)" 7 "$code-ghost" 8 "$code-2" >/dev/null
}
lose_orders
one_pass rebuild-once -1
dump >"$scratch/rebuild-once.dump"
rcli ZRANGE "$(key releasing)" 0 -1 >>"$scratch/rebuild-once.dump"
lose_orders
one_pass rebuild-steps 100
dump >"$scratch/rebuild-steps.dump"
rcli ZRANGE "$(key releasing)" 0 -1 >>"$scratch/rebuild-steps.dump"
ok "$(diff "$scratch/rebuild-once.dump" "$scratch/rebuild-steps.dump" >"$scratch/rebuild.diff"; echo $?)" \
  "a lost orders hash rebuilt in steps leaves Redis exactly as rebuild.lua in one script does"
[ -s "$scratch/rebuild.diff" ] && diag "$(head -20 "$scratch/rebuild.diff")"
is "$(grep -c "wrote again a lost orders hash.*in 4 steps" "$scratch/rebuild-steps.txt") $(rcli GET "$(key remaining)") $(staged_keys) $(rcli ZSCORE "$(key holds)" "$code-ghost")$(rcli HGET "$(key orders)" "$code-2" | cut -d: -f4)" \
  "1 920 0 X" "the rebuild went in 4 steps, set the counter from 931 back to the rule's 920, dropped the ghost hold, wrote the order being released as X, and left no staged key"

# 3. The sale goes on from it: replays, limits, and never more than 3,000.
reserve 8000001 "$code-0"
is "$(answer)" "201 " "a retry of a restored order is answered 201 (replayed)"
"$bin_load" --code "$code" --attempts 1000 --connections 50 --customer-base 9000000 \
  --order-prefix "$code-new-" --amount 500000 >"$scratch/more.txt" 2>&1
is "$(rcli GET "$(key remaining)") $(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 3000 60)" \
  "0 3000" "1,000 more attempts take the 920 uses left, and no more: used_count 3,000 of 3,000"

# 4. The counter back before the last step: what was staged is dropped.
code=$(unique_code STEPS)
new_voucher "$code" 500
"$bin_load" --code "$code" --attempts 300 --connections 20 --customer-base 8100000 \
  --order-prefix "$code-" --amount 500000 >"$scratch/load2.txt" 2>&1
wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 300 60 >/dev/null
lose
one_pass_paused counter-back
staged_until -eq 300
ok $? "the reconciler staged the 300 orders and stops before its last step"
rcli SET "$(key remaining)" 7 >/dev/null
run_out
is "$(rcli GET "$(key remaining)") $(rcli EXISTS "$(key orders)") $(staged_keys)" "7 0 0" \
  "a counter set meanwhile is left as it is: no orders written, the staged keys dropped"

# 5. The orders hash back before the last step: the same, said in the log.
rcli DEL "$(key remaining)" >/dev/null
one_pass_paused orders-back
staged_until -eq 300
ok $? "again the reconciler stops before its last step"
rcli HSET "$(key orders)" "$code-x" "8100001:100000:0:C" >/dev/null
run_out
is "$(rcli EXISTS "$(key remaining)") $(rcli HLEN "$(key orders)") $(staged_keys)" "0 1 0" \
  "an orders hash written meanwhile: nothing restored over it, the staged keys dropped"
ok "$(grep -q "$code: the restore in steps found the orders hash back" "$scratch/orders-back.txt"; echo $?)" \
  "and the reconciler says why"
rcli DEL "$(key orders)" >/dev/null
one_pass again 100

finish
