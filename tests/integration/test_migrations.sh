#!/usr/bin/env bash
# deploy/migrate: the writer's functions are defined once, in
# deploy/sql/functions.sql. A fresh database and one upgraded from migration
# 024 (applied as the runner before functions.sql did: no checksum column) end
# with the same functions (025 on: migrations the new runner applies), the file is applied again exactly when it changed,
# and a file that fails leaves the database as it was. Two throw-away
# databases on the private stack's PostgreSQL; the tests' database is left alone.
source "$(dirname "$0")/lib.sh"
plan 18

migrate=$VOUCHER_SOURCE_DIR/deploy/migrate
pg="host=127.0.0.1 port=$VOUCHER_PORT_BASE"
fresh_db=voucher_migrate_fresh
upgraded_db=voucher_migrate_upgraded
fresh="$pg dbname=$fresh_db user=voucher"
upgraded="$pg dbname=$upgraded_db user=voucher"

as_super() { psql -X -q -tA -v ON_ERROR_STOP=1 "$pg dbname=postgres user=postgres" -c "$1"; }
on() { psql -X -q -tA -v ON_ERROR_STOP=1 "$1" -c "$2"; } # DSN QUERY
drop_dbs() {
  as_super "DROP DATABASE IF EXISTS $fresh_db" && as_super "DROP DATABASE IF EXISTS $upgraded_db"
}
# Every function of the schema: its signature, its definition as PostgreSQL
# prints it, and who may run it.
functions() {
  on "$1" "SELECT p.oid::regprocedure || ' ' || p.proacl::text || E'\n' || pg_get_functiondef(p.oid)
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'public' ORDER BY p.oid::regprocedure::text"
}

drop_dbs >/dev/null
as_super "CREATE DATABASE $fresh_db OWNER voucher" &&
  as_super "CREATE DATABASE $upgraded_db OWNER voucher"
ok $? "two empty databases made"

# Fresh: the migrations, then the functions file.
"$migrate" "$fresh" >"$scratch/fresh.out" 2>&1
ok $? "deploy/migrate on an empty database exits 0"
grep -q "applied migration 025_direct_mode" "$scratch/fresh.out" &&
  grep -q "applied functions.sql" "$scratch/fresh.out"
ok $? "it applied the migrations, then functions.sql"

# Upgraded: migrations 001 to 024 as the runner before functions.sql applied
# them (each in one transaction with its row), then this runner.
on "$upgraded" "CREATE TABLE schema_migrations (
    version TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
old_rc=0
for f in "$VOUCHER_SOURCE_DIR"/deploy/sql/[0-9]*.sql; do
  version=$(basename "$f" .sql)
  [ "${version%%_*}" -le 24 ] 2>/dev/null || continue
  { cat "$f"; echo; echo "INSERT INTO schema_migrations (version) VALUES ('$version');"; } |
    psql -X -q -v ON_ERROR_STOP=1 -1 -d "$upgraded" -f - >/dev/null || old_rc=1
done
is "$old_rc/$(on "$upgraded" "SELECT count(*) FROM schema_migrations")" "0/22" \
  "the old way applied the 22 migrations up to 024"
# A voucher of a sale running while the upgrade runs.
on "$upgraded" "INSERT INTO voucher (code, discount_amount, total_limit, starts_at, ends_at)
    VALUES ('RUNNING', 100, 10, now() - interval '1 hour', now() + interval '1 day')"
# A campaign with redemptions, two held and one released (031 counts them).
on "$upgraded" "INSERT INTO campaign (name, state, alphabet, code_length, total_count,
                                      discount_amount, starts_at, ends_at)
    VALUES ('running', 'ACTIVE', 'safe32', 8, 10, 100, now() - interval '1 hour',
            now() + interval '1 day');
  INSERT INTO campaign_redemption (order_id, code, campaign_id, customer_id, status)
    SELECT o, k, (SELECT id FROM campaign WHERE name = 'running'), c, s
      FROM (VALUES ('m-1', 'K1', 1000001, 'RESERVED'), ('m-2', 'K2', 2, 'RESERVED'),
                   ('m-3', 'K3', 30, 'RELEASED')) AS v(o, k, c, s)"
"$migrate" "$upgraded" >"$scratch/upgraded.out" 2>&1
ok $? "deploy/migrate on the database at 024 exits 0"
after_024=$(for f in "$VOUCHER_SOURCE_DIR"/deploy/sql/[0-9]*.sql; do
  version=$(basename "$f" .sql)
  [ "${version%%_*}" -gt 24 ] 2>/dev/null && echo "migrate: applied migration $version"
done | tr '\n' ' ')
is "$(cat "$scratch/upgraded.out" | sed 's/ (checksum.*//' | tr '\n' ' ')" \
  "${after_024}migrate: applied functions.sql " \
  "it applied the migrations after 024 (025_direct_mode first), then functions.sql"
# 025: an upgrade does not change how a running sale is decided; 026: a voucher
# created without a mode is a direct one, now that the gateway decides it in
# PostgreSQL (proto/direct-mode.md).
is "$(on "$upgraded" "SELECT mode FROM voucher WHERE code = 'RUNNING'")/$(on "$upgraded" \
  "SELECT column_default FROM information_schema.columns
    WHERE table_name = 'voucher' AND column_name = 'mode'")" "flash/'direct'::text" \
  "the voucher that existed is a flash voucher, and a new one is a direct one by default"
