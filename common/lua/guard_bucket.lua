-- A guessing-limit bucket (gateway/gw_guard.h, proto/redis-keys.md "Guessing
-- limits"): a token bucket that only failed tries spend.
--
-- KEYS[1] guard:{cu:SCOPE:CUSTOMER} or guard:{ip:SCOPE:ADDRESS}, a hash
--         {level, at}; absent means full.
-- ARGV    op, tries, window_ms. op is
--         "check" (before the code is looked up): whether a try is there,
--                 writing nothing;
--         "spend" (after a failed try): take one even if none is left, down
--                 to 1,000,000 tries owed, so that failures that were in
--                 flight together are all paid for before the next try.
--
-- The level is in units of 1/tries of a millisecond's refill: full is
-- tries * window_ms, one try costs window_ms, each millisecond adds tries
-- (the arithmetic of gw_guard_bucket_*(), which tests/unit/test_guard.c
-- checks). The clock is Redis's own (TIME), so gateways with skewed clocks
-- share one bucket consistently.
--
-- Returns, for check, {1, 0} (a try is there) or {0, retry_ms}: empty, and
-- the milliseconds until the next whole try; for spend, {1, full_at}: when the
-- bucket is full again, in Redis's clock (ms since the epoch, TIME), which the
-- gateway then puts in guard:index and publishes (guard_index.lua).
local MAX_DEBT = 1000000 -- GW_GUARD_MAX_DEBT, in tries
local op = ARGV[1]
local tries = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local full = tries * window

local v = redis.call('HMGET', KEYS[1], 'level', 'at')
local level, at = tonumber(v[1]), tonumber(v[2])
if level == nil or at == nil then
  level, at = full, now
end
if now > at then
  local to_full = math.floor((full - level) / tries) + 1
  level = level + math.min(now - at, to_full) * tries
end
level = math.min(level, full)

if op == 'check' then
  if level < window then
    return {0, math.max(1, math.ceil((window - level) / tries))}
  end
  return {1, 0}
elseif op ~= 'spend' then
  return redis.error_reply('guard_bucket: unknown op ' .. tostring(op))
end

level = math.max(-MAX_DEBT * window, level - window)
redis.call('HSET', KEYS[1], 'level', string.format('%d', level), 'at', string.format('%d', now))
-- Full again after this long: the key is then the same as absent.
local to_full = math.ceil((full - level) / tries) + 1
redis.call('PEXPIRE', KEYS[1], to_full)
return {1, now + to_full}
