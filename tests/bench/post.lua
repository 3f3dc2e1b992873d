-- wrk script: POST the request body in the file $BENCH_BODY with the headers $BENCH_CTYPE
-- (Content-Type), $BENCH_HEAD_LEN (Inference-Header-Content-Length, when set) and $BENCH_TOKEN
-- (a bearer token, when set).  tests/bench/bench_peer.py.
wrk.method = "POST"
wrk.headers["Content-Type"] = os.getenv("BENCH_CTYPE")
local head_len = os.getenv("BENCH_HEAD_LEN")
if head_len and head_len ~= "" then wrk.headers["Inference-Header-Content-Length"] = head_len end
local token = os.getenv("BENCH_TOKEN")
if token and token ~= "" then wrk.headers["Authorization"] = "Bearer " .. token end
local f = io.open(os.getenv("BENCH_BODY"), "rb")
wrk.body = f:read("*a")
f:close()
