-- The source of truth: vouchers and their redemptions.
-- The CHECK on used_count and the UNIQUE order_id are the last line of
-- defence against overselling and double counting, whatever the code above does.

CREATE TABLE voucher (
    code             VARCHAR(32) PRIMARY KEY
                     CONSTRAINT ck_code_format CHECK (code ~ '^[A-Z0-9_-]{1,32}$'),
    discount_amount  BIGINT      NOT NULL CONSTRAINT ck_discount CHECK (discount_amount >= 0),
    min_order_amount BIGINT      NOT NULL DEFAULT 0 CONSTRAINT ck_min_order CHECK (min_order_amount >= 0),
    total_limit      INT         NOT NULL CONSTRAINT ck_total_limit CHECK (total_limit >= 1),
    used_count       INT         NOT NULL DEFAULT 0 CONSTRAINT ck_used_nonneg CHECK (used_count >= 0),
    per_user_limit   INT         NOT NULL DEFAULT 1 CONSTRAINT ck_per_user_limit CHECK (per_user_limit >= 1),
    starts_at        TIMESTAMPTZ NOT NULL,
    ends_at          TIMESTAMPTZ NOT NULL,
    CONSTRAINT ck_used CHECK (used_count <= total_limit),
    CONSTRAINT ck_window CHECK (ends_at > starts_at)
);

CREATE TABLE voucher_redemption (
    id           BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    voucher_code VARCHAR(32) NOT NULL REFERENCES voucher (code),
    customer_id  BIGINT      NOT NULL,
    order_id     VARCHAR(64) NOT NULL CONSTRAINT uq_redemption_order UNIQUE,
    status       VARCHAR(16) NOT NULL
                 CONSTRAINT ck_status CHECK (status IN ('RESERVED', 'CONFIRMED', 'RELEASED')),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- The per-customer count and the reconciler's per-voucher scans.
CREATE INDEX ix_redemption_voucher_customer ON voucher_redemption (voucher_code, customer_id);
