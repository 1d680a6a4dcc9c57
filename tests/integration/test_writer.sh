#!/usr/bin/env bash
# The writer on the real servers, fed straight from kcat: killed with -9 in the
# middle of a stream it loses nothing and counts nothing twice; poison events
# go to voucher-events.dlt with every header while the good ones apply; once
# the cause is fixed a replay applies them once, a second replay changes
# nothing and --dry-run publishes nothing; a customer's use beyond the
# voucher's per-customer limit is refused by PostgreSQL, dead-lettered, and
# applies on replay once a use was given back; with PostgreSQL stopped for 10 s it
# waits (not ready), dead-letters nothing and then applies everything once.
# Also: a poison event too large for the dead-letter topic once its headers are
# added is stored truncated and stops nothing; a replayed event lands in the
# partition the gateway uses for its voucher; a replay range needs --partition
# on a dead-letter topic of several partitions; under a REPEATABLE READ default
# the per-customer limit still holds; the lag gauge counts what is not applied.
# Stops and starts the stack's PostgreSQL: run it on a private stack (tests/run).
source "$(dirname "$0")/lib.sh"
plan 76

stack=$VOUCHER_SOURCE_DIR/deploy/stack
pg_back() { "$stack" up postgres >>"$scratch/pg-up.log" 2>&1; }
# Whatever happens, leave PostgreSQL running for the tests after this one.
trap 'pg_back; finish' EXIT

admin=127.0.0.1:$((VOUCHER_PORT_BASE + 11))
# The producer's own size limit above the broker's (1048588 bytes), so that the
# broker, not librdkafka, refuses an oversized dead letter (as in production
# with a larger message.max.bytes).
writer_args=(--session-timeout 6s --backoff-max 1s --admin-addr "$admin" --kafka message.max.bytes=1100000)
dlt=voucher-events.dlt
noop_metric='voucher_writer_events_total{outcome="noop"}'
now=$(date -u +%Y-%m-%dT%H:%M:%S.000Z)
later=$(date -u -d '+15 min' +%Y-%m-%dT%H:%M:%S.000Z)

# Event lines "KEY<TAB>JSON" (proto/events.md), keyed by the voucher code.
ev_reserved() { # CODE CUSTOMER ORDER
  printf '%s\t{"type":"VoucherReserved","version":1,"code":"%s","customerId":%s,"orderId":"%s","discountAmount":1000,"orderAmount":50000,"reservedAt":"%s","heldUntil":"%s"}\n' \
    "$1" "$1" "$2" "$3" "$now" "$later"
}
ev_confirmed() {
  printf '%s\t{"type":"VoucherConfirmed","version":1,"code":"%s","customerId":%s,"orderId":"%s","confirmedAt":"%s"}\n' \
    "$1" "$1" "$2" "$3" "$now"
}
ev_released() {
  printf '%s\t{"type":"VoucherReleased","version":1,"code":"%s","customerId":%s,"orderId":"%s","releasedAt":"%s","reason":"CANCELLED"}\n' \
    "$1" "$1" "$2" "$3" "$now"
}

# A stream for N orders spread over CODES: each reserved; every 5th then
# confirmed, every 7th then released (every 35th both). ORDER-PREFIX N CODES...
gen_stream() {
  local prefix=$1 n=$2
  shift 2
  awk -v prefix="$prefix" -v n="$n" -v codes="$*" -v now="$now" -v later="$later" 'BEGIN {
    nc = split(codes, c, " ")
    for (i = 1; i <= n; i++) {
      k = c[(i - 1) % nc + 1]; o = prefix i
      printf "%s\t{\"type\":\"VoucherReserved\",\"version\":1,\"code\":\"%s\",\"customerId\":%d,\"orderId\":\"%s\",\"discountAmount\":1000,\"orderAmount\":50000,\"reservedAt\":\"%s\",\"heldUntil\":\"%s\"}\n", k, k, i, o, now, later
      if (i % 5 == 0)
        printf "%s\t{\"type\":\"VoucherConfirmed\",\"version\":1,\"code\":\"%s\",\"customerId\":%d,\"orderId\":\"%s\",\"confirmedAt\":\"%s\"}\n", k, k, i, o, now
      if (i % 7 == 0)
        printf "%s\t{\"type\":\"VoucherReleased\",\"version\":1,\"code\":\"%s\",\"customerId\":%d,\"orderId\":\"%s\",\"releasedAt\":\"%s\",\"reason\":\"CANCELLED\"}\n", k, k, i, o, now
    }
  }'
}

