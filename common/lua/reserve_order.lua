-- The order of a reservation, as reserve.lua and campaign_reserve.lua keep it
-- (both include this file): the answer to an order Redis has already seen, and
-- the writing of a new hold. Both scripts share these KEYS and ARGV:
-- KEYS[2] users  KEYS[3] orders  KEYS[4] holds  KEYS[5] resent  KEYS[6] amounts
-- ARGV[1] customerId  ARGV[3] orderId  ARGV[4] discount  ARGV[5] heldUntilMs
-- ARGV[6] nowMs       ARGV[7] orderAmount
-- @include resent_mark.lua
-- @include orders_write.lua
-- @include order_value.lua

-- The answer to a retry: order is the stored value of ARGV[3]. holds_use(state),
-- when given, says whether the order is still the one of this request's use
-- (a campaign's code); when it says no, the orderId is another's (-4).
-- wait(), when given, is asked for a held or confirmed order and returned
-- fourth (reserve.lua's sold-out lease wait).
-- Returns {-4, order} another customer's orderId (or another use's),
-- {-5, order, amount} reserved with another orderAmount (the stored one),
-- {0, order[, false, wait]} the same order again: nothing is taken, and a held
-- or confirmed one is marked resent (the retry publishes VoucherReserved again).
local function retry_answer(order, holds_use, wait)
  local customer, _, _, state = parse_order(order)
  if customer ~= ARGV[1] then return {RESERVE.OTHER_CUSTOMER, order} end
  if holds_use and not holds_use(state) then return {RESERVE.OTHER_CUSTOMER, order} end
  -- Orders taken before amounts were kept, or restored by the reconciler,
  -- have none: such a retry cannot be compared and is answered as the same.
  local amount = redis.call('HGET', KEYS[6], ARGV[3])
  if amount and amount ~= ARGV[7] then return {RESERVE.OTHER_AMOUNT, order, amount} end
  if state == STATE.HELD or state == STATE.CONFIRMED then
    mark_resent(KEYS[5], ARGV[3], tonumber(ARGV[6]))
    if wait then return {RESERVE.SAME_ORDER, order, false, wait()} end
  end
  return {RESERVE.SAME_ORDER, order}
end

-- A new hold of ARGV[3] (the caller took the use): the customer's count, the
-- order held (H) until heldUntilMs, its amount. Returns the order's value.
local function write_hold()
  redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
  local order = order_value(ARGV[1], ARGV[4], ARGV[5], STATE.HELD)
  write_order(KEYS[3], ARGV[3], order)
  redis.call('HSET', KEYS[6], ARGV[3], ARGV[7])
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[3])
  return order
end
