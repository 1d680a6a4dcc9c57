#!/usr/bin/env bash
# The operator's scripts tell the truth and clean up after themselves
# (deploy/stack, deploy/run), tried on a throw-away stack folder with its own
# ports, so the private stack the other tests use is left alone.
source "$(dirname "$0")/lib.sh"
plan 9

stack=$VOUCHER_SOURCE_DIR/deploy/stack
tmp_stack=$scratch/other-stack
# A base no stack of the test run uses (the private stack is at VOUCHER_PORT_BASE).
tmp_base=$((VOUCHER_PORT_BASE + 500))

# destroy stops the daemons started against the stack before it deletes their pid files.
mkdir -p "$tmp_stack/run"
sleep 300 &
daemon_pid=$!
echo "$daemon_pid" >"$tmp_stack/run/writer.pid"
VOUCHER_STACK_DIR=$tmp_stack VOUCHER_PORT_BASE=$tmp_base "$stack" destroy >"$scratch/destroy.out" 2>&1
ok $? "deploy/stack destroy succeeds"
for ((i = 0; i < 100; i++)); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$daemon_pid" 2>/dev/null
is $? 1 "destroy stopped the daemon that ran against the stack"
wait "$daemon_pid" 2>/dev/null
grep -q "stopped writer" "$scratch/destroy.out"
ok $? "destroy says which daemon it stopped"

# up checks every port before it starts anything, and names who holds a taken one.
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
open(sys.argv[2], "w").close()
time.sleep(120)' "$((tmp_base + 1))" "$scratch/listening" &
holder=$!
for ((i = 0; i < 100; i++)); do [ -e "$scratch/listening" ] && break; sleep 0.05; done
VOUCHER_STACK_DIR=$tmp_stack VOUCHER_PORT_BASE=$tmp_base "$stack" up >"$scratch/up.out" 2>&1
ok $(( $? == 0 )) "deploy/stack up refuses when Redis's port is taken"
grep -q "port $((tmp_base + 1)) (Redis) is already in use by python3 (pid $holder)" "$scratch/up.out"
ok $? "the refusal names the port, the service and the process holding it"
[ ! -e "$tmp_stack/kafka/kafka.pid" ] && [ ! -e "$tmp_stack/pg" ]
ok $? "nothing was started before the refusal (no Kafka, no PostgreSQL)"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
rm -rf "$tmp_stack"

# status of the running private stack: each server with its pid.
"$stack" status >"$scratch/status.out" 2>&1
ok $? "deploy/stack status on the running stack exits 0"
grep -Eq "^postgres +running +127\.0\.0\.1:$VOUCHER_PORT_BASE +pid [0-9]+" "$scratch/status.out"
ok $? "status shows PostgreSQL's pid"

# deploy/run says what it did not understand.
"$VOUCHER_SOURCE_DIR/deploy/run" --bogus >/dev/null 2>"$scratch/run.err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "unknown option '--bogus'" "$scratch/run.err"
ok $? "deploy/run --bogus exits 2 naming the unknown option"
