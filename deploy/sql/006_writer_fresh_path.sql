-- A third way to apply a batch, for the batch a flash sale makes: every order
-- in it once, each event the next step of its order. 003_writer_apply.sql
-- describes the arguments, the outcomes and the two other implementations.
--
-- wr_apply_events_fresh() applies a batch in which each orderId comes once
-- and every event finds its order where a live stream leaves it:
-- VoucherReserved finds no row, VoucherConfirmed a RESERVED row,
-- VoucherReleased a RESERVED or CONFIRMED one. Then every outcome is 1
-- (applied) and the walk of wr_apply_events_seq() would do exactly this:
-- insert the reservations, move the others one step, and change used_count
-- by the reservations less the releases. No window function, no per-order
-- plan: one INSERT and two UPDATEs in one statement, whose row counts say
-- whether the batch was such a batch after all.
--
-- It declines (returns NULL, having changed nothing) when an orderId comes
-- twice, when a voucher is unknown, when used_count could leave
-- [0, total_limit] somewhere in the batch (the same bounds as the set path:
-- + every reservation, - every release, from the count before the batch),
-- or when a row was not where the batch expected it (a redelivery, an event
-- out of order, another voucher's orderId). The voucher rows are locked
-- before the bounds are read, so the count cannot move meanwhile.

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
