-- Ends the reconciler's read of a campaign in pieces (scan_begin.lua, then
-- HSCAN of its orders and of its taken codes): every order and every code a
-- script wrote since the read began, the sizes, which keys exist and the
-- releases due, all at one moment. With the pieces, which hold every order
-- and code not written since (HSCAN returns each element present
-- throughout), they are the campaign as it is now, as one MULTI/EXEC of the
-- whole would have read it. An order or a code gone without a write (a key
-- expired or was lost) shows in the sizes: the reader compares them with
-- what it holds.
--
-- KEYS[1] campaign:{cID}:orders  KEYS[2] campaign:{cID}:taken
-- KEYS[3] campaign:{cID}:users   KEYS[4] campaign:{cID}:releasing
-- KEYS[5] campaign:{cID}:scan    KEYS[6] campaign:{cID}:touched
-- KEYS[7] campaign:{cID}:touched_codes
-- ARGV[1] the read's token
-- ARGV[2] the latest start (ms) of a release to list as due
-- ARGV[3] how many due releases to list at most
--
-- Returns {1, HLEN orders, HLEN taken, keys, {orderId, value or nil, ...},
-- {code, orderId or nil, ...}, {due release's orderId, ...}} for a read kept
-- whole (keys: 1 when taken exists, plus 2 for users, plus 4 for orders), or
-- {0} when its token is gone (the read outlived its lifetime, or Redis lost
-- the key): then the notes may lack writes, and the reader reads at once.
local kept = redis.call('SREM', KEYS[5], ARGV[1]) == 1
local ids = kept and redis.call('SMEMBERS', KEYS[6]) or {}
local codes = kept and redis.call('SMEMBERS', KEYS[7]) or {}
if redis.call('EXISTS', KEYS[5]) == 0 then redis.call('DEL', KEYS[6], KEYS[7]) end
if not kept then return {0} end
local function again(key, fields)
  local out = {}
  for _, f in ipairs(fields) do
    if f ~= '' then
      out[#out + 1] = f
      out[#out + 1] = redis.call('HGET', key, f) or false
    end
  end
  return out
end
local keys = redis.call('EXISTS', KEYS[2]) + 2 * redis.call('EXISTS', KEYS[3]) +
  4 * redis.call('EXISTS', KEYS[1])
return {1, redis.call('HLEN', KEYS[1]), redis.call('HLEN', KEYS[2]), keys,
        again(KEYS[1], ids), again(KEYS[2], codes),
        redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))}
