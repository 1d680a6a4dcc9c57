-- Begins the reconciler's read of a voucher's orders hash in pieces, when the
-- hash is too large to read in one command without holding Redis up for
-- every gateway (HGETALL costs about 0.5 µs an order: 140 ms for 289,000).
-- Until scan_finish.lua (a campaign's: campaign_scan_finish.lua), each order a
-- script writes is noted in touched (orders_write.lua), and each code a
-- campaign's script writes in touched_codes (taken_write.lua); the read's
-- token in scan says a read is under way.
-- Several reconcilers may read at once: scan holds one token each, and
-- touched is only ever emptied with the last.
--
-- KEYS[1] voucher:{CODE}:orders  KEYS[2] voucher:{CODE}:scan
-- KEYS[3] voucher:{CODE}:touched (a campaign's keys alike: campaign:{cID}:...,
-- with KEYS[4] campaign:{cID}:touched_codes)
-- ARGV[1] this read's token  ARGV[2] the size above which the read goes in
-- pieces  ARGV[3] how long (ms) the read may take: scan and touched expire
-- then, and a read that took longer is not kept (scan_finish.lua)
--
-- Returns {begun, size}: begun 1 when the read in pieces began, 0 when the
-- hash has at most ARGV[2] orders (nothing begun: read it at once).
local size = redis.call('HLEN', KEYS[1])
if size <= tonumber(ARGV[2]) then return {0, size} end
redis.call('SADD', KEYS[2], ARGV[1])
-- The notes exist from now on, with the read's lifetime ("" is no orderId
-- nor code).
redis.call('PEXPIRE', KEYS[2], ARGV[3])
for i = 3, #KEYS do
  redis.call('SADD', KEYS[i], '')
  redis.call('PEXPIRE', KEYS[i], ARGV[3])
end
return {1, size}
