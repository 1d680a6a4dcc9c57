#!/usr/bin/env bash
# A wave of holds due (issue 43): 2,000 holds of one voucher come due within
# a few seconds while events of it are in flight (the writer stopped). The
# reconciler reads the oldest due holds with its targeted read, never the
# whole voucher, and gives their uses back in slices, oldest heldUntil first;
# in the end Redis's counter, used_count and the rows agree. Promises checked:
# no use stays taken for nothing (undersell only temporary), nothing oversold.
source "$(dirname "$0")/lib.sh"
plan 14

N=2000
reserve() { # CODE CUSTOMER ORDER -> $status $body
  http POST "/vouchers/$1/reservations" "{\"customerId\":$2,\"orderId\":\"$3\",\"orderAmount\":500000}"
}
held() { rcli ZCARD "voucher:{$1}:holds"; }
# The latest heldUntil among the orders Redis holds R, and the earliest still in holds.
latest_released() {
  rcli HVALS "voucher:{$1}:orders" | awk -F: '$4 == "R" && $3 > m { m = $3 } END { printf "%.0f\n", m }'
}
earliest_held() { rcli ZRANGE "voucher:{$1}:holds" 0 0 WITHSCORES | sed -n 2p; }
released() { rcli HVALS "voucher:{$1}:orders" | awk -F: '$4 == "R"' | wc -l; }

start_gateway --hold-ttl 30s
start_writer
code=$(unique_code WAVE)
new_voucher "$code" $((N + 10))
# Beside it, a paid order due with the wave whose confirm Redis will lose.
paid=$(unique_code WAVP)
new_voucher "$paid" 5
reserve "$paid" 1 "$paid-o1"
http POST "/vouchers/$paid/reservations/$paid-o1/confirm"
is "$status $(wait_sql "SELECT status FROM voucher_redemption WHERE order_id = '$paid-o1'" CONFIRMED 20)" \
  "200 CONFIRMED" "a paid order of another voucher, confirmed (200) and applied"

