-- pgbench script: the source document's "Solution 1", the whole reservation in
-- one PostgreSQL transaction on the voucher's row. @CODE@ is replaced by the
-- run's voucher code; every transaction uses a distinct customer and orderId.
-- A customer drawn twice fails the per-customer trigger (per_user_limit 1) and
-- aborts the run: from 1 to 2e9, 10,000 transactions drew one twice in about
-- 1 run of 40 (2026-12-02). From 1 to 9e18 (customer_id is a BIGINT), about
-- 1 in 10^11.
\set customer random(1, 9000000000000000000)
\set n random(1, 9000000000000000000)
BEGIN;
UPDATE voucher SET used_count = used_count + 1
 WHERE code = '@CODE@' AND used_count < total_limit;
INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status)
VALUES ('@CODE@', :customer, 's1-' || :n, 'RESERVED');
END;
