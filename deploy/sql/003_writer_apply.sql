-- The writer's batch apply: one call applies a batch of voucher events, in
-- order, with one round trip. proto/redemption-states.md is the state machine
-- this function implements; writer/wr_state.c holds the same table for tests.
--
-- Arguments are parallel arrays, one element per event, in partition order:
--   p_type      1 VoucherReserved, 2 VoucherConfirmed, 3 VoucherReleased
--   p_code      voucher code
--   p_customer  customerId
--   p_order     orderId
--   p_discount  discountAmount (VoucherReserved; else 0)
--   p_amount    orderAmount (VoucherReserved; else 0)
--   p_at_ms     reservedAt / confirmedAt / releasedAt, ms since the epoch
--   p_held_ms   heldUntil (VoucherReserved), ms since the epoch; 0 when absent
--
-- Returns one outcome per event:
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
--
-- So the status only ever moves forward, RESERVED < CONFIRMED < RELEASED,
-- and the final row depends on which events were seen, not on their order or
-- how often each came: redelivery and reordering converge.
--
-- Raises (and so applies nothing of the call) when an event can never apply:
--   23503 foreign_key_violation  unknown voucher
--   23514 check_violation        used_count would leave [0, total_limit]
-- The writer then bisects the batch under savepoints to find the event.
--
-- Two implementations of the same semantics:
--
-- wr_apply_events_seq() walks the events one by one. used_count is tracked
-- per voucher while the batch runs and written once per voucher at the end;
-- each voucher row is locked (FOR UPDATE) when first seen, so the running
-- count is exact and a violation is raised at the very event that causes it,
-- as if each event were applied by its own statement.
--
-- wr_apply_events_set() applies the whole batch with one set-based statement
-- (a few times faster). Because the row an order ends in depends only on the
-- set of event types seen, it can be computed per order; each event's outcome
-- comes from the status before it (the existing row and the earlier events of
-- the batch). It declines (returns NULL) when it cannot be exactly the same
-- as the walk: a voucher close enough to a limit that an event in the middle
-- of the batch could cross it, an unknown voucher, or one orderId under two
-- codes in the batch. If a row changed under it meanwhile (e.g. the
-- reconciler released it), it raises serialization_failure, which the writer
-- retries.
--
-- wr_apply_events() is what the writer calls: the set-based statement, or the
-- walk when that declines. (006_writer_fresh_path.sql replaces it with one that
-- first tries a third, cheaper implementation for live-stream batches.)

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
            UPDATE voucher_redemption SET status = 'CONFIRMED', updated_at = at
             WHERE order_id = p_order[i] AND voucher_code = p_code[i] AND status = 'RESERVED';
            IF FOUND THEN
                res := 1;
            ELSE
                INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status,
                                                created_at, updated_at)
                VALUES (p_code[i], p_customer[i], p_order[i], 'CONFIRMED', at, at)
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
    outcome := wr_apply_events_set(p_type, p_code, p_customer, p_order, p_discount, p_amount,
                                   p_at_ms, p_held_ms);
    IF outcome IS NULL THEN
        outcome := wr_apply_events_seq(p_type, p_code, p_customer, p_order, p_discount,
                                       p_amount, p_at_ms, p_held_ms);
    END IF;
    RETURN outcome;
END
$fn$;
