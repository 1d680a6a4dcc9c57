-- The reconciler's full read of one campaign's Redis state, in one atomic
-- step (rc_campaign.c reads PostgreSQL's rows before it, as the voucher pass
-- reads the rows before the orders).
--
-- KEYS[1] campaign:{cID}:taken  KEYS[2] campaign:{cID}:users
-- KEYS[3] campaign:{cID}:orders KEYS[4] campaign:{cID}:releasing
-- ARGV[1] the latest start (ms) of a release to list as due
-- ARGV[2] how many due releases to list at most
--
-- Returns {flags, text}: flags is 1 when taken exists, plus 2 when users
-- does, plus 4 when orders does; text is one line per order
-- "O orderId value", per taken code "T code orderId" (not the "!" field),
-- per release begun at or before ARGV[1] "R orderId", then a last line "."
-- (the reader checks it arrived whole).
local out = {}
local all = redis.call('HGETALL', KEYS[3])
for i = 1, #all, 2 do out[#out + 1] = 'O ' .. all[i] .. ' ' .. all[i + 1] end
all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if all[i] ~= '!' then out[#out + 1] = 'T ' .. all[i] .. ' ' .. all[i + 1] end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, o in ipairs(due) do out[#out + 1] = 'R ' .. o end
out[#out + 1] = '.'
local flags = redis.call('EXISTS', KEYS[1]) + 2 * redis.call('EXISTS', KEYS[2]) +
  4 * redis.call('EXISTS', KEYS[3])
return {flags, table.concat(out, '\n')}
