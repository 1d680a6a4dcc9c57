-- A voucher's aggregates (proto/redis-keys.md, "Aggregates"): per status, how
-- many of its redemption rows there are and the sum of their customers' last
-- six digits (right(customer_id::text, 6)::bigint), the numbers Redis keeps
-- per order state in voucher:{CODE}:agg. The reconciler compares the two
-- instead of reading a quiet voucher's every row and order.
--
-- Kept by the statement triggers of functions.sql
-- (voucher_redemption_aggregate()), in the transaction that changes the rows,
-- whatever writes them (the writer's apply paths, an operator's UPDATE). NULL
-- is "not counted" (an operator may set it so): the triggers leave a NULL
-- column NULL, and the reconciler reads such a voucher by its old rule.
--
-- The backfill below counts the rows there are now; rows a writer of the
-- previous version changes between this migration and functions.sql (which
-- makes the triggers) are not counted: the reconciler then finds the
-- aggregates apart, reads that voucher in full, and from then on compares
-- against the difference its full read found consistent (rc_agg.h), so such
-- an offset costs one full read, not a wrong verdict. A voucher created from
-- now on has no rows: its aggregates start at 0.
ALTER TABLE voucher
    ADD COLUMN agg_reserved            INT    DEFAULT 0,
    ADD COLUMN agg_confirmed           INT    DEFAULT 0,
    ADD COLUMN agg_released            INT    DEFAULT 0,
    ADD COLUMN agg_reserved_customers  BIGINT DEFAULT 0,
    ADD COLUMN agg_confirmed_customers BIGINT DEFAULT 0,
    ADD COLUMN agg_released_customers  BIGINT DEFAULT 0;

UPDATE voucher v
   SET agg_reserved = coalesce(a.reserved, 0),
       agg_confirmed = coalesce(a.confirmed, 0),
       agg_released = coalesce(a.released, 0),
       agg_reserved_customers = coalesce(a.reserved_customers, 0),
       agg_confirmed_customers = coalesce(a.confirmed_customers, 0),
       agg_released_customers = coalesce(a.released_customers, 0)
  FROM voucher w
  LEFT JOIN (
      SELECT r.voucher_code,
             count(*) FILTER (WHERE r.status = 'RESERVED') AS reserved,
             count(*) FILTER (WHERE r.status = 'CONFIRMED') AS confirmed,
             count(*) FILTER (WHERE r.status = 'RELEASED') AS released,
             sum(right(r.customer_id::text, 6)::bigint)
                 FILTER (WHERE r.status = 'RESERVED') AS reserved_customers,
             sum(right(r.customer_id::text, 6)::bigint)
                 FILTER (WHERE r.status = 'CONFIRMED') AS confirmed_customers,
             sum(right(r.customer_id::text, 6)::bigint)
                 FILTER (WHERE r.status = 'RELEASED') AS released_customers
        FROM voucher_redemption r
       GROUP BY r.voucher_code) a ON a.voucher_code = w.code
 WHERE v.code = w.code;

-- No grant: the triggers' function runs as the schema's owner (functions.sql).
