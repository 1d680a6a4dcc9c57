-- A campaign's perCustomerLimit, held by the database as 005 holds a
-- voucher's per_user_limit: a customer never holds more live
-- campaign_redemption rows (not RELEASED) across one campaign than its
-- per_customer_limit, whatever writes them (the writer, a replay, an
-- engineer's SQL). Redis refuses first (campaign_reserve.lua, atomically);
-- this is the last line of defence when Redis cannot: a users hash rebuilt
-- from an older state, a count set by hand, a replayed event.
--
-- As 005: statement-level triggers after INSERT or UPDATE count, for every
-- (campaign, customer) the statement gave a use to, that customer's live rows
-- (index ix_campaign_redemption_customer), and raise check_violation naming
-- ck_campaign_per_customer when one is over. The writer dead-letters the event
-- (class constraint), as for a voucher. The campaign rows concerned are locked
-- first (FOR NO KEY UPDATE, as the writer's own used_count update does), so
-- two transactions adding uses for one customer cannot both pass on counts
-- that miss each other's rows; right under READ COMMITTED only (005 and 007
-- say why), so the check refuses to run under REPEATABLE READ, as 007's.
--
-- Also campaign.redis_loaded_at (as voucher.redis_loaded_at, 004): set by the
-- gateway once a reservation has written the campaign's keys in Redis. With it
-- set, the loss of all the campaign's keys at once (a flushed Redis) is told
-- from a campaign never used: campaign_reserve.lua refuses (503) and the
-- reconciler rebuilds the keys from PostgreSQL (proto/campaigns.md).
--
-- No writer function changes: wr_apply_campaign_events (016) inserts and
-- updates one row per statement, and each statement is checked.

CREATE OR REPLACE FUNCTION campaign_redemption_per_customer_check()
RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    ids   bigint[];
    custs bigint[];
    bad   record;
BEGIN
    IF current_setting('transaction_isolation') = 'repeatable read' THEN
        RAISE EXCEPTION 'the per-customer limit of campaign_redemption is checked under READ COMMITTED or SERIALIZABLE only, not REPEATABLE READ'
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    -- The (campaign, customer) pairs this statement gave a use to: new live
    -- rows, and updated rows that became a use (a RELEASED row brought back
    -- by hand) or moved to another campaign or customer.
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(p.campaign_id), array_agg(p.customer_id) INTO ids, custs
          FROM (SELECT DISTINCT n.campaign_id, n.customer_id
                  FROM new_rows n WHERE n.status <> 'RELEASED') p;
    ELSE
        SELECT array_agg(p.campaign_id), array_agg(p.customer_id) INTO ids, custs
          FROM (SELECT DISTINCT n.campaign_id, n.customer_id
                  FROM new_rows n JOIN old_rows o ON o.order_id = n.order_id
                 WHERE n.status <> 'RELEASED'
                   AND (o.status = 'RELEASED' OR o.campaign_id <> n.campaign_id
                        OR o.customer_id <> n.customer_id)) p;
    END IF;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;

    PERFORM 1 FROM campaign c
      WHERE c.id = ANY (ids)
      ORDER BY c.id
        FOR NO KEY UPDATE;

    WITH u AS MATERIALIZED (
        SELECT p.id, p.cust,
               (SELECT count(*) FROM campaign_redemption r
                 WHERE r.campaign_id = p.id AND r.customer_id = p.cust
                   AND r.status <> 'RELEASED') AS uses
          FROM unnest(ids, custs) AS p(id, cust)
    )
    SELECT u.id, u.cust, c.per_customer_limit AS lim, u.uses INTO bad
      FROM u JOIN campaign c ON c.id = u.id
     WHERE u.uses > 1 AND u.uses > c.per_customer_limit
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'campaign %: customer % would hold % uses, above per_customer_limit %',
            bad.id, bad.cust, bad.uses, bad.lim
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_campaign_per_customer',
                  TABLE = 'campaign_redemption';
    END IF;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER tr_campaign_redemption_per_customer_insert
    AFTER INSERT ON campaign_redemption
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION campaign_redemption_per_customer_check();

CREATE TRIGGER tr_campaign_redemption_per_customer_update
    AFTER UPDATE ON campaign_redemption
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION campaign_redemption_per_customer_check();

ALTER TABLE campaign ADD COLUMN redis_loaded_at TIMESTAMPTZ;
GRANT UPDATE (redis_loaded_at) ON campaign TO voucher_gateway;

-- The check runs as the writer (the trigger's invoker): it reads the limit.
-- Locking the campaign row needs UPDATE on one of its columns, which the
-- writer has (used_count, 016).
GRANT SELECT (per_customer_limit) ON campaign TO voucher_writer;
REVOKE ALL ON FUNCTION campaign_redemption_per_customer_check() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION campaign_redemption_per_customer_check() TO voucher_writer;
