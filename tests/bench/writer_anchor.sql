-- pgbench script: the writer's anchor, one event applied in one transaction
-- with the statements the writer's batch function runs per VoucherReserved
-- (the INSERT ... ON CONFLICT of the redemption, then used_count raised).
-- @CODE@ is replaced by the run's voucher code.
\set customer random(1, 2000000000)
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
