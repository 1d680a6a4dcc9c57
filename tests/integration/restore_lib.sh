# Shared by the restore tests (sourced after lib.sh): test_restore_steps.sh
# (the orders hash lost: a restore or rebuild in steps) and
# test_restore_slices.sh (the counter lost, the orders kept: a restore in
# slices). $code is the voucher under test.

key() { echo "voucher:{$code}:$1"; }
reserve() { http POST "/vouchers/$code/reservations" "{\"customerId\":$1,\"orderId\":\"$2\",\"orderAmount\":500000}"; }
# Everything Redis holds of the voucher, as a restore writes it.
dump() {
  local k
  for k in remaining limit outside; do echo "$k $(rcli GET "$(key $k)")"; done
  for k in remaining users orders holds limit; do echo "$k expires $(rcli PEXPIRETIME "$(key $k)")"; done
  rcli HGETALL "$(key orders)" | paste - - | sort
  rcli HGETALL "$(key users)" | paste - - | sed 's/^/user /' | sort
  rcli ZRANGE "$(key holds)" 0 -1 WITHSCORES | paste - - | sed 's/^/hold /' | sort
  rcli ZRANGE "$(key releasing)" 0 -1 | sed 's/^/releasing /' | sort
}
staged_keys() { rcli --scan --pattern "voucher:{$code}:restoring:*" | wc -l; }
# restore NAME ABOVE: one pass (--once) restoring with --orders-scan-above ABOVE.
restore() {
  "$bin_reconciler" --once --grace 60s --restore-delay 0s --orders-scan-above "$2" \
    --admin-addr "" >"$scratch/$1.txt" 2>&1
}
# restore_paused NAME: the same in the background, stopping before each repair script.
restore_paused() {
  VOUCHER_PAUSE=reconciler-each-repair VOUCHER_PAUSE_DIR=$pause_dir "$bin_reconciler" --once \
    --grace 60s --restore-delay 0s --orders-scan-above 100 --admin-addr "" >"$scratch/$1.txt" 2>&1 &
  rc_pid=$!
}
# staged_until TEST N: lets the paused reconciler past every stop until the
# orders it staged (a restore in steps) or read (in slices) so far number TEST
# N (test's -eq, -ge): its next script is the one after them; 1 if never.
staged_until() {
  local i staged
  for ((i = 0; i < 1200; i++)); do
    if [ -e "$pause_dir/reconciler-each-repair" ]; then
      staged=$(rcli --scan --pattern "voucher:{$code}:restoring:*:orders" | head -1)
      [ -n "$staged" ] && [ "$(rcli HLEN "$staged")" "$1" "$2" ] && return 0
      pause_go reconciler-each-repair
    fi
    sleep 0.05
  done
  return 1
}
run_out() { # lets the paused reconciler go until it exits
  while kill -0 "$rc_pid" 2>/dev/null; do
    pause_go reconciler-each-repair
    sleep 0.02
  done
  wait "$rc_pid"
  return 0
}
