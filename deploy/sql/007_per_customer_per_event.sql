-- The per-customer limit, judged the same on every path of the writer's
-- batch apply, and checked only where it can be checked right.
--
-- 1. Per event, on every path. The walk (wr_apply_events_seq, 003) runs one
--    statement per event, so the per-customer triggers of 005 judge what a
--    customer holds after each event; the fresh (006) and set (003) paths
--    run one statement per batch, so the same triggers judged what the
--    customer holds after the whole batch. [Reserved(B, customer 7),
--    Released(A, customer 7)] with A held and a limit of 1 was applied by
--    the fresh and set paths and refused by the walk, so the outcome
--    depended on the batch's shape and on where a batch boundary fell.
--
--    The rule is the walk's, as for used_count and total_limit: an event is
--    judged on what the customer holds right after it, in partition order
--    (proto/redemption-states.md, "The per-customer limit", says why). The
--    fresh and set paths now decline, like they do near total_limit, when
--    a customer could go over per_user_limit somewhere in the batch:
--    their uses not RELEASED now, plus every order of theirs the batch may
--    give a use to (a reservation or a confirm of an order with no row
--    yet), above the limit. Below that bound no event of the batch can
--    cross the limit, so the walk would apply every event too, and the
--    three agree; above it, the walk judges each event. Only customers the
--    batch also gives a use back to need the bound (for the others the
--    count only grows, and the end of the batch is its highest point), so a
--    flash sale's batches, where a customer seldom both takes and gives
--    back, pay for it rarely.
--
-- 2. Not under REPEATABLE READ. 005's comment said a second transaction
--    would fail with serialization_failure there; it does not when the
--    first only locked the voucher row (an INSERT by hand locks it through
--    the trigger, but does not update it): the lock is granted, the count
--    reads the transaction's first snapshot, misses the first's rows, and
--    the customer ends with one use too many. The trigger now refuses to
--    run under REPEATABLE READ (SQLSTATE 25000), and the writer sets READ
--    COMMITTED on its connection (writer/wr_pg.c). Under SERIALIZABLE the
--    predicate locks of the count make PostgreSQL abort one of the two.

CREATE OR REPLACE FUNCTION wr_batch_customers_fit(
    p_type     smallint[],
    p_code     text[],
    p_customer bigint[],
    p_order    text[])
RETURNS boolean
LANGUAGE sql
STABLE
AS $fn$
    -- Only a customer the batch also gives a use back to can hold more in
    -- the middle of the batch than at its end: for everyone else the count
    -- only grows, so the end-of-statement triggers judge exactly as the walk
    -- (over the limit at some event iff over it at the end). So the bound is
    -- needed, and paid for, only for the (voucher, customer) pairs of a
    -- release: the event's customer, the customer of the row it releases,
    -- and the customer of the batch's own events of that order. For them:
    -- the orders of the batch that may give them a use (a reservation or a
    -- confirm of an orderId with no row), on top of their uses not RELEASED
    -- now, within the limit. The trigger's own test is
    -- "uses > 1 AND uses > per_user_limit".
    WITH e AS (
        SELECT t, code, cust, ord
          FROM unnest(p_type, p_code, p_customer, p_order) AS e(t, code, cust, ord)
    ),
    giving_back AS (
        SELECT code, cust FROM e WHERE t = 3
        UNION
        SELECT r.voucher_code, r.customer_id
          FROM e JOIN voucher_redemption r ON r.order_id = e.ord
         WHERE e.t = 3
        UNION
        SELECT g.code, g.cust
          FROM e g JOIN e x ON x.ord = g.ord AND x.t = 3
         WHERE g.t <> 3
    ),
    gains AS (
        SELECT e.code, e.cust, count(DISTINCT e.ord) AS plus
          FROM e JOIN giving_back b ON b.code = e.code AND b.cust = e.cust
         WHERE e.t IN (1, 2)
           AND NOT EXISTS (SELECT 1 FROM voucher_redemption r WHERE r.order_id = e.ord)
         GROUP BY e.code, e.cust
    )
    SELECT NOT EXISTS (
        SELECT 1
          FROM gains g JOIN voucher v ON v.code = g.code
         WHERE g.plus + (SELECT count(*) FROM voucher_redemption r
                          WHERE r.voucher_code = g.code AND r.customer_id = g.cust
                            AND r.status <> 'RELEASED') > greatest(v.per_user_limit, 1))
$fn$;

CREATE OR REPLACE FUNCTION wr_apply_events_fresh(
    p_type     smallint[],
    p_code     text[],
    p_customer bigint[],
    p_order    text[],
    p_discount bigint[],
    p_amount   bigint[],
    p_at_ms    bigint[],
    p_held_ms  bigint[])
