#!/usr/bin/env bash
# Monitoring on the local stack: the Prometheus of `deploy/stack up prometheus`
# (what `up --monitoring` starts) scrapes the three daemons with the rules of
# deploy/monitoring/voucher-rules.yml, and an alert fires for real.
#
# The rules are the real file with its windows and for: durations cut to
# seconds (a test cannot wait five minutes), evaluated every second. A sale
# with the writer up fires nothing; a sale with the writer stopped leaves its
# events unapplied, and VoucherWriterLagGrowing goes pending, then firing (with
# VoucherDaemonDown for the writer); the writer back, it resolves.
source "$(dirname "$0")/lib.sh"
plan 17

prom="http://127.0.0.1:$((VOUCHER_PORT_BASE + 20))"
stack=$VOUCHER_SOURCE_DIR/deploy/stack
prom_pidfile=$VOUCHER_STACK_DIR/prometheus/prometheus.pid
was_running=0
[ -f "$prom_pidfile" ] && kill -0 "$(cat "$prom_pidfile")" 2>/dev/null && was_running=1
started_at=$(date +%s)

# A Prometheus that ran before the test gets its own configuration back; one
# the test started is stopped.
restore_prometheus() {
  if [ "$was_running" -eq 1 ]; then
    env -u VOUCHER_PROMETHEUS_RULES -u VOUCHER_PROMETHEUS_INTERVAL "$stack" up prometheus >/dev/null 2>&1
  else
    "$stack" down prometheus >/dev/null 2>&1
  fi
}
trap 'restore_prometheus; finish' EXIT

# promql QUERY: the first result's value, or "" when there is none.
promql() {
  curl -s --max-time 2 -G "$prom/api/v1/query" --data-urlencode "query=$1" |
    jq -r '.data.result[0].value[1] // empty' 2>/dev/null
}

# The state of an alert whose labels meet a jq condition: pending, firing,
# none (Prometheus answered without it) or "" (Prometheus did not answer).
alert_state() { # ALERTNAME [JQ-CONDITION]
  curl -s --max-time 2 "$prom/api/v1/alerts" |
    jq -r --arg n "$1" "[.data.alerts[] | select(.labels.alertname == \$n) | select(${2:-true}) | .state] | .[0] // \"none\"" 2>/dev/null
}


# The test's rules: every "for:" 5 s, every range 10 s.
rules=$scratch/rules.yml
sed -E -e 's/^( *for: ).*/\15s/' -e 's/\[[0-9]+m\]/[10s]/g' \
  "$VOUCHER_SOURCE_DIR/deploy/monitoring/voucher-rules.yml" >"$rules"
VOUCHER_PROMETHEUS_RULES=$rules VOUCHER_PROMETHEUS_INTERVAL=1s "$stack" up prometheus >"$scratch/stack.log" 2>&1
ok $? "deploy/stack up prometheus starts Prometheus on port base + 20"
[ "$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' "$prom/-/ready")" = 200 ] ||
  { echo "Bail out! Prometheus is not ready: $(tail -3 "$scratch/stack.log")"; exit 1; }

lag_rule() {
  curl -s --max-time 2 "$prom/api/v1/rules" |
    jq -r '.data.groups[].rules[] | select(.name == "VoucherWriterLagGrowing") | "\(.duration) \(.query | test("\\[10s\\]"))"' 2>/dev/null
}
is "$(wait_for "5 true" 10 lag_rule)" "5 true" "Prometheus loaded the rules (the test's for: 5s and 10 s windows)"

code=$(unique_code MON)
new_voucher "$code" 40
start_gateway
start_writer
start_reconciler "" --interval 1s
targets() {
  curl -s --max-time 2 "$prom/api/v1/targets" |
    jq -r '[.data.activeTargets[] | "\(.labels.daemon)=\(.health)"] | sort | join(" ")'
}
is "$(wait_for "gateway=up reconciler=up writer=up" 30 targets)" "gateway=up reconciler=up writer=up" \
  "Prometheus scrapes the gateway, the writer and the reconciler, each labelled daemon"

