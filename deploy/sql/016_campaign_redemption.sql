-- Redemption of one-time campaign codes (proto/campaigns.md, "PostgreSQL" and
-- "Events"): one campaign_redemption row per order, as voucher_redemption, and
-- the writer's batch applies a campaign's events (those with campaignId) to it.
--
-- The last line of defence for "a code has one use, never two" is the partial
-- unique index on code: a second live row for a code raises 23505 and the
-- writer dead-letters that event (class constraint), as ck_used refuses a
-- voucher's oversell. campaign.used_count moves with the rows that really
-- changed, and ck_campaign_used (013) keeps it within total_count.

CREATE TABLE campaign_redemption (
    order_id                  VARCHAR(64) NOT NULL CONSTRAINT uq_campaign_redemption_order PRIMARY KEY,
    code                      VARCHAR(32) COLLATE "C" NOT NULL,
    campaign_id               BIGINT      NOT NULL,
    customer_id               BIGINT      NOT NULL,
    status                    VARCHAR(16) NOT NULL
                              CONSTRAINT ck_campaign_redemption_status
                              CHECK (status IN ('RESERVED', 'CONFIRMED', 'RELEASED')),
    discount_amount           BIGINT      NOT NULL DEFAULT 0,
    order_amount              BIGINT      NOT NULL DEFAULT 0,
    held_until                TIMESTAMPTZ,
    confirmed_discount_amount BIGINT,
    confirmed_order_amount    BIGINT,
    release_reason            VARCHAR(16),
    created_at                TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at                TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One live use per code, whatever the events say.
CREATE UNIQUE INDEX uq_campaign_redemption_live_code ON campaign_redemption (code)
    WHERE status <> 'RELEASED';
-- The reconciler's counts per campaign, and a customer's uses across it.
CREATE INDEX ix_campaign_redemption_campaign ON campaign_redemption (campaign_id, status);
CREATE INDEX ix_campaign_redemption_customer ON campaign_redemption (campaign_id, customer_id);

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

-- The writer's batch with the campaigns (the 11th array: campaignId, 0 for a
-- voucher's event). The vouchers' events go to the batch function of 009
-- unchanged, in their order; a campaign's to wr_apply_campaign_events(); the
-- outcomes are put back in the events' order. The two touch different rows
-- (an orderId is one voucher's or one code's: the gateway's claim, and the
-- conflict check above), so applying one group before the other changes no
-- outcome. A batch without campaign events calls 009's function as it is.
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
    v_out smallint[];
    c_out smallint[];
    outcome smallint[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM unnest(p_campaign) x WHERE x > 0) THEN
        RETURN wr_apply_batch(p_type, p_code, p_customer, p_order, p_discount, p_amount,
                              p_at_ms, p_held_ms, p_reason, p_replayed_from);
    END IF;
    SELECT coalesce(array_agg(n ORDER BY n) FILTER (WHERE x = 0), '{}'),
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
    -- The letters a replay of a campaign's event settled (as 009 for a voucher's).
    UPDATE dead_letter d SET state = 'replayed', settled_at = now()
      FROM unnest(c, c_out) AS e(n, oc)
     WHERE p_replayed_from[e.n] <> '' AND e.oc <> 5 AND d.state = 'parked'
       AND d.dlt_topic || '/' || d.dlt_partition || '/' || d.dlt_offset = p_replayed_from[e.n];
    outcome := array_fill(0::smallint, ARRAY[array_length(p_type, 1)]);
    FOR i IN 1 .. coalesce(array_length(v, 1), 0) LOOP
        outcome[v[i]] := v_out[i];
    END LOOP;
    FOR i IN 1 .. array_length(c, 1) LOOP
        outcome[c[i]] := c_out[i];
    END LOOP;
    RETURN outcome;
END
$fn$;

-- The writer applies; the reconciler counts and reads the live rows; the
-- gateway reads nothing of it (its campaign lookups read campaign_code).
REVOKE ALL ON campaign_redemption FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON campaign_redemption TO voucher_writer;
GRANT SELECT ON campaign_redemption TO voucher_reconciler;
GRANT SELECT (id, used_count), UPDATE (used_count) ON campaign TO voucher_writer;
GRANT SELECT (order_id) ON voucher_redemption TO voucher_writer;

-- The two functions, like 008's and 009's: the writer's alone.
REVOKE ALL ON FUNCTION wr_apply_campaign_events(smallint[], text[], bigint[], text[], bigint[],
    bigint[], bigint[], bigint[], text[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wr_apply_campaign_events(smallint[], text[], bigint[], text[], bigint[],
    bigint[], bigint[], bigint[], text[], bigint[]) TO voucher_writer;
REVOKE ALL ON FUNCTION wr_apply_batch(smallint[], text[], bigint[], text[], bigint[], bigint[],
    bigint[], bigint[], text[], text[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wr_apply_batch(smallint[], text[], bigint[], text[], bigint[], bigint[],
    bigint[], bigint[], text[], text[], bigint[]) TO voucher_writer;