RETURNS smallint[]
LANGUAGE plpgsql
AS $fn$
DECLARE
    n        int := coalesce(array_length(p_type, 1), 0);
    fits     boolean;
    want_ins int;
    want_con int;
    want_rel int;
    inserted int;
    confirmed int;
    released int;
BEGIN
    IF n = 0 THEN
        RETURN '{}';
    END IF;
    IF (SELECT count(DISTINCT o) FROM unnest(p_order) AS o) <> n THEN
        RETURN NULL;
    END IF;

    WITH d AS (
        SELECT e.code, count(*) FILTER (WHERE e.t = 1) AS plus,
               count(*) FILTER (WHERE e.t = 3) AS minus
          FROM unnest(p_type, p_code) AS e(t, code)
         GROUP BY e.code
    ),
    v AS (
        SELECT v.code, v.used_count, v.total_limit
          FROM voucher v
         WHERE v.code IN (SELECT code FROM d)
         ORDER BY v.code
           FOR NO KEY UPDATE
    )
    SELECT count(v.code) = count(*)
           AND bool_and(v.used_count + d.plus <= v.total_limit
                        AND v.used_count - d.minus >= 0)
      INTO fits
      FROM d LEFT JOIN v ON v.code = d.code;
    IF NOT fits THEN
        RETURN NULL;
    END IF;

    IF NOT wr_batch_customers_fit(p_type, p_code, p_customer, p_order) THEN
        RETURN NULL; -- a customer could go over per_user_limit mid-batch: the walk judges
    END IF;

    SELECT count(*) FILTER (WHERE t = 1), count(*) FILTER (WHERE t = 2),
           count(*) FILTER (WHERE t = 3)
      INTO want_ins, want_con, want_rel
      FROM unnest(p_type) AS t;
    IF want_ins + want_con + want_rel <> n THEN
        RETURN NULL; -- an unknown type: the walk names it
    END IF;

    BEGIN
        WITH ev AS (
            SELECT e.i, e.t, e.code, e.cust, e.ord, e.disc, e.amt,
                   to_timestamp(e.at_ms / 1000.0) AS at,
                   CASE WHEN e.held_ms > 0 THEN to_timestamp(e.held_ms / 1000.0) END AS held
              FROM unnest(p_type, p_code, p_customer, p_order, p_discount, p_amount, p_at_ms,
                          p_held_ms) WITH ORDINALITY AS e(t, code, cust, ord, disc, amt, at_ms,
                                                          held_ms, i)
        ),
        ins AS (
            INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status,
                                            discount_amount, order_amount, held_until,
                                            created_at, updated_at)
            SELECT ev.code, ev.cust, ev.ord, 'RESERVED', ev.disc, ev.amt, ev.held, ev.at, ev.at
              FROM ev
             WHERE ev.t = 1
             ORDER BY ev.i
            ON CONFLICT (order_id) DO NOTHING
            RETURNING voucher_code
        ),
        con AS (
            UPDATE voucher_redemption r SET status = 'CONFIRMED', updated_at = ev.at
              FROM ev
             WHERE ev.t = 2 AND r.order_id = ev.ord AND r.voucher_code = ev.code
               AND r.status = 'RESERVED'
            RETURNING r.voucher_code
        ),
        rel AS (
            UPDATE voucher_redemption r SET status = 'RELEASED', updated_at = ev.at
              FROM ev
             WHERE ev.t = 3 AND r.order_id = ev.ord AND r.voucher_code = ev.code
               AND r.status IN ('RESERVED', 'CONFIRMED')
            RETURNING r.voucher_code
        ),
        counted AS ( -- runs although nothing reads it, like every data-modifying WITH
            UPDATE voucher v SET used_count = v.used_count + d.delta
              FROM (SELECT c.code, sum(c.delta)::int AS delta
                      FROM (SELECT voucher_code AS code, 1 AS delta FROM ins
                            UNION ALL
                            SELECT voucher_code, -1 FROM rel) c
                     GROUP BY c.code) d
             WHERE v.code = d.code AND d.delta <> 0
        )
        SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM con),
               (SELECT count(*) FROM rel)
          INTO inserted, confirmed, released;

        IF inserted <> want_ins OR confirmed <> want_con OR released <> want_rel THEN
            RAISE EXCEPTION 'not a fresh batch' USING ERRCODE = 'VW001';
        END IF;
    EXCEPTION WHEN SQLSTATE 'VW001' THEN
        RETURN NULL; -- undone with the block: the other paths judge each event
    END;
    RETURN array_fill(1::smallint, ARRAY[n]);
END
$fn$;

CREATE OR REPLACE FUNCTION wr_apply_events_set(
    p_type     smallint[],
    p_code     text[],
    p_customer bigint[],
    p_order    text[],
    p_discount bigint[],
    p_amount   bigint[],
    p_at_ms    bigint[],
    p_held_ms  bigint[])
