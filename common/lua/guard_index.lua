-- The index of the guessing-limit buckets that are not full (gateway/gw_guard.h,
-- "the spent set"; proto/redis-keys.md "Guessing limits"), run by the gateway
-- after each spend that guard_bucket.lua answered.
--
-- KEYS[1] guard:index, a sorted set: bucket key -> when it is full again
--         (Redis's clock, ms since the epoch).
-- ARGV    pairs: bucket key, full_at (guard_bucket.lua's spend answer); the
--         buckets of one failure (customer and address) in one call.
--
-- Indexes each bucket (ZADD GT: a later spend only moves it later), then
-- publishes "full_at bucket" on voucher-guard for each. The order is the promise a
-- gateway relies on: it subscribes first and then reads the index, so every
-- spend is either in what it reads or a message it hears. Both happen here,
-- on the node of guard:index, in one script (on a Redis Cluster the message
-- then reaches the subscribers of every node). Bounded: the members already
-- full are removed each time (each once), and the key expires when its last
-- member is full, so an idle index goes away.
--
-- Returns Redis's now (ms).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if #ARGV == 0 or #ARGV % 2 ~= 0 then
  return redis.error_reply('guard_index: wants pairs of bucket key and full_at')
end
for i = 2, #ARGV, 2 do
  if tonumber(ARGV[i]) == nil then
    return redis.error_reply('guard_index: full_at is not a number')
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 1, #ARGV, 2 do
  if tonumber(ARGV[i + 1]) > now then
    redis.call('ZADD', KEYS[1], 'GT', ARGV[i + 1], ARGV[i])
  end
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]) + 1)
end
for i = 1, #ARGV, 2 do
  redis.call('PUBLISH', 'voucher-guard',
             string.format('%d', tonumber(ARGV[i + 1])) .. ' ' .. ARGV[i])
end
return now
