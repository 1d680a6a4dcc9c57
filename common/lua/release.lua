-- Gives a held use back, atomically.
--
-- KEYS[1] voucher:{CODE}:remaining  KEYS[2] voucher:{CODE}:users
-- KEYS[3] voucher:{CODE}:orders     KEYS[4] voucher:{CODE}:holds   (as reserve.lua)
-- ARGV[1] orderId
-- ARGV[2] mode: "release" gives back a held or confirmed use (cancelled order,
--         expired hold) and keeps the order in state R;
--         "forget" gives back only a held use and deletes the order, for a hold
--         whose VoucherReserved was never persisted: nothing else knows the
--         order, so the client may try it again.
--
-- Returns {status, order}: 1 given back, 0 nothing to give back (already R,
-- or C in "forget" mode), -1 no such order; order is the stored value
-- ("customerId:discount:heldUntilMs:state") as it is now.
local order = redis.call('HGET', KEYS[3], ARGV[1])
if not order then return {-1, false} end
local customer, discount, held, state = string.match(order, '^([^:]*):([^:]*):([^:]*):(.)$')
if state == 'R' or (state ~= 'H' and ARGV[2] == 'forget') then return {0, order} end
if ARGV[2] == 'forget' then
  redis.call('HDEL', KEYS[3], ARGV[1])
else
  order = customer .. ':' .. discount .. ':' .. held .. ':R'
  redis.call('HSET', KEYS[3], ARGV[1], order)
end
-- A missing counter is reloaded from PostgreSQL later: do not create it here.
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('INCR', KEYS[1]) end
redis.call('HINCRBY', KEYS[2], customer, -1)
redis.call('ZREM', KEYS[4], ARGV[1])
return {1, order}
