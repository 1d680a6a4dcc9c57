#!/usr/bin/env bash
# The reconciler on the real servers: unpaid holds expire and their uses come
# back; a confirm racing an expiry has exactly one outcome; a hold whose event
# never reached Kafka is released after the grace; lost Redis keys are
# restored from PostgreSQL plus the events still in flight; of two
# reconcilers one acts, and the other takes over when it dies.
source "$(dirname "$0")/lib.sh"
plan 40

reserve() { # CODE CUSTOMER ORDER -> $status $body
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":500000}"
}
rows_with() { sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$1' AND status = '$2'"; }

start_gateway --hold-ttl 2s --soldout-recheck 200ms
start_writer

# --- Holds that are never paid expire, and their uses go back to the pool.
code=$(unique_code EXP)
new_voucher "$code" 5
for i in 1 2 3 4 5; do reserve "$code" "$i" "$code-o$i"; done
is "$status" 201 "five holds taken"
reserve "$code" 6 "$code-o6"
is "$status $(jq -r .error <<<"$body")" "409 OUT_OF_STOCK" "the sixth customer finds it sold out"
start_reconciler "" --interval 300ms --grace 3s
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code' AND status = 'RELEASED'" 5 20)" 5 \
  "all five unpaid holds are RELEASED in PostgreSQL"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'")" 0 "used_count is back to 0"
is "$(rcli GET "voucher:{$code}:remaining")" 5 "Redis offers the five uses again"
expired_metric=$(metric "$(reconciler_admin 0)" voucher_reconciler_holds_expired_total)
ok "$([ "${expired_metric:-0}" -ge 5 ]; echo $?)" "the holds-expired counter counts them (${expired_metric:-none})"
http POST "/vouchers/$code/reservations/$code-o1/confirm"
is "$status $(jq -r .error <<<"$body")" "409 HOLD_EXPIRED" "confirming an expired hold answers HOLD_EXPIRED"
reserve "$code" 1 "$code-again1"
is "$status" 201 "the customer of an expired hold may reserve again"

# --- A confirm racing the expiry of the same hold: exactly one outcome, everywhere.
code=$(unique_code RACE)
new_voucher "$code" 30
# Thirty holds taken at once; each is then confirmed either surely before its
# heldUntil (its request's start + 1.6 s; holds last 2 s) or surely after it
# (its answer + 2.4 s), while the reconciler expires holds every 300 ms.
"$bin_load" --code "$code" --attempts 30 --connections 30 --customers 30 --amount 500000 \
  --order-prefix "$code-o" --out "$scratch/holds.tsv" >/dev/null
is "$(awk -F'\t' '$4 == "201"' "$scratch/holds.tsv" | wc -l)" 30 "thirty holds taken at once"
awk -F'\t' '$4 == "201" {n++; printf "%s %.0f\n", $2, (n % 2 ? $9 / 1000 + 1600 : $10 / 1000 + 2400)}' \
  "$scratch/holds.tsv" | sort -k2 -n >"$scratch/schedule.txt"
pids=()
while read -r order at; do
  while [ "$(date +%s%3N)" -lt "$at" ]; do sleep 0.01; done
  curl -s -o /dev/null -w "$order %{http_code}\n" -X POST --max-time 10 \
    "$base_url/vouchers/$code/reservations/$order/confirm" >>"$scratch/race.txt" &
  pids+=($!)
done <"$scratch/schedule.txt"
wait "${pids[@]}" # not a bare wait: the daemons are background jobs too
confirmed=$(awk '$2 == 200' "$scratch/race.txt" | wc -l)
expired=$(awk '$2 == 409' "$scratch/race.txt" | wc -l)
is "$((confirmed + expired))" 30 "every confirm answered 200 or 409 ($confirmed confirmed, $expired expired)"
ok "$([ "$confirmed" -gt 0 ] && [ "$expired" -gt 0 ]; echo $?)" "both outcomes occurred"
# The reconciler expires the rest, the writer applies everything: each check waits for it.
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code' AND status = 'CONFIRMED'" "$confirmed" 15)" \
  "$confirmed" "PostgreSQL has a CONFIRMED row for each 200"
is "$(wait_sql "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code' AND status = 'RELEASED'" "$expired" 15)" \
  "$expired" "and a RELEASED row for each 409"
mismatch=0
while read -r order st; do
  redis_state=$(rcli HGET "voucher:{$code}:orders" "$order" | awk -F: '{print $4}')
  pg_state=$(sql "SELECT status FROM voucher_redemption WHERE order_id = '$order'")
  if [ "$st" = 200 ]; then want="C CONFIRMED"; else want="R RELEASED"; fi
  [ "$redis_state $pg_state" = "$want" ] || { mismatch=$((mismatch + 1)); diag "$order: answered $st, Redis $redis_state, PostgreSQL $pg_state"; }
done <"$scratch/race.txt"
is "$mismatch" 0 "each order's answer, Redis state and PostgreSQL row agree"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'")" "$confirmed" "used_count counts the confirmed uses"
# Released in Redis before its event, the use is given back after the event's ack.
for ((i = 0; i < 150; i++)); do [ "$(rcli GET "voucher:{$code}:remaining")" = "$((30 - confirmed))" ] && break; sleep 0.1; done
is "$(rcli GET "voucher:{$code}:remaining")" "$((30 - confirmed))" "Redis offers the expired ones again"

# --- A hold whose event never reached Kafka: the gateway dies (a fault point,
# compiled into test builds) right after the Redis script, before the produce.
code=$(unique_code LOST)
new_voucher "$code" 3
reserve "$code" 1 "$code-kept"
http POST "/vouchers/$code/reservations/$code-kept/confirm"
is "$status" 200 "a normal hold, confirmed (so it never expires)"
daemon_stop "$test_name-gateway"
VOUCHER_FAULT=reserve-before-publish daemon_start "$test_name-gateway" "$bin_gateway" --hold-ttl 2s
wait_http_ok "$base_url/healthz" 30
reserve "$code" 2 "$code-stranded"
is "$status" 000 "the gateway died before answering (built with -Dfault_points=true)"
start_gateway --hold-ttl 2s --soldout-recheck 200ms
is "$(rcli GET "voucher:{$code}:remaining")" 1 "the stranded hold took a use in Redis only"
for ((i = 0; i < 150; i++)); do
  [ "$(rcli GET "voucher:{$code}:remaining")" = 2 ] && break
  sleep 0.1
done
is "$(rcli GET "voucher:{$code}:remaining")" 2 "after the grace the stranded hold's use is back"
is "$(rcli HGET "voucher:{$code}:orders" "$code-stranded" | awk -F: '{print $4}')" R "the stranded order is released in Redis"
is "$(wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$code-stranded'" RELEASED 10)" RELEASED \
  "PostgreSQL records it RELEASED, so a late reservation event would change nothing"
