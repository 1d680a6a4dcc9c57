#!/usr/bin/env bash
# A lower in slices (proto/redis-keys.md, "A lower in slices"; issue 43): a
# voucher's counter offers more than the remaining rule allows, and the voucher
# has more orders than --orders-scan-above. lower.lua, in one script, counts
# every order at once (3.6 s for 1,000,000: tests/bench/repairs.py). In slices,
# lower_slice.lua reads the orders hash 500 at a time and lower_finish.lua
# counts again what was written meanwhile and lowers the counter at one moment.
# The counter and the users hash exist all along, so reservations and releases
# go on between the slices. The counter must end where lower.lua leaves it; a
# cancel and a reservation between slices are counted as they are at the end
# (remaining + taken = the limit: no oversell, no use lowered away); notes lost
# or the counter gone make the last step give up, and the next pass repairs.
source "$(dirname "$0")/lib.sh"
plan 22

source "$(dirname "$0")/restore_lib.sh"

# The counter 50 above the rule's bound (what a lost give-back's retry, or an
# operator's SET, leaves): the pass lowers it.
raise() { rcli INCRBY "$(key remaining)" 50 >/dev/null; }
# The uses Redis's orders hold (H, C, X, E).
taken() { rcli HVALS "$(key orders)" | grep -c ':[HCXE]$'; }

start_gateway
start_writer

# A voucher of 3,000 uses with 2,100 holds, 40 confirmed and 20 cancelled (restore_lib.sh).
fill_voucher LOWER 8300000

# 1. The lower in one script, then the same excess lowered in slices: the same state.
raise
one_pass once -1
dump >"$scratch/once.dump"
raise
one_pass slices 100
dump >"$scratch/slices.dump"
ok "$(diff "$scratch/once.dump" "$scratch/slices.dump" >"$scratch/dump.diff"; echo $?)" \
  "in slices Redis ends exactly as after lower.lua in one script: counter, limit, outside, orders, \
customers' counts, holds, releases, expiries"
[ -s "$scratch/dump.diff" ] && diag "$(head -20 "$scratch/dump.diff")"
steps=$(grep "$code" "$scratch/slices.txt" | grep -o "read in slices, in [0-9]* steps" | grep -o "[0-9]*")
ok "$( [ "${steps:-0}" -ge 7 ]; echo $?)" \
  "the log says the orders were read in slices, in ${steps:-no} steps (the notes begun, at least 5 slices of 500 for 2,100 orders, the last step)"
grep -q "read in slices" "$scratch/slices.txt" ||
  diag "$(grep -v '"level":"debug"' "$scratch/slices.txt" | grep "$code" | tail -5)"
is "$(grep "$code" "$scratch/once.txt" | grep -c "in slices") $(grep "$code" "$scratch/once.txt" | grep -c "lowered a counter")" \
  "0 1" "with --orders-scan-above -1 it was lowered in one script"
is "$(rcli GET "$(key remaining)") $(taken) $(staged_keys) $(rcli EXISTS "$(key scan)" "$(key touched)")" \
  "920 2080 0 0" "the counter offers 3,000 - 2,080 uses; no staged key or note left"

# 2. A cancel between two slices of an order a slice already read held: the
# last step counts it as it is then (R), so its use stays offered.
raise
one_pass_paused cancel
staged_until -ge 1000
ok $? "the reconciler read 1,000 orders or more in slices and stops before its next step"
id=$(staged_hold)
http DELETE "/vouchers/$code/reservations/$id" >/dev/null
is "$status $(rcli HGET "$(key orders)" "$id" | cut -d: -f4) $(rcli GET "$(key remaining)")" \
  "200 R 971" "a cancel between the slices is answered 200 and gives its use back (R)"
run_out
is "$(rcli GET "$(key remaining)") $(($(rcli GET "$(key remaining)") + $(taken))) $(staged_keys)" \
  "921 3000 0" "the counter keeps the cancelled use: 3,000 - 2,079 (remaining + taken = the limit)"

# 3. A reservation after the last slice read the whole hash, before the last
# step: no slice read it, the notes count it, and its use is not offered twice.
raise
one_pass_paused reserve
paused_before lower_finish
ok $? "the reconciler read every order and stops before lower_finish.lua"
reserve 8399999 "$code-new" >/dev/null
is "$status $(rcli HGET "$(key orders)" "$code-new" | cut -d: -f4) $(rcli GET "$(key remaining)")" \
  "201 H 970" "a reservation between the slices and the last step is answered 201 and takes a use"
run_out
is "$(rcli GET "$(key remaining)") $(($(rcli GET "$(key remaining)") + $(taken))) $(staged_keys)" \
  "920 3000 0" "the new order counted: 3,000 - 2,080 offered (remaining + taken = the limit)"

# 4. The notes lost between two slices (the read's token gone): the last step
# gives up and writes nothing; the next pass lowers.
raise
notes_lost_between_slices notes-lost 1000
is "$(rcli GET "$(key remaining)") $(staged_keys)" "970 0" \
  "its read's token gone, the last step leaves the counter as it was and drops what was staged"
ok "$(grep -q "$code: the lower in slices found at its last step" \
  "$scratch/notes-lost.txt"; echo $?)" "and the reconciler says why"
one_pass again 100
is "$(rcli GET "$(key remaining)") $(staged_keys)" "920 0" "the next pass lowers it in slices"

# 4b. The notes lost after the last slice, before the last step (the token
# expired then): a write meanwhile went unnoted, so the last step's count
# cannot be trusted. It gives up and writes nothing; the next pass lowers.
raise
one_pass_paused notes-lost-last
paused_before lower_finish
ok $? "the reconciler read every order and stops before lower_finish.lua"
rcli DEL "$(key scan)" >/dev/null
run_out
is "$(rcli GET "$(key remaining)") $(staged_keys)" "970 0" \
  "its read's token gone before the last step, the counter stays as it was and what was staged is dropped"
ok "$(grep -q "$code: the lower in slices found at its last step" \
  "$scratch/notes-lost-last.txt"; echo $?)" "and the reconciler says why"
one_pass again-last 100
is "$(rcli GET "$(key remaining)") $(staged_keys)" "920 0" "the next pass lowers it in slices"

# 5. The counter lost between two slices: the slices and the last step refuse
# (lower.lua's COUNTER_MISSING), nothing is written; the next pass restores it.
raise
one_pass_paused counter-lost
staged_until -ge 500
ok $? "the reconciler stops between two slices once more"
rcli DEL "$(key remaining)" >/dev/null
run_out
is "$(rcli EXISTS "$(key remaining)") $(staged_keys)" "0 0" \
  "the counter gone, the lower writes no counter and drops what was staged"

finish