# Publishes KEY<TAB>VALUE lines from stdin to voucher-events, in order.
produce() {
  kcat -P -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -K $'\t' -X enable.idempotence=true
}
# The same, about LINES events every 100 ms: a stream that lasts a few seconds.
produce_paced() { # LINES
  awk -v per="$1" '{ print; fflush() } NR % per == 0 { system("sleep 0.1") }' | produce
}

# "OFFSET<TAB>KEY" of every dead letter whose key matches the regex CODES (a|b).
dlt_entries() {
  kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t "$dlt" -o beginning -e -q -f '%o\t%k\n' 2>/dev/null |
    awk -F'\t' -v re="^($1)\$" '$2 ~ re'
}
# The dead-letter topic's high watermark (it has one partition).
dlt_high() { kcat -b "$VOUCHER_KAFKA_BROKERS" -Q -t "$dlt:0:-1" 2>/dev/null | awk '/offset/ { print $NF }'; }

readyz() { curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$admin/readyz"; }
count_dlt() { dlt_entries "$1" | wc -l; }

# One line per voucher of CODES (a|b): rows, distinct orders, RESERVED,
# CONFIRMED, RELEASED, used_count, and whether used_count = rows not RELEASED.
summary() {
  sql "SELECT count(r.order_id) || ' ' || count(DISTINCT r.order_id) || ' ' ||
              count(*) FILTER (WHERE r.status = 'RESERVED') || ' ' ||
              count(*) FILTER (WHERE r.status = 'CONFIRMED') || ' ' ||
              count(*) FILTER (WHERE r.status = 'RELEASED')
         FROM voucher_redemption r WHERE r.voucher_code = ANY (string_to_array('$1', '|'))"
}
used_mismatches() { # CODES: vouchers whose used_count is not their rows not RELEASED
  sql "SELECT count(*) FROM voucher v
        WHERE v.code = ANY (string_to_array('$1', '|')) AND v.used_count <> (SELECT count(*) FROM voucher_redemption r
                WHERE r.voucher_code = v.code AND r.status <> 'RELEASED')"
}
# What the stream of gen_stream for N orders must leave: rows distinct RESERVED CONFIRMED RELEASED.
expected_summary() {
  awk -v n="$1" 'BEGIN { for (i = 1; i <= n; i++) { if (i % 7 == 0) rel++; else if (i % 5 == 0) conf++; else res++ }
    print n, n, res, conf, rel }'
}

start_writer "${writer_args[@]}"
wait_http_ok "http://$admin/healthz" 30 || { echo "Bail out! the writer's admin endpoint did not answer"; exit 1; }

# --- kill -9 in the middle of a stream of 10,000 orders, then a restart.
codes=()
for i in 1 2 3 4; do
  codes+=("$(unique_code KILL$i)")
  new_voucher "${codes[-1]}" 10000 >/dev/null
done
re=$(IFS='|'; echo "${codes[*]}")
gen_stream "${codes[0]}-o" 10000 "${codes[@]}" >"$scratch/stream.tsv"
diag "stream of $(wc -l <"$scratch/stream.tsv") events for 10000 orders over ${#codes[@]} vouchers"
produce_paced 300 <"$scratch/stream.tsv" &
producer=$!
applied=$(wait_sql "SELECT count(*) >= 2500 FROM voucher_redemption WHERE voucher_code = ANY (string_to_array('$re', '|'))" t 30)
daemon_stop "$test_name-writer" KILL
at_kill=$(sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = ANY (string_to_array('$re', '|'))")
ok "$([ "$applied" = t ] && [ "$at_kill" -lt 10000 ]; echo $?)" \
  "the writer was killed with -9 mid-stream ($at_kill of 10000 orders in PostgreSQL)"
start_writer "${writer_args[@]}"
wait "$producer"
ok $? "kcat published the whole stream"
want=$(expected_summary 10000)
got=$(wait_for "$want" 90 summary "$re" 2>/dev/null)
is "$got" "$want" "after the restart: 10000 rows for 10000 orders (RESERVED CONFIRMED RELEASED as sent)"
read -r rows distinct _ <<<"$got"
is "$((rows - distinct))" 0 "no duplicate rows: count(*) = count(DISTINCT order_id)"
is "$(sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = ANY (string_to_array('$re', '|')) AND order_id !~ '^${codes[0]}-o[0-9]+\$'")" 0 \
  "no row for an order that was not sent"
