-- forget.lua's work, for its voucher's build and its campaign's
-- (campaign_forget.lua): forget_hold(give_back) forgets the hold of ARGV[1]
-- and answers as forget.lua says; give_back(remaining_key, users_key,
-- customer) gives its use back (give_back.lua, campaign_give_back.lua).
--
-- KEYS[1] voucher:{CODE}:remaining  KEYS[2] voucher:{CODE}:users
-- KEYS[3] voucher:{CODE}:orders     KEYS[4] voucher:{CODE}:holds
-- KEYS[5] voucher:{CODE}:resent     (as forget.lua)
-- ARGV[1] orderId
-- @include order_value.lua
-- @include orders_write.lua
local function forget_hold(give_back)
  local order = redis.call('HGET', KEYS[3], ARGV[1])
  if not order then return {FORGET.NO_ORDER, false} end
  local customer, _, _, state = parse_order(order)
  if state ~= STATE.HELD then return {FORGET.NOT_HELD, order} end
  if redis.call('ZSCORE', KEYS[5], ARGV[1]) then return {FORGET.RESENT, order} end
  local amounts = string.gsub(KEYS[3], ':orders$', ':amounts')
  drop_order(KEYS[3], ARGV[1])
  -- Its amount goes with it: a campaign reads an amount without its order as
  -- the orders hash lost (campaign_lost.lua); a voucher drops the whole hash
  -- with the last order below.
  redis.call('HDEL', amounts, ARGV[1])
  give_back(KEYS[1], KEYS[2], customer)
  redis.call('ZREM', KEYS[4], ARGV[1])
  -- The last order gone: users and amounts go too (every count is 0, and no
  -- order needs its amount). reserve.lua reads users or amounts without orders
  -- as an orders hash lost, and refuses new orders until it is rebuilt. amounts
  -- sits beside orders (the same hash tag). A campaign's users is kept: there
  -- it is never emptied, and missing beside taken means lost
  -- (campaign_reserve.lua). A voucher's keys start with its family's head
  -- (KEY_HEAD, proto/redis-model.json).
  local of_voucher = string.sub(KEYS[3], 1, #KEY_HEAD.voucher) == KEY_HEAD.voucher
  if redis.call('EXISTS', KEYS[3]) == 0 and of_voucher then
    redis.call('DEL', KEYS[2], amounts)
  end
  return {FORGET.FORGOTTEN, order}
end
