-- wrk script for the serving benchmark (bench/bench_serving.py): each connection's requests cycle
-- through the paths listed one per line in the file named by the first script argument, every
-- thread from its own starting point; `done` prints one JSON line with the totals.
local paths = {}
local index = 1

function init(args)
  for line in io.lines(args[1]) do
    if #line > 0 then paths[#paths + 1] = line end
  end
  index = math.random(#paths)
end

function request()
  index = index % #paths + 1
  return wrk.format("GET", paths[index])
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "bytes": %d, "p50_us": %d, "p99_us": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}}\n',
    summary.requests, summary.duration, summary.bytes, latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.status, e.timeout))
end
