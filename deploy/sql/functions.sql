-- The writer's functions, defined once: every function of the schema, as it
-- is now. proto/redemption-states.md is the state machine the apply functions
-- implement, common/vc_redemption.c the same transitions as data, and
-- writer/check/apply_sql_check.py checks these functions against them.
--
-- Every deploy applies this file after the migrations (deploy/migrate), in
-- one transaction with its checksum in schema_migrations (the row
-- 'functions'), whenever the checksum differs from the one recorded: change a
-- function here, never in a migration. Each statement is CREATE OR REPLACE,
-- so applying the file again changes nothing, and a function keeps its owner
-- and the privileges granted below. The migrations from 003 to 017 hold the
-- earlier copies of these functions; they are history (a fresh database runs
-- them, then this file). From 025 on a migration changes the schema only: it
-- may add a table or a column a function here then uses (the migrations run
-- first), and it drops or renames nothing this file creates (but a trigger
-- whose old function would fail on the schema it leaves, until this file runs
-- after it: DROP TRIGGER IF EXISTS, which this file then makes again, 030). A function
-- whose arguments change is a new function: drop the old one here too, with
-- DROP FUNCTION IF EXISTS and its old signature, before the new definition.
-- A new trigger on a function of this file is made here too, after its
-- function (CREATE OR REPLACE TRIGGER): a migration that made it would run
-- before the function exists on a fresh database.
--
-- The voucher apply paths take parallel arrays, one element per event, in
-- partition order:
--   p_type      1 VoucherReserved, 2 VoucherConfirmed, 3 VoucherReleased
--   p_code      voucher code
--   p_customer  customerId
--   p_order     orderId
--   p_discount  discountAmount (VoucherReserved; a confirm's final figure or NULL)
--   p_amount    orderAmount (VoucherReserved; a confirm's final figure or NULL)
--   p_at_ms     reservedAt / confirmedAt / releasedAt, ms since the epoch
--   p_held_ms   heldUntil (VoucherReserved), ms since the epoch; 0 when absent
--
-- and return one outcome per event:
--   1 applied    the redemption changed (state, or the amounts a reservation
--                brings to a row an earlier event created)
--   2 no-op      already in that state or past it (a redelivery): nothing changed
--   3 early      VoucherConfirmed before its VoucherReserved: recorded as
--                CONFIRMED and the use counted; the late reservation fills in
--                the amounts and changes nothing else
--   4 tombstone  VoucherReleased before its VoucherReserved: recorded as
--                RELEASED so the late reservation becomes a no-op
--   5 conflict   the orderId belongs to another voucher: nothing changed; the
--                writer sends the event to the dead-letter topic
--   7 mismatch   (wr_apply_batch() with p_campaign only) an event of a direct
--                voucher its row does not bear out: nothing changed; the
--                writer dead-letters it (wr_verify_direct_events())
--
-- So the status only ever moves forward, RESERVED < CONFIRMED < RELEASED, and
-- the final row depends on which events were seen, not on their order or how
-- often each came. A call raises (and applies nothing) when an event can
-- never apply: 23503 for an unknown voucher, 23514 when used_count would
-- leave [0, total_limit]; the writer then bisects the batch under savepoints.
-- Three implementations of the same semantics (the walk, the set path, the
-- fresh path) agree event for event; apply_sql_check.py compares them.

-- The walk: applies the events one by one. used_count is tracked per voucher
-- while the batch runs and written once per voucher at the end; each voucher
-- row is locked (FOR UPDATE) when first seen, so the running count is exact
-- and a violation is raised at the very event that causes it, as if each
-- event were applied by its own statement. A confirm carries the order's
-- final figures (p_amount, p_discount) or NULL for none (issue 24).
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

-- Whether no customer of the batch can go over per_user_limit anywhere in it:
-- for each customer the batch also gives a use back to, their uses not
-- RELEASED now plus every order of theirs the batch may give a use to. The
-- fresh and set paths decline above this bound and leave the batch to the
-- walk, which judges each event (proto/redemption-states.md, "The
-- per-customer limit").
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

-- The fresh path, for the batch a flash sale makes: every orderId once, each
-- event the next step of its order (VoucherReserved finds no row,
-- VoucherConfirmed a RESERVED row, VoucherReleased a RESERVED or CONFIRMED
-- one). One INSERT and two UPDATEs in one statement, whose row counts say
-- whether the batch was such a batch after all. It declines (returns NULL,
-- having changed nothing) when an orderId comes twice, a voucher is unknown,
-- used_count could leave [0, total_limit] somewhere in the batch, a customer
-- could go over per_user_limit somewhere in it (wr_batch_customers_fit), or
-- a row was not where the batch expected it.
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

-- The set path: the whole batch in one set-based statement. The row an order
-- ends in depends only on the set of event types seen, so it is computed per
-- order; each event's outcome comes from the status before it. It declines
-- (returns NULL) when it cannot be exactly the walk: a voucher close enough
-- to a limit that an event in the middle of the batch could cross it, a
-- customer who could cross per_user_limit (wr_batch_customers_fit), an
-- unknown voucher, or one orderId under two codes. A row changed under it
-- meanwhile raises serialization_failure, which the writer retries.
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

-- What the writer's batch calls for the vouchers' events: the fresh path, else
-- the set path, else the walk, whichever first applies the batch.
CREATE OR REPLACE FUNCTION wr_apply_events(
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
    outcome smallint[];
BEGIN
    outcome := wr_apply_events_fresh(p_type, p_code, p_customer, p_order, p_discount, p_amount,
                                     p_at_ms, p_held_ms);
    IF outcome IS NULL THEN
        outcome := wr_apply_events_set(p_type, p_code, p_customer, p_order, p_discount,
                                       p_amount, p_at_ms, p_held_ms);
    END IF;
    IF outcome IS NULL THEN
        outcome := wr_apply_events_seq(p_type, p_code, p_customer, p_order, p_discount,
                                       p_amount, p_at_ms, p_held_ms);
    END IF;
    RETURN outcome;
END
$fn$;

-- Records one dead letter as parked (the writer, once the topic acknowledged
-- it; `dlt` commands for a letter found unrecorded). A copy of an event
-- already recorded changes nothing. A letter whose event was itself a replay
-- of a parked letter supersedes that letter: the new one is what is parked.
-- Returns the letter's id.
CREATE OR REPLACE FUNCTION wr_dlt_park(
    p_code text, p_order text, p_type text,
    p_dlt_topic text, p_dlt_partition int, p_dlt_offset bigint,
    p_topic text, p_partition int, p_offset bigint,
    p_class text, p_message text, p_replayed_from text)
RETURNS bigint
LANGUAGE plpgsql
AS $fn$
DECLARE
    letter bigint;
BEGIN
    INSERT INTO dead_letter (voucher_code, order_id, event_type, dlt_topic, dlt_partition,
                             dlt_offset, original_topic, original_partition, original_offset,
                             error_class, error_message, replayed_from)
    VALUES (nullif(p_code, ''), nullif(p_order, ''), nullif(p_type, ''), p_dlt_topic,
            p_dlt_partition, p_dlt_offset, p_topic, p_partition, p_offset, p_class,
            p_message, nullif(p_replayed_from, ''))
    ON CONFLICT ON CONSTRAINT uq_dead_letter_original DO NOTHING
    RETURNING id INTO letter;
    IF letter IS NULL THEN
        SELECT d.id INTO letter FROM dead_letter d
         WHERE d.original_topic = p_topic AND d.original_partition = p_partition
           AND d.original_offset = p_offset;
        RETURN letter;
    END IF;
    IF coalesce(p_replayed_from, '') <> '' THEN
        UPDATE dead_letter d SET state = 'superseded', settled_at = now()
         WHERE d.state = 'parked'
           AND d.dlt_topic || '/' || d.dlt_partition || '/' || d.dlt_offset = p_replayed_from;
    END IF;
    RETURN letter;
END
$fn$;

-- The vouchers' batch: wr_apply_events(), and in the same transaction what
-- only the events carry that the apply paths do not take: the reason of each
-- release that took effect (outcome applied or tombstone; the first of an
-- order in batch order), and the letters whose replay took effect (every
-- outcome but a conflict) marked replayed. p_reason and p_replayed_from run
-- along the other arrays ('' for none). wr_apply_batch() with p_campaign
-- below calls it for the vouchers' events of every batch.
CREATE OR REPLACE FUNCTION wr_apply_batch(
    p_type     smallint[],
    p_code     text[],
    p_customer bigint[],
    p_order    text[],
    p_discount bigint[],
    p_amount   bigint[],
    p_at_ms    bigint[],
    p_held_ms  bigint[],
    p_reason   text[],
    p_replayed_from text[])
RETURNS smallint[]
LANGUAGE plpgsql
AS $fn$
DECLARE
    outcome smallint[];
BEGIN
    outcome := wr_apply_events(p_type, p_code, p_customer, p_order, p_discount, p_amount,
                               p_at_ms, p_held_ms);
    UPDATE voucher_redemption r SET release_reason = x.reason
      FROM (SELECT DISTINCT ON (e.o) e.o, e.reason
              FROM unnest(p_order, p_type, p_reason, outcome) WITH ORDINALITY
                   AS e(o, t, reason, oc, n)
             WHERE e.t = 3 AND e.oc IN (1, 4) AND e.reason <> ''
             ORDER BY e.o, e.n) x
     WHERE r.order_id = x.o AND r.status = 'RELEASED' AND r.release_reason IS NULL;
    IF EXISTS (SELECT 1 FROM unnest(p_replayed_from) f WHERE f <> '') THEN
        UPDATE dead_letter d SET state = 'replayed', settled_at = now()
          FROM unnest(p_replayed_from, outcome) AS e(f, oc)
         WHERE e.f <> '' AND e.oc <> 5 AND d.state = 'parked'
           AND d.dlt_topic || '/' || d.dlt_partition || '/' || d.dlt_offset = e.f;
    END IF;
    RETURN outcome;
END
$fn$;

-- Applies a campaign's events in order, one by one (the transition table of
-- proto/redemption-states.md), and returns an outcome per event as
-- wr_apply_events() does: 1 applied, 2 no-op, 3 early confirm, 4 tombstone,
-- 5 order conflict (the orderId is a voucher's, or another code's). Events of
-- one campaign are few per batch (one partition per campaign, and the
-- gateway's answer waits for each), so a walk is cheap enough.
CREATE OR REPLACE FUNCTION wr_apply_campaign_events(
    p_type     smallint[],
    p_code     text[],
    p_customer bigint[],
    p_order    text[],
    p_discount bigint[],
    p_amount   bigint[],
    p_at_ms    bigint[],
    p_held_ms  bigint[],
    p_reason   text[],
    p_campaign bigint[])
RETURNS smallint[]
LANGUAGE plpgsql
AS $fn$
DECLARE
    outcome smallint[] := '{}';
    r campaign_redemption%ROWTYPE;
    at timestamptz;
    oc smallint;
    delta int;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_type, 1), 0) LOOP
        at := to_timestamp(p_at_ms[i] / 1000.0);
        delta := 0;
        SELECT * INTO r FROM campaign_redemption WHERE order_id = p_order[i] FOR UPDATE;
        IF NOT FOUND AND EXISTS (SELECT 1 FROM voucher_redemption v WHERE v.order_id = p_order[i]) THEN
            oc := 5;
        ELSIF FOUND AND (r.code <> p_code[i] OR r.campaign_id <> p_campaign[i]) THEN
            oc := 5;
        ELSIF NOT FOUND THEN
            INSERT INTO campaign_redemption (order_id, code, campaign_id, customer_id, status,
                                             discount_amount, order_amount, held_until,
                                             confirmed_discount_amount, confirmed_order_amount,
                                             release_reason, created_at, updated_at)
            VALUES (p_order[i], p_code[i], p_campaign[i], p_customer[i],
                    CASE p_type[i] WHEN 1 THEN 'RESERVED' WHEN 2 THEN 'CONFIRMED' ELSE 'RELEASED' END,
                    CASE WHEN p_type[i] = 1 THEN p_discount[i] ELSE 0 END,
                    CASE WHEN p_type[i] = 1 THEN p_amount[i] ELSE 0 END,
                    CASE WHEN p_type[i] = 1 AND p_held_ms[i] > 0
                         THEN to_timestamp(p_held_ms[i] / 1000.0) END,
                    CASE WHEN p_type[i] = 2 THEN p_discount[i] END,
                    CASE WHEN p_type[i] = 2 THEN p_amount[i] END,
                    CASE WHEN p_type[i] = 3 THEN nullif(p_reason[i], '') END,
                    at, at);
            oc := CASE p_type[i] WHEN 1 THEN 1 WHEN 2 THEN 3 ELSE 4 END;
            delta := CASE WHEN p_type[i] = 3 THEN 0 ELSE 1 END;
        ELSIF p_type[i] = 1 THEN
            oc := 2;
            -- A confirm or release overtook the reservation: it fills in the quote only.
            IF r.held_until IS NULL AND p_held_ms[i] > 0 THEN
                UPDATE campaign_redemption
                   SET discount_amount = p_discount[i], order_amount = p_amount[i],
                       held_until = to_timestamp(p_held_ms[i] / 1000.0),
                       created_at = least(created_at, at)
                 WHERE order_id = p_order[i];
            END IF;
        ELSIF p_type[i] = 2 AND r.status = 'RESERVED' THEN
            UPDATE campaign_redemption
               SET status = 'CONFIRMED', updated_at = at,
                   confirmed_discount_amount = p_discount[i], confirmed_order_amount = p_amount[i]
             WHERE order_id = p_order[i];
            oc := 1;
        ELSIF p_type[i] = 3 AND r.status IN ('RESERVED', 'CONFIRMED') THEN
            UPDATE campaign_redemption
               SET status = 'RELEASED', updated_at = at, release_reason = nullif(p_reason[i], '')
             WHERE order_id = p_order[i];
            oc := 1;
            delta := -1;
        ELSE
            oc := 2;
        END IF;
        IF delta <> 0 THEN
            UPDATE campaign SET used_count = used_count + delta WHERE id = p_campaign[i];
        END IF;
        outcome := outcome || oc;
    END LOOP;
    RETURN outcome;
END
$fn$;

-- A direct voucher's events (proto/direct-mode.md, "The writer"): its row was
-- written in the transaction that wrote the event to the outbox, so the row
-- is the truth and the event is its record. Nothing is applied; each event is
-- verified against the row of its orderId and gets 2 (no-op) when the row
-- bears it out, 7 (direct mismatch: the writer dead-letters it, class
-- direct-mismatch) when not. The writer reads the events later than the rows
-- change, so an event may find its row further on (a VoucherReserved a row
-- already CONFIRMED or RELEASED): it is borne out when the row is of the same
-- voucher and customer, and
--   VoucherReserved   the row's orderAmount and discountAmount are the event's
--                     (whatever the status: every state comes after it);
--   VoucherConfirmed  the row is CONFIRMED or RELEASED (a release may follow
--                     a confirm), and holds the event's final figures when the
--                     event carries them;
--   VoucherReleased   the row is RELEASED.
-- Read without a lock: a row only moves forward, and an event reaches Kafka
-- only after its row's commit.
CREATE OR REPLACE FUNCTION wr_verify_direct_events(
    p_type     smallint[],
    p_code     text[],
    p_customer bigint[],
    p_order    text[],
    p_discount bigint[],
    p_amount   bigint[])
RETURNS smallint[]
LANGUAGE plpgsql
AS $fn$
DECLARE
    outcome smallint[] := '{}';
    r voucher_redemption%ROWTYPE;
    ok boolean;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_type, 1), 0) LOOP
        SELECT * INTO r FROM voucher_redemption WHERE order_id = p_order[i];
        ok := FOUND AND r.voucher_code = p_code[i] AND r.customer_id = p_customer[i];
        IF ok THEN
            ok := CASE p_type[i]
                WHEN 1 THEN r.order_amount = p_amount[i] AND r.discount_amount = p_discount[i]
                WHEN 2 THEN r.status IN ('CONFIRMED', 'RELEASED')
                            AND (p_amount[i] IS NULL
                                 OR (r.confirmed_order_amount IS NOT DISTINCT FROM p_amount[i]
                                     AND r.confirmed_discount_amount
                                         IS NOT DISTINCT FROM p_discount[i]))
                WHEN 3 THEN r.status = 'RELEASED'
                ELSE false
            END;
        END IF;
        outcome := outcome || CASE WHEN ok THEN 2 ELSE 7 END::smallint;
    END LOOP;
    RETURN outcome;
