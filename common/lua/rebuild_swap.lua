-- rebuild_swap: the last step of a rebuild in steps (remaining_rule.lua
-- comes before this; restore_stage.lua wrote the staged keys): what
-- rebuild.lua does in one script, from the staged keys. At one moment: checks
-- that the counter exists, that the orders hash is still lost (missing, and
-- orders_lost.lua tells the loss) and that every staged order is there,
-- then puts the staged orders in place with their holds, drops the releases
-- begun that no order written holds, sets each customer's count to the staged one,
-- the counter to the remaining rule's bound (raised or lowered), and the
-- outside key to what it then holds back for no order.
-- Otherwise the staged keys are dropped and nothing else is written: the next
-- pass judges the voucher again (proto/redis-keys.md, "A restore in steps").
--
-- KEYS[1] remaining  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- KEYS[5] releasing  KEYS[6] amounts
-- KEYS[7] the staged orders  KEYS[8] the staged users  KEYS[9] the staged holds
-- ARGV[1] total_limit (the limit key's, when it exists)  ARGV[2] uses
-- counted without rows  ARGV[3] the staged orders held as taken
-- (restore_stage.lua's counts)  ARGV[4] how many orders were staged
-- ARGV[5] expireAt, as rebuild.lua takes it ("0" sets none)
--
-- Returns {n, "before:after"}: n orders written, the counter before and
-- after; {-1, false} the counter is missing; {-2, false} the orders hash is
-- not lost, or a staged order is missing.
-- @include remaining_rule.lua
local function drop_staged()
  redis.call('UNLINK', KEYS[7], KEYS[8], KEYS[9])
  drop_staged_agg(KEYS[7])
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  drop_staged()
  return {REPAIR.COUNTER_MISSING, false}
end
if not orders_lost(KEYS[3], KEYS[2], KEYS[6], KEYS[1]) or
   redis.call('HLEN', KEYS[7]) ~= tonumber(ARGV[4]) then
  drop_staged()
  return {REPAIR.ORDERS_STATE, false}
end
local written = tonumber(ARGV[4])
if written > 0 then replace_orders(KEYS[7], KEYS[3]) end
-- The sets follow the orders written, as rebuild.lua leaves them: the holds
-- are the staged ones (every H written, by its heldUntil: rebuild.lua adds
-- those and drops every other), releases begun stay only for X and E.
redis.call('UNLINK', KEYS[4])
if redis.call('EXISTS', KEYS[9]) == 1 then redis.call('RENAME', KEYS[9], KEYS[4]) end
local ids, stale = redis.call('ZRANGE', KEYS[5], 0, -1), {}
local values = hmget_all(KEYS[3], ids)
for i, id in ipairs(ids) do
  local state = values[i] and order_state(values[i])
  if state ~= STATE.CANCEL_BEGUN and state ~= STATE.EXPIRY_BEGUN then stale[#stale + 1] = id end
end
call_in_slices('ZREM', KEYS[5], stale, 1000)
if written == 0 then
  redis.call('DEL', KEYS[2], KEYS[6])
  redis.call('UNLINK', KEYS[8])
else
  place_users(KEYS[2], KEYS[8], KEYS[3])
end
local total = limit_total(KEYS[1], tonumber(ARGV[1]))
local before = tonumber(redis.call('GET', KEYS[1]))
local after = remaining_bound(total, tonumber(ARGV[2]), tonumber(ARGV[3]))
if after ~= before then redis.call('SET', KEYS[1], after, 'KEEPTTL') end
expire_placed(KEYS, tonumber(ARGV[5]))
set_outside(KEYS[1], tonumber(ARGV[3]))
return {written, before .. ':' .. after}