is "$(used_mismatches "$re")" 0 "used_count = rows not RELEASED, for each of the ${#codes[@]} vouchers"
read -r _ _ res conf rel <<<"$want"
is "$(sql "SELECT sum(used_count) FROM voucher WHERE code = ANY (string_to_array('$re', '|'))")" "$((res + conf))" \
  "the vouchers' used_count adds up to the $((res + conf)) uses still held"
is "$(count_dlt "$re")" 0 "none of the stream was dead-lettered"
diag "redelivered events the restarted writer found already applied: $(metric "$admin" "$noop_metric")"

# --- Poison events among good ones.
code=$(unique_code POISON)
ghost=$(unique_code GHOST) # never created, at first
new_voucher "$code" 3 >/dev/null
{
  ev_reserved "$code" 1 "$code-o1"
  ev_reserved "$code" 2 "$code-o2"
  ev_reserved "$ghost" 9 "$ghost-o1"
  printf '%s\t{"type":"VoucherReserved","version":1,"code":"%s","customerId":7,"orderId":\n' "$code" "$code"
  ev_reserved "$code" 3 "$code-o3"
  ev_reserved "$code" 4 "$code-o4" # a fourth use of a voucher of 3
  ev_confirmed "$code" 1 "$code-o1"
  ev_released "$code" 2 "$code-o2"
} | produce
re="$code|$ghost"
is "$(wait_for 3 30 count_dlt "$re" 2>/dev/null)" 3 "three poison events in $dlt"
is "$(wait_sql "SELECT string_agg(order_id || '=' || status, ' ' ORDER BY order_id) FROM voucher_redemption WHERE voucher_code = ANY (string_to_array('$re', '|'))" \
  "$code-o1=CONFIRMED $code-o2=RELEASED $code-o3=RESERVED" 20)" \
  "$code-o1=CONFIRMED $code-o2=RELEASED $code-o3=RESERVED" "the good events around them applied"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'")" 2 "used_count 2: three uses, one given back"

