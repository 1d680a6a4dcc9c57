-- The reconciler's read of one campaign (proto/campaigns.md, "The
-- reconciler"): its numbers, and the holds due for expiry, in one atomic read.
--
-- KEYS[1] campaign:{cID}:taken  KEYS[2] campaign:{cID}:holds
-- KEYS[3] campaign:{cID}:releasing  KEYS[4] campaign:{cID}:orders
-- KEYS[5] campaign:{cID}:users
-- ARGV[1] the latest heldUntil (ms) a hold may have to be listed
-- ARGV[2] how many holds to list at most
--
-- Returns {codes taken (the "!" field not counted), "ZCARD holds ZCARD
-- releasing HLEN orders lost keys\n" then one line per due hold: "orderId
-- heldUntilMs:state", or "orderId ?" for a value that is no order's}; lost
-- is 1 when taken or users is missing beside another of the campaign's keys
-- (campaign_reserve.lua refuses then: -7); keys is 1 when taken exists, plus
-- 2 for users, plus 4 for orders. Nothing is changed.
-- @include campaign_lost.lua
-- @include order_value.lua
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local t, u = redis.call('EXISTS', KEYS[1]), redis.call('EXISTS', KEYS[5])
-- Without redis_loaded_at: the reconciler adds it (rc_campaign.c).
local lost = 0
if campaign_keys_lost(KEYS[1], KEYS[5], KEYS[4], '0') then lost = 1 end
local out = {redis.call('ZCARD', KEYS[2]) .. ' ' .. redis.call('ZCARD', KEYS[3]) .. ' ' ..
  redis.call('HLEN', KEYS[4]) .. ' ' .. lost .. ' ' ..
  (t + 2 * u + 4 * redis.call('EXISTS', KEYS[4]))}
for _, o in ipairs(due) do
  local v = redis.call('HGET', KEYS[4], o)
  if v then
    local _, _, held, state = parse_order(v)
    -- A value that is no order's (parse_order() refuses it, as the reconciler's
    -- parser would) is listed as "orderId ?", which the reconciler refuses: the
    -- pass names the campaign and leaves it to the next, never skips the hold.
    out[#out + 1] = o .. ' ' .. (held and held .. ':' .. state or '?')
  end
end
return {redis.call('HLEN', KEYS[1]) - redis.call('HEXISTS', KEYS[1], '!'), table.concat(out, '\n')}
