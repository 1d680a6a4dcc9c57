-- lower_slice: one slice of a lower in slices (remaining_rule.lua and
-- repair_slices.lua, its read of a slice, come before this;
-- proto/redis-keys.md, "A lower in slices"). A voucher whose counter offers
-- more than the remaining rule allows, with more orders than the reconciler
-- reads at once, is lowered without one script counting every order (lower.lua
-- held Redis 3.6 s for 1,000,000). The counter and the users hash exist
-- meanwhile, so reserve.lua keeps taking uses between the slices and the
-- releases keep giving them back: each order a slice reads is noted in the
-- staged orders of this lower (the value it counted), and every write of an
-- order meanwhile is noted in touched by the read's token in scan
-- (scan_begin.lua, orders_write.lua): lower_finish.lua counts those again at
-- one moment before it lowers the counter. A slice only counts: it writes
-- nothing of the voucher's.
--
-- Each call reads the next piece of the orders hash (HSCAN ... COUNT ARGV[4]
-- from ARGV[2]) and, for each order not read before (HSCAN may return one
-- twice), copies its value into the staged orders and counts it when it is
-- held as taken.
--
-- KEYS[1] remaining  KEYS[2] orders  KEYS[3] holds  KEYS[4] releasing
-- KEYS[5] scan  KEYS[6] the staged orders (voucher:{CODE}:restoring:TOKEN:orders)
-- KEYS[7] the staged users (never written: a lower keeps no customer's count)
-- (KEYS[3], KEYS[4] and KEYS[7] unused: the keys every slice of a repair in
-- slices takes, rc_repair.c's repair_in_slices())
-- ARGV[1] the read's token (in scan since scan_begin.lua)
-- ARGV[2] the HSCAN cursor to read from
-- ARGV[3] how long the staged orders live (ms): a reconciler that stops midway
-- leaves nothing for good  ARGV[4] the slice: how many orders a call reads
-- (HSCAN's COUNT; the reconciler sends 500)
--
-- Returns {READ, "cursor:taken"}: the next cursor ("0" at the end of the
-- hash) and how many orders read now are held as taken; {COUNTER_MISSING,
-- false}: the counter is gone (lower.lua's answer; the restore's case);
-- {NOTES_LOST, false}: the read's token is gone (expired, or Redis lost it),
-- so touched may lack writes. Nothing is written when it refuses.
-- @include repair_slices.lua
if redis.call('EXISTS', KEYS[1]) == 0 then return {REPAIR.COUNTER_MISSING, false} end
if redis.call('SISMEMBER', KEYS[5], ARGV[1]) == 0 then return {REPAIR.NOTES_LOST, false} end
local cursor, taken = read_slice(KEYS[2], ARGV[2], tonumber(ARGV[4]), KEYS[6], false, {}, {}, '0')
if redis.call('EXISTS', KEYS[6]) == 1 then redis.call('PEXPIRE', KEYS[6], ARGV[3]) end
return {LOWER_SLICE.READ, cursor .. ':' .. taken}
