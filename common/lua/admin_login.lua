-- Failed admin logins of one client address (gateway/gw_login.h,
-- proto/redis-keys.md "Admin logins"): a bucket of tries that refills evenly
-- over its window (bucket_level.lua, the guessing limits' rule), shared by
-- every gateway, so that N gateways, or a restarted one, give a guesser no
-- more tries than one.
--
-- KEYS[1] guard:{login:ADDRESS}, a hash {level, at}; absent means full.
-- ARGV    op, tries, window_ms. op is
--         "take"  (a wrong token): takes a try if one is there, in this one
--                 step with the check, so that wrong tokens sent together
--                 cannot all pass before any is taken;
--         "check" (a right token): whether a try is there; nothing written,
--                 so that a right token spends nothing.
--         Both answer the same when the bucket is empty: the answer to an
--         empty bucket tells nothing of the token.
--
-- Returns {ADMIN_LOGIN.TRIED, 0}, or {ADMIN_LOGIN.EMPTY, retry_ms}: nothing
-- written, and the milliseconds until the next whole try. A take may fail
-- when Redis is full (OOM): the gateway then counts in its own memory
-- (gw_login.h).
-- @include bucket_level.lua
local op = ARGV[1]
local tries = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local level, now, full = bucket_level(KEYS[1], tries, window)

if op ~= 'take' and op ~= 'check' then
  return redis.error_reply('admin_login: unknown op ' .. tostring(op))
end
if level < window then
  return {ADMIN_LOGIN.EMPTY, math.max(1, math.ceil((window - level) / tries))}
end
if op == 'take' then
  bucket_write(KEYS[1], level - window, now, full, tries)
end
return {ADMIN_LOGIN.TRIED, 0}
