-- Who changed what, and who exported what (issue 42): one row per admin
-- action, written by the gateway (POST and PATCH /vouchers, the /campaigns
-- routes) and by voucher-admin (its campaign commands), in the same
-- transaction as the change it records, so that a change is never committed
-- unrecorded. An export changes nothing: it is recorded when it starts, with
-- the number of codes, and does not start when the row cannot be written.
--
-- before and after are the row as PostgreSQL held it (to_jsonb of the voucher
-- or campaign row; a voucher's redis_loaded_at left out: it is bookkeeping,
-- not a rule), read inside the transaction: after is what was committed.
-- A creation has no before; an export and a resume (of a stalled
-- generation) have no after, and their before is the campaign as they found
-- it.
--
-- The dead-letter register keeps its own audit (dead_letter_action, 009):
-- the writer's `dlt replay` and `dlt discard`, one row per letter acted on.
-- This table is the admin side's; the two are read side by side
-- (deploy/README.md, "Audit").

CREATE TABLE admin_audit (
    id     BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor  TEXT        NOT NULL CONSTRAINT ck_admin_audit_actor CHECK (length(actor) BETWEEN 1 AND 64),
    action VARCHAR(40) NOT NULL CONSTRAINT ck_admin_audit_action CHECK (action ~ '^[a-z]+\.[a-z]+$'),
    target TEXT        NOT NULL,
    before JSONB,
    after  JSONB,
    detail TEXT,
    source TEXT
);

CREATE INDEX ix_admin_audit_at ON admin_audit (at);
CREATE INDEX ix_admin_audit_target ON admin_audit (target, id);

-- Least privilege: who writes a row may neither change nor delete one, nor
-- read them (the gateway has no use for the rows; an attacker with its
-- credentials should not learn who the admins are). An identity column
-- needs no grant on its sequence.
REVOKE ALL ON admin_audit FROM PUBLIC;
GRANT INSERT (actor, action, target, before, after, detail, source)
    ON admin_audit TO voucher_gateway;

-- voucher-admin's own role (roles.sql): it lists the rows (`voucher-admin
-- audit`) and writes those of its campaign commands, which need what the
-- gateway's campaign routes need (013): create, generate, deactivate, export;
-- and its read-only views (`campaign code`, `report`, show's usage) read the
-- redemptions. It changes no voucher and no redemption.
GRANT SELECT ON admin_audit TO voucher_admin;
GRANT INSERT (actor, action, target, before, after, detail, source)
    ON admin_audit TO voucher_admin;
GRANT SELECT ON campaign, campaign_code, voucher TO voucher_admin;
GRANT INSERT (name, state, alphabet, prefix, code_length, check_symbol, total_count,
              discount_amount, discount_percent, max_discount_amount, min_order_amount,
              per_customer_limit, starts_at, ends_at)
    ON campaign TO voucher_admin;
GRANT UPDATE (state, generated_count, updated_at) ON campaign TO voucher_admin;
GRANT INSERT ON campaign_code TO voucher_admin;
GRANT SELECT ON voucher_redemption, campaign_redemption TO voucher_admin;
