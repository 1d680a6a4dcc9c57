#!/usr/bin/env bash
# Hostile clients against the resources every daemon holds (issue 14,
# "Resources"): the admin endpoints of the writer and the reconciler keep
# answering /healthz through crowds of idle sockets, requests that never end
# and pipelines nobody reads, and HEAD gets no body; a flood of distinct
# unknown voucher codes leaves a real code's answers unaffected.
source "$(dirname "$0")/lib.sh"
plan 9

client() { python3 "$VOUCHER_SOURCE_DIR/tests/integration/hostile_client.py" "$@"; }

start_writer
start_reconciler "" --interval 1s
writer_addr=$(writer_admin)
reconciler_addr=$(reconciler_admin 0)
wait_http_ok "http://$writer_addr/healthz" 30 || { echo "Bail out! the writer did not start"; exit 1; }
writer_pid=$(cat "$VOUCHER_STACK_DIR/run/$test_name-writer.pid")

# --- Admin endpoints: 200 idle sockets do not keep the liveness probe out
# (the oldest idle one is closed to make room).
is "$(client idle "$writer_addr" 200 /healthz)" 200 "the writer's /healthz answers with 200 idle sockets open"
is "$(client idle "$reconciler_addr" 200 /healthz)" 200 "the reconciler's /healthz answers with 200 idle sockets open"

# HEAD names the length but sends no body: the next pipelined answer follows the headers.
is "$(client head "$writer_addr" /healthz)" ok "HEAD /healthz gets headers only"
is "$(client head "$writer_addr" /metrics)" ok "HEAD /metrics gets headers only"

# Timeouts: an idle socket is closed (10 s), and so is a request that never ends (5 s).
is "$(client idle-close "$writer_addr" 20)" closed "an idle admin connection is closed after the idle timeout"
is "$(client partial-close "$writer_addr" 15)" closed "a request that never ends is closed after the read timeout"

# Pipelined requests whose answers are never read: the write queue stays
# bounded (the daemon stops parsing until it drains) and the connection is
# closed once its answers stop draining (10 s).
read -r grown state < <(client pipeline "$writer_addr" "$writer_pid" 30000 20)
diag "the writer's RSS grew by $grown KiB while 30000 /metrics requests went unread"
ok "$([ "${grown:-999999}" -lt 16384 ]; echo $?)" "unread pipelined answers do not grow the writer's memory (< 16 MiB)"
is "$state" closed "a connection that does not read its answers is closed after the write timeout"
is "$(client idle "$writer_addr" 0 /healthz)" 200 "the writer still answers /healthz afterwards"