END
$fn$;

-- The writer's batch (writer/wr_pg.c), with the campaigns: p_campaign, the
-- 11th array, is the event's campaignId, 0 for a voucher's event. The
-- vouchers' events go to the vouchers' batch above, in their order; a
-- campaign's to wr_apply_campaign_events(); a direct voucher's (its mode,
-- read here, so the batch stays one call in one transaction) to
-- wr_verify_direct_events(); the outcomes are put back in the events' order.
-- The groups touch different rows (an orderId is one voucher's or one
-- code's: the gateway's claim, and the conflict check; a direct voucher's
-- events change nothing), so applying one group before another changes no
-- outcome.
CREATE OR REPLACE FUNCTION wr_apply_batch(
    p_type     smallint[],
    p_code     text[],
    p_customer bigint[],
    p_order    text[],
    p_discount bigint[],
    p_amount   bigint[],
    p_at_ms    bigint[],
    p_held_ms  bigint[],
    p_reason   text[],
    p_replayed_from text[],
    p_campaign bigint[])
RETURNS smallint[]
LANGUAGE plpgsql
AS $fn$
DECLARE
    v int[];
    c int[];
    d int[];
    v_out smallint[];
    c_out smallint[];
    d_out smallint[];
    outcome smallint[];
BEGIN
    SELECT coalesce(array_agg(e.n ORDER BY e.n), '{}') INTO d
      FROM unnest(p_code, p_campaign) WITH ORDINALITY AS e(code, x, n)
     WHERE e.x = 0 AND EXISTS (SELECT 1 FROM voucher w WHERE w.code = e.code AND w.mode = 'direct');
    IF NOT EXISTS (SELECT 1 FROM unnest(p_campaign) x WHERE x > 0)
       AND array_length(d, 1) IS NULL THEN
        RETURN wr_apply_batch(p_type, p_code, p_customer, p_order, p_discount, p_amount,
                              p_at_ms, p_held_ms, p_reason, p_replayed_from);
    END IF;
    SELECT coalesce(array_agg(n ORDER BY n) FILTER (WHERE x = 0 AND n <> ALL (d)), '{}'),
           coalesce(array_agg(n ORDER BY n) FILTER (WHERE x > 0), '{}')
      INTO v, c
      FROM unnest(p_campaign) WITH ORDINALITY AS e(x, n);
    IF array_length(v, 1) > 0 THEN
        v_out := wr_apply_batch(
            ARRAY(SELECT p_type[n] FROM unnest(v) n), ARRAY(SELECT p_code[n] FROM unnest(v) n),
            ARRAY(SELECT p_customer[n] FROM unnest(v) n), ARRAY(SELECT p_order[n] FROM unnest(v) n),
            ARRAY(SELECT p_discount[n] FROM unnest(v) n), ARRAY(SELECT p_amount[n] FROM unnest(v) n),
            ARRAY(SELECT p_at_ms[n] FROM unnest(v) n), ARRAY(SELECT p_held_ms[n] FROM unnest(v) n),
            ARRAY(SELECT p_reason[n] FROM unnest(v) n),
            ARRAY(SELECT p_replayed_from[n] FROM unnest(v) n));
    END IF;
    c_out := wr_apply_campaign_events(
        ARRAY(SELECT p_type[n] FROM unnest(c) n), ARRAY(SELECT p_code[n] FROM unnest(c) n),
        ARRAY(SELECT p_customer[n] FROM unnest(c) n), ARRAY(SELECT p_order[n] FROM unnest(c) n),
        ARRAY(SELECT p_discount[n] FROM unnest(c) n), ARRAY(SELECT p_amount[n] FROM unnest(c) n),
        ARRAY(SELECT p_at_ms[n] FROM unnest(c) n), ARRAY(SELECT p_held_ms[n] FROM unnest(c) n),
        ARRAY(SELECT p_reason[n] FROM unnest(c) n), ARRAY(SELECT p_campaign[n] FROM unnest(c) n));
    d_out := wr_verify_direct_events(
        ARRAY(SELECT p_type[n] FROM unnest(d) n), ARRAY(SELECT p_code[n] FROM unnest(d) n),
        ARRAY(SELECT p_customer[n] FROM unnest(d) n), ARRAY(SELECT p_order[n] FROM unnest(d) n),
        ARRAY(SELECT p_discount[n] FROM unnest(d) n), ARRAY(SELECT p_amount[n] FROM unnest(d) n));
    -- The letters a replay of a campaign's event settled (as 009 for a voucher's), or of a
    -- direct voucher's event its row now bears out.
    UPDATE dead_letter l SET state = 'replayed', settled_at = now()
      FROM (SELECT * FROM unnest(c, c_out) UNION ALL SELECT * FROM unnest(d, d_out))
           AS e(n, oc)
     WHERE p_replayed_from[e.n] <> '' AND e.oc NOT IN (5, 7) AND l.state = 'parked'
       AND l.dlt_topic || '/' || l.dlt_partition || '/' || l.dlt_offset = p_replayed_from[e.n];
    outcome := array_fill(0::smallint, ARRAY[array_length(p_type, 1)]);
    FOR i IN 1 .. coalesce(array_length(v, 1), 0) LOOP
        outcome[v[i]] := v_out[i];
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(c, 1), 0) LOOP
        outcome[c[i]] := c_out[i];
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(d, 1), 0) LOOP
        outcome[d[i]] := d_out[i];
    END LOOP;
    RETURN outcome;
