#!/usr/bin/env bash
# The dead-letter workflow (issue 13, part 2), with the gateway, the writer
# and the reconciler all running: a reservation answered 201 that PostgreSQL
# refuses is parked (its use stays taken in Redis, the reconciler never
# releases it), then the operator replays it (applied once, confirm 200) or
# discards it (the use comes back through the two-phase release with reason
# DISCARDED, confirm 409). Every action is audited. At the end Redis and
# PostgreSQL agree and nothing is oversold.
source "$(dirname "$0")/lib.sh"
plan 51

reserve() { # CODE CUSTOMER ORDER -> $status $body
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":500000}"
}
confirm() { http POST "/vouchers/$1/reservations/$2/confirm"; }
cancel() { http DELETE "/vouchers/$1/reservations/$2"; }
state() { rcli HGET "voucher:{$1}:orders" "$2" | awk -F: '{print $4}'; }
remaining() { rcli GET "voucher:{$1}:remaining"; }
letter() { sql "SELECT state FROM dead_letter WHERE order_id = '$1'"; }
key_count() { # CODE: messages keyed CODE in voucher-events
  kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -o beginning -e -q -f '%k\n' 2>/dev/null | grep -acx "$1"
}
once_line() { # CODE: the voucher's line of a --once --report-only table
  "$bin_reconciler" --once --report-only 2>/dev/null | awk -v c="$1" '$1 == c'
}

grace_ms=2000
va=$(unique_code DLTREPLAY)
vb=$(unique_code DLTDISCARD)
new_voucher "$va" 5 >/dev/null
new_voucher "$vb" 5 >/dev/null
start_gateway
start_writer

# --- (1) total_limit lowered by hand below the next use: a 201 PostgreSQL refuses.
reserve "$va" 1 "$va-o1" && s1=$status
reserve "$vb" 1 "$vb-o1" && s2=$status
is "$s1 $s2" "201 201" "a first reservation on each voucher"
wait_sql "SELECT sum(used_count) FROM voucher WHERE code IN ('$va', '$vb')" 2 20 >/dev/null
sql "UPDATE voucher SET total_limit = 1 WHERE code IN ('$va', '$vb')"
reserve "$va" 2 "$va-o2" && s1=$status
reserve "$vb" 2 "$vb-o2" && s2=$status
is "$s1 $s2" "201 201" "the second reservations are answered 201 (Redis still offers the uses)"
is "$(wait_sql "SELECT string_agg(order_id || '=' || state, ' ' ORDER BY order_id = '$vb-o2') FROM dead_letter WHERE order_id IN ('$va-o2', '$vb-o2')" \
  "$va-o2=parked $vb-o2=parked" 30)" "$va-o2=parked $vb-o2=parked" \
  "PostgreSQL refused both: each is dead-lettered and parked"
is "$(sql "SELECT event_type || ' ' || error_class || ' ' || (dlt_offset IS NOT NULL) || ' ' || (error_message LIKE '23514:%') FROM dead_letter WHERE order_id = '$va-o2'")" \
  "VoucherReserved constraint true true" "the parked letter names its event, class, place in the DLT and SQLSTATE"
is "$(sql "SELECT count(*) FROM voucher_redemption WHERE order_id IN ('$va-o2', '$vb-o2')")" 0 "no row for them"

# The limit is put back before the reconciler starts: with it lowered, the
# reconciler rightly lowers Redis's counter to it, and nothing raises a
# counter again when a limit is raised by hand. Parking does not depend on
# the limit: the letter stays parked until an operator acts.
sql "UPDATE voucher SET total_limit = 5 WHERE code IN ('$va', '$vb')"
start_reconciler "" --grace "${grace_ms}ms" --interval 300ms

# --- (2) Parked for longer than the grace: still held, still counted, no release.
wait_graces "$grace_ms"
is "$(state "$va" "$va-o2") $(state "$vb" "$vb-o2")" "H H" \
  "after three graces and six passes both holds are still H in Redis (never released as undelivered)"
is "$(remaining "$va") $(remaining "$vb")" "3 3" "their uses stay counted in Redis (5 - 2 each)"
is "$(sql "SELECT count(*) FROM voucher_redemption WHERE order_id IN ('$va-o2', '$vb-o2')")" 0 \
  "and no VoucherReleased reached PostgreSQL (no tombstone row)"
