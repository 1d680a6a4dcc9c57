-- Ends the reconciler's read of an orders hash in pieces (scan_begin.lua):
-- the counter, the sizes and every order written since the read began, all
-- at one moment. With the pieces, which hold every order not written since
-- (HSCAN returns each element present throughout), they are the hash as it
-- is now. An order gone without a write (the hash expired or was lost) shows
-- in the size: the reader compares it with what it holds.
--
-- KEYS[1] voucher:{CODE}:remaining  KEYS[2] voucher:{CODE}:orders
-- KEYS[3] voucher:{CODE}:users      KEYS[4] voucher:{CODE}:amounts
-- KEYS[5] voucher:{CODE}:scan       KEYS[6] voucher:{CODE}:touched
-- ARGV[1] the read's token
--
-- Returns {1, remaining or nil, HLEN orders, HLEN users, EXISTS amounts,
-- {orderId, value or nil, ...}} for a read kept whole, or {0} when its token
-- is gone (the read outlived its lifetime, or Redis lost the key): then
-- touched may lack writes, and the reader reads at once instead.
local kept = redis.call('SREM', KEYS[5], ARGV[1]) == 1
local ids = kept and redis.call('SMEMBERS', KEYS[6]) or {}
if redis.call('EXISTS', KEYS[5]) == 0 then redis.call('DEL', KEYS[6]) end
if not kept then return {0} end
local written = {}
for _, id in ipairs(ids) do
  if id ~= '' then
    written[#written + 1] = id
    written[#written + 1] = redis.call('HGET', KEYS[2], id) or false
  end
end
return {1, redis.call('GET', KEYS[1]) or false, redis.call('HLEN', KEYS[2]),
        redis.call('HLEN', KEYS[3]), redis.call('EXISTS', KEYS[4]), written}
