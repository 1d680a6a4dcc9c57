-- The per-customer limit, held by the database like the total limit's CHECK:
-- a customer never holds more than the voucher's per_user_limit redemptions
-- that are not RELEASED, whatever writes them (the writer, a replay, an
-- engineer's SQL).
--
-- A CHECK cannot count rows, so statement-level triggers do: after each
-- INSERT or UPDATE of voucher_redemption they count, for every (voucher,
-- customer) the statement gave a use to, that customer's uses, and raise
-- check_violation naming the constraint ck_per_user_uses when one is over.
-- One check per statement, so the writer's batch of 500 rows pays for one
-- indexed count per customer in it, not one trigger call per row.
--
-- Two transactions adding uses for the same customer must not both pass on
-- a count that misses the other's rows: the trigger first locks the voucher
-- rows concerned (FOR NO KEY UPDATE, as the writer's own used_count update
-- does), so the second waits for the first to end, and its count, a new
-- statement under READ COMMITTED, sees the first's rows. That holds under
-- READ COMMITTED only. Under REPEATABLE READ the lock fails with
-- serialization_failure only when the first transaction updated the voucher
-- row (the writer's used_count); when it only locked it (a redemption
-- inserted by hand), the lock is granted and the count, from the
-- transaction's first snapshot, misses the first's rows: the check is
-- bypassed. 007_per_customer_per_event.sql makes this function refuse to
-- run under REPEATABLE READ, and the writer sets READ COMMITTED itself.

CREATE OR REPLACE FUNCTION voucher_redemption_per_user_check()
RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    codes text[];
    custs bigint[];
    bad   record;
BEGIN
    -- The (voucher, customer) pairs this statement gave a use to: new rows
    -- that are not RELEASED, and updated rows that became a use (a RELEASED
    -- row brought back by hand) or moved to another voucher or customer.
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(p.voucher_code), array_agg(p.customer_id) INTO codes, custs
          FROM (SELECT DISTINCT n.voucher_code, n.customer_id
                  FROM new_rows n WHERE n.status <> 'RELEASED') p;
    ELSE
        SELECT array_agg(p.voucher_code), array_agg(p.customer_id) INTO codes, custs
          FROM (SELECT DISTINCT n.voucher_code, n.customer_id
                  FROM new_rows n JOIN old_rows o ON o.id = n.id
                 WHERE n.status <> 'RELEASED'
                   AND (o.status = 'RELEASED' OR o.voucher_code <> n.voucher_code
                        OR o.customer_id <> n.customer_id)) p;
    END IF;
    IF codes IS NULL THEN
        RETURN NULL;
    END IF;

    PERFORM 1 FROM voucher v
      WHERE v.code = ANY (codes)
      ORDER BY v.code
        FOR NO KEY UPDATE;

    -- Count first, one index probe per pair, and only then look at the few
    -- vouchers' limits: a join of the pairs with voucher lets the planner
    -- compare every pair with every voucher.
    WITH c AS MATERIALIZED (
        SELECT p.code, p.cust,
               (SELECT count(*) FROM voucher_redemption r
                 WHERE r.voucher_code = p.code AND r.customer_id = p.cust
                   AND r.status <> 'RELEASED') AS uses
          FROM unnest(codes, custs) AS p(code, cust)
    )
    SELECT c.code, c.cust, v.per_user_limit AS lim, c.uses INTO bad
      FROM c JOIN voucher v ON v.code = c.code
     WHERE c.uses > 1 AND c.uses > v.per_user_limit
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'voucher %: customer % would hold % uses, above per_user_limit %',
            bad.code, bad.cust, bad.uses, bad.lim
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_per_user_uses',
                  TABLE = 'voucher_redemption';
    END IF;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER tr_redemption_per_user_insert
    AFTER INSERT ON voucher_redemption
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION voucher_redemption_per_user_check();

CREATE TRIGGER tr_redemption_per_user_update
    AFTER UPDATE ON voucher_redemption
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION voucher_redemption_per_user_check();