# Each dead letter: its raw Kafka headers, `dlt show`'s reading of them, and
# the original message they point at.
dlt_entries "$re" >"$scratch/dead.tsv"
"$bin_writer" dlt list >"$scratch/list.txt" 2>"$scratch/list.err"
ok $? "voucher-writer dlt list exits 0"
find_dead_letter() { # CLASS: sets $dl_offset to the offset of ours of that class (`dlt show`)
  local off key
  dl_offset=
  while IFS=$'\t' read -r off key; do
    "$bin_writer" dlt show "$off" >"$scratch/show-$off.txt" 2>&1 || continue
    grep -q "^  dlt-error-class  *$1\$" "$scratch/show-$off.txt" && { dl_offset=$off; return; }
  done <"$scratch/dead.tsv"
}
show_header() { # NAME: its value in the `dlt show` of $dl_offset
  awk -v n="$1" '$1 == n { sub(/^ *[^ ]+ +/, ""); print; exit }' "$scratch/show-$dl_offset.txt"
}
check_dead_letter() { # CLASS CODE ORDER-ID-OR-- (after find_dead_letter): prints problems
  local class=$1 code=$2 order=$3 headers p o original copy
  [ -n "$dl_offset" ] || { echo "no dead letter of class $class"; return; }
  headers=$(kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t "$dlt" -p 0 -o "$dl_offset" -c 1 -e -q -f '%h' 2>/dev/null |
    grep -o 'dlt-[a-z-]*=' | tr -d = | sort | tr '\n' ' ')
  [ "$headers" = "dlt-consumer-group dlt-error-class dlt-error-message dlt-failed-at dlt-original-offset dlt-original-partition dlt-original-timestamp dlt-original-topic " ] ||
    echo "raw headers: $headers"
  [ "$(show_header dlt-original-topic)" = voucher-events ] || echo "original topic: $(show_header dlt-original-topic)"
  [ "$(show_header dlt-consumer-group)" = voucher-writer ] || echo "consumer group: $(show_header dlt-consumer-group)"
  [[ "$(show_header dlt-original-timestamp)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9:]+)$ ]] || echo "original timestamp: $(show_header dlt-original-timestamp)"
  [[ "$(show_header dlt-failed-at)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9:]+)$ ]] || echo "failed at: $(show_header dlt-failed-at)"
  [ -n "$(show_header dlt-error-message)" ] || echo "no error message"
  p=$(show_header dlt-original-partition)
  o=$(show_header dlt-original-offset)
  original=$(kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -p "$p" -o "$o" -c 1 -e -q -f '%k %s' 2>/dev/null)
  copy=$(kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t "$dlt" -p 0 -o "$dl_offset" -c 1 -e -q -f '%k %s' 2>/dev/null)
  [ -n "$copy" ] && [ "$original" = "$copy" ] || echo "voucher-events $p/$o is '$original', the dead letter '$copy'"
  [ "$order" = - ] || grep -q "\"orderId\":\"$order\"" <<<"$copy" || echo "not the event of $order: $copy"
  # dlt list: one line for it, with its code, order and class.
  awk -v o="$dl_offset" -v k="$code" -v id="$order" -v c="$class" '$1 == o && $2 == k && $3 == id && $5 == c' \
    "$scratch/list.txt" | grep -q . || echo "dlt list has no line '$dl_offset $code $order ... $class'"
}
for spec in "unknown-voucher $ghost $ghost-o1 23503" "malformed $code - -" "constraint $code $code-o4 23514"; do
  read -r class key order sqlstate <<<"$spec"
  find_dead_letter "$class"
  problems=$(check_dead_letter "$class" "$key" "$order")
  is "$problems" "" "the $class dead letter ($order) has all 8 headers, points at its original, and is listed"
  [ "$sqlstate" = - ] ||
    is "$(awk '$1 == "dlt-error-message" { print $2 }' "$scratch/show-$dl_offset.txt")" "$sqlstate:" \
      "its error message starts with SQLSTATE $sqlstate"
  case $class in
    unknown-voucher) ghost_off=$dl_offset ;;
    constraint) limit_off=$dl_offset ;;
  esac
done
diag "$(grep -E "$code|$ghost" "$scratch/list.txt")"

# --- Fix the cause, replay: applied once; replay again: nothing changes.
snapshot() {
  sql "SELECT string_agg(order_id || '=' || status, ' ' ORDER BY order_id) FROM voucher_redemption WHERE voucher_code = ANY (string_to_array('$re', '|'))"
  sql "SELECT string_agg(code || '=' || used_count, ' ' ORDER BY code) FROM voucher WHERE code = ANY (string_to_array('$re', '|'))"
}
key_count() { # CODE: messages keyed CODE in voucher-events
  kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -o beginning -e -q -f '%k\n' 2>/dev/null | grep -acx "$1"
}
new_voucher "$ghost" 10 >/dev/null
sql "UPDATE voucher SET total_limit = 4 WHERE code = '$code'"
before=$(snapshot)
"$bin_writer" dlt replay --from "$ghost_off" --to "$ghost_off" --dry-run >"$scratch/dry.txt" 2>&1
ok $? "dlt replay --dry-run by offset exits 0"
"$bin_writer" dlt replay --error-class unknown-voucher --dry-run >"$scratch/dry-class.txt" 2>&1
grep -q "^would replay $ghost_off .*$ghost-o1" "$scratch/dry.txt" && grep -q "^would replay $ghost_off .*$ghost-o1" "$scratch/dry-class.txt"
ok $? "--dry-run by offset and by error class name the dead letter"
# The tool has exited: what it published is in the topic by now, and what it
# wrote is committed. Nothing of either.
is "$(key_count "$ghost")" 1 "--dry-run published nothing to voucher-events"
is "$(snapshot)" "$before" "--dry-run changed nothing in PostgreSQL"

"$bin_writer" dlt replay --from "$ghost_off" --to "$ghost_off" >"$scratch/replay1.txt" 2>&1 &&
  "$bin_writer" dlt replay --from "$limit_off" --to "$limit_off" >>"$scratch/replay1.txt" 2>&1
ok $? "dlt replay of the two fixed dead letters, by offset, exits 0"
is "$(grep -c 'replayed 1 of 1 selected' "$scratch/replay1.txt")" 2 "each replay says it re-published one event"
want="$ghost-o1=RESERVED $code-o1=CONFIRMED $code-o2=RELEASED $code-o3=RESERVED $code-o4=RESERVED" # GHOST_ < POISON_
is "$(wait_sql "SELECT string_agg(order_id || '=' || status, ' ' ORDER BY order_id) FROM voucher_redemption WHERE voucher_code = ANY (string_to_array('$re', '|'))" "$want" 20)" \
  "$want" "the replayed reservations applied"
is "$(sql "SELECT string_agg(code || '=' || used_count, ' ' ORDER BY code) FROM voucher WHERE code = ANY (string_to_array('$re', '|'))")" \
  "$ghost=1 $code=3" "applied once: used_count 3 and 1"
kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -o beginning -e -q -f '%k %h\n' 2>/dev/null |
  grep "^$ghost " | grep -q "dlt-replayed-from=$dlt/0/$ghost_off"
ok $? "the replayed event carries dlt-replayed-from: $dlt/0/$ghost_off"
is "$(count_dlt "$re")" 3 "nothing new dead-lettered"

applied=$(snapshot)
events_before=$(key_count "$ghost")
"$bin_writer" dlt replay --from "$ghost_off" --to "$ghost_off" >"$scratch/replay2.txt" 2>&1 &&
  "$bin_writer" dlt replay --from "$limit_off" --to "$limit_off" >>"$scratch/replay2.txt" 2>&1
ok $? "the same replay again exits 0"
# A letter is replayed once (deploy/sql/009): the second replay sends nothing and says so.
is "$(grep -c '^letter .*already replayed' "$scratch/replay2.txt") $(key_count "$ghost")" "2 $events_before" \
  "the second replay says both letters were already replayed and publishes nothing"
is "$(snapshot)" "$applied" "rows and used_count are identical after the second replay"
is "$(count_dlt "$re")" 3 "and still nothing new dead-lettered"

# --- The per-customer limit, held by PostgreSQL: customer 5 may hold one use.
code=$(unique_code PERCUST)
new_voucher "$code" 10 1 >/dev/null
{
  ev_reserved "$code" 5 "$code-o1"
  ev_reserved "$code" 5 "$code-o2" # a second use for customer 5
  ev_reserved "$code" 6 "$code-o3"
} | produce
is "$(wait_for 1 30 count_dlt "$code" 2>/dev/null)" 1 "the customer's second use is dead-lettered"
is "$(wait_sql "SELECT string_agg(order_id || '=' || status, ' ' ORDER BY order_id) FROM voucher_redemption WHERE voucher_code = '$code'" \
  "$code-o1=RESERVED $code-o3=RESERVED" 20)" "$code-o1=RESERVED $code-o3=RESERVED" \
  "the other customer's use and the first one applied; used_count $(sql "SELECT used_count FROM voucher WHERE code = '$code'")"
dlt_entries "$code" >"$scratch/dead.tsv"
"$bin_writer" dlt list >"$scratch/list.txt" 2>"$scratch/list.err"
find_dead_letter constraint
is "$(check_dead_letter constraint "$code" "$code-o2")" "" "it is a constraint dead letter of $code-o2, listed, with all 8 headers"
grep -q "per_user_limit 1" "$scratch/show-$dl_offset.txt"
ok $? "its error message names the per-customer limit: $(awk '$1 == "dlt-error-message"' "$scratch/show-$dl_offset.txt" | cut -c1-140)"
ev_released "$code" 5 "$code-o1" | produce
wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$code-o1'" RELEASED 20 >/dev/null
"$bin_writer" dlt replay --from "$dl_offset" --to "$dl_offset" >"$scratch/replay-percust.txt" 2>&1
ok $? "once the customer gave the first use back, dlt replay exits 0"
is "$(wait_sql "SELECT string_agg(order_id || '=' || status, ' ' ORDER BY order_id) FROM voucher_redemption WHERE voucher_code = '$code'" \
  "$code-o1=RELEASED $code-o2=RESERVED $code-o3=RESERVED" 20)" "$code-o1=RELEASED $code-o2=RESERVED $code-o3=RESERVED" \
  "the replayed second use applied"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'")" 2 "used_count 2: customer 5 holds one use again, customer 6 one"

# --- A malformed event so large that its dead-letter copy (the original plus
# eight headers) is over the broker's limit, followed by a good event of the
# same voucher: stored truncated, and the partition goes on.
code=$(unique_code OVERSIZE)
new_voucher "$code" 10 >/dev/null
retries_before=$(metric "$admin" voucher_writer_retries_total)
python3 -c '
import sys
sys.stdout.write("%s\t{\"type\":\"VoucherReserved\",\"code\":\"%s\",\"junk\":\"%s\"}\n" % (sys.argv[1], sys.argv[1], "x" * 1048300))
' "$code" >"$scratch/oversize.tsv"
big_len=$(($(cut -f2- "$scratch/oversize.tsv" | wc -c) - 1))
{ cat "$scratch/oversize.tsv"; ev_reserved "$code" 1 "$code-o1"; } |
  kcat -P -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -K $'\t' -X message.max.bytes=1100000
ok $? "kcat published a $big_len-byte malformed event (the broker takes up to 1048588) and a good one after it"
is "$(wait_sql "SELECT string_agg(order_id || '=' || status, ' ') FROM voucher_redemption WHERE voucher_code = '$code'" \
  "$code-o1=RESERVED" 30)" "$code-o1=RESERVED" "the good event behind the oversized one applied"
is "$(wait_for 1 20 count_dlt "$code" 2>/dev/null)" 1 "the oversized event is in $dlt"
big_off=$(dlt_entries "$code" | cut -f1)
kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t "$dlt" -p 0 -o "$big_off" -c 1 -e -q -f '%S %h\n' 2>/dev/null >"$scratch/big-dl.txt"
is "$(grep -o '^[0-9]*' "$scratch/big-dl.txt") $(grep -o 'dlt-truncated=[0-9]*' "$scratch/big-dl.txt")" \
  "4096 dlt-truncated=$big_len" "stored truncated: its first 4096 bytes, and dlt-truncated names the original's size"
is "$(grep -o 'dlt-original-offset=[0-9]*' "$scratch/big-dl.txt" | cut -d= -f2)" \
  "$(kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -o beginning -e -q -f '%k %S %o\n' 2>/dev/null | awk -v k="$code" '$1 == k && $2 > 1000000 { print $3 }')" \
  "its dlt-original-offset points at the whole original in voucher-events"
is "$(metric "$admin" voucher_writer_retries_total)" "$retries_before" "no batch was retried for it"
"$bin_writer" dlt list 2>/dev/null | awk -v o="$big_off" '$1 == o' | grep -q '\[not whole\]'
ok $? "dlt list marks it [not whole]"
"$bin_writer" dlt replay --from "$big_off" --to "$big_off" >"$scratch/replay-big.txt" 2>&1
rc=$?
ok "$([ "$rc" = 1 ] && grep -q "not replaying $dlt/0/$big_off" "$scratch/replay-big.txt"; echo $?)" \
  "dlt replay refuses to replay a part of it (exit $rc): $(head -1 "$scratch/replay-big.txt" | cut -c1-120)"

# --- A replayed event lands in the partition the gateway puts its voucher's
# events in (murmur2_random), not where kcat's or librdkafka's default would.
VOUCHER_GATEWAY_THREADS=1 start_gateway
pcodes=()
for i in 1 2 3 4 5 6 7 8; do
  pcodes+=("$(unique_code PART$i)")
  new_voucher "${pcodes[-1]}" 10 1 >/dev/null
  http POST "/vouchers/${pcodes[-1]}/reservations" '{"customerId":1,"orderId":"'"${pcodes[-1]}"'-o1","orderAmount":1000}'
  [ "$status" = 201 ] || diag "reservation for ${pcodes[-1]}: $status $body"
done
re=$(IFS='|'; echo "${pcodes[*]}")
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = ANY (string_to_array('$re', '|'))" 8 30)" 8 \
  "the gateway's 8 reservations applied"
# A second use of customer 1 on each voucher, published by kcat: dead-lettered.
for c in "${pcodes[@]}"; do ev_reserved "$c" 1 "$c-o2"; done | produce
is "$(wait_for 8 30 count_dlt "$re" 2>/dev/null)" 8 "the 8 second uses are dead-lettered"
read -r first last < <(dlt_entries "$re" | cut -f1 | sort -n | awk 'NR == 1 { f = $1 } { l = $1 } END { print f, l }')
"$bin_writer" dlt replay --from "$first" --to "$last" >"$scratch/replay-part.txt" 2>&1
ok $? "dlt replay of the 8 exits 0"
kcat -C -b "$VOUCHER_KAFKA_BROKERS" -t voucher-events -o beginning -e -q -f '%p\t%k\t%h\t%s\n' 2>/dev/null |
  awk -F'\t' -v re="^($re)\$" '$2 ~ re' >"$scratch/parts.txt"
# KEY GATEWAY-PARTITION KCAT-PARTITION REPLAY-PARTITION per code: the gateway
# published order -o1, kcat -o2, and the replay -o2 with dlt-replayed-from.
awk -F'\t' '$3 ~ /dlt-replayed-from/ { replay[$2] = $1; next }
     $4 ~ /-o1"/ { gw[$2] = $1; next }
     $4 ~ /-o2"/ { kc[$2] = $1 }
     END { for (k in gw) print k, gw[k], kc[k], replay[k] }' "$scratch/parts.txt" >"$scratch/part-table.txt"
is "$(awk '$4 != $2' "$scratch/part-table.txt")" "" "each replayed event is in the partition of the gateway's event for its code"
is "$(wc -l <"$scratch/part-table.txt")" 8 "8 codes compared"
diag "kcat's default partitioner put $(awk '$3 != $2' "$scratch/part-table.txt" | wc -l) of the 8 elsewhere"

# --- On a dead-letter topic of several partitions a range needs --partition
# (voucher-events, 12 partitions, stands in for one: --dry-run publishes nothing).
"$bin_writer" --dlt-topic voucher-events dlt replay --from 0 --to 0 --dry-run >"$scratch/multi.txt" 2>&1
rc=$?
ok "$([ "$rc" = 2 ] && grep -q -- "--partition" "$scratch/multi.txt"; echo $?)" \
  "a range on a 12-partition DLT without --partition is refused (exit $rc): $(head -1 "$scratch/multi.txt" | cut -c1-120)"
"$bin_writer" --dlt-topic voucher-events dlt replay --partition 3 --from 0 --to 0 --dry-run >"$scratch/multi.txt" 2>&1
is "$? $(grep -c '^would replay' "$scratch/multi.txt") $(grep '^would replay' "$scratch/multi.txt" | cut -d' ' -f3)" "0 1 3:0" \
  "with --partition 3 it selects offset 0 of partition 3 alone"

# --- The per-customer limit under a REPEATABLE READ default (the server's or
# the role's, here PGOPTIONS): another transaction adds a use for customer 7
# by hand while the writer waits for the voucher's row lock, then commits; the
# writer's use for customer 7 must then be refused, not counted on an old
# snapshot.
daemon_stop "$test_name-writer"
PGOPTIONS='-c default_transaction_isolation=repeatable\ read' start_writer "${writer_args[@]}"
code=$(unique_code RRLIMIT)
new_voucher "$code" 10 1 >/dev/null
{
  echo "BEGIN; INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status) VALUES ('$code', 7, '$code-byhand', 'RESERVED');"
  for ((i = 0; i < 600; i++)); do [ -e "$scratch/rr-go" ] && break; sleep 0.05; done
  echo "COMMIT;"
} | PGAPPNAME=rr-holder psql -X -q -v ON_ERROR_STOP=1 "$VOUCHER_PG_DSN" >"$scratch/rr-holder.txt" 2>&1 &
holder=$!
is "$(wait_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rr-holder' AND state = 'idle in transaction'" 1 10)" 1 \
  "a session added a use for customer 7 and holds its transaction open"
ev_reserved "$code" 7 "$code-o1" | produce
# pg_stat_activity shows another role's wait only to a superuser (the writer has its own role).
is "$(VOUCHER_PG_DSN="$VOUCHER_PG_DSN user=postgres" wait_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'voucher-writer' AND wait_event_type = 'Lock'" 1 30)" 1 \
  "the writer's batch waits for the voucher's row lock"