END
$fn$;

-- A voucher's per_user_limit, held by the database (the triggers of 005): for
-- every (voucher, customer) a statement gave a use to, the customer's live
-- rows counted, check_violation (ck_per_user_uses) when over. The voucher
-- rows are locked first (FOR NO KEY UPDATE); right under READ COMMITTED only,
-- so it refuses to run under REPEATABLE READ (SQLSTATE 25000; 007 says why).
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

-- A campaign's perCustomerLimit, held by the database as a voucher's (the
-- triggers of 017): check_violation (ck_campaign_per_customer) when a
-- customer holds more live rows across one campaign than its
-- per_customer_limit; the campaign rows locked first; READ COMMITTED only.
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

-- A voucher's aggregates (027, 030; proto/redis-keys.md, "Aggregates"), moved
-- by every statement that changes its redemption rows: per status, the rows'
-- count and the sum of their customers' last six digits, as Redis keeps them
-- per order state in voucher:{CODE}:agg, in voucher_aggregate (one row per
-- voucher, made by the first statement that needs it). One upsert per voucher
-- a statement changed, after the voucher rows are locked in code order, as the
-- per-customer check locks them: two transactions that touch the same
-- vouchers wait for each other instead of deadlocking. The voucher row is
-- locked, not updated (030: a second update of it in one transaction, beside
-- its used_count's, broke its multixact). A NULL aggregate (not counted)
-- stays NULL. SECURITY DEFINER (the schema's owner, which applies this file):
-- every role that changes redemptions (the writer, a function that runs as a
-- role of its own) keeps the aggregates without a grant on the table, and
-- none may write them otherwise.
CREATE OR REPLACE FUNCTION voucher_redemption_aggregate()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $fn$
DECLARE
    codes    text[];
    statuses text[];
    signs    int[];
    tails    bigint[];
BEGIN
    -- Each row the statement changed, +1 as it is now and -1 as it was.
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(n.voucher_code), array_agg(n.status), array_agg(1),
               array_agg(right(n.customer_id::text, 6)::bigint)
          INTO codes, statuses, signs, tails
          FROM new_rows n;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(o.voucher_code), array_agg(o.status), array_agg(-1),
               array_agg(-right(o.customer_id::text, 6)::bigint)
          INTO codes, statuses, signs, tails
          FROM old_rows o;
    ELSE
        SELECT array_agg(r.code), array_agg(r.status), array_agg(r.sign), array_agg(r.tail)
          INTO codes, statuses, signs, tails
          FROM (SELECT n.voucher_code AS code, n.status, 1 AS sign,
                       right(n.customer_id::text, 6)::bigint AS tail
                  FROM new_rows n
                UNION ALL
                SELECT o.voucher_code, o.status, -1, -right(o.customer_id::text, 6)::bigint
                  FROM old_rows o) r;
    END IF;
    IF codes IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM voucher v
      WHERE v.code = ANY (codes)
      ORDER BY v.code
        FOR NO KEY UPDATE;
    WITH s AS (
        SELECT d.code,
               coalesce(sum(d.sign) FILTER (WHERE d.status = 'RESERVED'), 0) AS reserved,
               coalesce(sum(d.sign) FILTER (WHERE d.status = 'CONFIRMED'), 0) AS confirmed,
               coalesce(sum(d.sign) FILTER (WHERE d.status = 'RELEASED'), 0) AS released,
               coalesce(sum(d.tail) FILTER (WHERE d.status = 'RESERVED'), 0) AS reserved_c,
               coalesce(sum(d.tail) FILTER (WHERE d.status = 'CONFIRMED'), 0) AS confirmed_c,
               coalesce(sum(d.tail) FILTER (WHERE d.status = 'RELEASED'), 0) AS released_c
          FROM unnest(codes, statuses, signs, tails) AS d(code, status, sign, tail)
         GROUP BY d.code
    )
    INSERT INTO voucher_aggregate AS a (code, agg_reserved, agg_confirmed, agg_released,
                                       agg_reserved_customers, agg_confirmed_customers,
                                       agg_released_customers)
    SELECT s.code, s.reserved, s.confirmed, s.released, s.reserved_c, s.confirmed_c,
           s.released_c
      FROM s
     WHERE (s.reserved, s.confirmed, s.released, s.reserved_c, s.confirmed_c, s.released_c)
           <> (0, 0, 0, 0, 0, 0)
     ORDER BY s.code
    ON CONFLICT (code) DO UPDATE
       SET agg_reserved = a.agg_reserved + EXCLUDED.agg_reserved,
           agg_confirmed = a.agg_confirmed + EXCLUDED.agg_confirmed,
           agg_released = a.agg_released + EXCLUDED.agg_released,
           agg_reserved_customers = a.agg_reserved_customers + EXCLUDED.agg_reserved_customers,
           agg_confirmed_customers = a.agg_confirmed_customers + EXCLUDED.agg_confirmed_customers,
           agg_released_customers = a.agg_released_customers + EXCLUDED.agg_released_customers;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE TRIGGER tr_redemption_aggregate_insert
    AFTER INSERT ON voucher_redemption
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION voucher_redemption_aggregate();

CREATE OR REPLACE TRIGGER tr_redemption_aggregate_update
    AFTER UPDATE ON voucher_redemption
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION voucher_redemption_aggregate();

CREATE OR REPLACE TRIGGER tr_redemption_aggregate_delete
    AFTER DELETE ON voucher_redemption
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION voucher_redemption_aggregate();

-- A campaign's aggregates (031; proto/campaigns.md, "Aggregates"), kept as a
-- voucher's above: per status, the count of its campaign_redemption rows and
-- the sum of their customers' last six digits, as Redis keeps them per order
-- state in campaign:{cID}:agg, in campaign_aggregate (one row per campaign,
-- made by the first statement that needs it). The campaign rows are locked
-- first, in id order, as the per-customer check locks them, then the
-- aggregate rows upserted in the same order: every transaction takes a
-- campaign row before its aggregate row, so two that touch the same campaigns
-- wait for each other instead of deadlocking. The writer applies a campaign's
-- events one statement at a time (wr_apply_campaign_events()), each on one
-- campaign, whose row it then updates (used_count) anyway: the lock adds no
-- campaign to what a batch takes, and changes no order between them (a
-- campaign's events are in one partition, applied by one lane). The lock is
-- no update: with used_count's own update the campaign row keeps one updating
-- member per transaction (030). A NULL aggregate (not counted) stays NULL.
-- SECURITY DEFINER, as the voucher's: the writer keeps them without a grant
-- on the table, and none may write them otherwise.
CREATE OR REPLACE FUNCTION campaign_redemption_aggregate()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $fn$
DECLARE
    ids      bigint[];
    statuses text[];
    signs    int[];
    tails    bigint[];
BEGIN
    -- Each row the statement changed, +1 as it is now and -1 as it was.
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(n.campaign_id), array_agg(n.status), array_agg(1),
               array_agg(right(n.customer_id::text, 6)::bigint)
          INTO ids, statuses, signs, tails
          FROM new_rows n;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(o.campaign_id), array_agg(o.status), array_agg(-1),
               array_agg(-right(o.customer_id::text, 6)::bigint)
          INTO ids, statuses, signs, tails
          FROM old_rows o;
    ELSE
        SELECT array_agg(r.id), array_agg(r.status), array_agg(r.sign), array_agg(r.tail)
          INTO ids, statuses, signs, tails
          FROM (SELECT n.campaign_id AS id, n.status, 1 AS sign,
                       right(n.customer_id::text, 6)::bigint AS tail
                  FROM new_rows n
                UNION ALL
                SELECT o.campaign_id, o.status, -1, -right(o.customer_id::text, 6)::bigint
                  FROM old_rows o) r;
    END IF;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM campaign c
      WHERE c.id = ANY (ids)
      ORDER BY c.id
        FOR NO KEY UPDATE;
    WITH s AS (
        SELECT d.id,
               coalesce(sum(d.sign) FILTER (WHERE d.status = 'RESERVED'), 0) AS reserved,
               coalesce(sum(d.sign) FILTER (WHERE d.status = 'CONFIRMED'), 0) AS confirmed,
               coalesce(sum(d.sign) FILTER (WHERE d.status = 'RELEASED'), 0) AS released,
               coalesce(sum(d.tail) FILTER (WHERE d.status = 'RESERVED'), 0) AS reserved_c,
               coalesce(sum(d.tail) FILTER (WHERE d.status = 'CONFIRMED'), 0) AS confirmed_c,
               coalesce(sum(d.tail) FILTER (WHERE d.status = 'RELEASED'), 0) AS released_c
          FROM unnest(ids, statuses, signs, tails) AS d(id, status, sign, tail)
         GROUP BY d.id
    )
    INSERT INTO campaign_aggregate AS a (campaign_id, agg_reserved, agg_confirmed, agg_released,
                                        agg_reserved_customers, agg_confirmed_customers,
                                        agg_released_customers)
    SELECT s.id, s.reserved, s.confirmed, s.released, s.reserved_c, s.confirmed_c, s.released_c
      FROM s
     WHERE (s.reserved, s.confirmed, s.released, s.reserved_c, s.confirmed_c, s.released_c)
           <> (0, 0, 0, 0, 0, 0)
     ORDER BY s.id
    ON CONFLICT (campaign_id) DO UPDATE
       SET agg_reserved = a.agg_reserved + EXCLUDED.agg_reserved,
           agg_confirmed = a.agg_confirmed + EXCLUDED.agg_confirmed,
           agg_released = a.agg_released + EXCLUDED.agg_released,
           agg_reserved_customers = a.agg_reserved_customers + EXCLUDED.agg_reserved_customers,
           agg_confirmed_customers = a.agg_confirmed_customers + EXCLUDED.agg_confirmed_customers,
           agg_released_customers = a.agg_released_customers + EXCLUDED.agg_released_customers;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE TRIGGER tr_campaign_redemption_aggregate_insert
    AFTER INSERT ON campaign_redemption
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION campaign_redemption_aggregate();

CREATE OR REPLACE TRIGGER tr_campaign_redemption_aggregate_update
    AFTER UPDATE ON campaign_redemption
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION campaign_redemption_aggregate();

CREATE OR REPLACE TRIGGER tr_campaign_redemption_aggregate_delete
    AFTER DELETE ON campaign_redemption
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION campaign_redemption_aggregate();

-- Who may run them: the writer's functions are the writer's alone (EXECUTE is
-- PUBLIC's by default; 008_daemon_roles.sql says why), and the campaigns'
-- per-customer check runs as the writer, the triggers' invoker. The
-- vouchers' per-user check keeps PostgreSQL's default, as 005 made it.
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
REVOKE ALL ON FUNCTION campaign_redemption_per_customer_check() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION campaign_redemption_per_customer_check() TO voucher_writer;

-- Direct mode (proto/direct-mode.md): a direct voucher's requests, each one
-- transaction in one call. The functions are SECURITY DEFINER, owned by
-- voucher_direct (roles.sql: no login; its table grants are 025's), with the
-- search_path fixed so that nothing the caller creates is found first. The
-- gateway may execute dr_reserve, dr_confirm, dr_cancel and dr_quote and
-- write no table itself; the reconciler dr_expire and the outbox's two.
--
-- Times are the gateway's (or the reconciler's), ms since the epoch, as the
-- flash path's are. Every answer is the flash path's for the same situation
-- (proto/openapi.yaml); the gateway maps `answer` to its status and error:
--   RESERVED 201; RETRY 201 replayed (reserve) or 200 replayed (confirm,
--   cancel); CONFIRMED 200; RELEASED 200; ORDER_CONFLICT, HOLD_EXPIRED,
--   OUT_OF_STOCK, ALREADY_USED, ALREADY_CONFIRMED 409; NOT_ELIGIBLE:REASON
--   422 with that reason; NOT_FOUND 404; NOT_DIRECT: the voucher is a flash
--   one, which the gateway decides in Redis and must never send here (the
--   function refuses it and changes nothing).
-- A refusal leaves nothing behind: no row, no use, no outbox row. Every
-- change writes exactly one outbox row (the event the gateway built, or for
-- an expiry the one the function builds) and notifies voucher_outbox.

-- The ms since the epoch of a time, and back: exact to the millisecond
-- (to_timestamp() goes through a double).
CREATE OR REPLACE FUNCTION dr_ts(p_ms bigint)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = public, pg_temp
AS $fn$ SELECT timestamptz 'epoch' + p_ms * interval '1 millisecond' $fn$;

CREATE OR REPLACE FUNCTION dr_ms(p_at timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = public, pg_temp
AS $fn$ SELECT (extract(epoch FROM p_at) * 1000)::bigint $fn$;

-- Why a voucher takes no new order at p_now, as vc_voucher_check() says it
-- (common/vc_voucher.c: inactive first, then the window), or NULL.
CREATE OR REPLACE FUNCTION dr_ineligible(p_active boolean, p_starts timestamptz,
                                         p_ends timestamptz, p_now timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = public, pg_temp
AS $fn$
    SELECT CASE WHEN NOT p_active THEN 'NOT_ELIGIBLE:INACTIVE'
                WHEN p_now < p_starts THEN 'NOT_ELIGIBLE:NOT_STARTED'
                WHEN p_now >= p_ends THEN 'NOT_ELIGIBLE:EXPIRED' END
$fn$;

-- Reserves a use of a direct voucher for an order: the insert of the
-- redemption first (ON CONFLICT on the unique order_id: two requests with one
-- orderId meet there, the second waits for the first's commit and inserts
-- nothing), then the conditional UPDATE of used_count. p_discount is the
-- gateway's quote from the voucher's rules (as flash mode's), p_event the
-- VoucherReserved it publishes in flash mode, stored in the outbox when a use
-- was taken. Answers, with the order's figures when it holds a use:
--   RESERVED        taken now; remaining is what is left after it
--   RETRY           the orderId holds a use already, for this code, customer
--                   and amount (RESERVED or CONFIRMED): its row's figures,
--                   nothing taken, whatever the rules say by now
--   ORDER_CONFLICT  the orderId is another code's, customer's or amount's, or
--                   a campaign code's; amount is its row's orderAmount when
--                   code and customer are this request's
--   HOLD_EXPIRED    the orderId's reservation was released
--   NOT_ELIGIBLE:INACTIVE / :NOT_STARTED / :EXPIRED, OUT_OF_STOCK,
--   ALREADY_USED (the per-customer trigger of 005), NOT_FOUND, NOT_DIRECT.
CREATE OR REPLACE FUNCTION dr_reserve(p_code text, p_order text, p_customer text,
                                      p_amount bigint, p_discount bigint, p_now_ms bigint,
                                      p_held_until_ms bigint, p_event text)
RETURNS TABLE (answer text, discount bigint, amount bigint, held_until_ms bigint,
               remaining bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
DECLARE
    v_now      timestamptz := dr_ts(p_now_ms);
    v_customer bigint := p_customer::bigint;
    v          record;
    r          record;
    v_id       bigint;
    v_left     bigint;
    v_refusal  text;
    v_cons     text;
BEGIN
    SELECT x.mode INTO v FROM voucher x WHERE x.code = p_code;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'NOT_FOUND', NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    IF v.mode <> 'direct' THEN
        RETURN QUERY SELECT 'NOT_DIRECT', NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    -- An orderId belongs to one code, a campaign's one-time codes included.
    IF EXISTS (SELECT 1 FROM campaign_redemption c WHERE c.order_id = p_order) THEN
        RETURN QUERY SELECT 'ORDER_CONFLICT', NULL::bigint, NULL::bigint, NULL::bigint,
                            NULL::bigint;
        RETURN;
    END IF;

    -- The insert, the use and the event, or none of them: a refusal raises
    -- inside the block, and its subtransaction takes the insert back.
    BEGIN
        INSERT INTO voucher_redemption AS x
               (voucher_code, customer_id, order_id, status, discount_amount, order_amount,
                held_until, created_at, updated_at)
        VALUES (p_code, v_customer, p_order, 'RESERVED', p_discount, p_amount,
                dr_ts(p_held_until_ms), v_now, v_now)
        ON CONFLICT (order_id) DO NOTHING
        RETURNING x.id INTO v_id;
        IF v_id IS NOT NULL THEN
            UPDATE voucher x SET used_count = x.used_count + 1
             WHERE x.code = p_code AND x.mode = 'direct' AND x.active
               AND v_now >= x.starts_at AND v_now < x.ends_at
               AND x.used_count < x.total_limit
            RETURNING x.total_limit - x.used_count INTO v_left;
            IF NOT FOUND THEN
                SELECT coalesce(dr_ineligible(x.active, x.starts_at, x.ends_at, v_now),
                                'OUT_OF_STOCK')
                  INTO v_refusal FROM voucher x WHERE x.code = p_code;
                RAISE EXCEPTION 'dr_reserve refused: %', v_refusal USING ERRCODE = 'VCDR1';
            END IF;
            INSERT INTO event_outbox (event_key, payload) VALUES (p_code, p_event);
            PERFORM pg_notify('voucher_outbox', '');
        END IF;
    EXCEPTION
        WHEN SQLSTATE 'VCDR1' THEN
            RETURN QUERY SELECT v_refusal, NULL::bigint, NULL::bigint, NULL::bigint,
                                NULL::bigint;
            RETURN;
        WHEN check_violation THEN
            GET STACKED DIAGNOSTICS v_cons = CONSTRAINT_NAME;
            IF v_cons IS DISTINCT FROM 'ck_per_user_uses' THEN
                RAISE;
            END IF;
            -- The rules refuse before the customer's limit, as in flash mode,
            -- where the gateway judges them before Redis counts.
            SELECT coalesce(dr_ineligible(x.active, x.starts_at, x.ends_at, v_now),
                            'ALREADY_USED')
              INTO v_refusal FROM voucher x WHERE x.code = p_code;
            RETURN QUERY SELECT v_refusal, NULL::bigint, NULL::bigint, NULL::bigint,
                                NULL::bigint;
            RETURN;
    END;
    IF v_id IS NOT NULL THEN
        RETURN QUERY SELECT 'RESERVED', p_discount, p_amount, p_held_until_ms, v_left;
        RETURN;
    END IF;

    -- The orderId was there (or came first and committed while this waited).
    SELECT x.voucher_code, x.customer_id, x.status, x.discount_amount, x.order_amount,
           x.held_until
      INTO r FROM voucher_redemption x WHERE x.order_id = p_order;
    IF r.voucher_code <> p_code OR r.customer_id <> v_customer THEN
        answer := 'ORDER_CONFLICT';
    ELSIF r.order_amount <> p_amount THEN
        RETURN QUERY SELECT 'ORDER_CONFLICT', NULL::bigint, r.order_amount, NULL::bigint,
                            NULL::bigint;
        RETURN;
    ELSIF r.status = 'RELEASED' THEN
        answer := 'HOLD_EXPIRED';
    ELSE
        RETURN QUERY SELECT 'RETRY', r.discount_amount, r.order_amount, dr_ms(r.held_until),
                            (SELECT (x.total_limit - x.used_count)::bigint
                               FROM voucher x WHERE x.code = p_code);
        RETURN;
    END IF;
    RETURN QUERY SELECT answer, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint;
END
$fn$;

-- The redemption of a direct voucher's order, locked (FOR UPDATE), for a
-- confirm or a cancel; found NULL when the code is unknown, a flash
-- voucher's, or the order is not this code's (status then says which:
-- NOT_FOUND or NOT_DIRECT).
CREATE OR REPLACE FUNCTION dr_lock_order(p_code text, p_order text, OUT status text,
                                         OUT row_id bigint, OUT customer_id bigint,
                                         OUT discount bigint, OUT amount bigint,
                                         OUT held_until timestamptz,
                                         OUT confirmed_amount bigint,
                                         OUT confirmed_discount bigint)
LANGUAGE plpgsql
SET search_path = public, pg_temp
AS $fn$
DECLARE
    v_mode text;
BEGIN
    SELECT x.mode INTO v_mode FROM voucher x WHERE x.code = p_code;
    IF v_mode IS NULL OR v_mode <> 'direct' THEN
        status := CASE WHEN v_mode IS NULL THEN 'NOT_FOUND' ELSE 'NOT_DIRECT' END;
        RETURN;
    END IF;
    SELECT x.status, x.id, x.customer_id, x.discount_amount, x.order_amount, x.held_until,
           x.confirmed_order_amount, x.confirmed_discount_amount
      INTO status, row_id, customer_id, discount, amount, held_until, confirmed_amount,
           confirmed_discount
      FROM voucher_redemption x
     WHERE x.order_id = p_order AND x.voucher_code = p_code
       FOR UPDATE;
    IF NOT FOUND THEN
        status := 'NOT_FOUND';
    END IF;
END
$fn$;

-- Confirms a direct voucher's order, as confirm.lua does a flash one's.
-- p_final_amount is the order's final total, NULL for a confirm without one;
-- p_final_discount the gateway's discount for that total from the voucher's
-- rules, NULL when the rules refuse it (below the minimum). p_event is the
-- VoucherConfirmed the gateway would publish, stored when the row changed.
-- Answers, with the figures the answer shows and the row's status:
--   CONFIRMED          RESERVED -> CONFIRMED now (one outbox row); discount
--                      and amount are the figures it is confirmed at
--   RETRY              already CONFIRMED, at this total or without one: 200
--                      replayed with its figures, nothing written
--   ALREADY_CONFIRMED  CONFIRMED at another total: 409 with those figures
--   HOLD_EXPIRED       released, or held past held_until (status says which)
--   NOT_ELIGIBLE:ORDER_TOO_SMALL  another total the rules refused: 422 with
--                      the reservation's figures (the quote); nothing changed
--   NOT_FOUND, NOT_DIRECT
CREATE OR REPLACE FUNCTION dr_confirm(p_code text, p_order text, p_final_amount bigint,
                                      p_final_discount bigint, p_now_ms bigint, p_event text)
RETURNS TABLE (answer text, discount bigint, amount bigint, held_until_ms bigint,
               status text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
DECLARE
    o      record := dr_lock_order(p_code, p_order);
    v_paid bigint;
    v_disc bigint;
BEGIN
    IF o.row_id IS NULL THEN
        RETURN QUERY SELECT o.status, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text;
        RETURN;
    END IF;
    IF o.status = 'CONFIRMED' THEN
        -- Confirmed without a total: at the reservation's figures.
        v_paid := coalesce(o.confirmed_amount, o.amount);
        v_disc := coalesce(o.confirmed_discount, o.discount);
        RETURN QUERY SELECT CASE WHEN p_final_amount IS NOT NULL AND p_final_amount <> v_paid
                                 THEN 'ALREADY_CONFIRMED' ELSE 'RETRY' END,
                            v_disc, v_paid, dr_ms(o.held_until), o.status;
        RETURN;
    END IF;
    IF o.status <> 'RESERVED' OR o.held_until < dr_ts(p_now_ms) THEN
        RETURN QUERY SELECT 'HOLD_EXPIRED', NULL::bigint, NULL::bigint, dr_ms(o.held_until),
                            o.status;
        RETURN;
    END IF;
    v_disc := o.discount;
    IF p_final_amount IS NOT NULL AND p_final_amount <> o.amount THEN
        IF p_final_discount IS NULL THEN
            RETURN QUERY SELECT 'NOT_ELIGIBLE:ORDER_TOO_SMALL', o.discount, o.amount,
                                dr_ms(o.held_until), o.status;
            RETURN;
        END IF;
        v_disc := p_final_discount;
    END IF;
    UPDATE voucher_redemption x
       SET status = 'CONFIRMED', updated_at = dr_ts(p_now_ms),
           confirmed_order_amount = p_final_amount,
           confirmed_discount_amount = CASE WHEN p_final_amount IS NOT NULL THEN v_disc END
     WHERE x.id = o.row_id;
    INSERT INTO event_outbox (event_key, payload) VALUES (p_code, p_event);
    PERFORM pg_notify('voucher_outbox', '');
    RETURN QUERY SELECT 'CONFIRMED', v_disc, coalesce(p_final_amount, o.amount),
                        dr_ms(o.held_until), 'CONFIRMED'::text;
END
$fn$;

-- Cancels a direct voucher's order, held or confirmed, as the flash cancel
-- does: RELEASED with release_reason CANCELLED, its use back (used_count - 1),
-- one outbox row (p_event, the VoucherReleased the gateway would publish).
-- Answers RELEASED, RETRY (already RELEASED, by a cancel or an expiry: 200
-- replayed, nothing written), NOT_FOUND, NOT_DIRECT; status is the row's
-- status before the call.
CREATE OR REPLACE FUNCTION dr_cancel(p_code text, p_order text, p_now_ms bigint, p_event text)
RETURNS TABLE (answer text, status text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
DECLARE
    o record := dr_lock_order(p_code, p_order);
BEGIN
    IF o.row_id IS NULL THEN
        RETURN QUERY SELECT o.status, NULL::text;
        RETURN;
    END IF;
    IF o.status = 'RELEASED' THEN
        RETURN QUERY SELECT 'RETRY', o.status;
        RETURN;
    END IF;
    UPDATE voucher_redemption x
       SET status = 'RELEASED', release_reason = 'CANCELLED', updated_at = dr_ts(p_now_ms)
     WHERE x.id = o.row_id;
    UPDATE voucher x SET used_count = x.used_count - 1 WHERE x.code = p_code;
    INSERT INTO event_outbox (event_key, payload) VALUES (p_code, p_event);
    PERFORM pg_notify('voucher_outbox', '');
    RETURN QUERY SELECT 'RELEASED', o.status;
END
$fn$;

-- What a quote of a direct voucher needs beyond the gateway's cached rules:
-- the uses left now (total_limit - used_count). Reads only. Answers OK,
-- NOT_FOUND or NOT_DIRECT; remaining is NULL unless OK.
CREATE OR REPLACE FUNCTION dr_quote(p_code text, p_now_ms bigint)
RETURNS TABLE (answer text, remaining bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    SELECT coalesce(q.answer, 'NOT_FOUND'), q.remaining
      FROM (SELECT 1) one
      LEFT JOIN (SELECT CASE WHEN x.mode = 'direct' THEN 'OK' ELSE 'NOT_DIRECT' END AS answer,
                        CASE WHEN x.mode = 'direct'
                             THEN (x.total_limit - x.used_count)::bigint END AS remaining
                   FROM voucher x WHERE x.code = p_code) q ON true
$fn$;

-- The reconciler's expiry of direct vouchers' holds: up to p_limit RESERVED
-- rows of direct vouchers whose held_until + p_grace_ms is before p_now_ms,
-- oldest first, rows another transaction holds skipped (a confirm or cancel
-- under way decides them), each RELEASED with release_reason EXPIRED, its
-- use back, and one outbox row: the VoucherReleased the reconciler publishes
-- for a flash hold's expiry (proto/events.md), built here. All in the
-- caller's one transaction. Returns the orders released.
CREATE OR REPLACE FUNCTION dr_expire(p_limit int, p_now_ms bigint, p_grace_ms bigint)
RETURNS TABLE (code text, order_id text, customer_id bigint, held_until_ms bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
DECLARE
    v_now timestamptz := dr_ts(p_now_ms);
BEGIN
    -- One statement: every part of a WITH that writes runs, read or not.
    RETURN QUERY
    WITH due AS (
        SELECT r.id FROM voucher_redemption r JOIN voucher v ON v.code = r.voucher_code
         WHERE r.status = 'RESERVED' AND v.mode = 'direct'
           AND r.held_until < v_now - p_grace_ms * interval '1 millisecond'
         ORDER BY r.held_until, r.id
         LIMIT p_limit
           FOR UPDATE OF r SKIP LOCKED
    ), released AS (
        UPDATE voucher_redemption r
           SET status = 'RELEASED', release_reason = 'EXPIRED', updated_at = v_now
          FROM due WHERE r.id = due.id
        RETURNING r.id, r.voucher_code, r.order_id, r.customer_id, r.held_until
    ), uses_back AS (
        UPDATE voucher x SET used_count = x.used_count - n.uses
          FROM (SELECT e.voucher_code, count(*) AS uses FROM released e
                 GROUP BY e.voucher_code) n
         WHERE x.code = n.voucher_code
        RETURNING x.code
    ), events AS (
        INSERT INTO event_outbox (event_key, payload)
        SELECT e.voucher_code,
               '{"type":"VoucherReleased","version":1,"code":' || to_json(e.voucher_code)::text ||
               ',"customerId":' || e.customer_id || ',"orderId":' ||
               to_json(e.order_id)::text || ',"releasedAt":' ||
               to_json(to_char(v_now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text ||
               ',"reason":"EXPIRED"}'
          FROM released e ORDER BY e.held_until, e.id
        RETURNING 1
    )
    SELECT e.voucher_code::text, e.order_id::text, e.customer_id, dr_ms(e.held_until)
      FROM released e ORDER BY e.held_until, e.id;
    IF FOUND THEN
        PERFORM pg_notify('voucher_outbox', '');
    END IF;
END
$fn$;

-- The relay's read: up to p_limit unsent events, in id order.
CREATE OR REPLACE FUNCTION dr_outbox_take(p_limit int)
RETURNS TABLE (id bigint, event_key text, payload text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    SELECT o.id, o.event_key, o.payload FROM event_outbox o
     WHERE o.sent_at IS NULL ORDER BY o.id LIMIT p_limit
$fn$;

-- The relay's mark, after Kafka's delivery report: returns how many of
-- p_ids were unsent until now.
CREATE OR REPLACE FUNCTION dr_outbox_sent(p_ids bigint[])
RETURNS bigint
LANGUAGE sql SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    WITH marked AS (
        UPDATE event_outbox o SET sent_at = now()
         WHERE o.id = ANY (p_ids) AND o.sent_at IS NULL
        RETURNING 1)
    SELECT count(*) FROM marked
$fn$;

-- The relay's metrics (reconciler/rc_outbox.c): how many rows are unsent
-- and how old the oldest is, in ms (0 when none). Both from the partial
-- index of the unsent rows.
CREATE OR REPLACE FUNCTION dr_outbox_stats()
RETURNS TABLE (unsent bigint, oldest_ms bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    SELECT count(*),
           coalesce((extract(epoch FROM now() - min(o.created_at)) * 1000)::bigint, 0)
      FROM event_outbox o WHERE o.sent_at IS NULL
$fn$;

-- The relay's clean-up: deletes up to p_limit rows sent more than
-- p_retention_ms ago, lowest id first (ids and sending times rise together,
-- so the primary key finds them), and returns how many. An unsent row is
-- never deleted, however old.
CREATE OR REPLACE FUNCTION dr_outbox_prune(p_retention_ms bigint, p_limit int)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER
SET search_path = public, pg_temp
AS $fn$
    WITH gone AS (
        DELETE FROM event_outbox o
         WHERE o.id IN (SELECT x.id FROM event_outbox x
                         WHERE x.sent_at < now() - p_retention_ms * interval '1 millisecond'
                         ORDER BY x.id LIMIT p_limit)
        RETURNING 1)
    SELECT count(*) FROM gone
$fn$;

-- Their owner and who may run them. The helpers (dr_ts, dr_ms,
-- dr_ineligible, dr_lock_order) run inside the others, as voucher_direct.
DO $$
DECLARE
    f regprocedure;
    who text;
BEGIN
    FOR f IN SELECT p.oid::regprocedure
               FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = current_schema() AND p.proname LIKE 'dr\_%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO voucher_direct', f);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        who := CASE WHEN f::text ~ '^dr_(reserve|confirm|cancel|quote)\(' THEN 'voucher_gateway'
                    WHEN f::text ~ '^dr_(expire|outbox_(take|sent|stats|prune))\('
                    THEN 'voucher_reconciler'
                    END;
        IF who IS NOT NULL THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, who);
        END IF;
    END LOOP;
END
$$;
