-- wrk script: POST /v1/jobs with a tiny placement job; the token comes from $GANTRY_TOKEN.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("GANTRY_TOKEN")
wrk.body = '{"type":"placement","name":"bench","spec":{"graph":{"ops":[{"name":"a","compute_us":10,' ..
           '"output_bytes":[100]},{"name":"b","compute_us":20,"output_bytes":[100]}],"edges":[{"src":"a",' ..
           '"dst":"b","bytes":100}],"devices":[{"name":"d0","memory_bytes":1000000}]}}}'

created = 0
function response(status, headers, body)
    if status == 201 then created = created + 1 end
end
