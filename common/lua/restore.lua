-- restore: rebuilds a voucher whose counter Redis lost, merging what the
-- reconciler read in PostgreSQL and the events in flight into what Redis
-- still holds (remaining_rule.lua comes before this). An order Redis holds is
-- kept as it is: it may be a retry's or a confirm's work the snapshot is too
-- old to know. The counter is written last, so a gateway sees the voucher only
-- when it is whole; nothing is written when the counter exists.
--
-- KEYS[1] remaining  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- KEYS[5] releasing
-- ARGV[1] total_limit  ARGV[2] uses counted without rows  ARGV[3] nowMs
-- ARGV[4] expireAt: the voucher's endsAt plus VOUCHER_REDIS_RETENTION, the
-- instant the gateway gives its keys (proto/redis-keys.md, "Retention");
-- "0" sets none
-- then fours as merge() takes them (every order of the snapshot)
--
-- Returns {1, "live:remaining"} restored, {0, false} the counter exists.
-- @include remaining_rule.lua
if redis.call('EXISTS', KEYS[1]) == 1 then return {RESTORE.COUNTER_EXISTS, false} end
merge(KEYS[3], KEYS[4], KEYS[5], 5)
-- The sets follow the merged orders: every hold by its heldUntil, every
-- release begun (kept with its start, or due after the grace from now).
local holds, releasing = {}, {}
local live, per = count_taken(KEYS[3], function(id, value, state)
  local _, _, held = parse_order(value)
  held = tonumber(held)
  if state == STATE.HELD and held then
    holds[#holds + 1] = held
    holds[#holds + 1] = id
  elseif state == STATE.CANCEL_BEGUN or state == STATE.EXPIRY_BEGUN then
    releasing[#releasing + 1] = ARGV[3]
    releasing[#releasing + 1] = id
  end
end)
call_in_slices('ZADD', KEYS[4], holds, 1000)
call_in_slices('ZADD', KEYS[5], releasing, 1000, 'NX')
-- Each count set to the orders held, lowered too: without the counter no use
-- was taken since, and a count above the orders is a hold lost with them.
set_users(KEYS[2], per, KEYS[3])
local remaining = remaining_bound(tonumber(ARGV[1]), tonumber(ARGV[2]), live)
redis.call('SET', KEYS[1], remaining)
expire_together(KEYS, tonumber(ARGV[4]))
-- The total the counter was computed from: the limit sync raises it by
-- difference if PostgreSQL's total moved since the snapshot.
redis.call('SET', limit_key(KEYS[1]), ARGV[1])
if tonumber(ARGV[4]) and tonumber(ARGV[4]) > 0 then
  redis.call('PEXPIREAT', limit_key(KEYS[1]), tonumber(ARGV[4]))
end
-- The uses the counter holds back for no order (the uses counted without
-- rows, or all of them when the orders hold more than the limit): with the
-- orders merged whole, what reserve.lua compares with (outside.lua).
set_outside(KEYS[1], live)
return {RESTORE.RESTORED, live .. ':' .. remaining}