# 2,000 holds taken within a few seconds (8 clients on kept-alive connections),
# then applied by the writer.
burst() { # CODE N: one status code a line
  python3 - "$VOUCHER_HTTP_ADDR" "$1" "$2" <<'PY'
import http.client, json, sys, threading
addr, code, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
host, port = addr.rsplit(":", 1)
out, lock = [], threading.Lock()
def client(k):
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    for i in range(k, n + 1, 8):
        body = json.dumps({"customerId": i, "orderId": "%s-o%d" % (code, i), "orderAmount": 500000})
        c.request("POST", "/vouchers/%s/reservations" % code, body,
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        with lock:
            out.append(r.status)
threads = [threading.Thread(target=client, args=(k,)) for k in range(1, 9)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("\n".join(map(str, out)))
PY
}
started=$(now_ms)
burst "$code" $N >"$scratch/codes"
is "$(sort "$scratch/codes" | uniq -c | awk '{print $2 ":" $1}' | paste -sd' ')" "201:$N" \
  "$N holds reserved (201 each), in $(($(now_ms) - started)) ms"
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" $N 60)" $N "their events applied"

# Events in flight through the wave: the writer stopped, two more holds taken.
daemon_stop "$test_name-writer"
reserve "$code" $((N + 1)) "$code-late1"
s1=$status
reserve "$code" $((N + 2)) "$code-late2"
is "$s1 $status" "201 201" "two more holds reserved while the writer is stopped: events in flight"
last_due=$(rcli ZRANGE "voucher:{$code}:holds" -1 -1 WITHSCORES | sed -n 2p)

# The reconciler: its first pass reads every voucher in full, the later ones
# (the periodic full read 1 h away) as their numbers say. A pass is held
# before its repairs until every hold is past heldUntil and the grace, so
# that the next pass finds the whole wave due at once.
VOUCHER_PAUSE=reconciler-before-repair,reconciler-expiry-slice VOUCHER_PAUSE_DIR=$pause_dir \
  start_reconciler "" --interval 200ms --grace 1s --full-every 1h --batch 1000 --expiry-slice 250
pause_wait reconciler-before-repair 30 || { echo "Bail out! the reconciler made no pass"; exit 1; }
pause_go reconciler-before-repair
pause_wait reconciler-before-repair 30 || { echo "Bail out! the reconciler made no second pass"; exit 1; }
# Redis loses the paid order's confirm (a crash under appendfsync everysec): H again.
value=$(rcli HGET "voucher:{$paid}:orders" "$paid-o1")
rcli HSET "voucher:{$paid}:orders" "$paid-o1" "${value%C}H" >/dev/null
rcli ZADD "voucher:{$paid}:holds" "$(cut -d: -f3 <<<"$value")" "$paid-o1" >/dev/null
past_due() { [ "$(now_ms)" -gt $((last_due + 1200)) ] && echo yes; }
state() { rcli HGET "voucher:{$1}:orders" "$2" | awk -F: '{print $4}'; }
wait_for yes 60 past_due >/dev/null
pause_go reconciler-before-repair
pause_wait reconciler-before-repair 30 && pause_go reconciler-before-repair

# The first slice of the pass that finds the wave due: the reconciler stops
# after it, before the next.
pause_wait reconciler-expiry-slice 60 || diag "no slice of due holds within 60 s"
is "$(released "$code")" 250 "after the first slice: 250 holds given back (--expiry-slice 250)"
first_latest=$(latest_released "$code")
first_earliest=$(earliest_held "$code")
ok "$([ "$first_latest" -le "$first_earliest" ] && echo 0 || echo 1)" \
  "the oldest first: every hold given back has a heldUntil ($first_latest) no later than any still held ($first_earliest)"
is "$(read_kind "$code")" 1 "that pass read the voucher by a targeted read, not in full"

# The rest of the wave: every slice boundary still a targeted read.
kinds=""
for ((i = 0; i < 600; i++)); do
  if [ -e "$pause_dir/reconciler-expiry-slice" ]; then
    kinds="$kinds$(read_kind "$code")"
    pause_go reconciler-expiry-slice
  fi
  pause_go reconciler-before-repair
  [ "$(held "$code")" = 0 ] && break
  sleep 0.1
done
is "$(held "$code")" 0 "every hold given back"
ok "$([ -n "$kinds" ] && [ -z "${kinds//1/}" ] && echo 0 || echo 1)" \
  "at every later slice boundary of the wave a targeted read (read kinds: ${kinds:0:40})"
ok "$([ "$(metric_sum "$(reconciler_admin 0)" voucher_reconciler_expiry_slices_total)" -ge 8 ] && echo 0 || echo 1)" \
  "in slices: voucher_reconciler_expiry_slices_total counts at least 8 ($((N / 250)) for $N holds)"

is "$(wait_for C 20 state "$paid" "$paid-o1")" C \
  "the paid order due with the wave: confirmed again in Redis (a full read), never expired"

# The writer catches up: every release applied; Redis and PostgreSQL agree.
start_writer
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 0 60)" 0 \
  "used_count 0 once the writer applied the releases"
is "$(sql "SELECT count(*) FILTER (WHERE status = 'RELEASED') || ' ' || count(*) FROM voucher_redemption WHERE voucher_code = '$code'") $(rcli GET "voucher:{$code}:remaining")" \
  "$((N + 2)) $((N + 2)) $((N + 10))" "every row RELEASED, and Redis offers every use again"
is "$(sql "SELECT status || ' ' || used_count FROM voucher_redemption r JOIN voucher v ON v.code = r.voucher_code WHERE order_id = '$paid-o1'") $(rcli GET "voucher:{$paid}:remaining")" \
  "CONFIRMED 1 4" "the paid order still CONFIRMED and counted, its use not offered again"
finish
