-- restore_swap: the last step of a restore in steps (remaining_rule.lua
-- comes before this; restore_stage.lua wrote the staged keys). At one moment:
-- checks that the counter and the orders hash are still missing and that
-- every staged order is there, then puts the staged orders in place, sets
-- each customer's count to the staged one (users as set_users() leaves it),
-- adds the staged holds, and sets the counter to the remaining rule's bound
-- and the limit key and the outside key, as restore.lua does. Otherwise the
-- staged keys are dropped and nothing else is written: the next pass judges
-- the voucher again.
--
-- KEYS[1] remaining  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- KEYS[5] the staged orders  KEYS[6] the staged users  KEYS[7] the staged holds
-- ARGV[1] total_limit  ARGV[2] uses counted without rows
-- ARGV[3] the staged orders held as taken (restore_stage.lua's counts)
-- ARGV[4] how many orders were staged  ARGV[5] expireAt, as restore.lua
-- takes it ("0" sets none)
--
-- Returns {1, "live:remaining"} restored; {0, false} the counter exists;
-- {-2, false} the orders hash exists, or a staged order is missing.
-- @include remaining_rule.lua
local function drop_staged()
  redis.call('UNLINK', KEYS[5], KEYS[6], KEYS[7])
  drop_staged_agg(KEYS[5])
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  drop_staged()
  return {RESTORE.COUNTER_EXISTS, false}
end
if redis.call('EXISTS', KEYS[3]) == 1 or redis.call('HLEN', KEYS[5]) ~= tonumber(ARGV[4]) then
  drop_staged()
  return {REPAIR.ORDERS_STATE, false}
end
if redis.call('EXISTS', KEYS[5]) == 1 then replace_orders(KEYS[5], KEYS[3]) end
-- Each count set to the orders held, lowered too, as set_users() does.
place_users(KEYS[2], KEYS[6], KEYS[3])
-- Holds an earlier hold left (no order holds them) stay, as restore.lua leaves them.
if redis.call('EXISTS', KEYS[4]) == 0 then
  if redis.call('EXISTS', KEYS[7]) == 1 then redis.call('RENAME', KEYS[7], KEYS[4]) end
else
  local staged = redis.call('ZRANGE', KEYS[7], 0, -1, 'WITHSCORES')
  for i = 1, #staged, 2 do staged[i], staged[i + 1] = staged[i + 1], staged[i] end
  call_in_slices('ZADD', KEYS[4], staged, 1000)
  redis.call('UNLINK', KEYS[7])
end
local live = tonumber(ARGV[3])
local remaining = remaining_bound(tonumber(ARGV[1]), tonumber(ARGV[2]), live)
redis.call('SET', KEYS[1], remaining)
local expire_at = tonumber(ARGV[5])
expire_placed(KEYS, expire_at)
redis.call('SET', limit_key(KEYS[1]), ARGV[1])
if expire_at and expire_at > 0 then redis.call('PEXPIREAT', limit_key(KEYS[1]), expire_at) end
set_outside(KEYS[1], live)
return {RESTORE.RESTORED, live .. ':' .. remaining}
