-- `voucher-admin campaign revoke CODE` (023) runs as voucher-admin's own role
-- (021): it may set a code's revoked_at, nothing else of campaign_code, and
-- records the revoke in admin_audit (021 granted it the INSERT).
GRANT UPDATE (revoked_at) ON campaign_code TO voucher_admin;
