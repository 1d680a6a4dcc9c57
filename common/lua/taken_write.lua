-- Every write of a campaign's taken hash (code -> orderId), by the scripts
-- that include this file. The reconciler reads a large campaign in pieces
-- (HSCAN of orders and taken; reconciler/rc_redis.c, proto/campaigns.md
-- "Reading a large campaign"): scan_begin.lua sets campaign:{cID}:scan while
-- such a read runs, and each code written meanwhile is noted in
-- campaign:{cID}:touched_codes, for campaign_scan_finish.lua to read again at
-- one moment (orders_write.lua does the same for the orders). A write that
-- bypassed these functions would leave the reconciler a stale code. Every
-- script that includes this one has orders_write.lua before it
-- (write_noted).
local function note_codes(taken_key, n, ...)
  if redis.call('EXISTS', (string.gsub(taken_key, ':taken$', ':scan'))) == 1 then
    local touched = (string.gsub(taken_key, ':taken$', ':touched_codes'))
    for i = 1, n, 2 do redis.call('SADD', touched, (select(i, ...))) end
  end
end

-- write_codes(taken_key, code, orderId, ...): HSET of one or more fields.
local function write_codes(taken_key, ...)
  redis.call('HSET', taken_key, ...)
  note_codes(taken_key, select('#', ...), ...)
end

-- write_code_list(taken_key, pairs): every code of pairs ({code, orderId,
-- code, orderId, ...}) written, as write_codes() writes them, in slices.
local function write_code_list(taken_key, pairs)
  write_noted(taken_key, pairs, 'taken', 'touched_codes')
end

local function drop_code(taken_key, code)
  redis.call('HDEL', taken_key, code)
  note_codes(taken_key, 1, code)
end

-- replace_codes(staged_key, taken_key): a whole taken hash put in place at
-- once (RENAME; campaign_rebuild_finish.lua). A read in pieces under way
-- cannot note its every code: its token goes, and the read is done again at
-- once, as replace_orders() does for the orders.
local function replace_codes(staged_key, taken_key)
  redis.call('RENAME', staged_key, taken_key)
  redis.call('DEL', (string.gsub(taken_key, ':taken$', ':scan')))
end
