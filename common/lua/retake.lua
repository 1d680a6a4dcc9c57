-- retake: takes a use again for each order the reconciler's snapshot counts
-- and Redis lacks (lost with the orders hash), or holds R where an earlier
-- pass saw it R too (remaining_rule.lua comes before this). An order Redis
-- holds otherwise is kept as it is. Each customer's count in users is raised
-- to the orders they hold (a lost users hash lets them past their limit). The counter is then lowered to the rule's
-- bound, counting the orders as they are now, never by one per order: when
-- only the orders hash was lost, the counter already counts those uses. It is
-- never raised, never taken below 0 (proto/redis-keys.md says why that stays
-- safe), and never created.
--
-- KEYS[1] remaining  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- KEYS[5] releasing
-- ARGV[1] total_limit (the limit key's, when it exists)  ARGV[2] uses counted without rows
-- ARGV[3] expireAt, as restore.lua takes it: a hash lost and written again
-- here gets the voucher's expiry back, "0" sets none
-- then fours as merge() takes them
--
-- Returns {n, "before:after"}: n orders written; {-1, false} the counter is
-- missing (the keys were lost: the restore rebuilds them; writing here would
-- make a voucher that looks loaded and is never restored); {-2, false} the
-- orders hash is lost (orders_lost.lua): the rebuild's case, nothing written.
-- The outside key (outside.lua) is set to what the counter then holds back
-- for no order.
-- @include remaining_rule.lua
if redis.call('EXISTS', KEYS[1]) == 0 then return {REPAIR.COUNTER_MISSING, false} end
-- The orders hash lost since the pass read it: writing the snapshot's live
-- orders would end the loss's sign without the orders taken after that read,
-- or the released ones, and a retry of one would be a new order. The next
-- pass sees the loss and rebuilds (rebuild.lua).
if voucher_orders_lost(KEYS[1], KEYS[3]) then return {REPAIR.ORDERS_STATE, false} end
local written = merge(KEYS[3], KEYS[4], KEYS[5], 4)
local live, per = count_taken(KEYS[3])
-- Every customer, not only those written: the users hash may be what was lost.
raise_users(KEYS[2], per, KEYS[3])
local total = limit_total(KEYS[1], tonumber(ARGV[1]))
local _, counter = settle(KEYS[1], total, tonumber(ARGV[2]), live)
expire_together(KEYS, tonumber(ARGV[3]))
set_outside(KEYS[1], live)
return {written, counter}
