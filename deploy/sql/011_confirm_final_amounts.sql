-- A confirm against the order's final total (issue 24): VoucherConfirmed may
-- carry the total the order was paid at and the discount for it
-- (proto/events.md), and the row keeps them beside the reservation's quote.
--
-- voucher_redemption.confirmed_order_amount, confirmed_discount_amount: the
-- figures of the confirm that confirmed the row (RESERVED -> CONFIRMED, or
-- an early confirm's insert), when it carried them; NULL when it did not (a
-- confirm without a total, or an event from before: the order was confirmed
-- at the reservation's order_amount and discount_amount), and on rows never
-- confirmed. A repeated confirm, or one arriving after the row was RELEASED,
-- changes nothing, as before: the gateway answers 409 ALREADY_CONFIRMED to a
-- confirm at another total, so every VoucherConfirmed of an order carries the
-- same figures or none, and the order they arrive in does not matter except
-- behind a release (proto/redemption-states.md).
--
-- The writer passes a confirm's figures in p_amount and p_discount, which
-- carried 0 for confirms before; it now passes NULL for a confirm without
-- them. The signatures do not change, so the grants stand as 008 and 010 made
-- them: CREATE OR REPLACE keeps a function's owner and privileges (EXECUTE
-- for voucher_writer alone), and the writer's table grants (SELECT, INSERT,
-- UPDATE on voucher_redemption, table-wide) cover the new columns, which the
-- gateway (column grants) and the reconciler (SELECT) do not need to write. Deploy this with the writer of
-- the same change: a writer from before passes 0 for a confirm's figures,
-- which this file would store as a confirm at a total of 0.
--
-- Below are the latest definitions, copied and changed only where a confirm
-- confirms a row: wr_apply_events_seq (003), wr_apply_events_fresh (007),
-- wr_apply_events_set (007). writer/check/apply_sql_check.py compares them.

ALTER TABLE voucher_redemption
    ADD COLUMN confirmed_order_amount    BIGINT,
    ADD COLUMN confirmed_discount_amount BIGINT,
    ADD CONSTRAINT ck_confirmed_amounts
        CHECK ((confirmed_order_amount IS NULL) = (confirmed_discount_amount IS NULL)
               AND confirmed_order_amount >= 0 AND confirmed_discount_amount >= 0);

