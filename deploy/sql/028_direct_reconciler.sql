-- Direct mode (issue 46, proto/direct-mode.md), slice 2: what the reconciler
-- needs for direct vouchers. Schema only (functions.sql, header).
--
-- The reconciler's check of a direct voucher counts its live rows every pass
-- (reconciler/rc_pg.c, rc_pg_read_direct()): with the status in the index,
-- an index-only scan, not a visit of every row of the voucher.
CREATE INDEX ix_redemption_voucher_status ON voucher_redemption (voucher_code, status);

-- The relay deletes the rows it sent once older than the retention
-- (dr_outbox_prune(), owned by voucher_direct): the table would otherwise
-- grow by every event of every direct voucher.
GRANT DELETE ON event_outbox TO voucher_direct;