is "$(sql "SELECT used_count FROM voucher WHERE code = '$code'")" 1 "used_count still counts only the normal hold"

daemon_stop "$test_name-reconciler"

# --- Redis loses a voucher while events are still in flight: restore, never oversell.
code=$(unique_code FLUSH)
new_voucher "$code" 10
for i in 1 2; do reserve "$code" "$i" "$code-o$i"; done
wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 2 15 >/dev/null
daemon_stop "$test_name-writer"
for i in 3 4 5; do reserve "$code" "$i" "$code-o$i"; done
is "$status" 201 "three more holds while the writer is stopped (their events in flight)"
daemon_stop "$test_name-gateway"
rcli DEL "voucher:{$code}:remaining" "voucher:{$code}:users" "voucher:{$code}:orders" \
  "voucher:{$code}:holds" "voucher:{$code}:releasing" >/dev/null
sql "UPDATE voucher SET redis_loaded_at = coalesce(redis_loaded_at, now()) WHERE code = '$code'" >/dev/null
"$bin_reconciler" --once --grace 60s --restore-delay 1s >"$scratch/restore.txt" 2>&1
diag "$(grep -E "^$code|repairs" "$scratch/restore.txt")"
is "$(rcli GET "voucher:{$code}:remaining")" 5 \
  "restored remaining = 10 - 2 applied - 3 in flight (not 10 - used_count = 8)"
