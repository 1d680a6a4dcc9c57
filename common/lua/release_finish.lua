-- Finishes giving a use back once Kafka acknowledged its VoucherReleased:
-- X or E -> R, and the use returns to the pool.
--
-- KEYS[1] voucher:{CODE}:remaining  KEYS[2] voucher:{CODE}:users
-- KEYS[3] voucher:{CODE}:orders     KEYS[4] voucher:{CODE}:releasing
-- ARGV[1] orderId
--
-- Returns {status, order}: 1 given back now, 0 already released, -1 no such
-- order, -2 the release was never begun; order as it is now.
-- @include give_back.lua
-- @include orders_write.lua
local order = redis.call('HGET', KEYS[3], ARGV[1])
if not order then return {RELEASE_FINISH.NO_ORDER, false} end
local customer, discount, held, state = string.match(order, '^([^:]*):([^:]*):([^:]*):(.)$')
if state == STATE.RELEASED then return {RELEASE_FINISH.ALREADY_RELEASED, order} end
if state ~= STATE.CANCEL_BEGUN and state ~= STATE.EXPIRY_BEGUN then
  return {RELEASE_FINISH.NOT_BEGUN, order}
end
order = customer .. ':' .. discount .. ':' .. held .. ':' .. STATE.RELEASED
write_order(KEYS[3], ARGV[1], order)
give_back(KEYS[1], KEYS[2], customer)
redis.call('ZREM', KEYS[4], ARGV[1])
return {RELEASE_FINISH.GIVEN_BACK, order}
