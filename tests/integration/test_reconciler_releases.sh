#!/usr/bin/env bash
# The reconciler's releases against the gateway acting inside its pass
# (issue 22 races 2, 3 and 4, issue 25 item 4, leadership). Each window is
# opened deterministically: the reconciler stops at a pause point after its
# reads, the test makes the gateway call (or the Redis rollback) there, and
# lets it go on. Promises checked: no paid (confirmed) order is released, no
# 201 or 200 has its use released behind it, no use stays taken for nothing.
source "$(dirname "$0")/lib.sh"
plan 31

reserve() { # CODE CUSTOMER ORDER -> $status $body
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":500000}"
}
confirm() { http POST "/vouchers/$1/reservations/$2/confirm"; }
state() { rcli HGET "voucher:{$1}:orders" "$2" | awk -F: '{print $4}'; }
keys5() { echo "voucher:{$1}:remaining voucher:{$1}:users voucher:{$1}:orders voucher:{$1}:holds voucher:{$1}:resent"; }
# The voucher loaded into Redis as the gateway loads it: CODE LIMIT
load() {
  rcli SET "voucher:{$1}:remaining" "$2" NX >/dev/null
  sql "UPDATE voucher SET redis_loaded_at = now() WHERE code = '$1'" >/dev/null
}
# reserve.lua run in Redis with nothing published: a reservation whose 503
# came before Redis ran the script (a Redis pause), or whose event was lost.
# CODE CUSTOMER ORDER HELD_UNTIL_MS -> the script's status
redis_reserve() {
  # shellcheck disable=SC2046
  rcli EVAL "$(lua_script reserve)" 6 $(keys5 "$1") "voucher:{$1}:amounts" "$2" 1 "$3" 100000 "$4" "$(now_ms)" \
    500000 take | head -1
}
redis_confirm() { # CODE ORDER: confirm.lua run in Redis, nothing published
  rcli EVAL "$(lua_script confirm)" 3 "voucher:{$1}:orders" "voucher:{$1}:holds" "voucher:{$1}:resent" "$2" "$(now_ms)" | head -1
}
redis_forget() { # CODE ORDER: forget.lua, as after a use taken under another request's claim
  # shellcheck disable=SC2046
  rcli EVAL "$(lua_script forget)" 5 $(keys5 "$1") "$2" | head -1
}
# Until the writer has applied every event of CODE (the reconciler's in_flight column is 0).
settle() {
  local i
  for ((i = 0; i < 100; i++)); do
    [ "$("$bin_reconciler" --once --report-only 2>/dev/null | awk -v c="$1" '$1 == c { print $6 }')" = 0 ] && return 0
    sleep 0.2
  done
  return 1
}
status_of() { sql "SELECT status FROM voucher_redemption WHERE order_id = '$1'"; }
# Lets a --once reconciler (PID) run to its end, through every pause point it reaches.
run_through() { # PID
  local i
  for ((i = 0; i < 600; i++)); do
    kill -0 "$1" 2>/dev/null || break
    rm -f "$pause_dir"/reconciler-*
    sleep 0.05
  done
  wait "$1"
}

# Steps a reconciler daemon started with both pause points, pass by pass.
# next_pause POINT: lets it run until it stops at POINT (other points are let go).
points=(reconciler-after-tail reconciler-before-repair)
last_go=0
next_pause() {
  local i p
  for ((i = 0; i < 1500; i++)); do
    [ -e "$pause_dir/$1" ] && return 0
    for p in "${points[@]}"; do
      if [ "$p" != "$1" ] && [ -e "$pause_dir/$p" ]; then last_go=$(now_ms); rm -f "$pause_dir/$p"; fi
    done
    sleep 0.02
  done
  echo "Bail out! the reconciler did not reach $1"
  exit 1
}
go() { last_go=$(now_ms); pause_go "$1"; }
start_gateway --hold-ttl 3s --soldout-recheck 200ms
start_writer

