-- The reconciler's read of one campaign (proto/campaigns.md, "The
-- reconciler"): its numbers, and the holds due for expiry, in one atomic read.
--
-- KEYS[1] campaign:{cID}:taken  KEYS[2] campaign:{cID}:holds
-- KEYS[3] campaign:{cID}:releasing  KEYS[4] campaign:{cID}:orders
-- ARGV[1] the latest heldUntil (ms) a hold may have to be listed
-- ARGV[2] how many holds to list at most
--
-- Returns {HLEN taken, "ZCARD holds ZCARD releasing\n" then one line per due
-- hold: "orderId heldUntilMs:state"}; nothing is changed.
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {redis.call('ZCARD', KEYS[2]) .. ' ' .. redis.call('ZCARD', KEYS[3])}
for _, o in ipairs(due) do
  local v = redis.call('HGET', KEYS[4], o)
  if v then
    local held, state = string.match(v, '^[^:]*:[^:]*:([^:]*):(.)$')
    if held then out[#out + 1] = o .. ' ' .. held .. ':' .. state end
  end
end
return {redis.call('HLEN', KEYS[1]), table.concat(out, '\n')}
