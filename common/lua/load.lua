-- load: sets a voucher's counter the first time it enters Redis (the
-- gateway's first load, and POST /vouchers), together with the limit key that
-- says which total_limit the counter was computed from (proto/redis-keys.md,
-- "The limit key"). Both or neither: a counter without its limit key could
-- not be raised by difference later. The uses the counter holds back below
-- the total (PostgreSQL's used_count, or its live rows if more: uses counted
-- without rows, rows written there without Redis) belong to no order Redis
-- holds: they go to the outside key (outside.lua), so that a counter below
-- its limit key with no orders hash is not taken for a lost orders hash.
--
-- KEYS[1] voucher:{CODE}:remaining  KEYS[2] voucher:{CODE}:limit
-- (voucher:{CODE}:outside beside them: written only when not 0)
-- ARGV[1] remaining  ARGV[2] total_limit the counter was computed from
-- ARGV[3] expireAt (ms, endsAt plus the retention)
--
-- Returns 1 set, 0 the counter existed (another load came first) or the
-- instant is not after 1970 (a voucher that ended that long ago): nothing
-- written.
-- @include outside.lua
if tonumber(ARGV[3]) <= 0 then return 0 end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PXAT', ARGV[3]) then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PXAT', ARGV[3])
set_outside(KEYS[1], 0)
return 1
