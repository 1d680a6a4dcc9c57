#!/usr/bin/env bash
# A retake in slices (proto/redis-keys.md, "A retake in slices"; issue 43):
# Redis lost a voucher's users hash (the customers' counts) and kept its
# counter and orders, and the voucher has more orders than
# --orders-scan-above. retake.lua, in one script, raises every customer from
# every order at once (428 ms for 100,000: tests/bench/repairs.py). In slices,
# retake_slice.lua merges the snapshot and reads the orders hash 500 at a time,
# and retake_finish.lua counts again what was written meanwhile, puts the
# counts in place and lowers the counter at one moment. The state must be the
# one retake.lua leaves; a reservation between two slices is refused as
# before (nothing taken); a cancel between two slices is counted as it is at
# the end (the counter and the customer's count right); notes lost make the
# last step give up, and the next pass retakes.
source "$(dirname "$0")/lib.sh"
plan 18

source "$(dirname "$0")/restore_lib.sh"

# Redis loses the customers' counts, and 100 holds, which the retake merges
# back from PostgreSQL: in slices, some land where HSCAN has passed, and only
# the notes count them.
lose() {
  rcli DEL "$(key users)" >/dev/null
  rcli HDEL "$(key orders)" $(seq -f "$code-%g" 1000 1099) >/dev/null
}

start_gateway
start_writer

# A voucher of 3,000 uses with 2,100 holds, 40 confirmed and 20 cancelled (restore_lib.sh).
fill_voucher RETAKE 8100000

# 1. The retake in one script, then the same loss retaken in slices: the same state.
lose
one_pass once -1
dump >"$scratch/once.dump"
lose
one_pass slices 100
dump >"$scratch/slices.dump"
ok "$(diff "$scratch/once.dump" "$scratch/slices.dump" >"$scratch/dump.diff"; echo $?)" \
  "in slices Redis ends exactly as after retake.lua in one script: counter, orders, customers' \
counts, holds, releases, expiries"
diag "$(wc -l <"$scratch/once.dump") lines of Redis's state compared, $(grep -c '^user ' "$scratch/once.dump") customers"
[ -s "$scratch/dump.diff" ] && diag "$(head -20 "$scratch/dump.diff")"
steps=$(grep "$code" "$scratch/slices.txt" | grep -o "read in slices, in [0-9]* steps" | grep -o "[0-9]*")
ok "$( [ "${steps:-0}" -ge 7 ]; echo $?)" \
  "the log says the customers' counts were read in slices, in ${steps:-no} steps (the notes begun, at least 5 slices of 500 for 2,100 orders, the last step)"
grep -q "read in slices" "$scratch/slices.txt" ||
  diag "$(grep -v '"level":"debug"' "$scratch/slices.txt" | grep "$code" | tail -5)"
is "$(grep "$code" "$scratch/once.txt" | grep -c "in slices") $(grep "$code" "$scratch/once.txt" | grep -c "users hash lost")" \
  "0 1" "with --orders-scan-above -1 they were counted again in one script"
is "$(rcli GET "$(key remaining)") $(rcli HLEN "$(key orders)") $(staged_keys) $(rcli EXISTS "$(key scan)" "$(key touched)")" \
  "920 2100 0 0" "the counter offers 3,000 - 2,080 uses; 2,100 orders; no staged key or note left"

# 2. Between two slices: a new reservation is refused as while the counts are
# lost (503, nothing taken); a cancel of an order a slice already read held is
# counted at the last step as it is then (R), so the counter and its
# customer's count are right, not what the slice read.
lose
one_pass_paused between
staged_until -ge 1000
ok $? "the reconciler read 1,000 orders or more in slices and stops before its next step"
reserve 8199999 "$code-new" >/dev/null
is "$status $(rcli HEXISTS "$(key orders)" "$code-new") $(rcli GET "$(key remaining)")" "503 0 920" \
  "a new reservation between the slices is answered 503 and takes nothing"
id=$(staged_hold)
customer=$(rcli HGET "$(key orders)" "$id" | cut -d: -f1)
http DELETE "/vouchers/$code/reservations/$id" >/dev/null
is "$status $(rcli HGET "$(key orders)" "$id" | cut -d: -f4)" "200 R" \
  "a cancel between the slices is answered 200 and gives its use back (R)"
run_out
want_users=$(($(rcli HVALS "$(key orders)" | grep -c "^$customer:.*:[HCXE]$")))
users_after=$(rcli HGET "$(key users)" "$customer")
is "$(rcli GET "$(key remaining)") ${users_after:-0} $(staged_keys)" \
  "921 $want_users 0" \
  "the counter keeps the cancelled use (3,000 - 2,079), and the customer's count is their orders held ($want_users)"
reserve 8199999 "$code-new" >/dev/null
is "$status $(rcli HGET "$(key users)" 8199999)" "201 1" "after the last step a reservation is taken again"

# 3. The notes lost between two slices (the read's token gone): the last step
# gives up and writes nothing; the next pass retakes.
lose
notes_lost_between_slices notes-lost 1000
is "$(rcli EXISTS "$(key users)") $(staged_keys)" "0 0" \
  "its read's token gone, the last step writes no customer's count and drops what was staged"
ok "$(grep -q "$code: the retake in slices found at its last step" \
  "$scratch/notes-lost.txt"; echo $?)" "and the reconciler says why"
one_pass again 100
is "$(rcli EXISTS "$(key users)") $(rcli GET "$(key remaining)") $(staged_keys)" "1 920 0" \
  "the next pass puts the counts back in slices"

# 4. A slice that refuses (users written again before it: only a repair does)
# leaves the read unwhole, even if users is missing again by the last step:
# the last step's size check (the slices read fewer orders than the hash holds)
# gives up rather than put partial counts in place.
lose
one_pass_paused users-back
staged_until -ge 500
ok $? "the reconciler read 500 orders or more in slices and stops before its next slice"
rcli HSET "$(key users)" 8199998 0 >/dev/null
pause_go reconciler-each-repair
pause_wait reconciler-each-repair
rcli DEL "$(key users)" >/dev/null
run_out
is "$(rcli EXISTS "$(key users)") $(rcli GET "$(key remaining)") $(staged_keys)" "0 920 0" \
  "a slice refused: the last step writes no count (users still missing), the counter as it was"
one_pass after 100
is "$(rcli EXISTS "$(key users)") $(rcli GET "$(key remaining)") $(staged_keys)" "1 920 0" \
  "and the next pass puts the counts back"

finish
