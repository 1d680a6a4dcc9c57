#!/usr/bin/env bash
# The reconciler's read of a large orders hash in pieces (issue 17: a full read
# of a voucher of 289,000 orders held Redis for 140-320 ms with one HGETALL, every
# gateway waiting behind it). Above --orders-scan-above orders the hash is read
# with HSCAN and finished by scan_finish.lua, which reads again, at one moment
# with the counter, every order a script wrote since the read began
# (orders_write.lua notes them). The pass must judge what it would have judged
# from one HGETALL at the finish: writes landing between the pieces and the
# finish (cancels, confirms, new orders) are no drift, two readers at once do
# not spoil each other's list, and a read that cannot be trusted (its token
# gone, orders lost without a write) is done again at once.
# Red with the note in orders_write.lua taken out (the cancels read as held:
# DRIFTED, exit 1), and with scan_finish.lua emptying touched on every finish.
source "$(dirname "$0")/lib.sh"
plan 22

key() { echo "voucher:{$code}:$1"; }
# One pass (--once, repairing nothing) that reads in pieces every orders hash
# above THRESHOLD orders and stops between the pieces and their finish, for
# each such voucher (other tests' too); its table and log in $scratch/NAME.txt.
# once_paused NAME THRESHOLD [DIR]: in the background, its pid in $once_pid.
once_paused() {
  local dir=${3:-$pause_dir}
  mkdir -p "$dir"
  VOUCHER_PAUSE=reconciler-orders-scanned VOUCHER_PAUSE_DIR=$dir "$bin_reconciler" --once \
    --report-only --orders-scan-above "$2" --grace 60s --admin-addr "" >"$scratch/$1.txt" 2>&1 &
  once_pid=$!
}
# reach_ours TOKENS [DIR]: lets the reader past other vouchers' stops until it
# stops on this one, which then has TOKENS reads under way. 1 if it never does.
reach_ours() {
  local dir=${2:-$pause_dir} i
  for ((i = 0; i < 600; i++)); do
    if [ -e "$dir/reconciler-orders-scanned" ]; then
      [ "$(rcli SCARD "$(key scan)")" = "$1" ] && return 0
      rm -f "$dir/reconciler-orders-scanned"
    fi
    sleep 0.05
  done
  return 1
}
# read_on PID [DIR]: lets the reader go, past any later stop, until it exits;
# returns its exit status. Sets $stopped_here: how often it stopped with a read
# of this voucher under way.
read_on() {
  local dir=${2:-$pause_dir}
  stopped_here=0
  while kill -0 "$1" 2>/dev/null; do
    if [ -e "$dir/reconciler-orders-scanned" ]; then
      [ "$(rcli EXISTS "$(key scan)")" = 1 ] && stopped_here=$((stopped_here + 1))
      rm -f "$dir/reconciler-orders-scanned"
    fi
    sleep 0.02
  done
  wait "$1"
}
verdict() { awk -v c="$code" '$1 == c { print $NF }' "$scratch/$1.txt"; }
cancel() { http DELETE "/vouchers/$code/reservations/$code-$1"; }
confirm() { http POST "/vouchers/$code/reservations/$code-$1/confirm"; }
reserve() { http POST "/vouchers/$code/reservations" "{\"customerId\":$1,\"orderId\":\"$code-$2\",\"orderAmount\":500000}"; }

start_gateway
start_writer

code=$(unique_code SCAN)
new_voucher "$code" 3000
"$bin_load" --code "$code" --attempts 1500 --connections 50 --customer-base 7000000 \
  --order-prefix "$code-" >"$scratch/load.txt" 2>&1
ok $? "1,500 orders held on a voucher of 3,000"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 1500 60)" 1500 \
  "PostgreSQL counts them"

# 1. Below the threshold (the default 10,000 here) the hash is read at once.
once_paused default 10000
read_on "$once_pid"
is "$(verdict default) $stopped_here" "consistent 0" \
  "with the default threshold 1,500 orders are read at once (no read in pieces of them): consistent"

# 2. Above it: in pieces, and judged as one read.
once_paused quiet 500
reach_ours 1
ok $? "above 500 orders the pass reads them in pieces (a read under way, stopped before its finish)"
read_on "$once_pid"
is "$(verdict quiet)" consistent "read in pieces, the voucher is consistent"
is "$(rcli EXISTS "$(key scan)" "$(key touched)")" 0 "the finish leaves neither the token nor the list of written orders"