RETURNS smallint[]
LANGUAGE plpgsql
AS $fn$
DECLARE
    fits     boolean;
    outcome  smallint[];
    inserted int;
    updated  int;
    want_ins int;
    want_upd int;
BEGIN
    IF coalesce(array_length(p_type, 1), 0) = 0 THEN
        RETURN '{}';
    END IF;

    -- Decline unless no event of the batch can cross a limit of used_count.
    -- An order gains a use at most once, and only if it has no row yet; it
    -- gives one back at most once. So used_count stays within
    -- [used - releasing holders, used + new orders] all through the batch.
    -- Decline also when an orderId comes with two codes.
    WITH o AS (
        SELECT e.ord, min(e.code) AS code, count(DISTINCT e.code) AS codes,
               bool_or(e.t IN (1, 2)) AS gains, bool_or(e.t = 3) AS releases
          FROM unnest(p_type, p_code, p_order) AS e(t, code, ord)
         GROUP BY e.ord
    ),
    s AS (
        SELECT o.code, max(o.codes) AS codes,
               count(*) FILTER (WHERE o.gains AND r.order_id IS NULL) AS plus,
               count(*) FILTER (WHERE o.releases AND r.status IN ('RESERVED', 'CONFIRMED'))
                   AS minus
          FROM o LEFT JOIN voucher_redemption r ON r.order_id = o.ord
         GROUP BY o.code
    )
    SELECT bool_and(v.code IS NOT NULL AND s.codes = 1
                    AND v.used_count + s.plus <= v.total_limit
                    AND v.used_count - s.minus >= 0)
      INTO fits
      FROM s LEFT JOIN voucher v ON v.code = s.code;
    IF NOT fits THEN
        RETURN NULL;
    END IF;

    IF NOT wr_batch_customers_fit(p_type, p_code, p_customer, p_order) THEN
        RETURN NULL; -- a customer could go over per_user_limit mid-batch: the walk judges
    END IF;

    WITH ev AS (
        SELECT e.i::int AS i, e.t::int AS t, e.code, e.cust, e.ord, e.disc, e.amt,
               to_timestamp(e.at_ms / 1000.0) AS at,
               CASE WHEN e.held_ms > 0 THEN to_timestamp(e.held_ms / 1000.0) END AS held,
               (e.t = 1 AND (e.disc <> 0 OR e.amt <> 0 OR e.held_ms > 0)) AS carries
          FROM unnest(p_type, p_code, p_customer, p_order, p_discount, p_amount, p_at_ms,
                      p_held_ms) WITH ORDINALITY AS e(t, code, cust, ord, disc, amt, at_ms,
                                                      held_ms, i)
    ),
    cur AS (
        SELECT r.order_id, r.voucher_code, r.status, r.created_at, r.updated_at,
               CASE r.status WHEN 'RESERVED' THEN 1 WHEN 'CONFIRMED' THEN 2 ELSE 3 END AS rank,
               (r.discount_amount = 0 AND r.order_amount = 0 AND r.held_until IS NULL) AS bare
          FROM voucher_redemption r
         WHERE r.order_id IN (SELECT ord FROM ev)
    ),
    step AS (
        SELECT ev.*, cur.order_id IS NOT NULL AS existed,
               coalesce(cur.voucher_code <> ev.code, false) AS conflict,
               coalesce(cur.rank, 0) AS cur_rank,
               coalesce(cur.bare, true) AS cur_bare,
               greatest(coalesce(cur.rank, 0),
                        coalesce(max(ev.t) OVER w, 0)) AS before,
               coalesce(cur.bare, true) AND NOT coalesce(bool_or(ev.carries) OVER w, false)
                   AS bare_before
          FROM ev LEFT JOIN cur ON cur.order_id = ev.ord
        WINDOW w AS (PARTITION BY ev.ord ORDER BY ev.i
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
    ),
    judged AS (
        SELECT step.*,
               CASE WHEN conflict THEN 5
                    WHEN before = 0 THEN CASE t WHEN 1 THEN 1 WHEN 2 THEN 3 ELSE 4 END
                    WHEN t > before THEN 1
                    WHEN carries AND bare_before THEN 1
                    ELSE 2 END AS outcome
          FROM step
    ),
    per_order AS (
        SELECT j.ord, min(j.code) AS code, bool_or(j.existed) AS existed,
               bool_or(j.conflict) AS conflict, max(j.cur_rank) AS cur_rank,
               greatest(max(j.cur_rank), max(j.t)) AS final_rank,
               (array_agg(j.cust ORDER BY j.i))[1] AS first_cust,
               (array_agg(j.at ORDER BY j.i))[1] AS first_at,
               (array_agg(j.disc ORDER BY j.i) FILTER (WHERE j.carries))[1] AS fill_disc,
               (array_agg(j.amt ORDER BY j.i) FILTER (WHERE j.carries))[1] AS fill_amt,
               (array_agg(j.held ORDER BY j.i) FILTER (WHERE j.carries))[1] AS fill_held,
               (array_agg(j.at ORDER BY j.i) FILTER (WHERE j.carries))[1] AS fill_at,
               (array_agg(j.at ORDER BY j.i DESC) FILTER (WHERE j.t > j.before))[1] AS change_at,
               bool_and(j.cur_bare) AS bare_at_start
          FROM judged j
         GROUP BY j.ord
    ),
    plan AS (
        SELECT o.*,
               (CASE WHEN o.final_rank IN (1, 2) THEN 1 ELSE 0 END)
             - (CASE WHEN o.cur_rank IN (1, 2) THEN 1 ELSE 0 END) AS delta,
               CASE o.final_rank WHEN 1 THEN 'RESERVED' WHEN 2 THEN 'CONFIRMED'
                                 ELSE 'RELEASED' END AS final_status,
               CASE o.cur_rank WHEN 1 THEN 'RESERVED' WHEN 2 THEN 'CONFIRMED'
                               WHEN 3 THEN 'RELEASED' END AS cur_status,
               (o.existed AND NOT o.conflict
                AND (o.final_rank > o.cur_rank OR (o.bare_at_start AND o.fill_at IS NOT NULL)))
                   AS needs_update
          FROM per_order o
    ),
    ins AS (
        INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status,
                                        discount_amount, order_amount, held_until,
                                        created_at, updated_at)
        SELECT p.code, p.first_cust, p.ord, p.final_status, coalesce(p.fill_disc, 0),
               coalesce(p.fill_amt, 0), p.fill_held, least(p.first_at, p.fill_at), p.change_at
          FROM plan p
         WHERE NOT p.existed
        ON CONFLICT (order_id) DO NOTHING
        RETURNING 1
    ),
    upd AS (
        UPDATE voucher_redemption r
           SET status = p.final_status,
               discount_amount = CASE WHEN p.bare_at_start AND p.fill_at IS NOT NULL
                                      THEN p.fill_disc ELSE r.discount_amount END,
               order_amount = CASE WHEN p.bare_at_start AND p.fill_at IS NOT NULL
                                   THEN p.fill_amt ELSE r.order_amount END,
               held_until = CASE WHEN p.bare_at_start AND p.fill_at IS NOT NULL
                                 THEN p.fill_held ELSE r.held_until END,
               created_at = CASE WHEN p.bare_at_start AND p.fill_at IS NOT NULL
                                 THEN least(r.created_at, p.fill_at) ELSE r.created_at END,
               updated_at = coalesce(p.change_at, r.updated_at)
          FROM plan p
         WHERE p.needs_update AND r.order_id = p.ord AND r.voucher_code = p.code
           AND r.status = p.cur_status
           AND (NOT (p.bare_at_start AND p.fill_at IS NOT NULL)
                OR (r.discount_amount = 0 AND r.order_amount = 0 AND r.held_until IS NULL))
        RETURNING 1
    ),
    counted AS ( -- runs although nothing reads it, like every data-modifying WITH
        UPDATE voucher v SET used_count = v.used_count + d.delta
          FROM (SELECT code, sum(delta)::int AS delta FROM plan
                 WHERE delta <> 0 AND NOT conflict GROUP BY code) d
         WHERE v.code = d.code
        RETURNING 1
    )
    SELECT (SELECT array_agg(j.outcome::smallint ORDER BY j.i) FROM judged j),
           (SELECT count(*) FROM ins), (SELECT count(*) FROM upd),
           (SELECT count(*) FILTER (WHERE NOT existed) FROM plan),
           (SELECT count(*) FILTER (WHERE needs_update) FROM plan)
      INTO outcome, inserted, updated, want_ins, want_upd;

    IF inserted <> want_ins OR updated <> want_upd THEN
        -- A row changed between our snapshot and our write: try the batch again.
        RAISE EXCEPTION 'redemptions changed while a batch was applied (% of % inserted, % of % updated)',
            inserted, want_ins, updated, want_upd
            USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN outcome;
END
$fn$;

CREATE OR REPLACE FUNCTION voucher_redemption_per_user_check()
RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    codes text[];
    custs bigint[];
    bad   record;
BEGIN
    -- Under REPEATABLE READ the count below would read the transaction's
    -- first snapshot and miss uses committed since: refuse to count wrong.
    IF current_setting('transaction_isolation') = 'repeatable read' THEN
        RAISE EXCEPTION 'the per-customer limit of voucher_redemption is checked under READ COMMITTED or SERIALIZABLE only, not REPEATABLE READ'
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED before changing redemptions';
    END IF;
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
