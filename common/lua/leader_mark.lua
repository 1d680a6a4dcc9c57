-- The reconciler's mark (proto/redis-keys.md, "Leadership and fencing"): the
-- acting reconciler writes the generation of its lock into a voucher's or a
-- campaign's leader key in every pass, before the pass writes anything there;
-- every script it writes with then checks the key still holds it
-- (leader.lua). A newer reconciler's mark raises the key, so an older one's
-- scripts are refused from then on, whatever they would change.
--
-- KEYS[1] voucher:{CODE}:leader or campaign:{cID}:leader (voucher:fence:leader
--         for the restart fence, on one node)
-- ARGV[1] the generation (decimal, from PostgreSQL's reconciler_leader)
-- ARGV[2] expireAt (ms), the instant the voucher's or campaign's other keys
--         expire (proto/redis-keys.md, "Retention"); "0" sets none
--
-- Returns 1 marked now, 0 already marked (its expiry moved to a later
-- expireAt only), or the error reply STALE_LEADER (as leader.lua's) when the
-- key holds a higher generation: nothing is written then.
local held = redis.call('GET', KEYS[1])
if held and tonumber(held) > tonumber(ARGV[1]) then
  return redis.error_reply('STALE_LEADER ' .. KEYS[1] .. ' ' .. held .. ' ' .. ARGV[1])
end
if held == ARGV[1] then
  if ARGV[2] ~= '0' then redis.call('PEXPIREAT', KEYS[1], ARGV[2], 'GT') end
  return 0
end
if ARGV[2] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
