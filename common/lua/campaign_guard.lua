-- Put before a voucher script (release_begin, confirm; included by
-- campaign_forget.lua and campaign_release_finish.lua) to make it act on a
-- campaign's code. The caller appends to
-- KEYS the campaign's users, orders and taken hashes and to ARGV whether
-- PostgreSQL says Redis had the campaign's keys ("1" or "0", as
-- campaign_reserve.lua's loaded) and the code; they are taken off here, so the
-- voucher script sees its usual arguments (ARGV[1] is the orderId in each).
-- The order must be the one holding the code: an orderId of the campaign named
-- with another of its codes is no such order (-1), as an unknown orderId is
-- (proto/campaigns.md). A released order (R) holds no code any more: the
-- script answers it (already released, or too late to confirm).
-- While the campaign's keys are lost (campaign_lost.lua) taken cannot say
-- which order holds the code, and the order itself may be gone: -7, the
-- outcome is unknown until the reconciler rebuilds them (the gateway's 503,
-- never a 404 that tells the order service there is no such order).
-- @include campaign_lost.lua
-- @include order_value.lua
local campaign_taken = table.remove(KEYS)
local campaign_orders = table.remove(KEYS)
local campaign_users = table.remove(KEYS)
local campaign_code = table.remove(ARGV)
local campaign_loaded = table.remove(ARGV)
if redis.call('HGET', campaign_taken, campaign_code) ~= ARGV[1] then
  local o = redis.call('HGET', campaign_orders, ARGV[1])
  if not (o and order_state(o) == STATE.RELEASED) then
    if campaign_keys_lost(campaign_taken, campaign_users, campaign_orders, campaign_loaded) then
      return {LOOKUP.KEYS_LOST, false}
    end
    return {LOOKUP.NO_ORDER, false}
  end
end
