-- limit_sync: brings the counter to PostgreSQL's total_limit when the limit
-- key (the total the counter reflects) says another: a total changed by hand
-- in SQL, a PATCH whose Redis step was lost (the gateway crashed after the
-- commit), or a counter loaded from a total read just before a PATCH
-- committed. The reconciler runs it (rc_raise.c) only while it holds the
-- voucher's limit lock, with the total read under that lock, so no PATCH is
-- half done (remaining_rule.lua comes before this).
--
-- A raise adds the difference: the counter was right, or short, for the old
-- total, so it is right, or short, for the new. A lower (by hand in SQL:
-- PATCH lowers Redis itself, first) takes the counter to the rule's bound,
-- counting the orders Redis holds now, as lower.lua does. A counter without
-- a limit key (loaded before limit keys existed) is taken to reflect
-- PostgreSQL's total: a raise by hand made before it was adopted is not
-- offered (undersell, never oversell).
--
-- KEYS[1] remaining  KEYS[2] orders  KEYS[3] limit
-- ARGV[1] total_limit  ARGV[2] uses counted without rows
-- ARGV[3] the limit key as the reconciler read it ("" when missing)
--
-- Returns {1, "before:after"} done, {-1, false} the counter is missing,
-- {-2, false} the limit key moved since it was read (the next pass judges),
-- {-3, false} a lower or an adoption while the orders hash is lost
-- (orders_lost.lua): nothing written, the sync runs again after the rebuild.
-- A lower and an adoption set the outside key (outside.lua) with the orders
-- they count.
-- @include remaining_rule.lua
local before = redis.call('GET', KEYS[1])
if not before then return {LIMIT_SYNC.COUNTER_MISSING, false} end
local have = redis.call('GET', KEYS[3])
if (have or '') ~= ARGV[3] then return {LIMIT_SYNC.LIMIT_MOVED, false} end
local total = tonumber(ARGV[1])
before = tonumber(before)
local after, live = before, nil
if have and total > tonumber(have) then
  after = before + (total - tonumber(have))
elseif not have or total < tonumber(have) then
  -- Both count the orders Redis holds: with the orders hash lost they would
  -- count none, and the lower would move the counter by less than the limit
  -- key (or the adoption record the lost orders' uses as held back for no
  -- order), hiding the loss reserve.lua refuses by. The rebuild first.
  if voucher_orders_lost(KEYS[1], KEYS[2]) then return {LIMIT_SYNC.ORDERS_LOST, false} end
  live = count_taken(KEYS[2])
  if have then after = math.min(before, remaining_bound(total, tonumber(ARGV[2]), live)) end
end
if after ~= before then redis.call('SET', KEYS[1], after, 'KEEPTTL') end
redis.call('SET', KEYS[3], total)
local expire_at = redis.call('PEXPIRETIME', KEYS[1])
if expire_at > 0 then redis.call('PEXPIREAT', KEYS[3], expire_at) end
-- A raise moves the counter and the limit key together: what the counter
-- holds back for no order (outside.lua) is unchanged. A lower, and a limit
-- key adopted, change it: recorded with the orders counted now.
if live then set_outside(KEYS[1], live) end
return {LIMIT_SYNC.DONE, before .. ':' .. after}
