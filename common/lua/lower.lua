-- lower: lowers a voucher's counter that offers more than the remaining rule
-- allows, counting the orders Redis holds as taken at this moment
-- (remaining_rule.lua comes before this). Whatever reserves and releases ran
-- since the reconciler read the voucher are counted as they are now, so a
-- counter that went down and back up meanwhile is judged by what it is, not
-- by the value read. Never raises the counter, never below 0.
--
-- KEYS[1] remaining  KEYS[2] orders
-- ARGV[1] total_limit (the limit key's, when it exists)  ARGV[2] uses counted without rows
--
-- Returns {1, "before:after"} lowered, {0, "before:before"} it already
-- obeys the rule, {-1, false} it is missing.
-- @include remaining_rule.lua
if redis.call('EXISTS', KEYS[1]) == 0 then return {LOWER.COUNTER_MISSING, false} end
local lost = voucher_orders_lost(KEYS[1], KEYS[2])
local live = count_taken(KEYS[2])
local total = limit_total(KEYS[1], tonumber(ARGV[1]))
local lowered, counter = settle(KEYS[1], total, tonumber(ARGV[2]), live)
-- A counter lowered for uses counted without rows (used_count raised by
-- hand) holds them back for no order: recorded, so that reserve.lua does not
-- take it for a lost orders hash; a loss shown before stays shown.
if not lost then set_outside(KEYS[1], live) end
return {lowered, counter}
