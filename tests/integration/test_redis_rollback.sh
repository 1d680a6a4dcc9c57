#!/usr/bin/env bash
# A Redis that comes back without its last writes (a crash under appendfsync
# everysec, a restore from an older copy) makes the service neither oversell
# nor lose an acknowledged reservation while the restart fence is on
# (VOUCHER_REDIS_FENCE: the gateway refuses to write on a Redis whose run_id
# the reconciler has not verified against PostgreSQL and Kafka).
#
# The stack runs appendfsync always, so a copy of Redis's AOF folder taken
# mid-sale is what a crash under everysec would have kept. Each mode sells a
# voucher of $limit uses: three 201s, the copy, three more 201s and a confirm
# (200), then the reconciler stops, Redis is killed (-9) and started again on
# the copy: it has lost three reservations and the confirm. Then:
#   fence off: the gateway sells on the rolled-back counter. The damage the
#              fence exists for is asserted (a retry of a lost 201 takes a
#              second use, the confirmed order is unknown, more 201s than
#              uses, dead letters), so the scenario is known to reproduce it.
#   fence on:  while the reconciler is stopped every reservation is refused
#              (503, the fence's detail) and takes nothing; so it is while the
#              reconciler repairs and until it sets voucher:fence (pause
#              points); once it has, a retry of a lost 201 is a replay, the
#              confirmed order is still paid, exactly $limit uses are sold in
#              all, PostgreSQL has one row per 201 and nothing is dead-lettered.
# The fence-on mode runs after the fence-off one, whose oversold voucher must
# not keep Redis from being verified; that voucher is then settled as an
# operator would (its dead letters discarded), and the test leaves Redis
# verified.
source "$(dirname "$0")/lib.sh"

