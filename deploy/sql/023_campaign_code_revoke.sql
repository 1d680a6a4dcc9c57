-- One leaked code revoked, without deactivating its campaign (issue 44):
-- `voucher-admin campaign revoke CODE` sets revoked_at. The gateway then
-- answers a new reservation or quote of the code exactly as an unknown code's
-- (404, a failed try for the guessing limits), while the orders that already
-- hold it stand: a retry replays its answer, a confirm or a cancel works.
ALTER TABLE campaign_code ADD COLUMN revoked_at TIMESTAMPTZ;

-- The gateway reads it with the code (013 granted SELECT on the table);
-- voucher-admin, run with the gateway's role, sets it and nothing else.
GRANT UPDATE (revoked_at) ON campaign_code TO voucher_gateway;
