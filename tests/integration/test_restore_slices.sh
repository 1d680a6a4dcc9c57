#!/usr/bin/env bash
# A restore in slices (proto/redis-keys.md, "A restore in slices"; issue 43):
# Redis lost a voucher's counter and kept its orders hash, and the voucher has
# more orders than --orders-scan-above. restore.lua, in one script, holds Redis
# for every order (704 ms for 100,000: tests/bench/repairs.py). In slices,
# restore_slice.lua merges the snapshot and reads the orders hash 1,000 at a
# time, and restore_finish.lua counts again what was written meanwhile and sets
# the counter at one moment. The state must be the one restore.lua leaves; a
# cancel landing between two slices must be counted as it is at the end (the
# counter and the customer's count right); notes lost or an order gone without
# a note make the last step give up, and the next pass restores.
source "$(dirname "$0")/lib.sh"
plan 14

source "$(dirname "$0")/restore_lib.sh"

# Redis loses the counter (and what the restore writes again from the orders:
# the limit key, the customers' counts, the holds), and keeps the orders but
# 100 holds, which the restore merges back from PostgreSQL: in slices, some
# land where HSCAN has passed, and only the notes count them.
lose() {
  rcli DEL "$(key remaining)" "$(key limit)" "$(key users)" "$(key holds)" >/dev/null
  rcli HDEL "$(key orders)" $(seq -f "$code-%g" 1000 1099) >/dev/null
}

start_gateway
start_writer

# A voucher of 3,000 uses with 2,100 holds, 40 confirmed and 20 cancelled (restore_lib.sh).
fill_voucher SLICES 8000000

# 1. The restore in one script, then the same loss restored in slices: the same state.
lose
one_pass once -1
dump >"$scratch/once.dump"
lose
one_pass slices 100
dump >"$scratch/slices.dump"
ok "$(diff "$scratch/once.dump" "$scratch/slices.dump" >"$scratch/dump.diff"; echo $?)" \
  "in slices Redis ends exactly as after restore.lua in one script: counter, limit, orders, customers' counts, holds, releases, expiries"
diag "$(wc -l <"$scratch/once.dump") lines of Redis's state compared"
[ -s "$scratch/dump.diff" ] && diag "$(head -20 "$scratch/dump.diff")"
steps=$(grep "$code" "$scratch/slices.txt" | grep -o "read in slices, in [0-9]* steps" | grep -o "[0-9]*")
ok "$( [ "${steps:-0}" -ge 7 ]; echo $?)" \
  "the log says the voucher was restored in slices, in ${steps:-no} steps (the notes begun, at least 5 slices of 500 for 2,100 orders, the last step)"
grep -q "read in slices" "$scratch/slices.txt" ||
  diag "$(grep -v '"level":"debug"' "$scratch/slices.txt" | grep "$code" | tail -5)"
is "$(grep "$code" "$scratch/once.txt" | grep -c "in slices") $(grep "$code" "$scratch/once.txt" | grep -c "restored a lost counter")" \
  "0 1" "with --orders-scan-above -1 it was restored in one script"
is "$(rcli GET "$(key remaining)") $(rcli ZCARD "$(key holds)") $(staged_keys) $(rcli EXISTS "$(key scan)" "$(key touched)")" \
  "920 2040 0 0" "the counter offers 3,000 - 2,080 uses; 2,040 holds; no staged key or note left"

# 2. A cancel between two slices, of an order a slice already read held: the
# last step counts it as it is then (R), so the counter and its customer's count
# are right, not what the slice read.
lose
one_pass_paused cancel
staged_until -ge 1000
ok $? "the reconciler read 1,000 orders or more in slices and stops before its next step"
id=$(staged_hold)
customer=$(rcli HGET "$(key orders)" "$id" | cut -d: -f1)
users_before=$(rcli HGET "$(key users)" "$customer")
http DELETE "/vouchers/$code/reservations/$id" >/dev/null
is "$status $(rcli HGET "$(key orders)" "$id" | cut -d: -f4)" "200 R" \
  "a cancel between the slices is answered 200 and gives its use back (R)"
run_out
want_users=$(($(rcli HVALS "$(key orders)" | grep -c "^$customer:.*:[HCXE]$")))
users_after=$(rcli HGET "$(key users)" "$customer")
is "$(rcli GET "$(key remaining)") ${users_after:-0} $(staged_keys)" \
  "921 $want_users 0" \
  "the counter offers the cancelled use too (3,000 - 2,079), and the customer's count is their orders held ($want_users, was ${users_before:-none})"
diag "$(grep -c "read in slices" "$scratch/cancel.txt") restore in slices logged"

# 3. The notes lost between two slices (the read's token gone): the last step
# gives up and writes nothing; the next pass restores.
lose
notes_lost_between_slices notes-lost 1000
is "$(rcli EXISTS "$(key remaining)") $(staged_keys)" "0 0" \
  "its read's token gone, the last step sets no counter and drops what was staged"
ok "$(grep -q "$code: the restore in slices found the orders hash changed without a note, or its notes" \
  "$scratch/notes-lost.txt"; echo $?)" "and the reconciler says why"

# 4. An order the slices read, gone without a note before the last step (an
# HDEL by hand, as a partial loss of the hash would): the same. Every order is
# read by then, so no later slice reads the hash again.
one_pass_paused unnoted
staged_until -ge "$(rcli HLEN "$(key orders)")"
rcli HDEL "$(key orders)" "$code-40" >/dev/null
run_out
is "$(rcli EXISTS "$(key remaining)") $(staged_keys)" "0 0" \
  "an order gone without a note: no counter set, the staged keys dropped"
one_pass again 100
is "$(rcli GET "$(key remaining)") $(rcli HGET "$(key orders)" "$code-40" | cut -d: -f4) $(staged_keys)" \
  "921 R 0" "the next pass restores it in slices, the released order written back from PostgreSQL"

finish
