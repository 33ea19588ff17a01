-- wrk script for bench/run: closed-loop tools/call of the echo tool on one
-- session (WRK_SESSION, from an initialize the script made; empty for a
-- server without sessions). Every response is checked: HTTP 200 and a
-- JSON-RPC result that is not a tool error, else it counts as bad. done()
-- writes one JSON document to WRK_OUT (latencies in microseconds).
local session = os.getenv("WRK_SESSION")
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
if session ~= nil and session ~= "" then
    wrk.headers["Mcp-Session-Id"] = session
end

local threads = {}
function setup(thread)
    table.insert(threads, thread)
end

bad = 0
function response(status, headers, body)
    if status ~= 200 or not string.find(body, '"result"', 1, true)
        or string.find(body, '"isError":true', 1, true) then
        bad = bad + 1
    end
end

function done(summary, latency, requests)
    local bad_total = 0
    for _, t in ipairs(threads) do
        bad_total = bad_total + t:get("bad")
    end
    local e = summary.errors
    local out = io.open(os.getenv("WRK_OUT"), "w")
    out:write(string.format(
        '{"requests": %d, "duration_us": %d, "bad_responses": %d, ' ..
        '"socket_errors": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "p999_us": %d}\n',
        summary.requests, summary.duration, bad_total,
        e.connect + e.read + e.write + e.status + e.timeout,
        latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9)))
    out:close()
end
