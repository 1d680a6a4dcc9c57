#!/usr/bin/env bash
# The scripts' order parser (common/lua/order_value.lua, parse_order()) run in
# the stack's Redis against the C one (vc_order_value_parse(), through
# order_value_verdicts): on each value below, both take it for an order in the
# same state or both refuse it. A script and the daemons that disagreed would
# each count a use the other does not (the reconciler's drift), or read a state
# from a value the other calls malformed.
source "$(dirname "$0")/lib.sh"
verdicts=${1:?the order_value_verdicts program}
plan 3

values=(
  '42:100000:1795975982123:H' '42:100000:1795975982123:C' '1:0:0:X' '1:0:0:E' '1:0:0:R'
  '-5:-1:-7:H' '007:0010:00:C' '0:0:0:H'
  '9223372036854775807:0:0:H' '-9223372036854775808:0:0:C'
  '9223372036854775808:0:0:H' '-9223372036854775809:0:0:C'
  '0009223372036854775807:0:0:H' '00009223372036854775807:0:0:H' '1:99999999999999999999:0:H'
  '' '1:2:3' '1:2:3:' '1:2:3:Q' '1:2:3:h' '1:2:3:HH' '1:2:3:4:H' 'x:2:3:H' '1::3:H' ':2:3:H'
  '+5:2:3:H' ' 5:2:3:H' '5 :2:3:H' '5:+2:3:H' '5:2: 3:H' '-:2:3:H' '--1:2:3:H' '1-:2:3:H'
  '1.5:2:3:H' '1e3:2:3:H' '0x1:2:3:H' '1:2:3:H ' 'é:2:3:H' '1:2:3:é'
)
lua=$scratch/check.lua
cat >"$lua" <<'LUA'
local out = {}
for i = 1, #ARGV do
  local _, _, _, state = parse_order(ARGV[i])
  out[i] = state or '-'
end
return out
LUA
text=$(cd "$VOUCHER_SOURCE_DIR/common" && python3 -c '
import sys, embed, redis_model
m = redis_model.load()
sys.stdout.write(embed.expand_all(["lua/order_value.lua", sys.argv[1]], m)[0])' "$lua")
ok $? "order_value.lua expands with the model's constants"
lua_says=$(rcli --raw EVAL "$text" 0 "${values[@]}")
c_says=$("$verdicts" "${values[@]}")
is "$(echo "$lua_says" | wc -l)" "${#values[@]}" "the scripts' parser answers for every value"
is "$(paste -d' ' <(printf '%s\n' "${values[@]}" | sed 's/^$/(empty)/') <(echo "$lua_says"))" \
   "$(paste -d' ' <(printf '%s\n' "${values[@]}" | sed 's/^$/(empty)/') <(echo "$c_says"))" \
   "parse_order() takes each value for the same state as vc_order_value_parse(), or refuses it too"