touch "$scratch/rr-go"
wait "$holder"
ok $? "the session committed its use"
is "$(wait_for 1 30 count_dlt "$code" 2>/dev/null)" 1 "the writer's use for customer 7 is dead-lettered"
is "$(sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code' AND customer_id = 7 AND status <> 'RELEASED'")" 1 \
  "customer 7 holds one use, within per_user_limit 1"
daemon_stop "$test_name-writer"
start_writer "${writer_args[@]}"
wait_http_ok "http://$admin/healthz" 30 || diag "the writer's admin endpoint did not answer"
# Ready once it has its PostgreSQL session and has joined its group (checked every second).
wait_http_ok "http://$admin/readyz" 30 || diag "the writer did not become ready"

# --- PostgreSQL stopped for 10 s in the middle of a stream.
codes=("$(unique_code PGDOWN1)" "$(unique_code PGDOWN2)")
for c in "${codes[@]}"; do new_voucher "$c" 5000 >/dev/null; done
re=$(IFS='|'; echo "${codes[*]}")
is "$(readyz)" 200 "/readyz: 200 before the outage"
gen_stream "${codes[0]}-o" 3000 "${codes[@]}" >"$scratch/stream2.tsv"
dlt_before=$(dlt_high)
[ -n "$dlt_before" ] || dlt_before=unreadable
produce_paced 100 <"$scratch/stream2.tsv" &
producer=$!
applied=$(wait_sql "SELECT count(*) >= 300 FROM voucher_redemption WHERE voucher_code = ANY (string_to_array('$re', '|'))" t 30)
"$stack" down postgres >"$scratch/pg-down.log" 2>&1
ok "$([ "$applied" = t ]; echo $?)" "PostgreSQL stopped mid-stream"
down_at=$(date +%s)
is "$(wait_for 503 8 readyz 2>/dev/null)" 503 "/readyz: 503 while PostgreSQL is down"
wait "$producer"
ok $? "kcat published the whole stream meanwhile"
while [ $(($(date +%s) - down_at)) -lt 10 ]; do sleep 0.2; done
daemon_running "$test_name-writer"
ok $? "the writer is still running after 10 s without PostgreSQL"
pg_back
ok $? "PostgreSQL started again"
is "$(wait_for 200 20 readyz 2>/dev/null)" 200 "/readyz: 200 once PostgreSQL is back"
want=$(expected_summary 3000)
got=$(wait_for "$want" 60 summary "$re" 2>/dev/null)
is "$got" "$want" "every event applied: 3000 rows, none twice (RESERVED CONFIRMED RELEASED as sent)"
is "$(used_mismatches "$re")" 0 "used_count = rows not RELEASED, for both vouchers"
is "$(dlt_high)" "$dlt_before" "nothing dead-lettered: $dlt's high watermark unchanged ($dlt_before)"
is "$(metric "$admin" voucher_writer_retries_total | awk '{print ($1 > 0)}')" 1 "the writer retried while it waited"

