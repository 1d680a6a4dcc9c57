-- An order's value in a voucher's or a campaign's orders hash,
-- "customerId:discount:heldUntilMs:state" (proto/redis-model.json's
-- order_value), read and written here only, by every script that reads a
-- state. parse_order() accepts what common/vc_order_value.c accepts and
-- nothing else, so a script and the daemons never disagree on which values
-- are orders: three decimal integers (an optional '-' and digits, no '+', no
-- spaces, within 64 bits) and one of the states, separated by ':'.

local ORDER_STATE_KNOWN = {}
for _, letter in pairs(STATE) do ORDER_STATE_KNOWN[letter] = true end

-- Whether digits (a field of a value, '-' and digits) is within a signed
-- 64-bit integer, as strtoll() reads it: Lua's numbers are doubles, so the
-- digits are compared as text.
local function order_int_fits(field)
  if #field >= 24 then return false end
  local sign, digits = string.match(field, '^(%-?)0*(%d*)$')
  if #digits < 19 then return true end
  if #digits > 19 then return false end
  return digits <= (sign == '-' and '9223372036854775808' or '9223372036854775807')
end

-- The fields of value as text (customerId, discount, heldUntilMs, state:
-- each as stored, so that a value written again keeps them byte for byte),
-- or nothing when value is no order's value.
local function parse_order(value)
  local customer, discount, held, state =
    string.match(value, '^(%-?%d+):(%-?%d+):(%-?%d+):(.)$')
  if not state or not ORDER_STATE_KNOWN[state] or not order_int_fits(customer) or
     not order_int_fits(discount) or not order_int_fits(held) then
    return
  end
  return customer, discount, held, state
end

-- The state of value, or nil when value is no order's value.
local function order_state(value)
  local _, _, _, state = parse_order(value)
  return state
end

-- The value of an order with these fields, as parse_order() reads it back.
-- A customerId's last six digits (with its sign when it has six or fewer),
-- as the orders' aggregate sums them (orders_write.lua): the sum of a million
-- orders stays far within 2^53, and PostgreSQL computes the same from
-- customer_id::text (right(customer_id::text, 6)::bigint). customer is a
-- customerId parse_order() returned.
local function order_customer_tail(customer)
  return tonumber(string.sub(customer, -6))
end

local function order_value(customer, discount, held, state)
  return customer .. ':' .. discount .. ':' .. held .. ':' .. state
end
