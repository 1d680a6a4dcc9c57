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
-- used_count is tracked per voucher while the batch runs and written once
-- per voucher at the end; each voucher row is locked (FOR UPDATE) when first
-- seen, so the running count is exact and a violation is raised at the very
-- event that causes it, as if each event were applied by its own statement.

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