# The writer has its partitions and Prometheus has the acting reconciler's lag
# before the sale: a lag first seen during the sale, not yet drained by a
# writer still joining its group, would look like a stuck one.
wait_http_ok "http://$(writer_admin)/readyz" 30 || { echo "Bail out! the writer did not become ready"; exit 1; }
is "$(wait_for 0 20 promql 'voucher:writer_lag_events:acting')" 0 \
  "Prometheus has the acting reconciler's writer lag: 0 before the sale"

# A normal sale: 100 attempts for 40 uses, the writer applying.
"$bin_load" --code "$code" --attempts 100 --connections 20 --customers 100 --amount 500000 \
  --order-prefix "$code-o" >/dev/null
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 40 30)" 40 "the writer applied the 40 reservations"
is "$(wait_for 40 20 promql 'sum(voucher_gateway_requests_total{route="reserve",status="201"})')" 40 \
  "Prometheus has the gateway's 40 answers 201 from its /metrics"
is "$(wait_for 1 20 promql "count(voucher:reconciler_verdict:acting{code=\"$code\"} == 0)")" 1 \
  "Prometheus has the acting reconciler's verdict on the voucher: consistent"

# Every family Prometheus scraped from the daemons is one the lint suite reads
# from the C sources (so the lint's list cannot miss what the daemons export).
python3 "$VOUCHER_SOURCE_DIR/tests/lint/metric_names.py" families >"$scratch/families"
curl -s --max-time 2 "$prom/api/v1/label/__name__/values" | jq -r '.data[]' | grep '^voucher_' |
  sed -E 's/_(bucket|sum|count)$//' | sort -u >"$scratch/scraped"
missing=$(comm -23 "$scratch/scraped" <(sort -u "$scratch/families") | tr '\n' ' ')
[ -s "$scratch/scraped" ] && [ -z "$missing" ]
ok $? "every metric scraped from the daemons is one tests/lint/metric_names.py finds in the sources${missing:+ (missing: $missing)}"

is "$(wait_for 0 20 promql 'voucher:writer_lag_events:acting')" 0 "the lag drained to 0 (as Prometheus sees it)"
is "$(promql "count(count_over_time(ALERTS{alertname=\"VoucherWriterLagGrowing\"}[$(($(date +%s) - started_at + 1))s])) or vector(0)")" 0 \
  "VoucherWriterLagGrowing was never pending during the normal sale"

# The writer stops; a second sale publishes 30 events nobody applies.
daemon_stop "$test_name-writer"
code2=$(unique_code MON)
new_voucher "$code2" 30
"$bin_load" --code "$code2" --attempts 30 --connections 10 --customers 30 --amount 500000 \
  --order-prefix "$code2-o" >/dev/null
is "$(wait_for 30 20 promql 'voucher:writer_lag_events:acting')" 30 \
  "with the writer stopped, the reconciler counts the 30 events as lag"
t0=$(date +%s)
is "$(wait_for pending 30 alert_state VoucherWriterLagGrowing)" pending "VoucherWriterLagGrowing goes pending"
is "$(wait_for firing 30 alert_state VoucherWriterLagGrowing)" firing \
  "then firing ($(($(date +%s) - t0)) s after the lag was seen)"
is "$(curl -s --max-time 2 "$prom/api/v1/alerts" | jq -r '.data.alerts[] | select(.labels.alertname == "VoucherWriterLagGrowing") | "\(.labels.severity) \(.annotations.runbook_url)"')" \
  "page deploy/README.md#voucherwriterlaggrowing" "the firing alert pages and names its runbook section"
is "$(wait_for firing 20 alert_state VoucherDaemonDown '.labels.daemon == "writer"')" firing \
  "VoucherDaemonDown fires for the writer"

# The writer back: it applies the 30 events and the alert resolves.
start_writer
is "$(wait_for none 40 alert_state VoucherWriterLagGrowing)" none "with the writer back, VoucherWriterLagGrowing resolves"

"$stack" down prometheus >/dev/null 2>&1
! (exec 3<>"/dev/tcp/127.0.0.1/$((VOUCHER_PORT_BASE + 20))") 2>/dev/null
ok $? "deploy/stack down prometheus stops it"
