-- Finishes giving a use back once Kafka acknowledged its VoucherReleased:
-- X or E -> R, and the use returns to the pool.
--
-- KEYS[1] voucher:{CODE}:remaining  KEYS[2] voucher:{CODE}:users
-- KEYS[3] voucher:{CODE}:orders     KEYS[4] voucher:{CODE}:releasing
-- ARGV[1] orderId
--
-- Returns {status, order}: 1 given back now, 0 already released, -1 no such
-- order, -2 the release was never begun; order as it is now.
local order = redis.call('HGET', KEYS[3], ARGV[1])
if not order then return {-1, false} end
local customer, discount, held, state = string.match(order, '^([^:]*):([^:]*):([^:]*):(.)$')
if state == 'R' then return {0, order} end
if state ~= 'X' and state ~= 'E' then return {-2, order} end
order = customer .. ':' .. discount .. ':' .. held .. ':R'
redis.call('HSET', KEYS[3], ARGV[1], order)
-- A missing counter is rebuilt from PostgreSQL later: never create it here.
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('INCR', KEYS[1]) end
-- Never below 0: a count the users hash lost reads as 0, and a -1 would let
-- the customer past their limit later (the reconciler rebuilds the hash).
if tonumber(redis.call('HGET', KEYS[2], customer) or '0') > 0 then
  redis.call('HINCRBY', KEYS[2], customer, -1)
end
redis.call('ZREM', KEYS[4], ARGV[1])
return {1, order}
