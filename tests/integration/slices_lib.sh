# Shared by the tests of repairs in steps and in slices (sourced after lib.sh):
# a reconciler pass run at once or paused before each repair script, and the
# staged keys it writes meanwhile. restore_lib.sh sources it for a voucher's
# restore, rebuild and retake (staged under voucher:{CODE}:restoring:TOKEN);
# test_campaign_rebuild_slices.sh for a campaign's rebuild (under
# campaign:{cID}:rebuilding:TOKEN). The sourcing test defines staged_pattern
# (the staged keys' glob) and orders_key (the live orders hash).

staged_keys() { rcli --scan --pattern "$(staged_pattern)" | wc -l; }
# one_pass NAME ABOVE: one pass (--once) repairing with --orders-scan-above ABOVE.
one_pass() {
  "$bin_reconciler" --once --grace 60s --restore-delay 0s --orders-scan-above "$2" \
    --admin-addr "" >"$scratch/$1.txt" 2>&1
}
# one_pass_paused NAME: the same in the background, stopping before each repair script.
one_pass_paused() {
  mkdir -p "$pause_dir"
  VOUCHER_PAUSE=reconciler-each-repair VOUCHER_PAUSE_DIR=$pause_dir "$bin_reconciler" --once \
    --grace 60s --restore-delay 0s --orders-scan-above 100 --admin-addr "" >"$scratch/$1.txt" 2>&1 &
  rc_pid=$!
}
# paused_until CMD...: lets the paused reconciler past every stop until, at a
# stop, CMD... succeeds (0: it stands there); 1 if it exits first or never does.
paused_until() {
  local i
  for ((i = 0; i < 1200; i++)); do
    if [ -e "$pause_dir/reconciler-each-repair" ]; then
      "$@" && return 0
      pause_go reconciler-each-repair
    fi
    kill -0 "$rc_pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
# staged_until TEST N: until the orders the pass staged (in steps) or read (in
# slices) so far number TEST N (test's -eq, -ge): its next script is the one
# after them.
staged_until() { paused_until staged_count "$1" "$2"; }
staged_count() {
  local staged
  staged=$(rcli --scan --pattern "$(staged_pattern):orders" | head -1)
  [ -n "$staged" ] && [ "$(rcli HLEN "$staged")" "$1" "$2" ]
}
# paused_before NAME: until it stands before the script NAME (the pause's
# detail is the script's text, whose header line begins "-- NAME:").
paused_before() { paused_until grep -qs "^-- $1:" "$pause_dir/reconciler-each-repair"; }
run_out() { # lets the paused reconciler go until it exits
  while kill -0 "$rc_pid" 2>/dev/null; do
    pause_go reconciler-each-repair
    sleep 0.02
  done
  wait "$rc_pid"
  return 0
}
# staged_hold [BUT]: an order the slices read so far, held (H) both in what
# they read and now, other than the orderId BUT.
staged_hold() {
  local staged id
  staged=$(rcli --scan --pattern "$(staged_pattern):orders" | head -1)
  for id in $(rcli HRANDFIELD "$staged" 100); do
    [ "$id" = "${1:-}" ] && continue
    if [ "$(rcli HGET "$staged" "$id" | cut -d: -f4)$(rcli HGET "$(orders_key)" "$id" |
      cut -d: -f4)" = HH ]; then
      echo "$id"
      return
    fi
  done
}
