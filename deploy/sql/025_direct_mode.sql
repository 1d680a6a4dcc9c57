-- Direct mode (issue 46, proto/direct-mode.md), slice 1: a voucher's mode and
-- the outbox its events leave PostgreSQL through. Schema only, as every
-- migration from 025 on (functions.sql, header): the functions that use it,
-- dr_reserve and the others, their owner voucher_direct and their grants are
-- in functions.sql.
--
-- voucher.mode: 'flash', decided in Redis, published by the gateway, applied
-- by the writer, as every voucher was before; or 'direct', decided by one
-- transaction in PostgreSQL (dr_reserve and the others). Fixed at creation
-- (PATCH answers 409 MODE_LOCKED). The rows that exist when this runs get
-- 'flash': an upgrade must not change how a running sale is decided. The
-- default for new rows stays 'flash' until slice 2 lands the gateway's direct
-- path; slice 2 sets it to 'direct', the design's default (a voucher created
-- without a mode before then is a flash voucher for good).
ALTER TABLE voucher
    ADD COLUMN mode TEXT NOT NULL DEFAULT 'flash'
        CONSTRAINT ck_voucher_mode CHECK (mode IN ('direct', 'flash'));

-- The outbox: one row per event of a direct voucher, written in the
-- transaction that changed the redemption, published after the commit by one
-- relay (the acting reconciler, slice 2) keyed by event_key, and marked sent
-- after Kafka's delivery report. A crash between the commit and the publish
-- loses nothing: the row stays unsent.
CREATE TABLE event_outbox (
    id         BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_key  TEXT        NOT NULL,
    payload    TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at    TIMESTAMPTZ
);

-- The relay reads the unsent rows in id order; the sent ones are most of the
-- table and none of its reads.
CREATE INDEX ix_event_outbox_unsent ON event_outbox (id) WHERE sent_at IS NULL;

-- dr_expire's scan: the holds not yet paid for, oldest first. RESERVED rows
-- are few (a flash voucher's too, until they are confirmed or released), so
-- the index stays small whatever the table's size.
CREATE INDEX ix_redemption_reserved_held ON voucher_redemption (held_until, id)
    WHERE status = 'RESERVED';

-- The gateway creates vouchers with a mode (POST /vouchers; 008 grants the
-- other columns). It writes nothing else here: it changes a direct voucher's
-- rows only through the functions it may execute.
GRANT INSERT (mode) ON voucher TO voucher_gateway;
REVOKE ALL ON event_outbox FROM PUBLIC;

-- The owner of the direct-mode functions (roles.sql: NOLOGIN, and the role
-- that runs the migrations is made a member of it) writes what they write.
-- ALTER FUNCTION ... OWNER TO needs the new owner to hold CREATE on the
-- schema; nobody logs in as voucher_direct, so nobody else can use it.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'voucher_direct') THEN
        RAISE EXCEPTION 'the role voucher_direct does not exist'
            USING HINT = 'run deploy/sql/roles.sql as a superuser first (deploy/README.md, "PostgreSQL roles")';
    END IF;
    IF NOT pg_has_role(current_user, 'voucher_direct', 'MEMBER') THEN
        RAISE EXCEPTION 'the role % that runs the migrations is not a member of voucher_direct',
            current_user
            USING HINT = format('as a superuser: GRANT voucher_direct TO %I', current_user);
    END IF;
    EXECUTE format('GRANT CREATE ON SCHEMA %I TO voucher_direct', current_schema());
END
$$;
GRANT SELECT, UPDATE (used_count) ON voucher TO voucher_direct;
GRANT SELECT, INSERT, UPDATE ON voucher_redemption TO voucher_direct;
GRANT SELECT ON campaign_redemption TO voucher_direct;
GRANT SELECT, INSERT, UPDATE ON event_outbox TO voucher_direct;
