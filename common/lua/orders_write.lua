-- Every write of a voucher's order, by the scripts that include this file.
-- The reconciler reads an orders hash too large to read at once in pieces
-- (HSCAN; reconciler/rc_redis.c, proto/redis-keys.md "Reading a large orders
-- hash"): scan_begin.lua sets voucher:{CODE}:scan while such a read runs, and
-- each order written meanwhile is noted in voucher:{CODE}:touched, for
-- scan_finish.lua to read again at one moment. Both keys sit beside the
-- orders hash (same hash tag, so the same slot). A write that bypassed these
-- two functions would leave the reconciler a stale value of that order.
-- A campaign's orders (campaign:{cID}:orders) are noted the same way, in
-- campaign:{cID}:touched; its taken codes by taken_write.lua.
local function note_order(orders_key, id)
  if redis.call('EXISTS', (string.gsub(orders_key, ':orders$', ':scan'))) == 1 then
    redis.call('SADD', (string.gsub(orders_key, ':orders$', ':touched')), id)
  end
end

local function write_order(orders_key, id, value)
  redis.call('HSET', orders_key, id, value)
  note_order(orders_key, id)
end

local function drop_order(orders_key, id)
  redis.call('HDEL', orders_key, id)
  note_order(orders_key, id)
end
