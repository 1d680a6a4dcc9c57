-- A use given back to the pool, as forget.lua and release_finish.lua do it
-- for a voucher (each passes give_back to the work it shares with its
-- campaign's build: forget_hold.lua, finish_release.lua): the counter gains
-- it, the customer's count loses it. A campaign's give-back
-- (campaign_give_back.lua) frees the code instead of a counter.

-- The customer's count of uses loses one.
local function uncount_use(users_key, customer)
  -- Never below 0: a count the users hash lost reads as 0, and a -1 would let
  -- the customer past their limit later (the reconciler rebuilds the hash).
  if tonumber(redis.call('HGET', users_key, customer) or '0') > 0 then
    redis.call('HINCRBY', users_key, customer, -1)
  end
end

local function give_back(remaining_key, users_key, customer)
  -- A missing counter is rebuilt from PostgreSQL later: never create it here.
  if redis.call('EXISTS', remaining_key) == 1 then redis.call('INCR', remaining_key) end
  uncount_use(users_key, customer)
end
