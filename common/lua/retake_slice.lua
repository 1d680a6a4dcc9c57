-- retake_slice: one slice of a retake in slices (remaining_rule.lua and
-- repair_slices.lua, its read of a slice, come before this;
-- proto/redis-keys.md, "A retake in slices"). A voucher whose
-- users hash Redis lost while it kept the counter and the orders, with more
-- orders than the reconciler reads at once, gets its customers' counts back
-- without one script holding Redis for every order. While users is missing
-- beside orders no script takes a use (reserve.lua answers COUNTS_LOST before
-- it writes) and none writes users (a give-back lowers only a count above 0),
-- but confirm, cancel, the release's finish and forget still write orders.
-- So each order a slice reads is noted in the staged copy of this retake (the
-- value it counted), and every write of an order meanwhile is noted in touched
-- by the read's token in scan (scan_begin.lua, orders_write.lua):
-- retake_finish.lua counts those again at one moment.
--
-- Each call: merges up to ARGV[4] of the snapshot's orders that Redis lacks
-- (as retake.lua's merge(), noted in touched like any write), then reads the
-- next piece of the orders hash (HSCAN ... COUNT ARGV[4] from ARGV[2]) and,
-- for each order not read before (HSCAN may return one twice), copies its
-- value into the staged orders and adds one to its customer's staged count
-- when it is held as taken. Holds and releases begun are left as retake.lua
-- leaves them: untouched but for the merged orders' holds.
--
-- KEYS[1] remaining  KEYS[2] orders  KEYS[3] holds  KEYS[4] releasing
-- KEYS[5] scan  KEYS[6] the staged orders  KEYS[7] the staged users
-- (voucher:{CODE}:restoring:TOKEN:orders, :users)  KEYS[8] users
-- ARGV[1] the read's token (in scan since scan_begin.lua)
-- ARGV[2] the HSCAN cursor to read from, "" when the read is done
-- ARGV[3] how long the staged keys live (ms): a reconciler that stops midway
-- leaves nothing for good  ARGV[4] the slice: how many orders a call merges
-- and reads (HSCAN's COUNT; the reconciler sends 500)
-- then fours as merge() takes them (orders of the snapshot)
--
-- Returns {READ, "cursor:taken:written"}: the next cursor ("0" at the end of
-- the hash, "" when none was read), how many orders read now are held as
-- taken, and how many of the snapshot's it wrote; {COUNTER_MISSING, false}:
-- the counter is gone (the restore's case); {ORDERS_STATE, false}: the orders
-- hash is lost; {USERS_BACK, false}: users exists again, so reserve.lua takes
-- uses meanwhile (the next pass judges again); {NOTES_LOST, false}: the read's
-- token is gone (expired, or Redis lost it), so touched may lack writes.
-- Nothing is written when it refuses.
-- @include repair_slices.lua
if redis.call('EXISTS', KEYS[1]) == 0 then return {REPAIR.COUNTER_MISSING, false} end
if voucher_orders_lost(KEYS[1], KEYS[2]) then return {REPAIR.ORDERS_STATE, false} end
if redis.call('EXISTS', KEYS[8]) == 1 then return {REPAIR.USERS_BACK, false} end
if redis.call('SISMEMBER', KEYS[5], ARGV[1]) == 0 then return {REPAIR.NOTES_LOST, false} end
local written = merge(KEYS[2], KEYS[3], KEYS[4], 5)
local cursor, taken = '', 0
if ARGV[2] ~= '' then
  -- Holds and releases begun are left as they are: what tally_order() puts
  -- into the two tables is dropped.
  cursor, taken = read_slice(KEYS[2], ARGV[2], tonumber(ARGV[4]), KEYS[6], KEYS[7], {}, {}, '0')
end
for i = 6, 7 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
end
return {RETAKE_SLICE.READ, cursor .. ':' .. taken .. ':' .. written}
