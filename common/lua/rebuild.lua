-- rebuild: writes again a voucher's orders hash that Redis lost while its
-- counter stayed (remaining_rule.lua comes before this). reserve.lua refuses
-- every new order while the loss shows (orders_lost.lua: users or amounts
-- without orders, or a counter below its limit key by more than the outside
-- key), so nothing was taken since the loss; the reconciler runs this only
-- with a snapshot read at least --restore-delay after it first saw the loss,
-- so every event of an order taken before it is in the snapshot
-- (proto/redis-keys.md, "A lost orders hash"). Hence the snapshot's orders
-- are every order that holds a use, and every order PostgreSQL released (R,
-- so that a retry of a cancelled orderId is answered 409, never a new 201).
-- The counter is set to the rule's bound, raised as well as lowered (a use
-- taken by a hold lost with the hash and never delivered is given back), each
-- customer's count to the orders they hold, and the outside key to what the
-- counter then holds back for no order. With nothing to write (the snapshot
-- knows no order), users and amounts are deleted: the voucher is as freshly
-- loaded.
--
-- KEYS[1] remaining  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- KEYS[5] releasing  KEYS[6] amounts
-- ARGV[1] total_limit (the limit key's, when it exists)  ARGV[2] uses counted
-- without rows  ARGV[3] expireAt, as restore.lua takes it
-- then fours as merge() takes them (every order of the snapshot)
--
-- Returns {n, "before:after"}: n orders written, the counter before and
-- after; {-1, false} the counter is missing (the restore's case); {-2, false}
-- the orders hash is not lost (it exists, or nothing tells a loss:
-- orders_lost.lua): nothing written, the next pass judges again.
-- @include remaining_rule.lua
if redis.call('EXISTS', KEYS[1]) == 0 then return {REPAIR.COUNTER_MISSING, false} end
if not orders_lost(KEYS[3], KEYS[2], KEYS[6], KEYS[1]) then return {REPAIR.ORDERS_STATE, false} end
local written, orders = merge(KEYS[3], KEYS[4], KEYS[5], 4)
-- The orders hash holds what merge() wrote, nothing else (it was lost).
local live, per = count_pairs(orders)
-- The sets follow the orders written: holds of orders lost and not written
-- again go (nothing holds them), releases begun stay only for X and E.
local begun = STATE.CANCEL_BEGUN .. STATE.EXPIRY_BEGUN
for _, set in ipairs({{KEYS[4], STATE.HELD}, {KEYS[5], begun}}) do
  local ids, stale = redis.call('ZRANGE', set[1], 0, -1), {}
  local values = hmget_all(KEYS[3], ids)
  for i, id in ipairs(ids) do
    local state = values[i] and order_state(values[i])
    if not state or not string.find(set[2], state, 1, true) then stale[#stale + 1] = id end
  end
  call_in_slices('ZREM', set[1], stale, 1000)
end
if written == 0 then
  redis.call('DEL', KEYS[2], KEYS[6])
else
  set_users(KEYS[2], per, KEYS[3])
end
local total = limit_total(KEYS[1], tonumber(ARGV[1]))
local before = tonumber(redis.call('GET', KEYS[1]))
local after = remaining_bound(total, tonumber(ARGV[2]), live)
if after ~= before then redis.call('SET', KEYS[1], after, 'KEEPTTL') end
expire_together(KEYS, tonumber(ARGV[3]))
-- The orders are back: the uses the counter now holds back for no order.
set_outside(KEYS[1], live)
return {written, before .. ':' .. after}
