-- Dead letters are parked, not lost (issue 13, part 2).
--
-- The writer records every dead letter here after the dead-letter topic
-- acknowledged it and before it stores the offsets of its batch. The
-- reconciler reads the parked orders and never releases them by itself; the
-- operator replays (`voucher-writer dlt replay`) or discards
-- (`voucher-writer dlt discard`) each letter, and every such action is
-- recorded in dead_letter_action. proto/redemption-states.md ("Dead letters
-- are parked") is the contract; deploy/README.md the runbook.

-- Why each release happened (the VoucherReleased event's reason: CANCELLED,
-- EXPIRED, UNDELIVERED, DISCARDED, REPAIR...). Set by the writer in the
-- transaction that releases the row; NULL for rows not released, and for
-- rows released before this migration.
ALTER TABLE voucher_redemption
    ADD COLUMN release_reason VARCHAR(32);

CREATE TABLE dead_letter (
    id                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- What it is about, from the event when it decodes (else the message key, no order).
    voucher_code       TEXT,
    order_id           VARCHAR(64),
    event_type         VARCHAR(32),
    -- Where the letter is. NULL when the topic refused even a reference to it.
    dlt_topic          TEXT        NOT NULL,
    dlt_partition      INT,
    dlt_offset         BIGINT,
    -- Where the event was read: one letter per event, however many copies a
    -- crash between producing the letter and recording it made.
    original_topic     TEXT        NOT NULL,
    original_partition INT         NOT NULL,
    original_offset    BIGINT      NOT NULL,
    error_class        VARCHAR(32) NOT NULL,
    error_message      TEXT        NOT NULL,
    -- The letter this event was a replay of ("voucher-events.dlt/P/O"), if any.
    replayed_from      TEXT,
    state              VARCHAR(16) NOT NULL DEFAULT 'parked'
                       CONSTRAINT ck_dead_letter_state
                       CHECK (state IN ('parked', 'replayed', 'discarded', 'superseded')),
    parked_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    replay_sent_at     TIMESTAMPTZ, -- when `dlt replay` put it back on the main topic
    settled_at         TIMESTAMPTZ, -- when it left 'parked'
    CONSTRAINT uq_dead_letter_original UNIQUE (original_topic, original_partition, original_offset)
);

-- The reconciler's read: parked and discarded letters per voucher.
CREATE INDEX ix_dead_letter_open ON dead_letter (voucher_code)
    WHERE state IN ('parked', 'discarded');
CREATE INDEX ix_dead_letter_dlt ON dead_letter (dlt_topic, dlt_partition, dlt_offset);
CREATE INDEX ix_dead_letter_order ON dead_letter (order_id);

-- Every operator action on a letter: what, when, who, and what came of it.
CREATE TABLE dead_letter_action (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    letter_id BIGINT      NOT NULL REFERENCES dead_letter (id),
    action    VARCHAR(16) NOT NULL CONSTRAINT ck_dead_letter_action
              CHECK (action IN ('replay', 'discard')),
    operator  TEXT        NOT NULL,
    at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    outcome   VARCHAR(16) NOT NULL, -- sent, noop, refused, discarded
    detail    TEXT        NOT NULL DEFAULT ''
);
CREATE INDEX ix_dead_letter_action_letter ON dead_letter_action (letter_id);

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

-- The writer's batch: wr_apply_events() (the latest copies, 003 to 007), and
-- in the same transaction what only the events carry that the apply paths
-- do not take:
--  * the reason of each release that took effect (outcome applied or
--    tombstone; the first of an order in batch order);
--  * the letters whose replay took effect (every outcome but a conflict: a
--    no-op means the event was already in) are marked replayed.
-- p_reason and p_replayed_from run along the other arrays ('' for none).
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
