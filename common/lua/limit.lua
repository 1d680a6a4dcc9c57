-- limit: moves a voucher's counter by the change of its total_limit
-- (PATCH /vouchers/{code}), in one step against reservations. The limit key
-- holds the total the counter reflects, so the difference is added once,
-- whoever applies it first (this script, or the reconciler's limit sync):
-- running it again with the same total changes nothing.
--
-- A raise runs after PostgreSQL committed the new total, a lower before
-- (under the voucher's row lock): Redis never offers a use PostgreSQL does
-- not have. A lower takes the uses from the counter only when the counter
-- still has them; otherwise the used and held uses are above the new total.
-- O(1): no order is read. The counter and the limit key move together, so
-- what the counter holds back for no order (the outside key, outside.lua)
-- stays as it is.
--
-- KEYS[1] voucher:{CODE}:remaining  KEYS[2] voucher:{CODE}:limit
-- ARGV[1] PostgreSQL's total_limit before the change, for a counter loaded
--         before limit keys existed (read under the row lock)
-- ARGV[2] the new total_limit
--
-- Returns {1, remaining after, total before}, {-1} the counter is missing
-- (nothing written: whoever sets it reads PostgreSQL's total), or
-- {-2, remaining, total before}: a lower would take the counter below 0.
local remaining = redis.call('GET', KEYS[1])
if not remaining then return {LIMIT.COUNTER_MISSING} end
remaining = tonumber(remaining)
local have = tonumber(redis.call('GET', KEYS[2]) or ARGV[1])
local want = tonumber(ARGV[2])
local delta = want - have
if delta < 0 and remaining + delta < 0 then return {LIMIT.BELOW_ZERO, remaining, have} end
if delta ~= 0 then redis.call('INCRBY', KEYS[1], delta) end
redis.call('SET', KEYS[2], want)
local expire_at = redis.call('PEXPIRETIME', KEYS[1])
if expire_at > 0 then redis.call('PEXPIREAT', KEYS[2], expire_at) end
return {LIMIT.DONE, remaining + delta, have}