# --- The database refuses every batch for a reason no event causes (here a
# privilege taken away; a bad migration does the same): nothing may be
# dead-lettered, the writer waits and applies everything once it is mended.
code=$(unique_code NOPRIV)
new_voucher "$code" 100 >/dev/null
dlt_before=$(dlt_high)
[ -n "$dlt_before" ] || dlt_before=unreadable
retries_before=$(metric "$admin" voucher_writer_retries_total)
# The role the writer logs in as: its own (deploy/sql/008_daemon_roles.sql), or the owner.
writer_role=$(psql -X -tA "${VOUCHER_WRITER_PG_DSN:-$VOUCHER_PG_DSN}" -c "SELECT current_user")
sql "REVOKE INSERT ON voucher_redemption FROM $writer_role"
trap 'sql "GRANT INSERT ON voucher_redemption TO $writer_role" >/dev/null 2>&1; finish' EXIT
for i in 1 2 3; do ev_reserved "$code" "$i" "$code-o$i"; done | produce
got=$(wait_for 1 15 bash -c "curl -s --max-time 1 http://$admin/metrics |
  awk -v b=${retries_before:-0} '/^voucher_writer_retries_total/ { print (\$2 >= b + 2) }'" 2>/dev/null)
is "$got" 1 "without INSERT on voucher_redemption the batch fails and is retried"
is "$(sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'") $(dlt_high)" "0 $dlt_before" \
  "meanwhile: no row, and nothing dead-lettered (42501 is not the events' fault)"
is "$(readyz)" 503 "/readyz: 503 while the batch waits"
is "$(wait_for 3 10 metric "$admin" voucher_writer_consumer_lag_events 2>/dev/null)" 3 \
  "the lag gauge counts the 3 events fetched but not applied"
grep -q "42501" "$VOUCHER_STACK_DIR/logs/$test_name-writer.log"
ok $? "the writer's log names the database's error (42501)"
sql "GRANT INSERT ON voucher_redemption TO $writer_role"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code'" 3 30)" 3 \
  "once the privilege is back, the three reservations apply"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'") $(dlt_high)" "3 $dlt_before" \
  "used_count 3, and still nothing dead-lettered"