is "$(rcli HLEN "voucher:{$code}:orders")" 5 "all five orders restored, in flight ones included"
# Retention (proto/redis-keys.md): rebuilt keys expire where the gateway's do, at endsAt + 72 h.
expire_at=$(sql "SELECT (extract(epoch FROM ends_at) * 1000)::bigint + 259200000 FROM voucher WHERE code = '$code'")
is "$(for k in remaining users orders holds; do rcli PEXPIRETIME "voucher:{$code}:$k"; done | tr '\n' ' ')" \
  "$expire_at $expire_at $expire_at $expire_at " "the restored keys expire at endsAt plus the retention, as the gateway's"
start_gateway --hold-ttl 2s --soldout-recheck 200ms
reserve "$code" 4 "$code-o4"
is "$status $(jq -r .replayed <<<"$body")" "201 true" "a retry of an in-flight order is recognised after the restore"
start_writer
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 5 20)" 5 "the writer applies the events in flight"

# --- FLUSHALL in the middle of a sale: the sale goes on after the restore and never oversells.
# Holds that outlive the test: every 201 keeps its use, so 201s can never exceed the limit.
daemon_stop "$test_name-gateway"
start_gateway --hold-ttl 10m
code=$(unique_code MIDSALE)
new_voucher "$code" 200
start_reconciler "" --interval 300ms --grace 30s --restore-delay 6s
# Paced at 1,000 attempts a second, so the flush lands in the middle of the sale.
"$bin_load" --code "$code" --attempts 3000 --connections 40 --rate 1000 --random-customers \
  --customers 3000 --order-prefix "$code-o" --retries 30 --timeout 3s \
  --out "$scratch/midsale.tsv" >/dev/null 2>&1 &
load=$!
for ((i = 0; i < 100; i++)); do # until the sale is under way
  left=$(rcli GET "voucher:{$code}:remaining")
  [ -n "$left" ] && [ "$left" -lt 180 ] && break
  sleep 0.05
done
rcli FLUSHALL >/dev/null
wait "$load"
created=$(awk -F'\t' '$4 == "201"' "$scratch/midsale.tsv" | wc -l)
diag "$(awk -F'\t' 'NR > 1 {n[$4]++} END {for (s in n) printf "%s:%d ", s, n[s]}' "$scratch/midsale.tsv")"
ok "$([ "$created" -le 200 ]; echo $?)" "never more 201s than uses across the flush ($created)"
ok "$([ -n "$left" ] && [ "$left" -gt 0 ] && [ "$left" -lt 200 ]; echo $?)" \
  "Redis was flushed in the middle of the sale ($left of 200 left)"
for ((i = 0; i < 60; i++)); do
  "$bin_reconciler" --once --report-only >"$scratch/midsale-rc.txt" 2>&1
  grep -q "^$code .* consistent$" "$scratch/midsale-rc.txt" && break
  sleep 0.5
done
is "$(grep "^$code " "$scratch/midsale-rc.txt" | awk '{print $NF}')" consistent \
  "after the flush, the restore and the rest of the sale, Redis and PostgreSQL agree"
used=$(sql "SELECT used_count FROM voucher WHERE code = '$code'")
ok "$([ "$used" -le 200 ] && [ "$used" -ge "$created" ]; echo $?)" \
  "PostgreSQL counts every acknowledged use and never more than the limit ($used)"
daemon_stop "$test_name-reconciler"
# A retake decided just before a flush must not bring back a counter of -1
# that looks loaded (the voucher would then never be restored).
gone=$(unique_code GONE)
out=$(rcli EVAL "$(lua_script retake)" 5 "voucher:{$gone}:remaining" \
  "voucher:{$gone}:users" "voucher:{$gone}:orders" "voucher:{$gone}:holds" "voucher:{$gone}:releasing" 10 0 0 "$gone-o1" "7:100:0:C" 0 0 | head -1)
is "$out $(rcli EXISTS "voucher:{$gone}:remaining" "voucher:{$gone}:orders" "voucher:{$gone}:users")" "-1 0" \
  "retake on a voucher whose keys are gone: -1, and it creates none of them"

