#!/usr/bin/env bash
# The reconciler's counter repairs (restore, retake, lower) against a gateway
# that keeps selling while a pass runs (issue 22, races 1, 5, 6, 7), and the
# remaining rule (issue 26: a used_count that counts uses without rows).
#
# Each race is hit deterministically: voucher-reconciler --once stops at a
# pause point (common/vc_fault.h) between its reads and its repair, the test
# makes the gateway call that opens the window, then lets it go. The checks
# are the promises: Redis never offers more than PostgreSQL allows (a
# reservation beyond it gets 409 and the writer dead-letters nothing), every
# 201 gets its row, and nothing stays undersold.
source "$(dirname "$0")/lib.sh"
plan 46

reserve() { # CODE CUSTOMER ORDER -> $status $body
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":500000}"
}
cancel() { http DELETE "/vouchers/$1/reservations/$2"; }
confirm() { http POST "/vouchers/$1/reservations/$2/confirm"; }
state() { rcli HGET "voucher:{$1}:orders" "$2" | awk -F: '{print $4}'; }
used() { sql "SELECT used_count FROM voucher WHERE code = '$1'"; }
live_rows() { sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$1' AND status IN ('RESERVED', 'CONFIRMED')"; }
# Dead letters whose key is CODE.
dead_letters() {
  kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events.dlt -o beginning -e -q -f '%k\n' 2>/dev/null |
    grep -cx "$1"
}
# The verdict of CODE in the first table a --once run printed (before its repairs).
verdict_before() { awk -v c="$1" '$1 == c { print $NF; exit }' "$2"; }
# ... and in the last one (after them, when it made any).
verdict_after() { awk -v c="$1" '$1 == c { v = $NF } END { print v }' "$2"; }

# rc_start OUT [POINT...]: voucher-reconciler --once in the background, stopping at
# each POINT; the test acts at pause_wait/pause_go, then rc_finish. Its table
# goes to OUT, its log lines to OUT.log (apart: they would interleave).
rc_start() {
  local out=$1 points
  shift
  points=$(IFS=,; echo "$*")
  VOUCHER_PAUSE=$points VOUCHER_PAUSE_DIR=$pause_dir \
    "$bin_reconciler" --once --grace 60s --restore-delay 0s >"$out" 2>"$out.log" &
  rc_pid=$!
}
# Lets every later pause go (--once runs a second pass after repairs) and waits,
# at most 60 s, for the reconciler to exit.
rc_finish() {
  local i
  for ((i = 0; i < 1200; i++)); do
    kill -0 "$rc_pid" 2>/dev/null || break
    rm -f "$pause_dir"/reconciler-*
    sleep 0.05
  done
  kill -0 "$rc_pid" 2>/dev/null && { diag "the reconciler did not finish"; kill "$rc_pid"; }
  wait "$rc_pid"
  return 0
}
paused() { # POINT: 0 once the reconciler waits there, else bail out
  pause_wait "$1" 30 || { echo "Bail out! the reconciler never reached $1"; cat "$scratch"/*.txt; exit 1; }
}

# --soldout-recheck 0: every 409 below comes from the script, never from the
# gateway's memory of an earlier sold-out answer.
start_gateway --hold-ttl 10m --soldout-recheck 0
start_writer

# --- Race 1: only `remaining` is lost; a retry answered 201 between the tail
# read and the restore must keep its order, and its use.
code=$(unique_code RACE1)
new_voucher "$code" 2
reserve "$code" 1 "$code-o1"
is "$status" 201 "race 1: a hold on a voucher of two"
# A second hold whose event never reached Kafka: the gateway dies right after
# the Redis script (a fault point), so no snapshot of the reconciler has it.
daemon_stop "$test_name-gateway"
VOUCHER_FAULT=reserve-before-publish daemon_start "$test_name-gateway" "$bin_gateway" --hold-ttl 10m --soldout-recheck 0
wait_http_ok "$base_url/healthz" 30
reserve "$code" 2 "$code-o2"
is "$status" 000 "race 1: the gateway died after holding o2, before publishing it"
start_gateway --hold-ttl 10m --soldout-recheck 0
wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 1 20 >/dev/null
rcli DEL "voucher:{$code}:remaining" >/dev/null
rc_start "$scratch/race1.txt" reconciler-before-repair
paused reconciler-before-repair
reserve "$code" 2 "$code-o2" # the client retries: the gateway publishes o2 now
is "$status $(jq -r .replayed <<<"$body")" "201 true" "race 1: the retry of o2 inside the window gets its 201"
pause_go reconciler-before-repair
rc_finish
diag "$(grep -E "^$code|repair" "$scratch/race1.txt")"
is "$(rcli GET "voucher:{$code}:remaining") $(state "$code" "$code-o2")" "0 H" \
  "race 1: the restore kept o2 and counted it (remaining 0)"
reserve "$code" 3 "$code-o3"
is "$status $(jq -r .error <<<"$body")" "409 OUT_OF_STOCK" "race 1: a third customer finds the voucher of two sold out"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code' AND status = 'RESERVED'" 2 20)" 2 \
  "race 1: both 201s have their rows"
is "$(used "$code")" 2 "race 1: used_count 2 of 2"
is "$(dead_letters "$code")" 0 "race 1: nothing dead-lettered"

# --- Race 5: only the orders hash is lost; retake must not count the uses twice.
code=$(unique_code RACE5)
new_voucher "$code" 10 2
for i in 1 2 3; do reserve "$code" "$i" "$code-o$i"; done
is "$status" 201 "race 5: three holds"
wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 3 20 >/dev/null
rcli DEL "voucher:{$code}:orders" >/dev/null
rc_start "$scratch/race5.txt"
rc_finish
diag "$(grep -E "^$code|repair" "$scratch/race5.txt")"
is "$(rcli GET "voucher:{$code}:remaining")" 7 "race 5: remaining stays 7 (3 of 10 taken, not 6)"
is "$(rcli HLEN "voucher:{$code}:orders") $(state "$code" "$code-o1")" "3 H" "race 5: the three orders are written back"
expire_at=$(sql "SELECT (extract(epoch FROM ends_at) * 1000)::bigint + 259200000 FROM voucher WHERE code = '$code'")
is "$(rcli PEXPIRETIME "voucher:{$code}:orders") $(rcli PEXPIRETIME "voucher:{$code}:remaining")" \
  "$expire_at $expire_at" "race 5: the orders written back expire with the counter, at endsAt plus the retention"
is "$(rcli HGET "voucher:{$code}:users" 1) $(rcli HGET "voucher:{$code}:users" 2)" "1 1" \
  "race 5: each customer still holds one use, not two"
reserve "$code" 1 "$code-again1"
is "$status" 201 "race 5: a customer with a limit of two may take a second use"
is "$(verdict_after "$code" "$scratch/race5.txt")" consistent "race 5: after the repair Redis and PostgreSQL agree"

# --- The users hash is lost: until something counts them again, a customer
# could take a use beyond per_user_limit that PostgreSQL then refuses.
code=$(unique_code USERS)
new_voucher "$code" 10
for i in 1 2; do reserve "$code" "$i" "$code-o$i"; done
wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 2 20 >/dev/null
rcli DEL "voucher:{$code}:users" >/dev/null
rc_start "$scratch/users.txt"
rc_finish
is "$(rcli HGET "voucher:{$code}:users" 1) $(rcli HGET "voucher:{$code}:users" 2) $(rcli GET "voucher:{$code}:remaining")" \
  "1 1 8" "users lost: each customer's count is back, the counter unchanged"
expire_at=$(sql "SELECT (extract(epoch FROM ends_at) * 1000)::bigint + 259200000 FROM voucher WHERE code = '$code'")
is "$(rcli PEXPIRETIME "voucher:{$code}:users")" "$expire_at" "users lost: the users hash written back expires at endsAt plus the retention"
reserve "$code" 1 "$code-again1"
is "$status $(jq -r .error <<<"$body")" "409 ALREADY_USED" "users lost: a customer at the limit is refused again"

# --- Race 6: lower's A-B-A. A reserve between the counter's read and the
# orders' read, a finished cancel before the repair; and no DRIFTED for it.
code=$(unique_code RACE6)
new_voucher "$code" 10
reserve "$code" 1 "$code-o1"
wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 1 20 >/dev/null
rc_start "$scratch/race6.txt" reconciler-after-remaining reconciler-before-repair
paused reconciler-after-remaining
reserve "$code" 2 "$code-o2"
is "$status $(rcli GET "voucher:{$code}:remaining")" "201 8" "race 6: a reserve after the counter was read"
pause_go reconciler-after-remaining
paused reconciler-before-repair
cancel "$code" "$code-o1"
is "$status $(rcli GET "voucher:{$code}:remaining")" "200 9" "race 6: a finished cancel before the repair"
pause_go reconciler-before-repair
rc_finish
diag "$(grep -E "^$code|repair" "$scratch/race6.txt")"
is "$(rcli GET "voucher:{$code}:remaining")" 9 "race 6: the counter is left at 9 (one use held), not lowered"
ok "$([ "$(verdict_before "$code" "$scratch/race6.txt")" != DRIFTED ]; echo $?)" \
  "race 6: a reserve during the pass is no drift ($(verdict_before "$code" "$scratch/race6.txt"))"
wait_sql "SELECT string_agg(status, ',' ORDER BY order_id) FROM voucher_redemption WHERE voucher_code = '$code'" \
  RELEASED,RESERVED 20 >/dev/null
"$bin_reconciler" --once --report-only >"$scratch/race6-after.txt" 2>"$scratch/race6-after.log"
is "$(verdict_before "$code" "$scratch/race6-after.txt")" consistent "race 6: once the writer caught up, consistent (no undersell left)"

# --- Race 7: a cancel acknowledged after the tail read and finished before the
# orders read; retake must not bring the cancelled order back.
code=$(unique_code RACE7)
new_voucher "$code" 10
reserve "$code" 1 "$code-o1"
wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 1 20 >/dev/null
rc_start "$scratch/race7.txt" reconciler-after-tail
paused reconciler-after-tail
cancel "$code" "$code-o1"
is "$status" 200 "race 7: the order is cancelled while the reconciler holds its snapshot"
pause_go reconciler-after-tail
rc_finish
diag "$(grep -E "^$code|repair" "$scratch/race7.txt")"
is "$(state "$code" "$code-o1") $(rcli GET "voucher:{$code}:remaining")" "R 10" \
  "race 7: the cancelled order stays released in Redis, its use in the pool"
confirm "$code" "$code-o1"
is "$status $(jq -r .error <<<"$body")" "409 HOLD_EXPIRED" "race 7: confirming the cancelled order answers 409"
is "$(wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$code-o1'" RELEASED 20)" RELEASED \
  "race 7: PostgreSQL has it RELEASED, as Redis"
ok "$([ "$(verdict_before "$code" "$scratch/race7.txt")" != DRIFTED ]; echo $?)" \
  "race 7: a cancel during the pass is no drift ($(verdict_before "$code" "$scratch/race7.txt"))"

# --- Issue 27: no repair takes the counter below 0. The orders hash is lost
# while the counter says sold out: writing the orders back takes nothing more.
code=$(unique_code NONEG)
new_voucher "$code" 2
for i in 1 2; do reserve "$code" "$i" "$code-o$i"; done
wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 2 20 >/dev/null
rcli DEL "voucher:{$code}:orders" >/dev/null
rc_start "$scratch/noneg.txt"
rc_finish
is "$(rcli GET "voucher:{$code}:remaining") $(rcli HLEN "voucher:{$code}:orders")" "0 2" \
  "issue 27: the orders are back and the counter stays 0, not -2"
ok "$(grep -q "repair: wrote again a lost orders hash" "$scratch/noneg.txt.log" &&
  ! grep -q "held Redis for" "$scratch/noneg.txt.log"; echo $?)" \
  "a rebuild of two orders is not warned of as holding Redis (--slow-repair, 500ms by default)"

# --- Issue 26: total_limit 10, used_count 10, no rows (an imported campaign).
code=$(unique_code USED)
new_voucher "$code" 10
sql "UPDATE voucher SET used_count = 10 WHERE code = '$code'" >/dev/null
reserve "$code" 1 "$code-o1"
is "$status $(jq -r .error <<<"$body") $(rcli GET "voucher:{$code}:remaining")" "409 OUT_OF_STOCK 0" \
  "issue 26: the gateway loads it sold out"
rcli DEL "voucher:{$code}:remaining" >/dev/null
rc_start "$scratch/used.txt"
rc_finish
diag "$(grep -E "^$code|repair" "$scratch/used.txt")"
is "$(rcli GET "voucher:{$code}:remaining")" 0 "issue 26: restored as 0 (the rule counts used_count), not 10"
reserve "$code" 2 "$code-o2"
is "$status $(jq -r .error <<<"$body")" "409 OUT_OF_STOCK" "issue 26: a reservation after the restore gets 409"
is "$(verdict_after "$code" "$scratch/used.txt")" used-without-rows "issue 26: its own verdict"
ok "$(grep -q "used-without-rows.*total_limit 10, live rows 0, 10 uses counted without rows" \
  "$scratch/used.txt.log"; echo $?)" \
  "issue 26: the verdict is logged with the numbers"
# A counter that already offers the difference (restored by the old rule) is lowered.
rcli SET "voucher:{$code}:remaining" 10 KEEPTTL >/dev/null
rc_start "$scratch/used-lower.txt"
rc_finish
is "$(rcli GET "voucher:{$code}:remaining")" 0 "issue 26: a counter offering the uses counted without rows is lowered to 0"
expire_at=$(sql "SELECT (extract(epoch FROM ends_at) * 1000)::bigint + 259200000 FROM voucher WHERE code = '$code'")
is "$(rcli PEXPIRETIME "voucher:{$code}:remaining")" "$expire_at" \
  "issue 26: the restored counter expires at endsAt plus the retention, and lowering it keeps that"
reserve "$code" 3 "$code-o3"
is "$status" 409 "issue 26: and the next reservation gets 409"
is "$(live_rows "$code") $(used "$code")" "0 10" "issue 26: PostgreSQL unchanged: no row, used_count 10"
is "$(dead_letters "$code")" 0 "issue 26: nothing dead-lettered"

# --- Issue 26, partly made of rows: used_count 6 = 4 without rows + 2 rows.
code=$(unique_code PART)
new_voucher "$code" 10
sql "UPDATE voucher SET used_count = 4 WHERE code = '$code'" >/dev/null
for i in 1 2; do reserve "$code" "$i" "$code-o$i"; done
is "$status $(rcli GET "voucher:{$code}:remaining")" "201 4" "partly rows: two holds on 10 - 4 uses"
wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 6 20 >/dev/null
rcli DEL "voucher:{$code}:remaining" >/dev/null
VOUCHER_RECONCILE_SLOW_REPAIR=0 rc_start "$scratch/part.txt"
rc_finish
ok "$(grep -qE "restore of voucher $code \(2 orders\) held Redis for [0-9]+ ms: every other command waited" \
  "$scratch/part.txt.log"; echo $?)" \
  "with --slow-repair 0 every restore is warned of: its voucher, its orders, how long Redis was held"
diag "$(grep -E "^$code|repair" "$scratch/part.txt")"
is "$(rcli GET "voucher:{$code}:remaining")" 4 "partly rows: restored as 10 - 4 - 2 = 4, not 10 - 2 = 8"
n201=0
for i in 3 4 5 6 7; do
  reserve "$code" "$i" "$code-o$i"
  [ "$status" = 201 ] && n201=$((n201 + 1))
done
is "$n201 $status" "4 409" "partly rows: four more 201s, then 409"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 10 20) $(live_rows "$code")" "10 6" \
  "partly rows: every 201 has its row, used_count 10 of 10"
is "$(dead_letters "$code")" 0 "partly rows: nothing dead-lettered"