# --- Race 2: a confirmed order is never expired, whatever Redis says.
# o1 is confirmed and applied; Redis then loses the confirm's write (a crash
# under appendfsync everysec) in the middle of a pass, after the pass read it.
# o2 is confirmed while the writer is stopped (VoucherConfirmed in flight) and
# Redis loses that write before the pass. Both holds are past heldUntil.
code=$(unique_code PAID)
new_voucher "$code" 2
reserve "$code" 1 "$code-o1"
held1=$(rcli HGET "voucher:{$code}:orders" "$code-o1")
confirm "$code" "$code-o1"
is "$status $(wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$code-o1'" CONFIRMED 20)" \
  "200 CONFIRMED" "o1 reserved, confirmed (200) and applied"
daemon_stop "$test_name-writer"
reserve "$code" 2 "$code-o2"
held2=$(rcli HGET "voucher:{$code}:orders" "$code-o2")
confirm "$code" "$code-o2"
is "$status" 200 "o2 confirmed (200) while the writer is stopped: its VoucherConfirmed is in flight"
until2=$(cut -d: -f3 <<<"$held2")
while [ "$(now_ms)" -le $((until2 + 1500)) ]; do sleep 0.1; done # both past heldUntil + the 1 s grace
rcli HSET "voucher:{$code}:orders" "$code-o2" "$held2" >/dev/null
rcli ZADD "voucher:{$code}:holds" "$until2" "$code-o2" >/dev/null
VOUCHER_PAUSE=reconciler-before-repair VOUCHER_PAUSE_DIR=$pause_dir \
  "$bin_reconciler" --once --grace 1s >"$scratch/paid.txt" 2>&1 &
rc_pid=$!
pause_wait reconciler-before-repair || { echo "Bail out! the reconciler did not pause"; exit 1; }
rcli HSET "voucher:{$code}:orders" "$code-o1" "$held1" >/dev/null # the rollback, after the pass read C
rcli ZADD "voucher:{$code}:holds" "$(cut -d: -f3 <<<"$held1")" "$code-o1" >/dev/null
run_through "$rc_pid"
diag "$(grep -E "^$code|repairs" "$scratch/paid.txt")"
is "$(state "$code" "$code-o1")" H "o1, read confirmed and rolled back to held during the pass, is not expired"
is "$(state "$code" "$code-o2")" C "o2, held in Redis with its confirm in flight, is repaired to confirmed"
start_writer
settle "$code"
is "$(status_of "$code-o1") $(status_of "$code-o2")" "CONFIRMED CONFIRMED" "PostgreSQL keeps both paid orders"
"$bin_reconciler" --once --grace 1s >"$scratch/paid2.txt" 2>&1
is "$(state "$code" "$code-o1")/$(rcli ZSCORE "voucher:{$code}:holds" "$code-o1")" C/ \
  "the next pass repairs o1 to confirmed (and out of the holds to expire)"
confirm "$code" "$code-o1"
is "$status" 200 "confirming o1 again answers 200"
settle "$code"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'") $(rcli GET "voucher:{$code}:remaining")" "2 0" \
  "both uses stay taken: nothing was sold twice"

# --- One reconciler daemon, stepped pass by pass, for the windows that need
# its memory across passes. Holds made in Redis only (their events never left).
# Race 3: r1 is retried by its client during the pass that releases stranded holds.
rcode=$(unique_code RETRY)
new_voucher "$rcode" 3
load "$rcode" 3
far=$(($(now_ms) + 600000))
redis_reserve "$rcode" 1 "$rcode-r1" "$far" >/dev/null
redis_reserve "$rcode" 2 "$rcode-r2" "$far" >/dev/null
# Race 4: u1 is forgotten, then taken again (a new hold under the same orderId).
ucode=$(unique_code REUSE)
new_voucher "$ucode" 3
load "$ucode" 3
redis_reserve "$ucode" 1 "$ucode-u1" "$far" >/dev/null
# Race 4 at the moment of the release: u3 is forgotten and taken again after the
# pass decided to release it, before the release.
vcode=$(unique_code REUSE2)
new_voucher "$vcode" 3
load "$vcode" 3
redis_reserve "$vcode" 1 "$vcode-u3" "$far" >/dev/null
# Issue 25 item 4: reserve and confirm both answered 503, Redis ran both later.
scode=$(unique_code STRAND)
new_voucher "$scode" 3
load "$scode" 3
for i in 1 2 3; do
  redis_reserve "$scode" "$i" "$scode-s$i" "$far" >/dev/null
  redis_confirm "$scode" "$scode-s$i" >/dev/null