line=$(once_line "$va")
is "$(awk '{print $7, $NF}' <<<"$line")" "1 parked" "--once: the parked column says 1 and the verdict is parked"
diag "$line"
is "$(metric "$(reconciler_admin 0)" "voucher_reconciler_parked_letters{code=\"$va\"}")" 1 \
  "metric voucher_reconciler_parked_letters for the voucher"

# --- Inspect.
"$bin_writer" dlt list --code "$va" >"$scratch/list-a.txt" 2>"$scratch/list-a.err"
ok $? "dlt list --code exits 0"
is "$(awk 'NR > 1 {print $2, $3, $4, $5, $7}' "$scratch/list-a.txt")" "$va $va-o2 VoucherReserved constraint parked" \
  "dlt list --code shows the voucher's one letter, parked"
message=$(sql "SELECT translate(error_message, E'\\n\\t', '  ') FROM dead_letter WHERE order_id = '$va-o2'")
grep -qF -- "$message" "$scratch/list-a.txt"
ok $? "and its MESSAGE whole (${#message} characters), the figures at its end too"
"$bin_writer" dlt list --order "$vb-o2" --state parked --since 10m --partition 0 >"$scratch/list-b.txt" 2>/dev/null
is "$(awk 'NR > 1 {print $3, $7}' "$scratch/list-b.txt")" "$vb-o2 parked" \
  "dlt list --order --state --since --partition select the other letter"
"$bin_writer" dlt list --order "$vb-o2" --since "$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)" >"$scratch/list-c.txt" 2>/dev/null
is "$? $(awk 'NR > 1' "$scratch/list-c.txt" | wc -l)" "0 0" "--since a later time shows none (exit 0)"
"$bin_writer" dlt list --since yesterday >/dev/null 2>"$scratch/list-bad.err"
is "$?" 2 "a bad --since is a usage error (exit 2)"

# --- (3) Replay: applied once, confirm 200.
events_before=$(key_count "$va")
"$bin_writer" dlt replay --order "$va-o2" --operator tester >"$scratch/replay1.txt" 2>"$scratch/replay1.err"
ok $? "dlt replay --order exits 0"
is "$(wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$va-o2'" RESERVED 30)" RESERVED \
  "the replayed reservation is applied"
is "$(wait_sql "SELECT state FROM dead_letter WHERE order_id = '$va-o2'" replayed 10)" replayed "its letter is marked replayed"
confirm "$va" "$va-o2"
is "$status" 200 "confirm of the replayed order answers 200"
is "$(wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$va-o2'" CONFIRMED 20)" CONFIRMED "and PostgreSQL has it confirmed"
events_mid=$(key_count "$va")
"$bin_writer" dlt replay --order "$va-o2" --operator tester >"$scratch/replay2.txt" 2>"$scratch/replay2.err"
ok $? "replaying the same letter again exits 0"
grep -q "already replayed" "$scratch/replay2.txt"
ok $? "and says it was already replayed: $(head -1 "$scratch/replay2.txt")"
is "$(key_count "$va")" "$events_mid" "the second replay published nothing (the first published $((events_mid - events_before - 1)) plus the confirm)"
is "$(sql "SELECT string_agg(a.action || ':' || a.outcome || ':' || a.operator, ' ' ORDER BY a.id) FROM dead_letter_action a JOIN dead_letter d ON d.id = a.letter_id WHERE d.order_id = '$va-o2'")" \
  "replay:sent:tester replay:noop:tester" "both replays are audited with the operator"
grep -q '"action":"replay".*"operator":"tester"\|"operator":"tester".*"action":"replay"' "$scratch/replay1.err"
ok $? "the replay logged one JSON line naming the action and the operator"

