#!/usr/bin/env bash
# Authentication and least privilege (issue 14, deploy/README.md "Authentication
# and secrets"): the order service's API token on every /vouchers route, with
# two tokens at once for rotation; the gateway and the reconciler on Redis as
# an ACL user whose password no log line shows; each daemon on PostgreSQL as
# its own role, refused what its code does not do.
source "$(dirname "$0")/lib.sh"
plan 38

# ---- a Redis ACL user for this run, removed at the end ----
hostport=${VOUCHER_REDIS_URL#redis://}
hostport=${hostport%%/*}
redis_user=sec_$RANDOM$RANDOM
redis_pw=pw-$(head -c12 /dev/urandom | od -An -tx1 | tr -d ' \n')
# The ACL deploy/README.md recommends: the voucher keys only, nothing dangerous but INFO
# (the restart fence reads the run_id).
rcli ACL SETUSER "$redis_user" on ">$redis_pw" '~voucher:*' '~voucher-order:*' '~guard:*' '~campaign:*' \
  resetchannels '&voucher-rules' '&voucher-guard' '+@all' '-@dangerous' '+info' >/dev/null
trap 'rcli ACL DELUSER "$redis_user" >/dev/null 2>&1; finish' EXIT
acl_url="redis://$redis_user:$redis_pw@$hostport/0"
bad_url="redis://$redis_user:wrong-$redis_pw@$hostport/0"

api_old=$(new_token old)
api_new=$(new_token new)
admin_token=$(new_token admin)
export VOUCHER_API_TOKEN="$api_new, $api_old" VOUCHER_ADMIN_TOKEN=$admin_token
stack_redis_url=$VOUCHER_REDIS_URL
export VOUCHER_REDIS_URL=$acl_url VOUCHER_GATEWAY_THREADS=2
start_gateway
start_writer
unset VOUCHER_API_TOKEN VOUCHER_ADMIN_TOKEN VOUCHER_GATEWAY_THREADS
export VOUCHER_REDIS_URL=$stack_redis_url

reserve_body() { echo "{\"customerId\":$1,\"orderId\":\"$2\",\"orderAmount\":500000}"; }
# The value Redis keeps for an order: "customerId:discount:heldUntilMs:STATE".
order_state() { rcli HGET "voucher:{$1}:orders" "$2" | awk -F: '{print $NF}'; }

code=$(unique_code SEC)
new_voucher "$code" 10

# ---- the API token ----
http POST "/vouchers/$code/reservations" "$(reserve_body 1 "$code-a")"
is "$(answer)" "401 UNAUTHORIZED" "a reservation without a token: 401 UNAUTHORIZED"
grep -qi '^WWW-Authenticate: Bearer' <<<"$headers"
ok $? "the 401 says WWW-Authenticate: Bearer"
http POST "/vouchers/$code/reservations" "$(reserve_body 1 "$code-a")" -H "Authorization: Bearer wrong-$api_new"
is "$(answer)" "401 UNAUTHORIZED" "a reservation with a wrong token: 401"
http POST "/vouchers/$code/reservations" "$(reserve_body 1 "$code-a")" -H "Authorization: Bearer $admin_token"
is "$(answer)" "401 UNAUTHORIZED" "the admin token is not an API token: 401"
is "$(rcli HGET "voucher:{$code}:orders" "$code-a")" "" "no refused reservation took anything"

http POST "/vouchers/$code/reservations" "$(reserve_body 1 "$code-a")" -H "Authorization: Bearer $api_new"
is "$status" 201 "with the new token: 201"
http POST "/vouchers/$code/reservations" "$(reserve_body 2 "$code-b")" -H "Authorization: Bearer $api_old"
is "$status" 201 "with the old token, during the rotation: 201"

# Another customer's order, released by someone without a token.
http DELETE "/vouchers/$code/reservations/$code-a"
is "$(answer)" "401 UNAUTHORIZED" "DELETE of another customer's order without a token: 401"
is "$(order_state "$code" "$code-a")" H "the order is still held"
http POST "/vouchers/$code/reservations/$code-a/confirm"
is "$(answer)" "401 UNAUTHORIZED" "a confirm without a token: 401"
http POST "/vouchers/$code/quote" '{"customerId":3,"orderAmount":500000}'
is "$(answer)" "401 UNAUTHORIZED" "a quote without a token: 401"
http POST "/vouchers/$code/reservations/$code-a/confirm" "" -H "Authorization: Bearer $api_old"
is "$(answer)" "200 CONFIRMED" "the confirm with a token: 200"
http DELETE "/vouchers/$code/reservations/$code-b" "" -H "Authorization: Bearer $api_new"
is "$(answer)" "200 RELEASED" "the release with a token: 200"
http GET /healthz
is "$status" 200 "/healthz needs no token (probes)"

# vc-load sends the token it is given; deploy/run relies on it.
"$bin_load" --code "$code" --attempts 3 --connections 3 --customer-base 100 --order-prefix "$code-l" \
  --token "$api_new" --json >"$scratch/load.json"
is "$(jq -c '[.byStatus["201"], ([.byStatus[]] | add)]' "$scratch/load.json")" '[3,3]' \
  "vc-load --token: 3 reservations, 3 201s"

# ---- Redis as an ACL user ----
# Two workers, the admin worker (the admin address's: gateway/gw_worker.h), and the
# listener of rule changes (subscribed to voucher-rules).
for ((i = 0; i < 50; i++)); do
  [ "$(rcli CLIENT LIST | grep -c "user=$redis_user ")" -ge 4 ] && break
  sleep 0.1
done
is "$(rcli CLIENT LIST | grep -c "user=$redis_user ") $(rcli CLIENT LIST | grep "user=$redis_user " | grep -c 'cmd=subscribe')" "4 1" \
  "the gateway's two workers, its admin worker and its rules listener are on Redis as the ACL user"
# Ready also waits for the Kafka producer's id (about a second after start).
wait_http_ok "http://$(gateway_admin)/readyz" 15
ok $? "the gateway is ready (/readyz 200) on Redis as the ACL user"
is "$(rcli GET "voucher:{$code}:remaining")" 6 "Redis counted the uses taken through the ACL user (10 - 4)"
# The daemons of this test logged in as their roles, and the work still got done.
is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 4 30)" 4 \
  "the writer applied the 4 uses (as voucher_writer)"
is "$(sql "SELECT string_agg(DISTINCT application_name || '=' || usename, ' ')
             FROM pg_stat_activity WHERE application_name IN ('voucher-gateway', 'voucher-writer')")" \
  "voucher-gateway=voucher_gateway voucher-writer=voucher_writer" \
  "the gateway and the writer are logged in to PostgreSQL as their own roles"
# Its verdicts depend on every voucher of the stack (exit 0, 1 or 3); 2 is an error.
"$bin_reconciler" --once --redis-url "$acl_url" >"$scratch/reconcile.log" 2>&1
rc=$?
[ "$rc" -ne 2 ] && grep -q '^[0-9]* vouchers: [0-9]* consistent' "$scratch/reconcile.log"
ok $? "the reconciler's pass runs as the ACL user and reports (exit $rc)"
"$bin_reconciler" --once --redis-url "$bad_url" >"$scratch/reconcile-bad.log" 2>&1
rc=$?
[ "$rc" -ne 0 ] && grep -q "AUTH as user $redis_user" "$scratch/reconcile-bad.log"
ok $? "with a wrong password the reconciler's pass fails and says AUTH failed (exit $rc)"

daemon_stop "$test_name-gateway"
VOUCHER_REDIS_URL=$bad_url daemon_start "$test_name-gateway" "$bin_gateway" --admin-addr "$(gateway_admin)"
wait_http_ok "http://$(gateway_admin)/healthz" 30
for ((i = 0; i < 50; i++)); do
  grep -q "AUTH as user $redis_user failed" "$VOUCHER_STACK_DIR/logs/$test_name-gateway.log" && break
  sleep 0.1
done
is "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$(gateway_admin)/readyz")" 503 \
  "with a wrong password the gateway is not ready"
grep -q "AUTH as user $redis_user failed" "$VOUCHER_STACK_DIR/logs/$test_name-gateway.log"
ok $? "and its log says the AUTH failed"
grep -q "redis://$redis_user:\*\*\*@$hostport/0" "$VOUCHER_STACK_DIR/logs/$test_name-gateway.log"
ok $? "the gateway's start line shows the Redis URL with the password as ***"
cat "$VOUCHER_STACK_DIR/logs/$test_name-"*.log "$scratch"/reconcile*.log >"$scratch/all.log"
is "$(grep -c -F -e "$redis_pw" "$scratch/all.log")" 0 "no log line holds the password ($(wc -l <"$scratch/all.log") lines)"
VOUCHER_REDIS_URL="redis://$redis_user:$redis_pw@$hostport:x/0" "$bin_gateway" >"$scratch/bad-url.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] && ! grep -q -F -e "$redis_pw" "$scratch/bad-url.log" && grep -q '\*\*\*' "$scratch/bad-url.log"
ok $? "a bad Redis URL stops the gateway (exit $rc) with an error that hides the password"

# ---- PostgreSQL roles ----
# as ROLE SQL: runs SQL as one of the daemons' roles; prints its output and errors.
as() { psql -X -q -tA -v ON_ERROR_STOP=1 "$VOUCHER_PG_DSN user=$1" -c "$2" 2>&1; }
denied() { # ROLE SQL DESCRIPTION: the statement fails for want of a privilege
  local out refused
  out=$(as "$1" "$2")
  grep -q -e "permission denied" -e "must be owner" <<<"$out"
  refused=$?
  ok $refused "$3"
  [ $refused -eq 0 ] || diag "$out"
}
denied voucher_gateway "UPDATE voucher SET used_count = 0 WHERE code = '$code'" \
  "the gateway's role cannot UPDATE used_count"
denied voucher_gateway "UPDATE voucher_redemption SET status = 'RELEASED' WHERE voucher_code = '$code'" \
  "the gateway's role cannot change redemptions (it reads one for the support lookup, 012)"
denied voucher_gateway "SELECT wr_apply_events('{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}')" \
  "the gateway's role cannot run the writer's functions"
denied voucher_writer "ALTER TABLE voucher DROP CONSTRAINT ck_used" \
  "the writer's role cannot ALTER (drop the oversell CHECK)"
denied voucher_writer "UPDATE voucher SET total_limit = total_limit + 1000 WHERE code = '$code'" \
  "the writer's role cannot raise a total_limit"
denied voucher_reconciler "UPDATE voucher_redemption SET status = 'RELEASED' WHERE voucher_code = '$code'" \
  "the reconciler's role cannot write redemptions"
denied voucher_gateway "UPDATE reconciler_leader SET generation = generation + 1" \
  "the gateway's role cannot raise the reconciler's generation (its fencing token, 018)"
denied voucher_reconciler "DELETE FROM reconciler_leader" \
  "the reconciler's role may raise its generation, not delete it"
is "$(as voucher_reconciler "SELECT pg_try_advisory_lock(1); SHOW lock_timeout" | tr '\n' ' ')" "t 10s " \
  "the reconciler's role may take an advisory lock, and its sessions have a lock_timeout"
is "$(as voucher_gateway "SHOW statement_timeout")" 30s "the gateway's role has a statement_timeout"
is "$(for r in voucher_gateway voucher_writer voucher_reconciler; do as $r "SHOW idle_in_transaction_session_timeout"; done | tr '\n' ' ')" \
  "1min 1min 10min " "a session idle inside a transaction is ended: the gateway's and the writer's after 1 min, the reconciler's after 10"
