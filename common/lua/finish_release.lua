-- release_finish.lua's work, for its voucher's build and its campaign's
-- (campaign_release_finish.lua): finish_release(give_back) finishes the
-- release of ARGV[1] and answers as release_finish.lua says;
-- give_back(remaining_key, users_key, customer) gives its use back
-- (give_back.lua, campaign_give_back.lua).
--
-- KEYS[1] voucher:{CODE}:remaining  KEYS[2] voucher:{CODE}:users
-- KEYS[3] voucher:{CODE}:orders     KEYS[4] voucher:{CODE}:releasing
-- ARGV[1] orderId
-- @include order_value.lua
-- @include orders_write.lua
local function finish_release(give_back)
  local order = redis.call('HGET', KEYS[3], ARGV[1])
  if not order then return {RELEASE_FINISH.NO_ORDER, false} end
  local customer, discount, held, state = parse_order(order)
  if state == STATE.RELEASED then return {RELEASE_FINISH.ALREADY_RELEASED, order} end
  if state ~= STATE.CANCEL_BEGUN and state ~= STATE.EXPIRY_BEGUN then
    return {RELEASE_FINISH.NOT_BEGUN, order}
  end
  order = order_value(customer, discount, held, STATE.RELEASED)
  write_order(KEYS[3], ARGV[1], order)
  give_back(KEYS[1], KEYS[2], customer)
  redis.call('ZREM', KEYS[4], ARGV[1])
  return {RELEASE_FINISH.GIVEN_BACK, order}
end