CREATE OR REPLACE FUNCTION wr_apply_events_seq(
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
    n       int := coalesce(array_length(p_type, 1), 0);
    outcome smallint[] := '{}';
    v_code  text[] := '{}';
    v_used  int[] := '{}';
    v_orig  int[] := '{}';
    v_limit int[] := '{}';
    k       int;
    u       int;
    l       int;
    at      timestamptz;
    delta   int;
    res     smallint;
BEGIN
    FOR i IN 1 .. n LOOP
        k := array_position(v_code, p_code[i]);
        IF k IS NULL THEN
            SELECT used_count, total_limit INTO u, l
              FROM voucher WHERE code = p_code[i] FOR UPDATE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'unknown voucher % (order %)', p_code[i], p_order[i]
                    USING ERRCODE = 'foreign_key_violation';
            END IF;
            v_code := v_code || p_code[i];
            v_used := v_used || u;
            v_orig := v_orig || u;
            v_limit := v_limit || l;
            k := array_length(v_code, 1);
        END IF;
        at := to_timestamp(p_at_ms[i] / 1000.0);
        delta := 0;
        res := 2;

        IF p_type[i] = 1 THEN
            INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status,
                                            discount_amount, order_amount, held_until,
                                            created_at, updated_at)
            VALUES (p_code[i], p_customer[i], p_order[i], 'RESERVED',
                    p_discount[i], p_amount[i],
                    CASE WHEN p_held_ms[i] > 0 THEN to_timestamp(p_held_ms[i] / 1000.0) END,
                    at, at)
            ON CONFLICT (order_id) DO NOTHING;
            IF FOUND THEN
                delta := 1;
                res := 1;
            ELSE
                -- A repeat, or a reservation overtaken by its confirm or release:
                -- those rows lack the amounts only a reservation carries.
                UPDATE voucher_redemption
                   SET discount_amount = p_discount[i], order_amount = p_amount[i],
                       held_until = CASE WHEN p_held_ms[i] > 0
                                         THEN to_timestamp(p_held_ms[i] / 1000.0) END,
                       created_at = least(created_at, at)
                 WHERE order_id = p_order[i] AND voucher_code = p_code[i]
                   AND discount_amount = 0 AND order_amount = 0 AND held_until IS NULL
                   AND (p_discount[i] <> 0 OR p_amount[i] <> 0 OR p_held_ms[i] > 0);
                IF FOUND THEN
                    res := 1;
                END IF;
            END IF;

        ELSIF p_type[i] = 2 THEN
            -- A confirm given the final total carries its figures (NULL without):
            -- stored by the confirm that confirms the row, and by no other.
            UPDATE voucher_redemption
               SET status = 'CONFIRMED', updated_at = at,
                   confirmed_order_amount = coalesce(p_amount[i], confirmed_order_amount),
                   confirmed_discount_amount = coalesce(p_discount[i], confirmed_discount_amount)
             WHERE order_id = p_order[i] AND voucher_code = p_code[i] AND status = 'RESERVED';
            IF FOUND THEN
                res := 1;
            ELSE
                INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status,
                                                confirmed_order_amount,
                                                confirmed_discount_amount, created_at, updated_at)
                VALUES (p_code[i], p_customer[i], p_order[i], 'CONFIRMED', p_amount[i],
                        p_discount[i], at, at)
                ON CONFLICT (order_id) DO NOTHING;
                IF FOUND THEN
                    delta := 1;
                    res := 3;
                END IF;
            END IF;

        ELSIF p_type[i] = 3 THEN
            UPDATE voucher_redemption SET status = 'RELEASED', updated_at = at
             WHERE order_id = p_order[i] AND voucher_code = p_code[i]
               AND status IN ('RESERVED', 'CONFIRMED');
            IF FOUND THEN
                delta := -1;
                res := 1;
            ELSE
                INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status,
                                                created_at, updated_at)
                VALUES (p_code[i], p_customer[i], p_order[i], 'RELEASED', at, at)
                ON CONFLICT (order_id) DO NOTHING;
                IF FOUND THEN
                    res := 4;
                END IF;
            END IF;

        ELSE
            RAISE EXCEPTION 'unknown event type % (order %)', p_type[i], p_order[i]
                USING ERRCODE = 'invalid_parameter_value';
        END IF;

        -- Nothing changed: a repeat, unless the order is another voucher's.
        IF res = 2 AND EXISTS (SELECT 1 FROM voucher_redemption
                                WHERE order_id = p_order[i] AND voucher_code <> p_code[i]) THEN
            res := 5;
        END IF;

        IF delta <> 0 THEN
            v_used[k] := v_used[k] + delta;
            IF v_used[k] > v_limit[k] THEN
                RAISE EXCEPTION 'voucher %: order % would raise used_count to % above total_limit %',
                    p_code[i], p_order[i], v_used[k], v_limit[k]
                    USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_used';
            ELSIF v_used[k] < 0 THEN
                RAISE EXCEPTION 'voucher %: release of order % would lower used_count below 0',
                    p_code[i], p_order[i]
                    USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_used_nonneg';
            END IF;
        END IF;
        outcome := outcome || res;
    END LOOP;

    UPDATE voucher v SET used_count = d.used
      FROM unnest(v_code, v_used, v_orig) AS d(code, used, orig)
     WHERE v.code = d.code AND d.used <> d.orig;
    RETURN outcome;
END
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
            UPDATE voucher_redemption r
               SET status = 'CONFIRMED', updated_at = ev.at,
                   confirmed_order_amount = coalesce(ev.amt, r.confirmed_order_amount),
                   confirmed_discount_amount = coalesce(ev.disc, r.confirmed_discount_amount)
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
               -- The figures of the confirm that confirms the row (the walk's rule).
               (array_agg(j.amt ORDER BY j.i) FILTER (WHERE j.t = 2 AND j.t > j.before))[1]
                   AS conf_amt,
               (array_agg(j.disc ORDER BY j.i) FILTER (WHERE j.t = 2 AND j.t > j.before))[1]
                   AS conf_disc,
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
                                        confirmed_order_amount, confirmed_discount_amount,
                                        created_at, updated_at)
        SELECT p.code, p.first_cust, p.ord, p.final_status, coalesce(p.fill_disc, 0),
               coalesce(p.fill_amt, 0), p.fill_held, p.conf_amt, p.conf_disc,
               least(p.first_at, p.fill_at), p.change_at
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
               confirmed_order_amount = coalesce(p.conf_amt, r.confirmed_order_amount),
               confirmed_discount_amount = coalesce(p.conf_disc, r.confirmed_discount_amount),
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
