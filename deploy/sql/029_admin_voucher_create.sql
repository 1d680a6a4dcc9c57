-- `voucher-admin voucher create` (issue 46: a voucher's mode is chosen at
-- creation through the API, the CLI and SQL) runs as voucher-admin's own role
-- (021). It inserts a voucher as POST /vouchers does (common/vc_voucher_create.c:
-- the rules, the mode, redis_loaded_at left NULL so that a flash voucher's first
-- reservation loads it) and records the audit row (021 granted that INSERT).
-- The columns are the ones it writes; used_count, active and the rest keep
-- their defaults, and it may change no voucher (UPDATE stays the gateway's).
GRANT INSERT (code, discount_amount, discount_percent, max_discount_amount, min_order_amount,
              total_limit, per_user_limit, starts_at, ends_at, redis_loaded_at, mode)
    ON voucher TO voucher_admin;
