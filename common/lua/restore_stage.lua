-- restore_stage: one slice of a restore or rebuild in steps (remaining_rule.lua
-- comes before this; proto/redis-keys.md, "A restore in steps"). A voucher
-- whose orders hash Redis lost, with more orders than the reconciler reads at
-- once, is written again without one script holding Redis for every order:
-- the reconciler writes the snapshot's orders, their holds and the customers'
-- counts into staging keys of its own, a slice a call, and restore_swap.lua
-- (the counter lost too) or rebuild_swap.lua (the counter kept) then moves
-- them into place at one moment. While the orders hash is missing, no other
-- script writes the voucher's orders, users or holds (reserve.lua refuses a
-- new order before writing anything: "not loaded" without the counter, -7
-- with it while users or amounts tells the loss; confirm, cancel, forget and
-- the release need the order), so the staged keys hold what restore.lua or
-- rebuild.lua, in one script, would write.
--
-- KEYS[1] the staged orders  KEYS[2] the staged holds  KEYS[3] the staged
-- users (voucher:{CODE}:restoring:TOKEN:orders, :holds, :users)
-- KEYS[4] releasing  KEYS[5] remaining
-- ARGV[1] "1" when the counter must exist (a rebuild), "0" when it must not
-- (a restore)
-- ARGV[2] how long the staged keys live (ms): a reconciler that stops midway
-- leaves nothing for good
-- ARGV[3] u: the customers' counts that follow, ARGV[4 .. 3 + 2u] customerId,
-- the orders they hold as taken
-- then fours as merge() takes them (orders of the snapshot)
--
-- Returns {n, "taken"}: n orders staged, taken of them held as taken (H, C
-- or X); {-1, false}: the counter is not as ARGV[1] wants (restored or loaded
-- meanwhile, or lost), nothing written.
-- @include remaining_rule.lua
if redis.call('EXISTS', KEYS[5]) ~= tonumber(ARGV[1]) then
  return {REPAIR.COUNTER_MISSING, false}
end
local u = tonumber(ARGV[3])
local counts = {}
for i = 4, 3 + 2 * u do counts[#counts + 1] = ARGV[i] end
call_in_slices('HSET', KEYS[3], counts, 1000)
local list, taken = {}, 0
for i = 4 + 2 * u, #ARGV - 3, 4 do
  local value = ARGV[i + 1]
  local state = order_state(value)
  if state then
    list[#list + 1] = {ARGV[i], value, ARGV[i + 2], state}
    if taken_state(state) then taken = taken + 1 end
  end
end
lacking_orders(KEYS[4], list)
write_lacking(KEYS[1], KEYS[2], list)
for i = 1, 3 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
end
-- The staged orders' aggregate (write_orders()) expires with them.
if redis.call('EXISTS', agg_key(KEYS[1])) == 1 then
  redis.call('PEXPIRE', agg_key(KEYS[1]), ARGV[2])
end
return {#list, tostring(taken)}
