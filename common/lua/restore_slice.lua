-- restore_slice: one slice of a restore in slices (remaining_rule.lua and
-- repair_slices.lua, its read of a slice, come before this;
-- proto/redis-keys.md, "A restore in slices"). A voucher whose
-- counter Redis lost while it kept the orders hash, with more orders than the
-- reconciler reads at once, is restored without one script holding Redis for
-- every order. While the counter is missing no script takes a use
-- (reserve.lua answers "not loaded" before it writes), but confirm, cancel,
-- the release's finish and forget still write orders. So each order a slice
-- reads is noted in the staged copy of this restore (the value it counted),
-- and every write of an order meanwhile is noted in touched by the read's
-- token in scan (scan_begin.lua, orders_write.lua): restore_finish.lua
-- counts those again at one moment before it sets the counter.
--
-- Each call: merges up to ARGV[5] of the snapshot's orders that Redis lacks
-- (as restore.lua's merge(), noted in touched like any write), then reads the
-- next piece of the orders hash (HSCAN ... COUNT ARGV[5] from ARGV[2]) and, for
-- each order not read before (HSCAN may return one twice), copies its value
-- into the staged orders, adds one to its customer's staged count when it is
-- held as taken, puts an H among the holds and an X or E among the releases
-- begun (NX, due a grace from now), as restore.lua does for every order.
--
-- KEYS[1] remaining  KEYS[2] orders  KEYS[3] holds  KEYS[4] releasing
-- KEYS[5] scan  KEYS[6] the staged orders  KEYS[7] the staged users
-- (voucher:{CODE}:restoring:TOKEN:orders, :users)
-- ARGV[1] the read's token (in scan since scan_begin.lua)
-- ARGV[2] the HSCAN cursor to read from, "" when the read is done
-- ARGV[3] nowMs  ARGV[4] how long the staged keys live (ms): a reconciler
-- that stops midway leaves nothing for good  ARGV[5] the slice: how many
-- orders a call merges and reads (HSCAN's COUNT; the reconciler sends 500)
-- then fours as merge() takes them (orders of the snapshot)
--
-- Returns {READ, "cursor:taken"}: the next cursor ("0" at the end of
-- the hash, "" when none was read) and how many orders read now are held as
-- taken; {COUNTER_EXISTS, false}: the counter is back, nothing written;
-- {NOTES_LOST, false}: the read's token is gone (expired, or Redis lost it),
-- so touched may lack writes: nothing written, the restore gives up.
-- @include repair_slices.lua
if redis.call('EXISTS', KEYS[1]) == 1 then return {RESTORE.COUNTER_EXISTS, false} end
if redis.call('SISMEMBER', KEYS[5], ARGV[1]) == 0 then return {REPAIR.NOTES_LOST, false} end
merge(KEYS[2], KEYS[3], KEYS[4], 6)
local cursor, taken = '', 0
if ARGV[2] ~= '' then
  local holds, releasing = {}, {}
  cursor, taken = read_slice(KEYS[2], ARGV[2], tonumber(ARGV[5]), KEYS[6], KEYS[7], holds,
                             releasing, ARGV[3])
  call_in_slices('ZADD', KEYS[3], holds, 1000)
  call_in_slices('ZADD', KEYS[4], releasing, 1000, 'NX')
end
for i = 6, 7 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
end
return {RESTORE_SLICE.READ, cursor .. ':' .. taken}
