-- Confirms a held use (the order was paid), atomically.
--
-- KEYS[1] voucher:{CODE}:orders  KEYS[2] voucher:{CODE}:holds   (as reserve.lua)
-- KEYS[3] voucher:{CODE}:resent  a confirm of an order already confirmed
--                                publishes VoucherConfirmed again: it is
--                                marked there, as reserve.lua marks a retry,
--                                so the reconciler does not release as
--                                "never delivered" an order whose 200 may
--                                come after its pass read Kafka
-- ARGV[1] orderId   ARGV[2] nowMs
--
-- Returns {status, order}: 1 confirmed now, 0 already confirmed, -1 no such
-- order, -2 released, or held past heldUntilMs (the hold is no longer
-- promised and may be released at any moment); order is the stored value as
-- it is now.
local order = redis.call('HGET', KEYS[1], ARGV[1])
if not order then return {-1, false} end
local customer, discount, held, state = string.match(order, '^([^:]*):([^:]*):([^:]*):(.)$')
if state == 'C' then
  if KEYS[3] then
    -- Markers older than ten minutes go, as in reserve.lua.
    local now = tonumber(ARGV[2])
    redis.call('ZADD', KEYS[3], now, ARGV[1])
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - 600000)
    redis.call('PEXPIRE', KEYS[3], 600000)
  end
  return {0, order}
end
if state ~= 'H' or tonumber(held) < tonumber(ARGV[2]) then return {-2, order} end
order = customer .. ':' .. discount .. ':' .. held .. ':C'
redis.call('HSET', KEYS[1], ARGV[1], order)
redis.call('ZREM', KEYS[2], ARGV[1])
return {1, order}
