-- wrk script: POST an Open Inference Protocol request read from $GANTRY_INFER_BODY (a file);
-- the token comes from $GANTRY_TOKEN.  Counts answers by status.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("GANTRY_TOKEN")
local f = io.open(os.getenv("GANTRY_INFER_BODY"), "r")
wrk.body = f:read("*a")
f:close()

ok = 0
function response(status, headers, body)
    if status == 200 then ok = ok + 1 end
end

function done(summary, latency, requests)
    io.write(string.format("ok_hint=%d\n", summary.requests - summary.errors.status))
end
