#!/usr/bin/env bash
# The reconciler's read of a large campaign in pieces (issue 17: one script
# read a campaign of 100,000 orders and codes in 611 ms of Redis, every gateway
# waiting behind it, every pass while the campaign is busy). Above
# --orders-scan-above orders its orders and taken codes are read with HSCAN and
# finished by campaign_scan_finish.lua, which reads again, at one moment, every
# order and code a script wrote since the read began (orders_write.lua and
# taken_write.lua note them). The pass must act as one read at the finish
# would: reservations, cancels and a confirm landing between the pieces and
# the finish are no loss (a stale read sees a held order whose code taken does
# not name, and "rebuilds" keys nothing lost), a release begun long ago is
# finished, and a read that cannot be trusted is done again at once.
# Red with the notes taken out of taken_write.lua (the two new orders' codes
# unseen: a rebuild), and with the due releases dropped from the finish.
source "$(dirname "$0")/lib.sh"
plan 17

source "$(dirname "$0")/campaign_lib.sh"
campaign_test SC '"name":"scan","count":200,"discountAmount":500'
state() { rcli HGET "$k:orders" "$1" | cut -d: -f4; }
# One repairing pass (--once) that reads in pieces every campaign above
# THRESHOLD orders and stops between the pieces and their finish, for each
# voucher or campaign so read (other tests' too); its log in $scratch/NAME.txt.
# once_paused NAME THRESHOLD: in the background, its pid in $once_pid.
once_paused() {
  mkdir -p "$pause_dir"
  VOUCHER_PAUSE=reconciler-orders-scanned VOUCHER_PAUSE_DIR=$pause_dir "$bin_reconciler" --once \
    --orders-scan-above "$2" --grace 1s --admin-addr "" >"$scratch/$1.txt" 2>&1 &
  once_pid=$!
}
# reach_ours: lets the reader past other stops until it stops on this
# campaign. 1 if it never does.
reach_ours() {
  local i
  for ((i = 0; i < 600; i++)); do
    if [ -e "$pause_dir/reconciler-orders-scanned" ]; then
      [ "$(rcli SCARD "$k:scan")" = 1 ] && return 0
      rm -f "$pause_dir/reconciler-orders-scanned"
    fi
    sleep 0.05
  done
  return 1
}
# read_on PID: lets the reader go, past any later stop, until it exits.
# $stopped_here: how often it stopped on this campaign. (Its exit status
# speaks for every voucher of the stack, other tests' too: the last check
# looks for failed passes instead.)
read_on() {
  stopped_here=0
  while kill -0 "$1" 2>/dev/null; do
    if [ -e "$pause_dir/reconciler-orders-scanned" ]; then
      [ "$(rcli EXISTS "$k:scan")" = 1 ] && stopped_here=$((stopped_here + 1))
      rm -f "$pause_dir/reconciler-orders-scanned"
    fi
    sleep 0.02
  done
  wait "$1"
}
said() { grep -c "campaign $cid: $2" "$scratch/$1.txt"; }
rebuilt() { said "$1" "rebuilt the keys"; }
fell_back() { said "$1" "its orders or codes changed under their read"; }

# 120 orders, one code each.
mapfile -t codes < <(sql "SELECT code FROM campaign_code WHERE campaign_id = $cid ORDER BY seq")
failed=0
for i in $(seq 1 120); do
  reserve "${codes[$i]}" $((base + i)) "$o-$i"
  [ "$status" = 201 ] || failed=$((failed + 1))
done
is "$failed" 0 "120 codes of the campaign taken, one order each"
is "$(wait_sql "SELECT count(*) FROM campaign_redemption WHERE campaign_id = $cid" 120 60)" 120 \
  "PostgreSQL has the 120 orders"

# 1. Below the threshold: read at once, nothing to repair.
once_paused quiet 1000
read_on "$once_pid"
is "$stopped_here $(rebuilt quiet)" "0 0" "below the threshold the campaign is read at once: nothing repaired"

