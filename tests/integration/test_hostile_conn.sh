#!/usr/bin/env bash
# Clients that go away at the worst moment do not hurt the gateway: pipelined
# bursts of /healthz reset after 100 bytes of answers (the gateway's writes
# then fail while it still has answers to give), clients that reset
# mid-request while the reservation waits for Redis or Kafka (also during a
# Redis pause, so the answers come after the connections are gone), and a
# SIGTERM under such a load. After each, the gateway's log has no sanitizer
# report and the gateway still answers; on SIGTERM it exits 0.
# Meant for the sanitizer build (tests/run runs it in build-asan, where an
# AddressSanitizer report of a use-after-free is a failure); in a plain build
# it still proves the gateway survives.
source "$(dirname "$0")/lib.sh"
plan 19

client() { python3 "$VOUCHER_SOURCE_DIR/tests/integration/hostile_client.py" "$@"; }
log=$VOUCHER_STACK_DIR/logs/$test_name-gateway.log
: >"$log"
sanitizer_re='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|WARNING: ThreadSanitizer|SUMMARY: [A-Za-z]*Sanitizer'
# No report in the log from line FROM on (default 1): 0, else 1 with the
# report's first lines as diagnostics.
no_report() {
  if tail -n +"${1:-1}" "$log" | grep -qE "$sanitizer_re"; then
    tail -n +"${1:-1}" "$log" | grep -E -A12 "$sanitizer_re" | head -30 | sed 's/^/#   /'
    return 1
  fi
  return 0
}
# The log's next line number: where the next step's reports would begin.
mark() { echo $(($(wc -l <"$log") + 1)); }
healthz() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$base_url/healthz"; }

# 0. The start-up check tells a listener from a port that connections hold.
# A connection made from port P (bound without SO_REUSEADDR, as an outgoing
# connection's port is) and closed by its side first leaves P in TIME-WAIT:
# nothing listens there, but nothing can bind P for a minute either.
tw_port=$((VOUCHER_PORT_BASE + 18))
python3 - "$tw_port" <<'PY'
import socket, sys
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
cli = socket.socket(); cli.bind(("127.0.0.1", int(sys.argv[1])))
cli.connect(srv.getsockname()); peer, _ = srv.accept()
cli.close()  # the active close: TIME-WAIT stays on the client's port
peer.recv(1); peer.close(); srv.close()
PY
VOUCHER_HTTP_ADDR=127.0.0.1:$tw_port timeout 30 "$bin_gateway" >"$scratch/tw.log" 2>&1
is "$?" 1 "the gateway refuses a port held by a connection in TIME-WAIT"
diag "$(grep -o 'cannot be bound.*range' "$scratch/tw.log" | head -1)"
grep -q "nothing listens there: [1-9][0-9]* connection(s) in TIME-WAIT" "$scratch/tw.log" &&
  ! grep -q "listens there\"" "$scratch/tw.log"
ok $? "and says that nothing listens there and a connection is in TIME-WAIT"
# SO_REUSEADDR, as any server sets it: a connection in TIME-WAIT on the port
# (an earlier test's server closed it first) must not keep the listener out.
python3 -c 'import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(1); time.sleep(30)' "$((tw_port + 1))" &
listener_pid=$!
for ((i = 0; i < 100; i++)); do
  (exec 3<>"/dev/tcp/127.0.0.1/$((tw_port + 1))") 2>/dev/null && break
  sleep 0.1
done
VOUCHER_HTTP_ADDR=127.0.0.1:$((tw_port + 1)) timeout 30 "$bin_gateway" >"$scratch/listener.log" 2>&1
grep -q "is in use: another process (another gateway?) listens there" "$scratch/listener.log"
listener_said=$?
ok $listener_said "a port with a listener: the gateway says another process listens there"
[ "$listener_said" = 0 ] || diag "$(tail -3 "$scratch/listener.log")"
kill "$listener_pid" 2>/dev/null
wait "$listener_pid" 2>/dev/null

export VOUCHER_GATEWAY_THREADS=2 VOUCHER_REDIS_TIMEOUT=200ms
start_gateway
pid=$(cat "$(daemon_dir)/$test_name-gateway.pid")
code=$(unique_code HOSTILE)
new_voucher "$code" 1000000

# 1. Pipelined bursts, each reset after the first 100 bytes of answers.
from=$(mark)
out=$(client burst "$VOUCHER_HTTP_ADDR" 3000 8)
diag "$out"
no_report "$from"
ok $? "bursts of 3000 pipelined /healthz reset after 100 bytes: no sanitizer report"
is "$(healthz)" 200 "the gateway still answers /healthz"

