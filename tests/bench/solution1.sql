-- pgbench script: the source document's "Solution 1", the whole reservation in
-- one PostgreSQL transaction on the voucher's row. @CODE@ is replaced by the
-- run's voucher code; every transaction uses a distinct customer and orderId.
\set customer random(1, 2000000000)
\set n random(1, 9000000000000000000)
BEGIN;
UPDATE voucher SET used_count = used_count + 1
 WHERE code = '@CODE@' AND used_count < total_limit;
INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status)
VALUES ('@CODE@', :customer, 's1-' || :n, 'RESERVED');
END;
