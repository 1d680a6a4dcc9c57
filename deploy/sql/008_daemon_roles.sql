-- Least privilege: the gateway, the writer and the reconciler each log in as
-- their own role, granted exactly what their code uses (found by reading it:
-- gateway/gw_store.c, common/vc_pg.c, writer/wr_pg.c and the wr_* functions,
-- reconciler/rc_pass.c). The tables stay owned by the role that runs the
-- migrations (voucher), the only one that may ALTER, DROP or TRUNCATE them.
-- The roles come from deploy/sql/roles.sql, run by a superuser first.
--
-- A later migration that adds a table, a column a daemon writes, or a
-- function a daemon calls grants it here-like in its own file: nothing is
-- granted by default. The functions are SECURITY INVOKER, so what a role may
-- do to the tables bounds what any function it calls may do.

DO $$
BEGIN
    IF (SELECT count(*) FROM pg_roles
         WHERE rolname IN ('voucher_gateway', 'voucher_writer', 'voucher_reconciler')) < 3 THEN
        RAISE EXCEPTION 'the daemon roles voucher_gateway, voucher_writer and voucher_reconciler do not exist'
            USING HINT = 'run deploy/sql/roles.sql as a superuser first (deploy/README.md, "PostgreSQL roles")';
    END IF;
END
$$;

-- From a clean slate, so that running this again (or after a hand-made grant)
-- leaves exactly what is below.
REVOKE ALL ON voucher, voucher_redemption, schema_migrations FROM PUBLIC;
REVOKE ALL ON voucher, voucher_redemption, schema_migrations
    FROM voucher_gateway, voucher_writer, voucher_reconciler;

-- The gateway reads voucher rules (vc_pg_load_voucher), claims a voucher's
-- first load into Redis (UPDATE redis_loaded_at ... RETURNING total_limit -
-- used_count) and creates vouchers (POST /vouchers: every column but
-- used_count, which starts at 0). It never writes used_count, never touches
-- redemptions.
GRANT SELECT ON voucher TO voucher_gateway;
GRANT INSERT (code, discount_amount, discount_percent, max_discount_amount, min_order_amount,
              total_limit, per_user_limit, starts_at, ends_at, redis_loaded_at)
    ON voucher TO voucher_gateway;
GRANT UPDATE (redis_loaded_at) ON voucher TO voucher_gateway;

-- The writer applies events through wr_apply_events (003, 006): it inserts and
-- updates redemptions, and locks voucher rows (FOR UPDATE, and FOR NO KEY
-- UPDATE in the per-customer trigger of 005, which runs as the writer) to move
-- used_count. It changes no voucher rule.
GRANT SELECT ON voucher TO voucher_writer;
GRANT UPDATE (used_count) ON voucher TO voucher_writer;
GRANT SELECT, INSERT, UPDATE ON voucher_redemption TO voucher_writer;

-- The reconciler reads; it repairs Redis, never PostgreSQL. Its advisory lock
-- (pg_try_advisory_lock) and its look at pg_locks need no grant.
GRANT SELECT ON voucher, voucher_redemption TO voucher_reconciler;

-- The writer's functions: the writer's alone (EXECUTE is PUBLIC's by default).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure
               FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = current_schema() AND p.proname LIKE 'wr\_%'
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO voucher_writer', f);
    END LOOP;
END
$$;