# The direct-mode functions: owned by the role nobody logs in as, run as it,
# with a search_path of their own.
is "$(on "$upgraded" "SELECT string_agg(DISTINCT pg_get_userbyid(p.proowner) || ' ' ||
      p.prosecdef::text || ' ' || (p.proconfig IS NOT NULL)::text, ',')
      FROM pg_proc p WHERE p.proname IN ('dr_reserve', 'dr_confirm', 'dr_cancel', 'dr_quote',
                                         'dr_expire', 'dr_outbox_take', 'dr_outbox_sent')")" \
  "voucher_direct true true" "dr_* are SECURITY DEFINER, owned by voucher_direct, search_path set"

# 031: the campaign's aggregate counts the rows it had (held, confirmed,
# released; then their customers' last six digits), and the trigger
# functions.sql made keeps it from then on, for a change made by hand too.
campaign_agg() {
  on "$upgraded" "SELECT a.agg_reserved || ' ' || a.agg_confirmed || ' ' || a.agg_released || ' '
                         || a.agg_reserved_customers || ' ' || a.agg_confirmed_customers || ' '
                         || a.agg_released_customers
                    FROM campaign_aggregate a JOIN campaign c ON c.id = a.campaign_id
                   WHERE c.name = 'running'"
}
is "$(campaign_agg)" "2 0 1 3 0 30" "031 counted the campaign's rows that were there (backfill)"
on "$upgraded" "UPDATE campaign_redemption SET status = 'CONFIRMED' WHERE order_id = 'm-2'"
is "$(campaign_agg)" "1 1 1 1 2 30" "and its trigger moves it with a row confirmed by hand"

functions "$fresh" >"$scratch/fresh.functions"
functions "$upgraded" >"$scratch/upgraded.functions"
count=$(grep -c '^wr_\|_check()' "$scratch/fresh.functions")
cmp -s "$scratch/fresh.functions" "$scratch/upgraded.functions" && [ "$count" -ge 11 ]
ok $? "fresh and upgraded have the same $count functions, bodies and grants (pg_get_functiondef)" ||
  diff "$scratch/fresh.functions" "$scratch/upgraded.functions" | head -20 | sed 's/^/# /'

# Every function the migrations left is defined in the file: none is kept by
# a migration alone.
missing=$(on "$upgraded" "SELECT DISTINCT p.proname FROM pg_proc p
            JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'" |
  while read -r name; do
    grep -q "^CREATE OR REPLACE FUNCTION $name(" "$VOUCHER_SOURCE_DIR/deploy/sql/functions.sql" ||
      echo "$name"
  done)
is "$missing" "" "every function of the schema is defined in functions.sql"

# Again: nothing to do.
"$migrate" "$upgraded" >"$scratch/again.out" 2>&1
is "$?/$(cat "$scratch/again.out")" "0/" "a second run applies nothing"

# A changed file is applied again: a line added to wr_apply_events()'s body.
cp -r "$VOUCHER_SOURCE_DIR/deploy/sql" "$scratch/sql"
sed -i '/^CREATE OR REPLACE FUNCTION wr_apply_events(/,/^AS \$fn\$/{/^AS \$fn\$/a\
-- changed by test_migrations
}' "$scratch/sql/functions.sql"
VOUCHER_SQL_DIR=$scratch/sql "$migrate" "$upgraded" >"$scratch/changed.out" 2>&1
grep -q "applied functions.sql" "$scratch/changed.out"
ok $? "a changed functions.sql is applied again"
on "$upgraded" "SELECT pg_get_functiondef('wr_apply_events'::regproc)" |
  grep -q "changed by test_migrations"
ok $? "the function's body is the changed file's"
is "$(on "$upgraded" "SELECT checksum FROM schema_migrations WHERE version = 'functions'")" \
  "$(sha256sum "$scratch/sql/functions.sql" | cut -d' ' -f1)" \
  "schema_migrations records the changed file's checksum"

# A file that fails: nothing of it stays, the checksum recorded stays.
cp "$scratch/sql/functions.sql" "$scratch/changed.sql"
sed -i 's/-- changed by test_migrations/-- changed twice/' "$scratch/sql/functions.sql"
echo "SELECT no_such_function();" >>"$scratch/sql/functions.sql"
VOUCHER_SQL_DIR=$scratch/sql "$migrate" "$upgraded" >"$scratch/broken.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q "functions.sql failed" "$scratch/broken.out"
ok $? "a functions.sql that fails: exit 1 naming it"
[ "$(on "$upgraded" "SELECT checksum FROM schema_migrations WHERE version = 'functions'")" = \
  "$(sha256sum "$scratch/changed.sql" | cut -d' ' -f1)" ] &&
  on "$upgraded" "SELECT pg_get_functiondef('wr_apply_events'::regproc)" |
  grep -q "changed by test_migrations"
ok $? "and leaves the functions and the checksum as they were"

drop_dbs
