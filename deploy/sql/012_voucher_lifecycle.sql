-- Voucher lifecycle (PATCH /vouchers/{code}, proto/openapi.yaml): an active
-- flag, and the grants the gateway needs to change a voucher's rules.
--
-- active: an inactive voucher refuses new reservations (422 NOT_ELIGIBLE,
-- reason INACTIVE); holds taken before can still be confirmed or released.
-- Nothing downstream reads it: the writer applies every event of an order
-- the gateway acknowledged, whatever the voucher's rules say now.
ALTER TABLE voucher ADD COLUMN IF NOT EXISTS active BOOLEAN NOT NULL DEFAULT true;

-- The gateway changes the rules of a voucher under its row lock (SELECT ...
-- FOR UPDATE) and a transaction-level advisory lock on its code that the
-- reconciler's limit sync takes too (proto/redis-keys.md, "The limit key").
-- It never writes used_count.
GRANT UPDATE (discount_amount, discount_percent, max_discount_amount, min_order_amount,
              total_limit, per_user_limit, starts_at, ends_at, active)
    ON voucher TO voucher_gateway;

-- GET /vouchers/{code}/reservations/{orderId} (support staff, admin token)
-- shows an order as PostgreSQL has it: the columns of one redemption the
-- answer names, nothing more (010 gave the first load voucher_code, status).
GRANT SELECT (order_id, customer_id, discount_amount, order_amount, held_until, created_at,
              updated_at, release_reason)
    ON voucher_redemption TO voucher_gateway;
