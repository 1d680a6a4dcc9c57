#!/usr/bin/env bash
# A quiet voucher is judged by its aggregates (proto/redis-keys.md,
# "Aggregates"; issue 43): per order state, the orders Redis holds and the rows
# PostgreSQL holds, with their customers' sums, kept by every script and by
# the rows' triggers. While they agree the voucher is not read in full, however
# short --full-every; drift that cancels out in the counter (a use Redis gave
# back that PostgreSQL counts, beside a hold nothing downstream knows) moves
# them apart, and the next pass reads the voucher in full and repairs it,
# however long --full-every. Promises checked: never oversell (the confirmed
# use taken again), undersell only temporary (the unknown hold released).
source "$(dirname "$0")/lib.sh"
plan 9

reserve() { # CODE CUSTOMER ORDER -> $status $body
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":500000}"
}
state() { rcli HGET "voucher:{$1}:orders" "$2" | awk -F: '{print $4}'; }
# The writer commits its offsets a second after it applied them: until then its
# events count as in flight, and a voucher with events in flight is not quiet.
wait_quiet() { # CODE
  local i
  for ((i = 0; i < 100; i++)); do
    [ "$("$bin_reconciler" --once --report-only 2>/dev/null | awk -v c="$1" '$1 == c { print $6 }')" = 0 ] &&
      return 0
    sleep 0.2
  done
  return 1
}
# The aggregate Redis keeps for CODE, as "field=n" sorted, zeros left out.
agg() { rcli HGETALL "voucher:{$1}:agg" | paste - - | awk '$2 != 0 { print $1 "=" $2 }' | sort | tr '\n' ' '; }

start_gateway --hold-ttl 60s
start_writer
code=$(unique_code AGG)
new_voucher "$code" 10
reserve "$code" 101 "$code-o1"
http POST "/vouchers/$code/reservations/$code-o1/confirm"
reserve "$code" 102 "$code-o2"
reserve "$code" 103 "$code-o3"
http DELETE "/vouchers/$code/reservations/$code-o3"
is "$(wait_sql "SELECT string_agg(status, ' ' ORDER BY order_id) FROM voucher_redemption WHERE voucher_code = '$code'" \
  "CONFIRMED RESERVED RELEASED" 20)" "CONFIRMED RESERVED RELEASED" \
  "o1 confirmed, o2 held, o3 cancelled: PostgreSQL has them"
is "$(agg "$code")" "C=1 C_customers=101 H=1 H_customers=102 R=1 R_customers=103 " \
  "Redis's aggregate counts one order per state, and sums their customers"
is "$(sql "SELECT agg_reserved || ' ' || agg_confirmed || ' ' || agg_released || ' ' || agg_reserved_customers
             || ' ' || agg_confirmed_customers || ' ' || agg_released_customers FROM voucher_aggregate WHERE code = '$code'")" \
  "1 1 1 102 101 103" "PostgreSQL's aggregate counts its rows the same"
wait_quiet "$code" || { echo "Bail out! the writer never committed its offsets"; exit 1; }

# 1. Nothing wrong: with --full-every 1s, every voucher whose aggregates are
#    missing or apart is read in full every second; this one is not, over 4 s
#    of passes (its first one, which reads everything, aside).
start_reconciler "" --interval 200ms --grace 2s --full-every 1s
passes_after 1 || { echo "Bail out! the reconciler finished no pass"; exit 1; }
kinds=""
deadline=$(($(now_ms) + 4000))
while [ "$(now_ms)" -lt "$deadline" ]; do
  passes_after 1
  kinds+="$(read_kind "$code")"
done
ok "$([ -n "$kinds" ] && [ -z "${kinds//0/}" ]; echo $?)" \
  "a quiet voucher whose aggregates agree is judged by its numbers on every pass for 4 s, never read in full (voucher_reconciler_read: $kinds)"
daemon_stop "$test_name-reconciler"

# 2. Drift that cancels out in the counter, made by the scripts themselves as
#    lost events make it: Redis gives o1's confirmed use back (a release begun
#    and finished whose VoucherReleased never reached Kafka), and takes one for
#    a hold whose VoucherReserved never did. The counter still agrees with
#    used_count; the aggregates do not (C-1, R+1, H+1 in Redis).
start_reconciler "" --interval 200ms --grace 2s --full-every 1h
passes_after 1 || { echo "Bail out! the reconciler finished no pass"; exit 1; }
keys_begin="voucher:{$code}:orders voucher:{$code}:holds voucher:{$code}:releasing"
# shellcheck disable=SC2086
rcli EVAL "$(lua_script release_begin)" 3 $keys_begin "$code-o1" cancel "$(now_ms)" >/dev/null
rcli EVAL "$(lua_script release_finish)" 4 "voucher:{$code}:remaining" "voucher:{$code}:users" \
  "voucher:{$code}:orders" "voucher:{$code}:releasing" "$code-o1" >/dev/null
rcli EVAL "$(lua_script reserve)" 6 "voucher:{$code}:remaining" "voucher:{$code}:users" \
  "voucher:{$code}:orders" "voucher:{$code}:holds" "voucher:{$code}:resent" "voucher:{$code}:amounts" \
  109 1 "$code-ghost" 100000 $(($(now_ms) + 600000)) "$(now_ms)" 500000 take >/dev/null
is "$(state "$code" "$code-o1") $(state "$code" "$code-ghost") $(rcli GET "voucher:{$code}:remaining")" \
  "R H 8" "Redis gave o1's use back and took one for the ghost: still 2 taken of 10, as used_count says"
passes_after 1
is "$(read_kind "$code")" 2 "the next pass read the voucher in full: its aggregates disagree (--full-every 1h)"
is "$(wait_for C 10 state "$code" "$code-o1")" C "that read took o1's confirmed use again"
is "$(wait_for R 30 state "$code" "$code-ghost") $(rcli GET "voucher:{$code}:remaining")" "R 8" \
  "and released the hold nothing downstream knows, once the grace had passed: 2 uses taken, as PostgreSQL counts"
wait_for 0 20 read_kind "$code" >/dev/null
passes_after 2
is "$(read_kind "$code") $(agg "$code")" "0 C=1 C_customers=101 H=1 H_customers=102 R=2 R_customers=212 " \
  "repaired, the aggregates agree again (o3 and the ghost released): judged by its numbers"
finish