# --- Two reconcilers: one acts; when it dies, the other takes over.
start_reconciler "" --interval 300ms
start_reconciler 2 --interval 300ms
# Until each has tried for the lease, both may still say 0.
for ((i = 0; i < 100; i++)); do
  a=$(metric "$(reconciler_admin 0)" voucher_reconciler_leader)
  b=$(metric "$(reconciler_admin 1)" voucher_reconciler_leader)
  [ $((${a:-0} + ${b:-0})) -ge 1 ] && break
  sleep 0.1
done
is "$((a + b))" 1 "exactly one of two reconcilers acts ($a and $b)"
if [ "$a" = 1 ]; then dead=""; alive=1; else dead=2; alive=0; fi
daemon_stop "$test_name-reconciler$dead" KILL
for ((i = 0; i < 50; i++)); do
  [ "$(metric "$(reconciler_admin $alive)" voucher_reconciler_leader)" = 1 ] && break
  sleep 0.2
done
is "$(metric "$(reconciler_admin $alive)" voucher_reconciler_leader)" 1 "after kill -9 of the acting one, the other acts"

# --- A quiet voucher is judged by its numbers between full reads; drift that
# cancels out in the numbers is found at the next full read (--full-every).
# Made by hand, around the scripts, the drift leaves the aggregates as they
# were; --audit-every 0 reads the voucher by --full-every alone, as a voucher
# without aggregates is (test_reconciler_aggregates.sh has the aggregates).
daemon_stop "$test_name-reconciler"
daemon_stop "$test_name-reconciler2"
code=$(unique_code QUIET)
new_voucher "$code" 5
reserve "$code" 1 "$code-o1"
http POST "/vouchers/$code/reservations/$code-o1/confirm"
is "$status $(wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$code-o1'" CONFIRMED 20)" "200 CONFIRMED" \
  "one use reserved and confirmed"
# The writer commits its offsets a second after it applied them: until then its
# events count as in flight, and a voucher with events in flight is read in full.
for ((i = 0; i < 100; i++)); do
  [ "$("$bin_reconciler" --once --report-only 2>/dev/null | awk -v c="$code" '$1 == c { print $6 }')" = 0 ] && break
  sleep 0.2
done
start_reconciler "" --interval 300ms --grace 2s --full-every 5s --audit-every 0
# Its first pass reads everything in full; the voucher's verdict appears after it.
for ((i = 0; i < 300; i++)); do
  [ -n "$(metric "$(reconciler_admin 0)" "voucher_reconciler_verdict{code=\"$code\"}")" ] && break
  sleep 0.1
done
# Redis gives the confirmed use back and holds one that nothing downstream knows:
# one use taken either way, as PostgreSQL counts.
o1=$(rcli HGET "voucher:{$code}:orders" "$code-o1")
rcli HSET "voucher:{$code}:orders" "$code-o1" "${o1%:C}:R" "$code-ghost" "9:100:9999999999999:H" >/dev/null
rcli ZADD "voucher:{$code}:holds" 9999999999999 "$code-ghost" >/dev/null
# Two whole passes after the change: the second began after it.
passes=$(metric_sum "$(reconciler_admin 0)" voucher_reconciler_passes_total)
metric_wait "$(reconciler_admin 0)" voucher_reconciler_passes_total "$((${passes:-0} + 2))" 10
is "$(metric "$(reconciler_admin 0)" "voucher_reconciler_verdict{code=\"$code\"}")" 0 \
  "between full reads the voucher is judged by its numbers, which agree: consistent"
for ((i = 0; i < 100; i++)); do
  [ "$(rcli HGET "voucher:{$code}:orders" "$code-o1" | cut -d: -f4) $(rcli HGET "voucher:{$code}:orders" "$code-ghost" | cut -d: -f4)" = "C R" ] && break
  sleep 0.2
done
is "$(rcli HGET "voucher:{$code}:orders" "$code-o1" | cut -d: -f4) $(rcli HGET "voucher:{$code}:orders" "$code-ghost" | cut -d: -f4) $(rcli GET "voucher:{$code}:remaining")" \
  "C R 4" "the next full read took the confirmed use again and released the unknown hold"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 1 10)" 1 "PostgreSQL still counts one use"
