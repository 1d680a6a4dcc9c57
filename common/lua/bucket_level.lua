-- A bucket's level now (included by guard_bucket.lua and admin_login.lua: the
-- guessing limits and the admin logins refill by one rule). A bucket is a
-- hash {level, at}; absent means full. The level is in units of 1/tries of a
-- millisecond's refill: full is tries * window_ms, one try costs window_ms,
-- each millisecond adds tries (the arithmetic of gw_guard_bucket_*(), which
-- tests/unit/test_guard.c checks), so a bucket refills evenly over its
-- window. The clock is Redis's own (TIME), so gateways with skewed clocks
-- share one bucket consistently.
--
-- Returns level, now (ms since the epoch, Redis's clock) and full.
local function bucket_level(key, tries, window)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local full = tries * window
  local v = redis.call('HMGET', key, 'level', 'at')
  local level, at = tonumber(v[1]), tonumber(v[2])
  if level == nil or at == nil then
    level, at = full, now
  end
  if now > at then
    local to_full = math.floor((full - level) / tries) + 1
    level = level + math.min(now - at, to_full) * tries
  end
  return math.min(level, full), now, full
end

-- Writes level (as of now) to key, which expires when the bucket is full
-- again (it is then the same as absent). Returns when that is (Redis's clock).
local function bucket_write(key, level, now, full, tries)
  redis.call('HSET', key, 'level', string.format('%d', level), 'at', string.format('%d', now))
  local to_full = math.ceil((full - level) / tries) + 1
  redis.call('PEXPIRE', key, to_full)
  return now + to_full
end
