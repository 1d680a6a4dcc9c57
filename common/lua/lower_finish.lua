-- lower_finish: the last step of a lower in slices (remaining_rule.lua and
-- repair_slices.lua, its count again of the noted orders, come before this;
-- lower_slice.lua read the orders hash; proto/redis-keys.md, "A lower in
-- slices"). At one moment: ends the read (its token out of scan), and gives
-- up, writing nothing but dropping the staged orders, when the counter is
-- gone, the token was gone (touched may lack writes), or the orders hash
-- changed without a note (its size is not what the slices read plus the notes
-- say: the hash expired or was lost meanwhile). Otherwise each order written
-- since the read began (touched: reservations, confirms, cancels, releases,
-- forgets) is counted as it is now instead of as the slices read it, which
-- makes live the orders held as taken now, as lower.lua's count_taken() would
-- find them in this same moment; then, as lower.lua: the counter lowered to
-- the rule's bound from live (never raised, never below 0), and the outside
-- key unless the orders hash is lost. The counter is never lowered from a
-- count some write since escaped.
--
-- KEYS[1] remaining  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- KEYS[5] releasing  KEYS[6] scan  KEYS[7] touched
-- KEYS[8] the staged orders  KEYS[9] the staged users (none: dropped if there)
-- (KEYS[2], KEYS[4] and KEYS[5] unused: the keys every finish of a repair in
-- slices takes, rc_repair.c's repair_in_slices())
-- ARGV[1] total_limit (the limit key's, when it exists)  ARGV[2] uses counted
-- without rows  ARGV[3] the orders the slices read held as taken
-- (lower_slice.lua's counts, summed)  ARGV[4] the read's token
--
-- Returns as lower.lua: {LOWERED, "before:after"}, {OBEYS, "before:before"};
-- {COUNTER_MISSING, false}; {NOTES_LOST, false} the token was gone;
-- {ORDERS_STATE, false} the orders hash changed without a note. Nothing but
-- the staged orders and the read's notes is written unless it answers
-- LOWERED.
-- @include repair_slices.lua
local refused, ids = end_read(KEYS[6], KEYS[7], ARGV[4], {KEYS[8], KEYS[9]}, function(kept)
  if redis.call('EXISTS', KEYS[1]) == 0 then return REPAIR.COUNTER_MISSING end
  if not kept then return REPAIR.NOTES_LOST end
end)
if refused then return {refused, false} end
local lost = voucher_orders_lost(KEYS[1], KEYS[3])
local whole, live = recount_uses(ids, KEYS[8], KEYS[3], tonumber(ARGV[3]), {}, {}, '0')
redis.call('UNLINK', KEYS[8], KEYS[9])
if not whole then return {REPAIR.ORDERS_STATE, false} end
local total = limit_total(KEYS[1], tonumber(ARGV[1]))
local lowered, counter = settle(KEYS[1], total, tonumber(ARGV[2]), live)
-- As lower.lua: a loss shown before stays shown.
if not lost then set_outside(KEYS[1], live) end
return {lowered, counter}
