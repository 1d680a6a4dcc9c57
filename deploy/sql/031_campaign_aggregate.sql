-- A campaign's aggregates (proto/campaigns.md, "Aggregates"; proto/redis-keys.md,
-- "Aggregates"), as 030 keeps a voucher's: per status, how many of the
-- campaign's campaign_redemption rows there are and the sum of their
-- customers' last six digits (right(customer_id::text, 6)::bigint), the
-- numbers Redis keeps per order state in campaign:{cID}:agg (the same
-- orders_write.lua). The reconciler compares the two instead of reading a
-- quiet campaign's every row and order every VOUCHER_RECONCILE_FULL_EVERY,
-- and reads the campaign's live rows from here instead of counting them every
-- pass.
--
-- Kept by the statement triggers of functions.sql
-- (campaign_redemption_aggregate()), in the transaction that changes the rows,
-- whoever writes them (the writer's apply, an operator's UPDATE). NULL is "not
-- counted" and stays NULL: the reconciler then counts the live rows and reads
-- the campaign by its old rule. No foreign key to campaign, as voucher_aggregate
-- has none to voucher: the trigger locks the campaign row itself, and a
-- key-share lock taken beside that would only add a member to the row's
-- multixact, which the writer's update of used_count shares (030).
CREATE TABLE campaign_aggregate (
    campaign_id             BIGINT PRIMARY KEY,
    agg_reserved            INT    DEFAULT 0,
    agg_confirmed           INT    DEFAULT 0,
    agg_released            INT    DEFAULT 0,
    agg_reserved_customers  BIGINT DEFAULT 0,
    agg_confirmed_customers BIGINT DEFAULT 0,
    agg_released_customers  BIGINT DEFAULT 0
);

-- The backfill: one row per campaign there is, counting the rows there are
-- now. Rows a writer of the previous version changes between this migration
-- and functions.sql (which makes the triggers) are not counted: the
-- reconciler then finds the aggregates apart, reads that campaign in full,
-- and from then on compares against the difference its full read found
-- consistent (reconciler/rc_agg.h), so such an offset costs one full read,
-- not a wrong verdict. A campaign created from now on has no rows: its row
-- here is made, from 0, by the first statement that changes its redemptions.
INSERT INTO campaign_aggregate (campaign_id, agg_reserved, agg_confirmed, agg_released,
                                agg_reserved_customers, agg_confirmed_customers,
                                agg_released_customers)
SELECT c.id, coalesce(a.reserved, 0), coalesce(a.confirmed, 0), coalesce(a.released, 0),
       coalesce(a.reserved_customers, 0), coalesce(a.confirmed_customers, 0),
       coalesce(a.released_customers, 0)
  FROM campaign c
  LEFT JOIN (
      SELECT r.campaign_id,
             count(*) FILTER (WHERE r.status = 'RESERVED') AS reserved,
             count(*) FILTER (WHERE r.status = 'CONFIRMED') AS confirmed,
             count(*) FILTER (WHERE r.status = 'RELEASED') AS released,
             sum(right(r.customer_id::text, 6)::bigint)
                 FILTER (WHERE r.status = 'RESERVED') AS reserved_customers,
             sum(right(r.customer_id::text, 6)::bigint)
                 FILTER (WHERE r.status = 'CONFIRMED') AS confirmed_customers,
             sum(right(r.customer_id::text, 6)::bigint)
                 FILTER (WHERE r.status = 'RELEASED') AS released_customers
        FROM campaign_redemption r
       GROUP BY r.campaign_id) a ON a.campaign_id = c.id;

-- The reconciler compares them and reads the live rows from them; the
-- trigger's function (the schema's owner) writes them; nobody else needs them.
GRANT SELECT ON campaign_aggregate TO voucher_reconciler;
