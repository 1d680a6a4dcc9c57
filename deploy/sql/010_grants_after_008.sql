-- What the daemon roles of 008 need from the migrations written beside it
-- (008 grants nothing by default, and a later migration grants what it adds).
--
-- The gateway's first load of a voucher counts its live redemptions (the
-- remaining rule, proto/redis-keys.md): read access to the two columns it
-- names, nothing else of the table.
GRANT SELECT (voucher_code, status) ON voucher_redemption TO voucher_gateway;

-- Dead letters (009): the writer parks them and its dlt commands list, replay
-- and discard them with an audit row each; the reconciler reads which orders
-- are parked or discarded. Nobody else sees them.
REVOKE ALL ON dead_letter, dead_letter_action FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON dead_letter, dead_letter_action TO voucher_writer;
GRANT SELECT ON dead_letter TO voucher_reconciler;

-- 009's functions, like 008's: the writer's alone.
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