# 3. Writes between the pieces and the finish: three cancels, two confirms and
#    two new orders. What the finish reads again makes them no drift.
once_paused writes 500
reach_ours 1
ok $? "a second read in pieces stops before its finish"
for o in 1 2 3; do cancel "$o"; [ "$(answer)" = "200 RELEASED" ] || diag "cancel $o: $(answer)"; done
for o in 4 5; do confirm "$o"; [ "$(answer)" = "200 CONFIRMED" ] || diag "confirm $o: $(answer)"; done
reserve 8000001 new1
s1=$(answer)
reserve 8000002 new2
is "$s1 $(answer)" "201  201 " "two new orders taken during the read"
remaining=$(rcli GET "$(key remaining)")
is "$remaining $(rcli SCARD "$(key touched)")" "1501 8" \
  "remaining 1501 (3000 - 1500 + 3 - 2) and seven orders noted as written (with the placeholder)"
read_on "$once_pid"
is "$(verdict writes)" behind "the writes are judged as events still to reach PostgreSQL (behind), not as drift"
ok "$(! grep -q "$code: the orders changed" "$scratch/writes.txt"; echo $?)" "the read in pieces was kept"
is "$(rcli GET "$(key remaining)")" "$remaining" "the counter is as the gateway left it"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'" 1502 30)" 1502 \
  "the writer has every order"

# 4. Two readers at once: the first to finish must not empty the list the other needs.
once_paused first 500 "$scratch/pause-a"
first=$once_pid
reach_ours 1 "$scratch/pause-a"
once_paused second 500 "$scratch/pause-b"
second=$once_pid
reach_ours 2 "$scratch/pause-b"
ok $? "two reads in pieces under way at once"
for o in 6 7 8; do cancel "$o"; done
read_on "$second" "$scratch/pause-b"
is "$(rcli SCARD "$(key scan)") $(rcli SISMEMBER "$(key touched)" "$code-7")" "1 1" \
  "the second finished; the first's token and the written orders stay"
read_on "$first" "$scratch/pause-a"
is "$(verdict first)" behind "the first reader, finishing last, still sees the three cancels (no drift)"

# 5. A read that cannot be trusted is done again at once: its token gone
#    (outlived, or Redis lost it), or orders lost without any script's write.
wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code' AND status = 'RELEASED'" 6 30 >/dev/null
once_paused lost_token 500
reach_ours 1
rcli DEL "$(key scan)" >/dev/null
read_on "$once_pid"
is "$(verdict lost_token) $(grep -c "$code: the orders changed" "$scratch/lost_token.txt")" "consistent 1" \
  "with its token gone the read is done again at once (said once), and the voucher is consistent"
value=$(rcli HGET "$(key orders)" "$code-100")
once_paused lost_order 500
reach_ours 1
rcli HDEL "$(key orders)" "$code-100" >/dev/null
read_on "$once_pid"
is "$(grep -c "$code: the orders changed" "$scratch/lost_order.txt") $(verdict lost_order)" "1 DRIFTED" \
  "an order lost without a write: the size differs, the read is done again at once and sees the loss"
rcli HSET "$(key orders)" "$code-100" "$value" >/dev/null
once_paused last 500
read_on "$once_pid"
is "$(verdict last) $stopped_here" "consistent 1" "the order put back, a last read in pieces finds the voucher consistent"
# An orderId no gateway would take (70 bytes: written by hand) is an unreadable order, as
# a read at once counts it, not a reason to read again at once.
odd=$code-$(printf 'x%.0s' $(seq 1 70))
rcli HSET "$(key orders)" "$odd" "1:100:0:R" >/dev/null
once_paused odd 500
read_on "$once_pid"
is "$(verdict odd) $stopped_here $(grep -c "$code: the orders changed" "$scratch/odd.txt") $(grep -c "$code: 1 orders in Redis could not be read" "$scratch/odd.txt")" \
  "consistent 1 0 1" "an orderId of 70 bytes is counted unreadable (said), and the read in pieces is kept"
rcli HDEL "$(key orders)" "$odd" >/dev/null
# A pass that fails says "voucher-reconciler: ..." and exits 2; the daemon's log says error.
ok "$(! grep -qE '"level":"error"|^voucher-reconciler: ' "$scratch"/*.txt; echo $?)" \
  "no pass failed or logged an error"

# 6. The daemon counts its reads in pieces for the dashboards.
start_reconciler "" --orders-scan-above 500 --interval 200ms
metric_wait "$(reconciler_admin)" voucher_reconciler_orders_read_in_pieces_total 1 30
ok $? "the reconciler daemon counts its reads in pieces (voucher_reconciler_orders_read_in_pieces_total)"

finish
