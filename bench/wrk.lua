-- wrk's script for bench/wrk.mjs: POSTs the body in the file args[1] with the bearer key args[2] (none when empty);
-- `{{n}}` in the body becomes the run's tag args[3], the thread's id and its request's number, so no two requests of a
-- bench are the same text. Prints one JSON line at the end: the responses that came back, their time, those with an
-- HTTP status >= 400, the requests that failed without a response (connect, read, write, timeout), p50 and p99 in µs.
local threads = {}
function setup(thread)
  thread:set('id', #threads + 1)
  table.insert(threads, thread)
end

local head, tail, headers, tag, n = nil, nil, nil, '', 0
function init(args)
  local f = assert(io.open(args[1], 'rb'))
  local body = f:read('*a')
  f:close()
  local s, e = body:find('{{n}}', 1, true)
  if s then
    head, tail = body:sub(1, s - 1), body:sub(e + 1)
  else
    head = body
  end
  tag = args[3] or ''
  headers = { ['Content-Type'] = 'application/json' }
  if args[2] and args[2] ~= '' then headers['Authorization'] = 'Bearer ' .. args[2] end
end

function request()
  n = n + 1
  local body = tail and (head .. tag .. '-' .. id .. '-' .. n .. tail) or head
  return wrk.format('POST', nil, headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests":%d,"duration_us":%d,"status_errors":%d,"failed":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout, latency:percentile(50),
    latency:percentile(99)))
end
