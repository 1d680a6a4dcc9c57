-- Whether a voucher's orders hash was lost (proto/redis-keys.md, "A lost
-- orders hash"): it does not exist, and
-- - users or amounts does: both are written with every order, and forget.lua
--   deletes them when it empties orders; or
-- - remaining (the counter's key, when given) is below its limit key by more
--   than the outside key (outside.lua): every use taken has its order in the
--   hash until the use is back (a released order stays, R, until the
--   voucher's keys expire together; forget.lua gives the use back as it
--   drops the order), so uses taken with no orders hash were taken by orders
--   lost with it. This one tells the loss when users and amounts went too
--   (an eviction of several keys, a partial restore, a DEL by hand).
-- So orders missing beside either is a loss, never a voucher without orders.
-- The reconciler rebuilds it from PostgreSQL (rebuild.lua).
-- @include outside.lua
local function orders_lost(orders, users, amounts, remaining)
  return redis.call('EXISTS', orders) == 0 and
         (redis.call('EXISTS', users) == 1 or redis.call('EXISTS', amounts) == 1 or
          (remaining ~= nil and uses_unexplained(remaining)))
end
-- The answer of a voucher script that found no order: -1, or -7 while the
-- orders hash is lost and -8 while the voucher's counter is missing from Redis
-- (never loaded, expired a retention after its end, or lost with its keys:
-- the gateway asks PostgreSQL which). In both the order may exist in
-- PostgreSQL, so the gateway answers 503 (outcome unknown, retry), never a 404
-- that tells the order service there is no such order. Without the keys
-- (users, amounts, remaining: nil) it is -1, as before they were passed.
local function no_order(orders, users, amounts, remaining)
  if not remaining then return LOOKUP.NO_ORDER end
  if redis.call('EXISTS', remaining) == 0 then return LOOKUP.COUNTER_LOST end
  if orders_lost(orders, users, amounts, remaining) then return LOOKUP.KEYS_LOST end
  return LOOKUP.NO_ORDER
end