# --- (4) Discard: the use comes back, confirm 409.
"$bin_writer" dlt discard --order "$vb-o2" --operator tester >"$scratch/discard.txt" 2>"$scratch/discard.err"
ok $? "dlt discard --order exits 0"
is "$(letter "$vb-o2")" discarded "the letter is discarded"
is "$(wait_for R 30 state "$vb" "$vb-o2")" R "the reconciler released the order in Redis (R)"
is "$(remaining "$vb")" 4 "its use is back in Redis (5 - 1)"
confirm "$vb" "$vb-o2"
is "$status" 409 "confirm of the discarded order answers 409"
is "$(wait_sql "SELECT status || ' ' || coalesce(release_reason, '-') FROM voucher_redemption WHERE order_id = '$vb-o2'" "RELEASED DISCARDED" 20)" \
  "RELEASED DISCARDED" "PostgreSQL has it released with reason DISCARDED"
"$bin_writer" dlt discard --order "$vb-o2" --operator tester >"$scratch/discard2.txt" 2>/dev/null
is "$(sql "SELECT string_agg(a.action || ':' || a.outcome || ':' || a.operator, ' ' ORDER BY a.id) FROM dead_letter_action a JOIN dead_letter d ON d.id = a.letter_id WHERE d.order_id = '$vb-o2'")" \
  "discard:discarded:tester discard:noop:tester" "discards are audited; a second one is a no-op"
"$bin_writer" dlt replay --order "$vb-o2" >"$scratch/replay-discarded.txt" 2>/dev/null
is "$(sql "SELECT status FROM voucher_redemption WHERE order_id = '$vb-o2'") $(grep -c 'discarded at' "$scratch/replay-discarded.txt")" "RELEASED 1" \
  "a discarded letter is not replayed"

# --- A crash between the dead letter and its row: the batch is read again, the
# event dead-lettered again, and the letter parked then (two copies, one letter).
# The reconciler is stopped while the limit is low (see above).
vc=$(unique_code DLTCRASH)
new_voucher "$vc" 5 >/dev/null
reserve "$vc" 1 "$vc-o1"
wait_sql "SELECT used_count FROM voucher WHERE code = '$vc'" 1 20 >/dev/null
daemon_stop "$test_name-reconciler"
daemon_stop "$test_name-writer"
sql "UPDATE voucher SET total_limit = 1 WHERE code = '$vc'"
VOUCHER_PAUSE=writer-before-park VOUCHER_PAUSE_DIR=$pause_dir start_writer
reserve "$vc" 2 "$vc-o2" && s1=$status
pause_wait writer-before-park 30
ok $? "answered $s1; the writer stopped with the letter in the topic, before parking it"
daemon_stop "$test_name-writer" KILL
pause_go writer-before-park
is "$(sql "SELECT count(*) FROM dead_letter WHERE order_id = '$vc-o2'")" 0 "killed there: no row yet"
start_writer
is "$(wait_sql "SELECT state FROM dead_letter WHERE order_id = '$vc-o2'" parked 30)" parked \
  "after the restart the event is dead-lettered again and parked"
"$bin_writer" dlt list --order "$vc-o2" >"$scratch/list-crash.txt" 2>/dev/null
is "$(awk 'NR > 1 {print $3, $7}' "$scratch/list-crash.txt" | tr '\n' ' ')" "$vc-o2 parked $vc-o2 parked " \
  "dlt list shows both copies, as the one parked letter"
sql "UPDATE voucher SET total_limit = 5 WHERE code = '$vc'"
events_before=$(key_count "$vc")
"$bin_writer" dlt replay --order "$vc-o2" >"$scratch/replay-crash.txt" 2>/dev/null
is "$(grep -c '^letter .*sent to' "$scratch/replay-crash.txt") $(grep -c 'another copy' "$scratch/replay-crash.txt") $(($(key_count "$vc") - events_before))" "1 1 1" \
  "replaying both copies sends the event once"
is "$(wait_sql "SELECT r.status || ' ' || d.state FROM voucher_redemption r JOIN dead_letter d USING (order_id) WHERE r.order_id = '$vc-o2'" "RESERVED replayed" 30)" \
  "RESERVED replayed" "applied, and the letter replayed"