done
is "$(state "$scode" "$scode-s1")$(state "$scode" "$scode-s2")$(state "$scode" "$scode-s3") $(rcli GET "voucher:{$scode}:remaining")" \
  "CCC 0" "three uses confirmed in Redis with no event anywhere"

# Pass 1 first sees every hold above (before its second pause); pass 2 starts
# more than a grace later (the interval is longer), so it is the pass that
# releases what is stranded. The windows open inside pass 2.
VOUCHER_PAUSE=reconciler-after-tail,reconciler-before-repair VOUCHER_PAUSE_DIR=$pause_dir \
  start_reconciler "" --interval 3s --grace 2s
next_pause reconciler-after-tail
go reconciler-after-tail
next_pause reconciler-before-repair
go reconciler-before-repair
next_pause reconciler-after-tail
# Pass 2 has read Kafka; it stops before reading Redis.
is "$(redis_forget "$ucode" "$ucode-u1") $(redis_reserve "$ucode" 1 "$ucode-u1" $(($(now_ms) + 600000)))" "1 1" \
  "u1 forgotten (taken under another claim) and taken again: a new hold, unsent so far"
reserve "$rcode" 1 "$rcode-r1"
is "$status $(jq -r .replayed <<<"$body")" "201 true" "r1's client retries inside the pass: 201 replayed"
confirm "$scode" "$scode-s2"
is "$status" 200 "s2's client confirms again inside the pass: 200"
reserve "$scode" 3 "$scode-s3"
is "$status $(jq -r .replayed <<<"$body")" "201 true" "s3's client reserves again inside the pass: 201 replayed"
go reconciler-after-tail
next_pause reconciler-before-repair # it decided to release u3 (stranded): now u3 becomes another hold
is "$(redis_forget "$vcode" "$vcode-u3") $(redis_reserve "$vcode" 1 "$vcode-u3" $(($(now_ms) + 600000)))" "1 1" \
  "u3 forgotten and taken again between the decision and the release"
go reconciler-before-repair
next_pause reconciler-after-tail # pass 2 is over
daemon_stop "$test_name-reconciler" KILL
rm -f "$pause_dir"/reconciler-*
is "$(state "$rcode" "$rcode-r2")" R "control: r2, stranded and never retried, is released in that pass"
is "$(state "$rcode" "$rcode-r1")" H "race 3: r1, retried with a 201 inside the pass, is not released behind it"
is "$(state "$ucode" "$ucode-u1")" H "race 4: the new hold under u1's orderId does not inherit the old one's age"
is "$(state "$vcode" "$vcode-u3")" H "race 4: the release decided for the old u3 does not hit the new u3"
is "$(state "$scode" "$scode-s1")" R "item 4: s1, confirmed in Redis and unknown downstream after the grace, is released"
is "$(state "$scode" "$scode-s2")$(state "$scode" "$scode-s3")" CC \
  "item 4: s2 (200 inside the pass) and s3 (201 inside the pass) keep their uses"
is "$(rcli GET "voucher:{$scode}:remaining")" 1 "s1's use is back in the pool: no permanent undersell"
settle "$rcode"
settle "$scode"
is "$(status_of "$rcode-r1") $(status_of "$rcode-r2")" "RESERVED RELEASED" \
  "PostgreSQL: r1 reserved (its 201 stands), r2 released"
