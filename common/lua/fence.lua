-- The restart fence (proto/redis-keys.md, "The restart fence"): which Redis
-- process the reconciler last found to agree with PostgreSQL and Kafka. A
-- Redis that restarted (a new run_id) may have come back without its last
-- writes (appendfsync everysec, a restore from an older copy); until the
-- reconciler has repaired and verified it, a gateway with the fence on
-- refuses to write there. The run_id is read here, on the server, so that a
-- check or a set can never mix one process's key with another's run_id.
--
-- KEYS[1] voucher:fence
-- ARGV[1] "check": returns {run_id, fence} (fence "" when the key is absent)
--         "set": when this server's run_id is ARGV[2], writes it to the key
--         and returns 1; returns 0 when Redis restarted since ARGV[2] was read
local info = redis.call('INFO', 'server')
local run_id = string.match(info, 'run_id:(%x+)')
if not run_id then return redis.error_reply('ERR fence: no run_id in INFO server') end
if ARGV[1] == 'set' then
  if run_id ~= ARGV[2] then return 0 end
  redis.call('SET', KEYS[1], run_id)
  return 1
end
return {run_id, redis.call('GET', KEYS[1]) or ''}