# 2. Above it, with writes between the pieces and the finish.
once_paused writes 50
reach_ours
ok $? "above 50 orders the pass reads the campaign in pieces (stopped before its finish)"
reserve "${codes[150]}" $((base + 150)) "$o-150"
s1=$status
reserve "${codes[151]}" $((base + 151)) "$o-151"
s2=$status
http DELETE "/vouchers/${codes[1]}/reservations/$o-1"
s3=$status
http DELETE "/vouchers/${codes[2]}/reservations/$o-2"
s4=$status
http POST "/vouchers/${codes[3]}/reservations/$o-3/confirm"
is "$s1 $s2 $s3 $s4 $status" "201 201 200 200 200" "two new orders, two cancels and a confirm during the read"
# Orders: 2 new, 2 cancelled, 1 confirmed; codes: 2 taken, "!" with them, 2 given back.
is "$(rcli SCARD "$k:touched") $(rcli SCARD "$k:touched_codes")" "6 6" \
  "five orders and five codes noted as written (each set with its placeholder)"
read_on "$once_pid"
is "$(rebuilt writes) $(fell_back writes)" "0 0" \
  "the pass sees the writes as one read at the finish would: no loss rebuilt, the read kept"
is "$(rcli EXISTS "$k:scan" "$k:touched" "$k:touched_codes")" 0 \
  "the finish leaves neither the token nor the notes"
is "$(state "$o-150") $(rcli HGET "$k:taken" "${codes[150]}") $(state "$o-1") $(rcli HEXISTS "$k:taken" "${codes[1]}")" \
  "H $o-150 R 0" "Redis as the gateway left it: the new order holds its code, the cancelled one's is free"

# 3. A release begun long ago and never finished is finished by a pass in pieces
#    (the finish lists the releases due).
held=$(rcli HGET "$k:orders" "$o-10" | cut -d: -f3)
rcli HSET "$k:orders" "$o-10" "$((base + 10)):500:$held:X" >/dev/null
rcli ZREM "$k:holds" "$o-10" >/dev/null
rcli ZADD "$k:releasing" $(( $(now_ms) - 10000 )) "$o-10" >/dev/null
once_paused stalled 50
read_on "$once_pid"
is "$stopped_here" 1 "a pass reads the campaign in pieces again"
is "$(state "$o-10") $(rcli HEXISTS "$k:taken" "${codes[10]}") $(rcli ZSCORE "$k:releasing" "$o-10")" "R 0 " \
  "the stalled release is finished in Redis: R, its code free, out of releasing"
is "$(wait_sql "SELECT status || ':' || release_reason FROM campaign_redemption WHERE order_id = '$o-10'" RELEASED:CANCELLED 30)" \
  RELEASED:CANCELLED "and published: PostgreSQL has the cancel"

# 4. A read that cannot be trusted is done again at once: its token gone, or
#    a code gone from taken without a script.
once_paused lost_token 50
reach_ours
rcli DEL "$k:scan" >/dev/null
read_on "$once_pid"
is "$(fell_back lost_token) $(rebuilt lost_token)" "1 0" \
  "with its token gone the read is done again at once (said once): nothing to rebuild"
once_paused lost_code 50
reach_ours
rcli HDEL "$k:taken" "${codes[20]}" >/dev/null
read_on "$once_pid"
is "$(fell_back lost_code) $(rebuilt lost_code) $(rcli HGET "$k:taken" "${codes[20]}")" "1 1 $o-20" \
  "a code lost without a write: read again at once, which sees the loss and rebuilds it"
# An orderId and a code no gateway would take (written by hand) are skipped, as a read
# at once skips them, not a reason to read again at once.
odd_order=$o-$(printf 'x%.0s' $(seq 1 70))
odd_code=$(printf 'Y%.0s' $(seq 1 40))
rcli HSET "$k:orders" "$odd_order" "1:500:0:R" >/dev/null
rcli HSET "$k:taken" "$odd_code" "$o-1" >/dev/null
once_paused odd 50
read_on "$once_pid"
is "$stopped_here $(fell_back odd) $(rebuilt odd)" "1 0 0" \
  "an orderId of 70 bytes and a code of 40 in Redis: the read in pieces is kept, nothing rebuilt"
rcli HDEL "$k:orders" "$odd_order" >/dev/null
rcli HDEL "$k:taken" "$odd_code" >/dev/null
ok "$(! grep -qE '"level":"error"|^voucher-reconciler: ' "$scratch"/*.txt; echo $?)" \
  "no pass failed or logged an error"

# 5. The daemon counts its reads in pieces of a campaign for the dashboards.
start_reconciler "" --orders-scan-above 50 --interval 200ms
metric_wait "$(reconciler_admin)" 'voucher_reconciler_orders_read_in_pieces_total{of="campaign",result="kept"}' 1 30
ok $? "the reconciler daemon counts its reads of a campaign in pieces"

finish