confirm "$rcode" "$rcode-r1"
is "$status" 200 "r1 can be confirmed after its 201"
is "$(status_of "$scode-s1") $(status_of "$scode-s2") $(status_of "$scode-s3")" "RELEASED CONFIRMED RESERVED" \
  "PostgreSQL: s1 released (a tombstone: never answered 200), s2 confirmed, s3 reserved"
confirm "$scode" "$scode-s1"
is "$status $(jq -r .error <<<"$body")" "409 HOLD_EXPIRED" "confirming s1 afterwards is refused, consistently"
settle "$scode"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$scode'") $(rcli GET "voucher:{$scode}:remaining")" "2 1" \
  "the voucher counts s2 and s3 on both sides"

# --- Leadership: a reconciler whose session (and lock) ended stops repairing.
lcode=$(unique_code LEAD)
new_voucher "$lcode" 2
load "$lcode" 2
# Its limit key, as the gateway's load.lua writes it: the limit sync has nothing
# to do, so the proof of the lock is all that stands between the pass and the hold.
rcli SET "voucher:{$lcode}:limit" 2 >/dev/null
redis_reserve "$lcode" 1 "$lcode-l1" $(($(now_ms) - 60000)) >/dev/null # long past heldUntil
# The pass asks PostgreSQL again before a repair once its last proof of the lock
# is this old (reconciler/rc_pg.h) on the monotonic clock; a --once pass sent its
# last proof when it took the lock, before its reads and so before its pause.
proof_ms=$(awk '$1 == "#define" && $2 == "RC_PROOF_EVERY_MS" { print $3 }' \
  "$VOUCHER_SOURCE_DIR/reconciler/rc_pg.h")
[ -n "$proof_ms" ] || { echo "Bail out! no RC_PROOF_EVERY_MS in reconciler/rc_pg.h"; exit 1; }
mono_ms() { python3 -c 'import time; print(time.monotonic_ns() // 1000000)'; }
VOUCHER_PAUSE=reconciler-before-repair VOUCHER_PAUSE_DIR=$pause_dir \
  "$bin_reconciler" --once --grace 1s >"$scratch/lead.txt" 2>&1 &
rc_pid=$!
pause_wait reconciler-before-repair || { echo "Bail out! the reconciler did not pause"; exit 1; }
paused=$(mono_ms)
# As the superuser: the reconciler logs in as its own role, whose sessions the
# owner may not end. With a timeout, pg_terminate_backend() is true only once
# the session has ended, not when it was merely asked to end.
ended="SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 20000)) FROM pg_locks
       WHERE locktype = 'advisory' AND granted AND objid = x'7461736b'::bigint::oid"
is "$(psql -X -q -tA "$VOUCHER_PG_DSN user=postgres" -c "$ended")" 1 \
  "its PostgreSQL session has ended while it is about to repair (the lock is free for another)"
# Until that proof is older than proof_ms on the clock the pass counts with (a
# wall-clock wait comes short when the wall clock steps): its first repair
# must ask the ended session, whatever voucher comes first.
until [ "$(mono_ms)" -gt $((paused + proof_ms)) ]; do sleep 0.05; done
run_through "$rc_pid"
is "$?" 2 "the pass fails instead of repairing"
grep -q "lost the reconciler lock" "$scratch/lead.txt"
lost=$?
ok "$lost" "and says it lost the lock"
[ "$lost" -eq 0 ] || diag "$(grep -v "^{" "$scratch/lead.txt" | head -3)"
is "$(state "$lcode" "$lcode-l1")" H "the expired hold was left for the next leader"
"$bin_reconciler" --once --grace 1s >"$scratch/lead2.txt" 2>&1
is "$(state "$lcode" "$lcode-l1")" R "the next reconciler that holds the lock expires it"
