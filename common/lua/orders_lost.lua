-- Whether a voucher's orders hash was lost (proto/redis-keys.md, "A lost
-- orders hash"): it does not exist while users or amounts does. Both are
-- written with every order, and forget.lua deletes them when it empties
-- orders, so orders missing beside either is a loss, never a voucher without
-- orders. The reconciler rebuilds it from PostgreSQL (rebuild.lua).
local function orders_lost(orders, users, amounts)
  return redis.call('EXISTS', orders) == 0 and
         (redis.call('EXISTS', users) == 1 or redis.call('EXISTS', amounts) == 1)
end
-- The answer of a voucher script that found no order: -1, or -7 while the
-- orders hash is lost and -8 while the voucher's counter is missing from Redis
-- (never loaded, expired a retention after its end, or lost with its keys:
-- the gateway asks PostgreSQL which). In both the order may exist in
-- PostgreSQL, so the gateway answers 503 (outcome unknown, retry), never a 404
-- that tells the order service there is no such order. Without the keys
-- (users, amounts, remaining: nil) it is -1, as before they were passed.
local function no_order(orders, users, amounts, remaining)
  if not remaining then return -1 end
  if redis.call('EXISTS', remaining) == 0 then return -8 end
  if orders_lost(orders, users, amounts) then return -7 end
  return -1
end
