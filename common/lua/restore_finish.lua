-- restore_finish: the last step of a restore in slices (remaining_rule.lua
-- and repair_slices.lua, its count again of the noted orders, come before
-- this; restore_slice.lua read the orders hash and merged the
-- snapshot's orders). At one moment: ends the read (its token out of scan),
-- and gives up, writing nothing but dropping the staged keys, when the
-- counter is back, the token was gone (touched may lack writes), or the
-- orders hash changed without a note (its size is not what the slices read
-- plus the notes say: the hash expired or was lost meanwhile). Otherwise each
-- order written since the read began (touched) is counted as it is now
-- instead of as the slices read it: its customer's staged count and the
-- uses held move by the difference, an H is put among the holds and an X or
-- E among the releases begun. Then, as restore.lua: users replaced by the
-- staged counts (lowered too), the counter set to the remaining rule's bound
-- from the uses held now, the limit key, the expiries and the outside key.
-- The counter is never set from a count some write since escaped.
--
-- KEYS[1] remaining  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- KEYS[5] releasing  KEYS[6] scan  KEYS[7] touched
-- KEYS[8] the staged orders  KEYS[9] the staged users
-- ARGV[1] total_limit  ARGV[2] uses counted without rows
-- ARGV[3] the orders the slices read held as taken (restore_slice.lua's
-- counts, summed)  ARGV[4] nowMs  ARGV[5] expireAt, as restore.lua takes it
-- ("0" sets none)  ARGV[6] the read's token
--
-- Returns {RESTORED, "live:remaining"}; {COUNTER_EXISTS, false};
-- {NOTES_LOST, false} the token was gone; {ORDERS_STATE, false} the orders
-- hash changed without a note. Nothing but the staged keys and the read's
-- notes is written unless restored.
-- @include repair_slices.lua
local function drop_staged() redis.call('UNLINK', KEYS[8], KEYS[9]) end
local refused, ids = end_read(KEYS[6], KEYS[7], ARGV[6], {KEYS[8], KEYS[9]}, function(kept)
  if redis.call('EXISTS', KEYS[1]) == 1 then return RESTORE.COUNTER_EXISTS end
  if not kept then return REPAIR.NOTES_LOST end
end)
if refused then return {refused, false} end
local holds, releasing = {}, {}
local whole, live, per = recount_uses(ids, KEYS[8], KEYS[3], tonumber(ARGV[3]), holds, releasing,
                                      ARGV[4])
if not whole then
  drop_staged()
  return {REPAIR.ORDERS_STATE, false}
end
move_staged_counts(KEYS[9], per)
call_in_slices('ZADD', KEYS[4], holds, 1000)
call_in_slices('ZADD', KEYS[5], releasing, 1000, 'NX')
redis.call('UNLINK', KEYS[8])
-- Each count set to the orders held, lowered too, as set_users() does.
place_users(KEYS[2], KEYS[9], KEYS[3])
local remaining = remaining_bound(tonumber(ARGV[1]), tonumber(ARGV[2]), live)
redis.call('SET', KEYS[1], remaining)
-- The users the staged counts became carry the staged keys' lifetime: the
-- voucher's instant, or none, as restore.lua leaves them.
local expire_at = tonumber(ARGV[5])
if expire_at and expire_at > 0 then
  expire_together(KEYS, expire_at)
else
  redis.call('PERSIST', KEYS[2])
end
redis.call('SET', limit_key(KEYS[1]), ARGV[1])
if expire_at and expire_at > 0 then redis.call('PEXPIREAT', limit_key(KEYS[1]), expire_at) end
set_outside(KEYS[1], live)
return {RESTORE.RESTORED, live .. ':' .. remaining}
