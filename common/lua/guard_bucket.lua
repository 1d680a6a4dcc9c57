-- A guessing-limit bucket (gateway/gw_guard.h, proto/redis-keys.md "Guessing
-- limits"): a token bucket that only failed tries keep.
--
-- KEYS[1] guard:{cu:SCOPE:CUSTOMER} or guard:{ip:SCOPE:ADDRESS}, a hash
--         {level, at}; absent means full.
-- ARGV    op, tries, window_ms[, count]. op is
--         "take"  (before the code is looked up): takes a try if one is
--                 there, in this one step with the check, so that tries sent
--                 together cannot all pass before any is taken (issue 42);
--         "give"  (after an answer that is not a failed try): gives count
--                 taken tries back (1 when absent: a gateway's lease gives
--                 all it held at once), up to full;
--         "spend" (after a failed try that no take paid for: the gateway let
--                 it through from memory): take one even if none is left,
--                 down to 1,000,000 tries owed, so that it is paid for before
--                 the next try.
--
-- The level and its refill: bucket_level.lua.
--
-- Returns, for take, {1, full_at} (taken) or {0, retry_ms}: empty, nothing
-- written, and the milliseconds until the next whole try; for spend, {1,
-- full_at}; for give, {1, 0}. full_at is when the bucket is full again, in
-- Redis's clock (ms since the epoch, TIME), which the gateway puts in
-- guard:index and publishes once the try turns out a failure (guard_index.lua).
-- Every write may fail when Redis is full (OOM): the gateway then refuses the
-- request (503), never lets it through unpaid.
-- @include bucket_level.lua
local MAX_DEBT = 1000000 -- GW_GUARD_MAX_DEBT, in tries
local op = ARGV[1]
local tries = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local level, now, full = bucket_level(KEYS[1], tries, window)

if op == 'take' then
  if level < window then
    return {0, math.max(1, math.ceil((window - level) / tries))}
  end
  level = level - window
elseif op == 'give' then
  level = level + window * (tonumber(ARGV[4]) or 1)
  if level >= full then
    -- Full: the same as absent.
    redis.call('DEL', KEYS[1])
    return {1, 0}
  end
elseif op == 'spend' then
  level = math.max(-MAX_DEBT * window, level - window)
else
  return redis.error_reply('guard_bucket: unknown op ' .. tostring(op))
end

return {1, bucket_write(KEYS[1], level, now, full, tries)}
