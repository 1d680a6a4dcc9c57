-- Percent discounts with an optional cap, and what each redemption was worth.

ALTER TABLE voucher
    ADD COLUMN discount_percent INT
        CONSTRAINT ck_discount_percent CHECK (discount_percent BETWEEN 1 AND 100),
    ADD COLUMN max_discount_amount BIGINT
        CONSTRAINT ck_max_discount CHECK (max_discount_amount >= 1);

ALTER TABLE voucher_redemption
    ADD COLUMN discount_amount BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN order_amount    BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN held_until      TIMESTAMPTZ,
    ADD COLUMN updated_at      TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP;
