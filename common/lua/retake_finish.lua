-- retake_finish: the last step of a retake in slices (remaining_rule.lua
-- and repair_slices.lua, its count again of the noted orders, come before
-- this; retake_slice.lua read the orders hash and merged the
-- snapshot's orders). At one moment: ends the read (its token out of scan),
-- and gives up, writing nothing but dropping the staged keys, when the
-- counter is gone, the orders hash is lost, users exists again, the token was
-- gone (touched may lack writes), or the orders hash changed without a note
-- (its size is not what the slices read plus the notes say). Otherwise each
-- order written since the read began (touched) is counted as it is now
-- instead of as the slices read it: its customer's staged count and the uses
-- held move by the difference. Then, as retake.lua: users gets the counts
-- (raised from nothing: users is missing, so the staged counts are put in
-- place by RENAME, one command whatever the customers), the counter lowered
-- to the rule's bound from the uses held now (never raised), the expiries and
-- the outside key. The counter is never lowered from a count some write since
-- escaped, and no customer's count is set from one.
--
-- KEYS[1] remaining  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- KEYS[5] releasing  KEYS[6] scan  KEYS[7] touched
-- KEYS[8] the staged orders  KEYS[9] the staged users
-- ARGV[1] total_limit (the limit key's, when it exists)  ARGV[2] uses counted
-- without rows  ARGV[3] the orders the slices read held as taken
-- (retake_slice.lua's counts, summed)  ARGV[4] expireAt, as retake.lua takes
-- it ("0" sets none)  ARGV[5] the read's token  ARGV[6] the snapshot's orders
-- the slices wrote (summed)
--
-- Returns {n, "before:after"} as retake.lua (n: ARGV[6]); {COUNTER_MISSING,
-- false}; {ORDERS_STATE, false} the orders hash lost or changed without a
-- note; {USERS_BACK, false}; {NOTES_LOST, false} the token was gone. Nothing
-- but the staged keys and the read's notes is written unless it answers n.
-- @include repair_slices.lua
local function drop_staged() redis.call('UNLINK', KEYS[8], KEYS[9]) end
local refused, ids = end_read(KEYS[6], KEYS[7], ARGV[5], {KEYS[8], KEYS[9]}, function(kept)
  if redis.call('EXISTS', KEYS[1]) == 0 then return REPAIR.COUNTER_MISSING end
  if voucher_orders_lost(KEYS[1], KEYS[3]) then return REPAIR.ORDERS_STATE end
  if redis.call('EXISTS', KEYS[2]) == 1 then return REPAIR.USERS_BACK end
  if not kept then return REPAIR.NOTES_LOST end
end)
if refused then return {refused, false} end
-- Holds and releases begun are left as retake.lua leaves them.
local whole, live, per = recount_uses(ids, KEYS[8], KEYS[3], tonumber(ARGV[3]), {}, {}, '0')
if not whole then
  drop_staged()
  return {REPAIR.ORDERS_STATE, false}
end
move_staged_counts(KEYS[9], per)
redis.call('UNLINK', KEYS[8])
-- users is missing: raising every customer to the orders they hold is
-- writing the staged counts, which place_users() does with one RENAME (and a
-- customer's 0 when nobody holds a use, as raise_users() leaves it).
place_users(KEYS[2], KEYS[9], KEYS[3])
local total = limit_total(KEYS[1], tonumber(ARGV[1]))
local _, counter = settle(KEYS[1], total, tonumber(ARGV[2]), live)
-- The users the staged counts became carry the staged keys' lifetime: the
-- voucher's instant, or none, as retake.lua's HSET leaves a new hash.
local expire_at = tonumber(ARGV[4])
if expire_at and expire_at > 0 then
  expire_together(KEYS, expire_at)
else
  redis.call('PERSIST', KEYS[2])
end
set_outside(KEYS[1], live)
return {tonumber(ARGV[6]), counter}