# --- Two replays of one letter at the same moment, and a discard meanwhile: the
# letter is claimed before it is sent, so one replay sends it, once; the other
# and the discard find it claimed (the reconciler is still stopped, as above).
vd=$(unique_code DLTTWICE)
new_voucher "$vd" 5 >/dev/null
reserve "$vd" 1 "$vd-o1"
wait_sql "SELECT used_count FROM voucher WHERE code = '$vd'" 1 20 >/dev/null
sql "UPDATE voucher SET total_limit = 1 WHERE code = '$vd'"
reserve "$vd" 2 "$vd-o2"
is "$(wait_sql "SELECT state FROM dead_letter WHERE order_id = '$vd-o2'" parked 30)" parked \
  "another letter parked (answered $status)"
sql "UPDATE voucher SET total_limit = 5 WHERE code = '$vd'"
events_before=$(key_count "$vd")
VOUCHER_PAUSE=dlt-replay-before-send VOUCHER_PAUSE_DIR=$pause_dir \
  "$bin_writer" dlt replay --order "$vd-o2" --operator first >"$scratch/replay-first.txt" 2>&1 &
first=$!
pause_wait dlt-replay-before-send 30
ok $? "the first replay stopped after deciding to send, before sending"
"$bin_writer" dlt replay --order "$vd-o2" --operator second >"$scratch/replay-second.txt" 2>&1
"$bin_writer" dlt discard --order "$vd-o2" --operator third >"$scratch/discard-mid.txt" 2>&1
pause_go dlt-replay-before-send
wait "$first"
ok $? "the first replay exits 0"
is "$(grep -c '^letter .*sent to' "$scratch/replay-first.txt") $(grep -c '^letter .*being replayed by first@' "$scratch/replay-second.txt") $(grep -c '^letter .*being replayed by first@' "$scratch/discard-mid.txt")" \
  "1 1 1" "the first replay sends; the second and the discard find the letter claimed by it"
diag "$(grep 'letter ' "$scratch/replay-second.txt")"
is "$(wait_sql "SELECT r.status || ' ' || d.state FROM voucher_redemption r JOIN dead_letter d USING (order_id) WHERE r.order_id = '$vd-o2'" "RESERVED replayed" 30)" \
  "RESERVED replayed" "applied, and the letter replayed (not discarded)"
is "$(($(key_count "$vd") - events_before)) $(sql "SELECT string_agg(a.action || ':' || a.outcome || ':' || a.operator, ' ' ORDER BY a.id) FROM dead_letter_action a JOIN dead_letter d ON d.id = a.letter_id WHERE d.order_id = '$vd-o2'")" \
  "1 replay:noop:second discard:noop:third replay:sent:first" \
  "the event went to the main topic once, and the audit has one sent"
start_reconciler "" --grace "${grace_ms}ms" --interval 300ms

# --- Release reasons: a customer's cancel is stored as CANCELLED.
cancel "$va" "$va-o1"
is "$status" 200 "cancel of the first order answers 200"
is "$(wait_sql "SELECT status || ' ' || coalesce(release_reason, '-') FROM voucher_redemption WHERE order_id = '$va-o1'" "RELEASED CANCELLED" 20)" \
  "RELEASED CANCELLED" "the cancel's reason is stored on the row"

# --- At the end: Redis and PostgreSQL agree, nothing is oversold.
for ((i = 0; i < 50; i++)); do
  [ "$(once_line "$va" | awk '{print $NF}') $(once_line "$vb" | awk '{print $NF}')" = "consistent consistent" ] && break
  sleep 0.2
done
is "$(once_line "$va" | awk '{print $7, $NF}') / $(once_line "$vb" | awk '{print $7, $NF}')" "0 consistent / 0 consistent" \
  "both vouchers consistent, nothing parked"
is "$(sql "SELECT string_agg(v.code || '=' || v.used_count || '/' || v.total_limit || ':' || (SELECT count(*) FROM voucher_redemption r WHERE r.voucher_code = v.code AND r.status <> 'RELEASED'), ' ' ORDER BY v.code) FROM voucher v WHERE v.code IN ('$va', '$vb')")" \
  "$(sort <<<"$va=1/5:1
$vb=1/5:1" | tr '\n' ' ' | sed 's/ $//')" "used_count equals the live rows and stays within total_limit"
is "$(remaining "$va") $(remaining "$vb")" "4 4" "Redis offers exactly what PostgreSQL allows (5 - 1 each)"