if [[ $VOUCHER_REDIS_URL == redis+cluster://* ]]; then
  echo "1..0 # SKIP the fence is for a single Redis node (a cluster refuses it)"
  exit 0
fi
plan 36

limit=10
# The fence's refusal says the Redis process is not verified (vc_error.h, VC_ERR_FENCED).
fence_detail='not verified'
reserve() { # CODE CUSTOMER ORDER -> $status $body
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":500000}"
}
confirm() { http POST "/vouchers/$1/reservations/$2/confirm"; }
remaining() { rcli GET "voucher:{$1}:remaining"; }
state() { rcli HGET "voucher:{$1}:orders" "$2" | awk -F: '{print $4}'; }
replayed() { jq -r '.replayed // false' <<<"$body"; }
# 0 when the last answer is the fence's refusal.
fenced() { [ "$status" = 503 ] && jq -r '.detail // empty' <<<"$body" | grep -q "$fence_detail"; }
# A call repeated while it is answered 503 (at most 5 s), as a client retries
# a 503 with the same orderId: the gateway reconnects to a restarted Redis
# after a backoff, and with the fence on a worker whose connection was
# refused checks again at most every 500 ms, so one may still refuse just
# after another was let through.
retried() { # COMMAND...
  local i
  for ((i = 0; i < 50; i++)); do
    "$@"
    [ "$status" = 503 ] || return 0
    sleep 0.1
  done
}
redis_info() { rcli INFO server | tr -d '\r' | sed -n "s/^$1://p"; }
# "verified" when voucher:fence holds the run_id of the Redis process running.
fence_state() { if [ "$(rcli GET voucher:fence)" = "$(redis_info run_id)" ]; then echo verified; else echo unverified; fi; }
dead_letters() { sql "SELECT count(*) FROM dead_letter WHERE voucher_code = '$1'"; }
writer_dead_letters() { local n; n=$(metric "$(writer_admin)" 'voucher_writer_events_total{outcome="dead_letter"}'); echo "${n:-0}"; }
verdict() { "$bin_reconciler" --once --report-only 2>/dev/null | awk -v c="$1" '$1 == c { print $NF }'; }
# wait_for for a COMMAND that takes seconds itself (a reconciler pass over the
# whole stack): until it prints WANT or SECONDS have passed; prints the last output.
wait_slow() { # WANT SECONDS COMMAND...
  local want=$1 until=$(($(date +%s) + $2)) got
  shift 2
  while :; do
    got=$("$@")
    { [ "$got" = "$want" ] || [ "$(date +%s)" -ge "$until" ]; } && break
    sleep 0.1
  done
  echo "$got"
}

# Where Redis keeps its AOF (appendonlydir in the stack's Redis folder).
aof_dir="$(rcli CONFIG GET dir | sed -n 2p)/$(rcli CONFIG GET appenddirname | sed -n 2p)"
[ -f "$aof_dir/$(rcli CONFIG GET appendfilename | sed -n 2p).manifest" ] ||
  { echo "Bail out! no AOF manifest in '$aof_dir': the stack's Redis must run with appendonly yes"; exit 1; }
stack() { "$VOUCHER_SOURCE_DIR/deploy/stack" "$@" >>"$scratch/stack.log" 2>&1; }
# Whatever happens, Redis is running when the test ends: the next test needs it.
# A reconciler at a pause point (fence on, below) is let go until it stopped.
releaser=
let_go() { ( while :; do rm -f "$pause_dir"/reconciler-*; sleep 0.05; done ) & releaser=$!; }
at_exit() {
  [ -n "$releaser" ] || let_go
  daemon_stop "$test_name-reconciler"
  kill "$releaser"
  wait "$releaser" 2>/dev/null
  [ "$(rcli PING 2>/dev/null)" = PONG ] || stack up redis
  finish
}
trap at_exit EXIT

copy_aof() { rm -rf "$scratch/aof" && cp -a "$aof_dir" "$scratch/aof"; }
# kill -9 the stack's Redis and start it again on the copy of its AOF.
crash_to_copy() {
  local pid i
  pid=$(redis_info process_id)
  [ -n "$pid" ] && [ "$pid" = "$(cat "$VOUCHER_STACK_DIR/redis/redis.pid" 2>/dev/null)" ] ||
    { echo "Bail out! Redis's pid '$pid' is not the stack's ($VOUCHER_STACK_DIR/redis/redis.pid)"; exit 1; }
  kill -9 "$pid"
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  rm -rf "$aof_dir" && cp -a "$scratch/aof" "$aof_dir"
  stack up redis || { echo "Bail out! Redis did not start on the copy"; cat "$scratch/stack.log"; exit 1; }
  # Every worker of the gateway connected again (its /readyz): a worker still
  # waiting out its reconnect backoff would answer 503 "backend unavailable".
  wait_http_ok "http://$(gateway_admin)/readyz" 30 || { echo "Bail out! the gateway did not reconnect to Redis"; exit 1; }
}

# Until a reservation on a fresh voucher is accepted (at most SECONDS): with
# the fence on, the reconciler has verified the Redis that runs.
wait_writable() { # SECONDS
  local code i
  code=$(unique_code PROBE)
  new_voucher "$code" 1
  for ((i = 0; i < $1 * 10; i++)); do
    reserve "$code" 1 "$code-o1"
    [ "$status" = 201 ] && return 0
    sleep 0.1
  done
  diag "the last answer on $code: $status $body"
  diag "what keeps the reconciler from verifying Redis:"
  "$bin_reconciler" --once --report-only 2>/dev/null | grep -vE ' (consistent|not loaded)$' | sed 's/^/# /'
  return 1
}

admin_token=$(new_token adm)
rc_start() { start_reconciler "" --interval 300ms --grace 3s --restore-delay 2s --redis-fence; }
# The gateway tries Kafka for 1 s, below the reconciler's restore delay (2 s).
gw_start() { # FENCE (0 or 1)
  daemon_stop "$test_name-gateway"
  VOUCHER_REDIS_FENCE=$1 VOUCHER_ADMIN_TOKEN=$admin_token start_gateway --hold-ttl 10m --soldout-recheck 0 --kafka-timeout 1s
}

# The sale up to the rollback, the same in both modes. Sets $code; the orderIds
# answered 201 go to $scratch/$1.201 (one a line).
sell_and_roll_back() { # MODE
  local mode=$1 i n old_run
  code=$(unique_code "ROLLBACK_${mode^^}")
  new_voucher "$code" "$limit"
  : >"$scratch/$mode.201"
  n=0
  for i in 1 2 3; do
    retried reserve "$code" "$i" "$code-o$i"
    [ "$status" = 201 ] && { n=$((n + 1)); echo "$code-o$i" >>"$scratch/$mode.201"; }
  done
  copy_aof
  for i in 4 5 6; do
    retried reserve "$code" "$i" "$code-o$i"
    [ "$status" = 201 ] && { n=$((n + 1)); echo "$code-o$i" >>"$scratch/$mode.201"; }
  done
  retried confirm "$code" "$code-o4"
  is "$n $status $(remaining "$code")" "6 200 4" "$mode: three 201s, the AOF copied aside, three more 201s and a confirm (200)"
  daemon_stop "$test_name-reconciler"
  old_run=$(redis_info run_id)
  crash_to_copy
  is "$(remaining "$code") $(state "$code" "$code-o3") $(state "$code" "$code-o4")$(state "$code" "$code-o5")" "7 H " \
    "$mode: Redis came back on the copy: 7 uses offered, o1-o3 held, o4 (confirmed) and o5 unknown"
  ok "$([ -n "$(redis_info run_id)" ] && [ "$(redis_info run_id)" != "$old_run" ]; echo $?)" \
    "$mode: it is a new Redis process (run_id $old_run -> $(redis_info run_id))"
}

# Reservations of new customers until 409 (at most 2 * limit); their 201s are
# added to $scratch/MODE.201; prints "201s LAST-STATUS LAST-ERROR".
sell_out() { # MODE FIRST-CUSTOMER
  local i n=0
  for ((i = $2; i < $2 + 2 * limit; i++)); do
    retried reserve "$code" "$i" "$code-s$i"
    [ "$status" = 201 ] || break
    n=$((n + 1))
    echo "$code-s$i" >>"$scratch/$1.201"
  done
  echo "$n $status $(jq -r '.error // empty' <<<"$body")"
}

start_writer
wait_http_ok "http://$(writer_admin)/healthz" 30 || { echo "Bail out! the writer did not start"; exit 1; }

# ---------------------------------------------------------------- fence off
# What the fence is for: the same rollback without it, the reconciler stopped.
gw_start 0
rc_start
dead0=$(writer_dead_letters)
sell_and_roll_back off
retried reserve "$code" 5 "$code-o5"
is "$status $(replayed) $(remaining "$code")" "201 false 6" \
  "off: the retry of o5 (its 201 lost in Redis) is taken as a new order: a second use"
retried confirm "$code" "$code-o4"
ok "$([ "$status" != 200 ]; echo $?)" "off: the confirmed o4 is unknown to Redis (confirm answers $status $(jq -r .error <<<"$body"))"
read -r n last_status last_error <<<"$(sell_out off 100)"
sold=$(sort -u "$scratch/off.201" | wc -l)
diag "off: $n more 201s before $last_status $last_error; $sold orders told 201 on a voucher of $limit"
ok "$([ "$sold" -gt "$limit" ]; echo $?)" "off: more orders told 201 ($sold) than the voucher has uses ($limit)"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" "$limit" 20)" "$limit" \
  "off: PostgreSQL stops at used_count $limit (its CHECK)"
for ((i = 0; i < 100; i++)); do [ "$(dead_letters "$code")" -ge $((sold - limit)) ] && break; sleep 0.1; done
is "$(dead_letters "$code")" "$((sold - limit))" "off: each 201 beyond the limit is dead-lettered: acknowledged, then refused"
ok "$([ "$(writer_dead_letters)" -gt "$dead0" ]; echo $?)" "off: the writer counts dead letters ($dead0 -> $(writer_dead_letters))"
off_code=$code

# ---------------------------------------------------------------- fence on
gw_start 1
rc_start
since=$(now_ms)
wait_writable 30
writable=$?
ok $writable "on: a reservation on a fresh voucher is accepted: the reconciler verified Redis ($(($(now_ms) - since)) ms)"
[ $writable = 0 ] || { echo "Bail out! Redis was never verified: nothing else can be tried"; exit 1; }
dead0=$(writer_dead_letters)
sell_and_roll_back on

# The first call after the restart may meet the broken connection instead.
for ((i = 0; i < 100; i++)); do
  reserve "$code" 50 "$code-x50"
  fenced && break
  sleep 0.1
done
ok "$(fenced; echo $?)" "on: a reservation on the restarted Redis is refused with the fence's detail"
diag "on: $status $body"
refused=0
for i in 51 52 53; do
  reserve "$code" "$i" "$code-x$i"
  fenced && refused=$((refused + 1))
done
is "$refused" 3 "on: three more reservations of new customers: 503, the fence's detail"
reserve "$code" 5 "$code-o5"
ok "$(fenced; echo $?)" "on: the retry of o5 is refused too (a retry can come back later)"
confirm "$code" "$code-o4"
ok "$(fenced; echo $?)" "on: and so is the confirm of o4"
fenced || diag "on: the confirm answered $status $body"
is "$(remaining "$code") $(rcli HLEN "voucher:{$code}:orders") $(rcli HEXISTS "voucher:{$code}:orders" "$code-x51")" "7 3 0" \
  "on: nothing was taken: 7 uses offered, the three orders of the copy, no refused order"
# PATCH moves the counter on a Redis connection of its own, which checks the fence too.
http PATCH "/vouchers/$code" '{"totalLimit":12}' -H "Authorization: Bearer $admin_token"
ok "$(fenced; echo $?)" "on: a PATCH of the limit is refused with the fence's detail ($status)"
is "$(sql "SELECT total_limit FROM voucher WHERE code = '$code'") $(remaining "$code")" "$limit 7" \
  "on: and changed nothing: the limit still $limit in PostgreSQL, 7 uses offered in Redis"

# The reconciler again, stopped before its first pass's repairs and just
# before it sets the fence: the gateways stay fenced until the repairs are done
# and a pass found nothing more to repair (red if the fence were set first).
# (reconciler-before-repair stops once a pass, after its reads; a stop at each
# repair would crawl through the expiries other tests leave on the stack.)
since=$(now_ms)
VOUCHER_PAUSE=reconciler-before-repair,reconciler-before-fence VOUCHER_PAUSE_DIR=$pause_dir rc_start
pause_wait reconciler-before-repair 30 || { echo "Bail out! the reconciler never came to repair after the restart"; exit 1; }
reserve "$code" 54 "$code-x54"
is "$(fence_state) $(fenced; echo $?) $(remaining "$code")" "unverified 0 7" \
  "on: before the reconciler's first repairs: voucher:fence not this Redis's run_id, a reservation refused, 7 uses offered"
fenced || diag "on: x54 answered $status $body"
# Its passes go on, their repairs let go at once, up to the fence, or past it
# were it set before its time.
( while :; do rm -f "$pause_dir/reconciler-before-repair"; sleep 0.01; done ) &
repairs_releaser=$!
for ((i = 0; i < 600; i++)); do
  [ -e "$pause_dir/reconciler-before-fence" ] && break
  [ "$(fence_state)" = verified ] && break
  sleep 0.05
done
kill "$repairs_releaser"
wait "$repairs_releaser" 2>/dev/null
reserve "$code" 69 "$code-x69"
is "$([ -e "$pause_dir/reconciler-before-fence" ]; echo $?) $(fence_state) $(fenced; echo $?) $(remaining "$code") $(state "$code" "$code-o4")" \
  "0 unverified 0 4 C" "on: repaired (4 uses offered, o4 confirmed), the reconciler about to set the fence: still refused"
# From here on every pause point is let go at once, until the test ends.
let_go
wait_writable 30
writable=$?
ok $writable "on: once the reconciler set the fence, a reservation is accepted again ($(($(now_ms) - since)) ms after it started)"
[ $writable = 0 ] || { echo "Bail out! Redis was never verified after the rollback"; exit 1; }
diag "$(grep -h 'Redis run_id' "$VOUCHER_STACK_DIR/logs/$test_name-reconciler.log" | tail -4)"
is "$(remaining "$code")" 4 "on: Redis offers 4 uses again ($limit less the 6 sold), not 7"
retried reserve "$code" 5 "$code-o5"
is "$status $(replayed) $(remaining "$code")" "201 true 4" "on: the retry of o5 (its 201 lost in Redis) is a replay: 201, no second use"
retried confirm "$code" "$code-o4"
is "$status $(replayed) $(state "$code" "$code-o4")" "200 true C" "on: the confirmed o4 is still paid (200 replayed, C in Redis)"
read -r n last_status last_error <<<"$(sell_out on 100)"
is "$n $last_status $last_error" "4 409 OUT_OF_STOCK" "on: 4 more uses sold, then OUT_OF_STOCK"
sort -u "$scratch/on.201" >"$scratch/on.201.sorted"
is "$(wc -l <"$scratch/on.201.sorted")" "$limit" "on: exactly $limit orders told 201 in all, before and after the rollback"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" "$limit" 20)" "$limit" "on: PostgreSQL: used_count $limit"
sql "SELECT order_id FROM voucher_redemption WHERE voucher_code = '$code' ORDER BY 1" | sort >"$scratch/on.rows"
is "$(diff "$scratch/on.201.sorted" "$scratch/on.rows" >/dev/null; echo $?)" 0 "on: one row per order told 201, and none else"
diff "$scratch/on.201.sorted" "$scratch/on.rows" | sed 's/^/# /'
is "$(sql "SELECT status FROM voucher_redemption WHERE order_id = '$code-o4'")" CONFIRMED "on: o4's row is CONFIRMED"
is "$(dead_letters "$code")" 0 "on: nothing dead-lettered for the voucher"
is "$(writer_dead_letters)" "$dead0" "on: the writer refused nothing"
is "$(wait_slow consistent 20 verdict "$code")" consistent "on: voucher-reconciler --once calls the voucher consistent"

# ---------------------------------------------------------------- the damage undone
# The fence-off voucher is still oversold in Redis (12 holds on 10 uses, two of
# them dead-lettered: DRIFTED, which no repair can close; Redis was verified
# above all the same, the fence waiting only for counters that offer more than
# PostgreSQL allows). The operator's part (deploy/README.md, dead letters):
# the customers told 201 beyond the limit are refused, their letters
# discarded, and reconciler passes give their uses back (--once, the daemon
# stopped: the daemon reads a voucher whose counts agree in full only every
# --full-every, 30 s).
discarded=0
for order in $(sql "SELECT order_id FROM dead_letter WHERE voucher_code = '$off_code' AND state = 'parked'"); do
  "$bin_writer" dlt discard --order "$order" --operator "$test_name" >>"$scratch/discard.txt" 2>&1 &&
    discarded=$((discarded + 1))
done
is "$discarded" "$((sold - limit))" "off, afterwards: the operator discards the $((sold - limit)) dead letters"
daemon_stop "$test_name-reconciler"
settle() { # the off voucher's verdict after one --once pass and its repairs
  "$bin_reconciler" --once --grace 3s >"$scratch/settle.txt" 2>/dev/null
  awk -v c="$off_code" '$1 == c { v = $NF } END { print v }' "$scratch/settle.txt"
}
is "$(wait_slow consistent 30 settle)" consistent "off, afterwards: reconciler passes settle the voucher (consistent)"
