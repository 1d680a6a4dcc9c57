-- A voucher's aggregates move out of its row into a table of their own
-- (proto/redis-keys.md, "Aggregates"). Kept on the voucher row (027), every
-- transaction that changes redemptions updated that row twice: once in the
-- aggregates' trigger and once for used_count (dr_reserve, dr_cancel, the
-- writer's apply). Updated twice by one transaction, one of them in a
-- subtransaction (dr_reserve's BEGIN ... EXCEPTION block, the writer's
-- SAVEPOINT), while other transactions hold a KEY SHARE lock on it (the
-- foreign key of every redemption row inserted for the voucher), the row's
-- multixact got two updating members and PostgreSQL 15 refused the statement:
-- "new multixact has more than one updating member" (XX000), one direct
-- reservation in a few thousand answered 503 under load (tests/chaos,
-- direct-outage). Here the trigger updates voucher_aggregate, and the voucher
-- row is updated once per transaction again, as before 027.
--
-- The same columns and meaning as 027's: per status, how many of the voucher's
-- redemption rows there are and the sum of their customers' last six digits;
-- NULL is "not counted" and stays NULL. A voucher without a row here is not
-- counted either, until the first statement that changes its redemptions
-- makes the row (from 0: the reconciler then finds the aggregates apart for a
-- voucher that had rows before, and reads it in full once, rc_agg.h).
CREATE TABLE voucher_aggregate (
    code                    TEXT PRIMARY KEY,
    agg_reserved            INT    DEFAULT 0,
    agg_confirmed           INT    DEFAULT 0,
    agg_released            INT    DEFAULT 0,
    agg_reserved_customers  BIGINT DEFAULT 0,
    agg_confirmed_customers BIGINT DEFAULT 0,
    agg_released_customers  BIGINT DEFAULT 0
);

INSERT INTO voucher_aggregate (code, agg_reserved, agg_confirmed, agg_released,
                               agg_reserved_customers, agg_confirmed_customers,
                               agg_released_customers)
SELECT code, agg_reserved, agg_confirmed, agg_released, agg_reserved_customers,
       agg_confirmed_customers, agg_released_customers
  FROM voucher;

-- The trigger of the functions.sql before this one still writes the voucher
-- row's columns: it goes first, and functions.sql (applied after the
-- migrations) makes the one that writes this table.
-- (A fresh database has none yet: no notice of the skipped drops.)
SET LOCAL client_min_messages = warning;
DROP TRIGGER IF EXISTS tr_redemption_aggregate_insert ON voucher_redemption;
DROP TRIGGER IF EXISTS tr_redemption_aggregate_update ON voucher_redemption;
DROP TRIGGER IF EXISTS tr_redemption_aggregate_delete ON voucher_redemption;
ALTER TABLE voucher
    DROP COLUMN agg_reserved,
    DROP COLUMN agg_confirmed,
    DROP COLUMN agg_released,
    DROP COLUMN agg_reserved_customers,
    DROP COLUMN agg_confirmed_customers,
    DROP COLUMN agg_released_customers;

-- The reconciler compares them; the trigger's function (the schema's owner)
-- writes them; nobody else needs them.
GRANT SELECT ON voucher_aggregate TO voucher_reconciler;
