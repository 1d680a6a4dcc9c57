-- Confirms a held use (the order was paid), atomically.
--
-- KEYS[1] voucher:{CODE}:orders  KEYS[2] voucher:{CODE}:holds   (as reserve.lua)
-- ARGV[1] orderId   ARGV[2] nowMs
--
-- Returns {status, order}: 1 confirmed now, 0 already confirmed, -1 no such
-- order, -2 released, or held past heldUntilMs (the hold is no longer
-- promised and may be released at any moment); order is the stored value as
-- it is now.
local order = redis.call('HGET', KEYS[1], ARGV[1])
if not order then return {-1, false} end
local customer, discount, held, state = string.match(order, '^([^:]*):([^:]*):([^:]*):(.)$')
if state == 'C' then return {0, order} end
if state ~= 'H' or tonumber(held) < tonumber(ARGV[2]) then return {-2, order} end
order = customer .. ':' .. discount .. ':' .. held .. ':C'
redis.call('HSET', KEYS[1], ARGV[1], order)
redis.call('ZREM', KEYS[2], ARGV[1])
return {1, order}
