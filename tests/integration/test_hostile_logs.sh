#!/usr/bin/env bash
# One-time codes stay out of the logs (issue 42, item 8; deploy/README.md,
# "Codes in the logs"): a campaign's code is a secret worth a discount, and a
# log line is read by more people than the codes' export. The lines that name
# a code show a campaign's, or a code not known to be a voucher's, as '#' and
# 16 hex digits of the process's keyed hash (vc_log_code()); a voucher's code
# stays as it is. Provoked here with known codes: the gateway's "reservation
# failed" line for a campaign's code and for a code nobody has (Redis paused
# past the gateway's deadline: 503), and the reconciler's release line for a
# campaign's expired hold. Before, all three lines held the code in clear.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/campaign_lib.sh"
plan 8

campaign_test HL '"name":"hostile-logs","count":3,"discountAmount":500' \
  --hold-ttl 1s --redis-timeout 200ms
campaign_codes paused expired
unknown=${paused%?}$([ "${paused: -1}" = Z ] && echo Y || echo Z) # its shape, no campaign's
gateway_log=$VOUCHER_STACK_DIR/logs/$test_name-gateway.log
reconciler_log=$VOUCHER_STACK_DIR/logs/$test_name-reconciler.log
voucher=$(unique_code HLOGS)
new_voucher "$voucher" 5 >/dev/null

# The lines this run adds (the logs are kept across runs).
gw_from=$(wc -l <"$gateway_log")
# --- The gateway: Redis paused longer than its 200 ms deadline, once for each
# reservation (the gateway's connection is whole again before the next one).
paused_reserve() { # CODE CUSTOMER ORDER: prints the status
  rcli CLIENT PAUSE 1000 ALL >/dev/null
  reserve "$@"
  wait_for PONG 10 rcli PING >/dev/null
  echo "$status"
}
s_paused=$(paused_reserve "$paused" $((base + 1)) "$o-paused")
s_unknown=$(paused_reserve "$unknown" $((base + 2)) "$o-unknown")
s_voucher=$(paused_reserve "$voucher" $((base + 3)) "$o-voucher")
is "$s_paused $s_unknown $s_voucher" "503 503 503" \
  "Redis paused: a campaign's code, an unknown code and a voucher's code get 503"
gw_new() { tail -n +"$((gw_from + 1))" "$gateway_log"; }
line() { gw_new | grep -F "\"orderId\":\"$1\"" | grep -F 'reservation failed' | head -1; }
diag "the campaign code's line: $(line "$o-paused")"
ok "$(line "$o-paused" | grep -q '"code":"#[0-9a-f]\{16\}"'; echo $?)" \
  "the campaign code's failure is logged, its code as a keyed hash"
ok "$(line "$o-unknown" | grep -q '"code":"#[0-9a-f]\{16\}"'; echo $?)" \
  "an unknown code's failure too (a guess may be someone's code)"
ok "$(line "$o-voucher" | grep -qF "\"code\":\"$voucher\""; echo $?)" \
  "a voucher's code stays as it is (shared, and what operators search for)"
is "$(gw_new | grep -cF -e "$paused" -e "$unknown")" 0 \
  "neither code appears in the gateway's log"

# --- The reconciler: a campaign's hold, unconfirmed past its 1 s, released.
reserve "$expired" $((base + 4)) "$o-expired"
is "$status" 201 "a hold of the campaign's second code"
wait_sql "SELECT count(*) FROM campaign_redemption WHERE order_id = '$o-expired'" 1 30 >/dev/null
rc_from=$( [ -f "$reconciler_log" ] && wc -l <"$reconciler_log" || echo 0)
start_reconciler "" --grace 1s --interval 1s
released() {
  tail -n +"$((rc_from + 1))" "$reconciler_log" | grep -F "order $o-expired of code" | head -1
}
has_released() { [ -n "$(released)" ] && echo 1; }
wait_for 1 30 has_released >/dev/null
diag "the reconciler's line: $(released)"
ok "$(released | grep -q 'of code #[0-9a-f]\{16\} released'; echo $?)" \
  "the reconciler logs the release, the code as a keyed hash"
is "$(tail -n +"$((rc_from + 1))" "$reconciler_log" | grep -cF "$expired")" 0 \
  "the released code does not appear in the reconciler's log"
finish
