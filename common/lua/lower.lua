-- Lowers a voucher's remaining count when it offers more than PostgreSQL
-- allows, only if it is still what the reconciler read (compare and set).
--
-- KEYS[1] voucher:{CODE}:remaining
-- ARGV[1] the value read   ARGV[2] the value to set (smaller)
--
-- Returns 1 lowered, 0 it changed meanwhile (read again), -1 it is missing.
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if v ~= ARGV[1] then return 0 end
if tonumber(ARGV[2]) >= tonumber(v) then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
