-- pgbench script: the writer's anchor, one event applied in one transaction
-- with the statements the writer's batch function runs per VoucherReserved
-- (the INSERT ... ON CONFLICT of the redemption, then used_count raised).
-- @CODE@ is replaced by the run's voucher code.
-- A customer drawn twice fails the per-customer trigger (per_user_limit 1) and
-- aborts the run: from 1 to 2e9, 10,000 transactions drew one twice in about
-- 1 run of 40 (2026-12-02). From 1 to 9e18 (customer_id is a BIGINT), about
-- 1 in 10^11.
\set customer random(1, 9000000000000000000)
\set n random(1, 9000000000000000000)
BEGIN;
INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status,
                                discount_amount, order_amount, held_until,
                                created_at, updated_at)
VALUES ('@CODE@', :customer, 'wa-' || :n, 'RESERVED', 100000, 500000,
        now() + interval '15 minutes', now(), now())
ON CONFLICT (order_id) DO NOTHING;
UPDATE voucher SET used_count = used_count + 1 WHERE code = '@CODE@';
END;
