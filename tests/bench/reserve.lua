-- wrk script: POST /vouchers/CODE/reservations with a JSON body, a distinct
-- customer and orderId on every request, and a JSON summary at the end.
--
-- Environment: BENCH_CODE (voucher code), BENCH_ORDER_PREFIX (orderId prefix,
-- unique per run), BENCH_CUSTOMER_BASE (first customerId), BENCH_AMOUNT
-- (orderAmount). The same script drives the nginx anchor, so both runs send
-- byte-for-byte the same kind of request.

local code = os.getenv("BENCH_CODE") or "SOLDOUT"
local prefix = os.getenv("BENCH_ORDER_PREFIX") or "wrk-"
local customer_base = tonumber(os.getenv("BENCH_CUSTOMER_BASE") or "1")
local amount = tonumber(os.getenv("BENCH_AMOUNT") or "100000")
local path = "/vouchers/" .. code .. "/reservations"
local headers = {["Content-Type"] = "application/json"}

local threads = {}
local next_id = 0

-- Runs in the main interpreter once per thread: give each its own id.
function setup(thread)
  thread:set("tid", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  counter = 0
  n201 = 0
  n409 = 0
  nother = 0
end

function request()
  counter = counter + 1
  -- Thread t uses customers base + t * 10^8 + 1, 2, ...: all distinct.
  local body = string.format('{"customerId":%d,"orderId":"%s%d-%d","orderAmount":%d}',
    customer_base + tid * 100000000 + counter, prefix, tid, counter, amount)
  return wrk.format("POST", path, headers, body)
end

function response(status, hdrs, body)
  if status == 201 then
    n201 = n201 + 1
  elseif status == 409 then
    n409 = n409 + 1
  else
    nother = nother + 1
  end
end

function done(summary, latency, requests)
  local c201, c409, cother = 0, 0, 0
  for _, t in ipairs(threads) do
    c201 = c201 + t:get("n201")
    c409 = c409 + t:get("n409")
    cother = cother + t:get("nother")
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"durationUs":%d,"throughput":%.1f,' ..
    '"latencyUs":{"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%.1f},' ..
    '"byStatus":{"201":%d,"409":%d,"other":%d},' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d}}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean,
    c201, c409, cother, e.connect, e.read, e.write, e.timeout))
end
