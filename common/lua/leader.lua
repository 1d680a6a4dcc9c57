-- The reconciler's fencing token (proto/redis-keys.md, "Leadership and
-- fencing"), put before every script the reconciler writes with: the build
-- makes rc_NAME.lua of it and NAME.lua (common/lua/meson.build), and the
-- gateway's scripts stay without it. The reconciler (rc_redis_eval()) appends
-- to KEYS the leader key of the voucher's or campaign's hash tag
-- (voucher:{CODE}:leader, campaign:{cID}:leader) and to ARGV the generation
-- of the lock it holds; they are taken off here, so the script after this
-- sees its own keys and arguments as it always did.
--
-- The script runs only while the key holds exactly that generation: the
-- pass marked the voucher with it (leader_mark.lua) before its first write,
-- and only a newer reconciler's mark or a loss changes it. Otherwise nothing
-- is written, and the answer is an error reply whose first word names why
-- (reconciler/rc_leader.h reads them):
--   STALE_LEADER    a higher generation: a newer reconciler took the lock and
--                   marked the voucher; this one must stop acting
--   LEADER_UNMARKED absent or lower: the key was lost since this pass marked
--                   it (Redis lost the voucher's keys after the pass read
--                   them); the pass stops, and the next one reads again
-- each followed by the key, what it holds ("-" for nothing) and the token.
local leader_key = table.remove(KEYS)
local leader_token = table.remove(ARGV)
local leader_held = redis.call('GET', leader_key)
if leader_held ~= leader_token then
  local why = 'LEADER_UNMARKED '
  if leader_held and tonumber(leader_held) > tonumber(leader_token) then why = 'STALE_LEADER ' end
  return redis.error_reply(why .. leader_key .. ' ' .. (leader_held or '-') .. ' ' .. leader_token)
end