# 2. Clients leaving mid-request, reservations among them.
from=$(mark)
out=$(client midrequest "$VOUCHER_HTTP_ADDR" "$code" 300)
diag "$out"
# The reservations sent whole reach Redis even though their clients left.
for ((i = 0; i < 100; i++)); do
  [ "$(rcli HLEN "voucher:{$code}:orders")" -ge 60 ] && break
  sleep 0.1
done
ok $(($(rcli HLEN "voucher:{$code}:orders") >= 60 ? 0 : 1)) \
  "reservations of clients that reset were taken in Redis ($(rcli HLEN "voucher:{$code}:orders"))"
no_report "$from"
ok $? "clients resetting mid-request and mid-reservation: no sanitizer report"
is "$(healthz)" 200 "the gateway still answers /healthz"

# 3. The same while Redis is paused longer than the gateway's Redis timeout:
# the commands time out (503) after the clients left, and Redis's replies
# come later still.
from=$(mark)
rcli CLIENT PAUSE 1500 ALL >/dev/null
out=$(client midrequest "$VOUCHER_HTTP_ADDR" "$code" 100)
diag "$out"
# Past the pause, Redis answers again, and so does the gateway.
for ((i = 0; i < 100; i++)); do
  [ "$(rcli PING 2>/dev/null)" = PONG ] && break
  sleep 0.1
done
http POST "/vouchers/$code/reservations" '{"customerId":999999999,"orderId":"'"$code"'-after-pause","orderAmount":1000}'
is "$status" 201 "a reservation after the Redis pause: 201"
no_report "$from"
ok $? "clients resetting while Redis was paused: no sanitizer report"

# 4. SIGTERM under load: the gateway drains and exits 0.
client load "$VOUCHER_HTTP_ADDR" "$code" 60 6 >"$scratch/load.out" 2>&1 &
load_pid=$!
from=$(mark)
# Load is on once many more reservations arrive than the steps above made.
before=$(rcli HLEN "voucher:{$code}:orders")
for ((i = 0; i < 300; i++)); do
  [ "$(rcli HLEN "voucher:{$code}:orders")" -ge $((before + 200)) ] && break
  sleep 0.1
done
ok $(($(rcli HLEN "voucher:{$code}:orders") >= before + 200 ? 0 : 1)) "the load is running"
no_report "$from"
ok $? "under mixed hostile load: no sanitizer report"
is "$(healthz)" 200 "the gateway still answers /healthz under that load"
kill -TERM "$pid"
for ((i = 0; i < 600; i++)); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
  kill -KILL "$pid"
  diag "the gateway did not exit within 60 s of SIGTERM"
fi
wait "$pid"
is "$?" 0 "SIGTERM under load: the gateway exits 0"
rm -f "$(daemon_dir)/$test_name-gateway.pid"
grep -q stopped "$log"
ok $? "and logs that it stopped"
no_report 1
ok $? "through the shutdown: no sanitizer report"
wait "$load_pid"
diag "$(cat "$scratch/load.out")"

# 5. A shutdown that overruns VOUCHER_SHUTDOWN_TIMEOUT: a worker is held
# inside a request (pause point), so it cannot finish; the shared watchdog
# (common/vc_shutdown.c) ends the gateway with status 1 and says why.
VOUCHER_SHUTDOWN_TIMEOUT=1s VOUCHER_PAUSE=gateway-dispatch VOUCHER_PAUSE_DIR=$pause_dir \
  daemon_start "$test_name-gateway" "$bin_gateway"
pid=$(cat "$(daemon_dir)/$test_name-gateway.pid")
for ((i = 0; i < 300; i++)); do
  (exec 3<>"/dev/tcp/${VOUCHER_HTTP_ADDR%:*}/${VOUCHER_HTTP_ADDR#*:}") 2>/dev/null && break
  sleep 0.1
done
curl -s -o /dev/null --max-time 10 "$base_url/healthz" &
curl_pid=$!
pause_wait gateway-dispatch
ok $? "a request is held inside a worker"
from=$(mark)
kill -TERM "$pid"
for ((i = 0; i < 100; i++)); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
wait "$pid"
is "$?" 1 "a shutdown longer than VOUCHER_SHUTDOWN_TIMEOUT: the watchdog exits 1"
rm -f "$(daemon_dir)/$test_name-gateway.pid"
pause_go gateway-dispatch
wait "$curl_pid"
tail -n +"$from" "$log" | grep -q "shutdown took longer than 1000 ms"
ok $? "and logs that the shutdown took longer than 1000 ms"
