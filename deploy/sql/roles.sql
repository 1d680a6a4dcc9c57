-- The daemons' login roles: one per daemon, each granted only what it uses by
-- migration 008_daemon_roles.sql; and voucher_admin, voucher-admin's (021:
-- its campaign commands and reading the admin audit). Roles belong to the whole PostgreSQL
-- cluster, not to one database, so a migration (run as the database owner,
-- who may not create roles) cannot make them: a superuser, or a role with
-- CREATEROLE, runs this file once before 008, and again harmlessly later.
-- deploy/stack does it for the local stack. Not numbered: the migration
-- runner does not pick it up.
--
--   psql -v ON_ERROR_STOP=1 -U postgres -d postgres -f deploy/sql/roles.sql
--
-- Passwords are not set here (the local stack trusts 127.0.0.1). In production
-- give each role its own, from your secret store, and put it in that daemon's
-- DSN only:  ALTER ROLE voucher_gateway PASSWORD '...';
--
-- The role defaults bound every session of these roles, whatever opens it
-- (the reconciler's lock session does not go through vc_pg_connect): a
-- statement running longer than statement_timeout, or waiting longer than
-- lock_timeout for a lock, fails instead of holding the connection and its
-- locks. A daemon may set a longer statement_timeout in its own session (the
-- reconciler does, for its pass). A session left idle inside a transaction (a
-- daemon stuck between two statements, a connection a crash left open) is
-- ended after idle_in_transaction_session_timeout, so that it cannot hold
-- row locks and old snapshots for ever: 1 minute for the gateway and the
-- writer, whose transactions wait on nothing slower than Redis or Kafka; 10
-- minutes for the reconciler, whose pass keeps its snapshot open while it
-- reads Kafka's tail and Redis (a large voucher's orders in pieces).
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['voucher_gateway', 'voucher_writer', 'voucher_reconciler', 'voucher_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT', r);
        END IF;
        EXECUTE format('ALTER ROLE %I SET statement_timeout = %L', r, '30s');
        EXECUTE format('ALTER ROLE %I SET lock_timeout = %L', r, '10s');
        EXECUTE format('ALTER ROLE %I SET idle_in_transaction_session_timeout = %L', r,
                       CASE r WHEN 'voucher_reconciler' THEN '10min' ELSE '1min' END);
    END LOOP;
END
$$;

-- voucher_direct owns the direct-mode functions (functions.sql: dr_reserve and
-- the others, SECURITY DEFINER): they write with its grants (025), and the
-- gateway, which may only execute them, writes no table itself. Nobody logs
-- in as it. The role that runs the migrations (voucher, here and in
-- deploy/stack) must be a member of it to make it the functions' owner: where
-- the owner role has another name, grant it likewise.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'voucher_direct') THEN
        CREATE ROLE voucher_direct NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'voucher') THEN
        GRANT voucher_direct TO voucher;
    END IF;
END
$$;
