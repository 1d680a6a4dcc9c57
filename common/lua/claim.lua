-- Changes an orderId's claim (voucher-order:{ORDERID}, proto/redis-keys.md)
-- only on behalf of the request that owns it. A claim's value is
-- "CODE:TOKEN": the voucher code the orderId belongs to, and a token unique to
-- the request that wrote it. One key, in its own slot (Redis Cluster too).
--
-- KEYS[1] voucher-order:{ORDERID}
-- ARGV[1] "release": the request's reservation took nothing: delete the
--         claim, only if it still holds ARGV[2] (this request made it and no
--         other request took it over since);
--         "keep": the request took a use under a claim another request of the
--         same code made: make the claim its own (ARGV[2]) if it is free or
--         held for the same code, so that the other request's release cannot
--         delete it.
-- ARGV[2] CODE:TOKEN of this request   ARGV[3] CODE
-- ARGV[4] when the claim expires (Unix ms): the voucher's endsAt plus the
--         retention, the instant its keys expire (proto/redis-keys.md,
--         "Retention"); absent from gateways older than the retention
--
-- Returns 1 done, 0 not done: "release" found another value (or none),
-- "keep" found the orderId claimed for another code.
local v = redis.call('GET', KEYS[1])
if ARGV[1] == 'release' then
  if v ~= ARGV[2] then return 0 end
  redis.call('DEL', KEYS[1])
  return 1
end
-- A claim written before claims had tokens holds the bare code.
if v and v ~= ARGV[3] and string.sub(v, 1, #ARGV[3] + 1) ~= ARGV[3] .. ':' then return 0 end
if ARGV[4] then
  redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[4])
else
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
end
return 1
