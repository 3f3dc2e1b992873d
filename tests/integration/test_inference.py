"""Inference jobs through the real stack: a model trained by a training job is served by
replicas on CPU workers behind the Open Inference Protocol v2 (ready, metadata, infer);
predictions match the labels; client mistakes get clear 4xx; a full queue gives 429 and a
stalled replica 504, never a hang; latency and SLO attainment are recorded per job."""

import concurrent.futures
import gzip
import http.client
import json
import os
import re
import time

from harness import ADMIN, Stack, alone, iso_seconds, timeout, wait_until
from test_flow import SSEReader
from test_training import training_job


FMNIST = "/usr/share/datasets/fashion-mnist"


def fmnist_samples(n):
    """the first n Fashion-MNIST test images (scaled to [0,1], as in training) and labels"""
    with gzip.open(os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz")) as f:
        img = f.read(16 + n * 784)[16:]
    with gzip.open(os.path.join(FMNIST, "t10k-labels-idx1-ubyte.gz")) as f:
        lab = list(f.read(8 + n)[8:])
    return [b / 255.0 for b in img], lab


def infer_body(data, n):
    return {"id": "req-1", "inputs": [{"name": "input", "shape": [n, 1, 28, 28], "datatype": "FP32", "data": data}]}


def serve_job(model, **spec):
    s = {"model": model, "slo": {"latency_ms": 250, "percentile": 99}, "replicas": 1}
    s.update(spec)
    return {"type": "inference", "name": f"serve-{model}", "spec": s}


def trained_model(s, tok, name="fmnist"):
    jid = s.submit(tok, training_job(name=name, steps=400))
    s.wait_state(tok, jid, "succeeded", timeout=240)


def test_serving_predictions_errors_and_metrics():
    with Stack(workers=3) as s:
        _, tok = s.tenant("serving")
        trained_model(s, tok)
        r = s.post("/v1/jobs", tok, serve_job("nope"))
        assert r.status == 400 and r.json["error"]["field"] == "spec.model", r
        r = s.post("/v1/jobs", tok, serve_job("fmnist", slo={"latency_ms": -1}))
        assert r.status == 400 and r.json["error"]["field"] == "spec.slo.latency_ms", r
        r = s.post("/v1/jobs", tok, serve_job("fmnist", resolved={}))
        assert r.status == 400 and r.json["error"]["field"] == "spec.resolved", r
        assert s.get("/v2/models/fmnist/ready", tok).status == 404  # registered, not served yet
        jid = s.submit(tok, serve_job("fmnist", replicas={"min": 2, "max": 3}, max_batch=16))
        s.wait_state(tok, jid, "running", timeout=60)
        assert s.job(tok, jid)["spec"]["resolved"]["version"] == 1
        wait_until("ready", lambda: s.get("/v2/models/fmnist/ready", tok).status == 200, 30)
        meta = s.get("/v2/models/fmnist", tok).json
        assert meta["inputs"][0]["shape"] == [-1, 1, 28, 28] and meta["versions"] == ["1"], meta

        data, labels = fmnist_samples(64)
        r = s.post("/v2/models/fmnist/infer", tok, infer_body(data, 64))
        assert r.status == 200, r
        out = {o["name"]: o for o in r.json["outputs"]}
        assert r.json["model_name"] == "fmnist" and r.json["id"] == "req-1"
        assert out["probabilities"]["shape"] == [64, 10] and out["label"]["shape"] == [64]
        probs = out["probabilities"]["data"]
        assert all(abs(sum(probs[i * 10:(i + 1) * 10]) - 1) < 1e-3 for i in range(64))
        correct = sum(p == y for p, y in zip(out["label"]["data"], labels))
        assert correct >= 45, f"{correct}/64 right"

        # many concurrent single-sample requests: every answer is the one for its own input
        def one(i):
            rr = s.post("/v2/models/fmnist/infer", tok, infer_body(data[i * 784:(i + 1) * 784], 1))
            return rr.status, rr.json["outputs"][1]["data"][0] if rr.status == 200 else rr.json
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            res = list(ex.map(one, range(64)))
        assert all(st == 200 for st, _ in res), res[:3]
        assert [lab for _, lab in res] == out["label"]["data"]

        # the client's mistakes: clear 4xx, and the replicas keep serving
        # (the API's one error shape: {"error": {"code", "message", "field"}})
        r = s.post("/v2/models/fmnist/infer", tok, infer_body(data[:700], 1))
        assert r.status == 400 and r.json["error"]["field"].startswith("inputs[0]"), r
        r = s.post("/v2/models/fmnist/infer", tok, {"inputs": [{"shape": [1, 1, 27, 28], "data": [0] * 756}]})
        assert r.status == 400 and "784" in r.json["error"]["message"], r
        for broken in (b"{not json", b'["\\\xc3\xa9"]', b'{"inputs":[{"data":["\\\xf0\x9f\x98\x80"]}]}'):
            r = s.request("POST", "/v2/models/fmnist/infer", tok, raw=broken, headers={"Content-Type": "application/json"})
            assert r.status == 400 and r.json["error"]["code"] == "invalid_json", (broken, r)
        assert s.post("/v2/models/other/infer", tok, infer_body(data[:784], 1)).status == 404
        assert s.post("/v2/models/fmnist/infer", tok, infer_body(data[:784], 1)).status == 200

        # latency and SLO attainment, recorded by the server in windows: the last answers may
        # land in the window after the first one with requests
        def served():
            pts = [p for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"] if p.get("requests")]
            return pts if sum(p["requests"] for p in pts) >= 66 else None
        pts = wait_until("serving metrics for the 66 answered requests", served, 10)
        assert all(0 <= p["slo_attainment"] <= 1 and p["p99_ms"] > 0 for p in pts), pts
        text = s.get("/metrics", ADMIN).raw  # per-job series: admins and the scrape token only
        assert f'gantry_inference_requests_total{{job="{jid}",outcome="ok"}}' in text

        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 200
        wait_until("replicas stopped", lambda: all(w["state"] == "idle" for w in s.workers()), 20)
        assert s.post("/v2/models/fmnist/infer", tok, infer_body(data[:784], 1)).status == 404


@alone  # a stalled replica's 504 is timed
def test_full_queue_429_and_stalled_replica_504():
    with Stack(workers=2) as s:
        _, tok = s.tenant("serving-limits")
        trained_model(s, tok, "small")
        jid = s.submit(tok, serve_job("small", queue_limit=2, timeout_ms=700))
        s.wait_state(tok, jid, "running", timeout=60)
        wait_until("ready", lambda: s.get("/v2/models/small/ready", tok).status == 200, 30)
        data, _ = fmnist_samples(1)
        assert s.post("/v2/models/small/infer", tok, infer_body(data, 1)).status == 200
        replica = next(e["source"].split(":", 1)[1] for e in s.events(tok, jid) if e["state"] == "running")
        name = "worker" + replica[len("w_test"):]
        s.pause(name)  # a stalled replica: requests wait in the queue
        try:
            t0 = time.time()
            with concurrent.futures.ThreadPoolExecutor(5) as ex:
                res = list(ex.map(lambda _: s.post("/v2/models/small/infer", tok, infer_body(data, 1)), range(5)))
            codes = sorted(r.status for r in res)
            # two wait in the queue (queue_limit 2), perhaps one more in the stalled replica's pending pop
            timeouts = codes.count(504)
            assert set(codes) == {429, 504} and timeouts in (2, 3), codes
            assert time.time() - t0 < 5, "a stalled replica must not hold requests past timeout_ms"
            full = next(r for r in res if r.status == 429)
            assert full.headers.get("retry-after") == "1" and "queue" in full.json["error"]["message"]
        finally:
            s.resume(name)
        # the replica wakes up, answers the stale requests (dropped by the server) and serves again; until
        # the worker has popped the stale requests, a new one may still find the queue full (429) or wait
        # past timeout_ms (504) on a loaded machine: those count too
        after = []

        def serves():
            after.append(s.post("/v2/models/small/infer", tok, infer_body(data, 1)).status)
            return after[-1] == 200
        wait_until("serving again", serves, 20)
        drops, timeouts = 5 - timeouts + after.count(429), timeouts + after.count(504)
        every = wait_until("drops and timeouts recorded",
                           lambda: (pts := s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]) and
                           sum(p.get("drops", 0) + p.get("timeouts", 0) for p in pts) >= drops + timeouts and pts, 10)
        assert sum(p.get("drops", 0) for p in every) == drops, (every, after)
        assert sum(p.get("timeouts", 0) for p in every) == timeouts, (every, after)


CNN = {"input": [1, 28, 28], "layers": [{"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"},
                                        {"type": "maxpool", "size": 2}, {"type": "flatten"}, {"type": "dense", "units": 10}]}


def trace_rates(jobs, minutes, start=2880):
    """per-minute request counts of two jobs from the repository's copy of the Faro trace"""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "data", "traces", "faro_days01-10.jsonl")
    with open(path) as f:
        lines = [json.loads(x)["rates"] for x in f.readlines()[start:start + minutes]]
    return [[r[j] for r in lines] for j in jobs]


@alone  # the replicas follow a timed trace
def test_autoscaler_follows_a_compressed_trace():
    """two models served through the real stack under a load that follows the Faro trace, one trace
    minute every 2 s: the scheduler's autoscaler (Faro-FairSum, rounds every 10 s) changes the replica
    counts within the 4 workers, and SLO attainment is reported per job"""
    with Stack(workers=4, scheduler_args=["--autoscale-control-s", "10", "--autoscale-period-min", "0"]) as s:
        _, tok = s.tenant("autoscaled")
        for name in ("cnn-a", "cnn-b"):
            job = training_job(name=name, steps=30)
            job["spec"]["model"] = CNN
            s.wait_state(tok, s.submit(tok, job), "succeeded", timeout=240)
        jids = [s.submit(tok, serve_job(name, replicas={"min": 1, "max": 3}, slo={"latency_ms": 400},
                                        queue_limit=200, timeout_ms=3000)) for name in ("cnn-a", "cnn-b")]
        for jid in jids:
            s.wait_state(tok, jid, "running", timeout=60)
        data, _ = fmnist_samples(32)
        body = json.dumps(infer_body(data, 32)).encode()
        rates = trace_rates(["serve-cluster4", "serve-cluster9"], 20)
        peak = max(max(r) for r in rates)
        start = time.time()
        stop = [start + 40]  # at most the trace's 20 minutes; sooner once what is asserted below has happened

        def load(k):
            """requests of 32 samples for model k at up to ~14/s, shaped like its trace"""
            name, sent, codes = ("cnn-a", "cnn-b")[k], 0, {}
            conn = s.connection(10)
            t0 = time.time()
            while time.time() < stop[0]:
                minute = min(19, int((time.time() - t0) / 2))
                rate = 2 + 12 * rates[k][minute] / peak
                time.sleep(1.0 / rate)  # the load's shape is the trace: this pause sets the request rate
                try:
                    conn.request("POST", f"/v2/models/{name}/infer", body=body,
                                 headers={"Authorization": f"Bearer {tok}", "Content-Type": "application/json"})
                    r = conn.getresponse()
                    r.read()
                    codes[r.status] = codes.get(r.status, 0) + 1
                except OSError:
                    conn = s.connection(10)
                sent += 1
            return codes
        def scaled():
            """some job was given a second replica by the autoscaler (a replicas point >= 2 and an event)"""
            return any(any(p.get("replicas", 0) >= 2 for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"])
                       and any(e["reason"].startswith("autoscaler") for e in s.events(tok, jid)) for jid in jids)
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            loads = ex.map(load, [0, 0, 1, 1])
            # the load runs 20 s at least (10 trace minutes, two control rounds), then ends once a job has scaled
            while time.time() < stop[0]:
                if time.time() - start >= 20 and scaled():
                    stop[0] = time.time()
                    break
                time.sleep(1)
            results = list(loads)
        codes = {}
        for c in results:
            for k, v in c.items():
                codes[k] = codes.get(k, 0) + v
        assert codes.get(200, 0) > 100, codes
        report, changes = [], []
        for jid in jids:
            ev = [e for e in s.events(tok, jid) if e["reason"].startswith("autoscaler")]
            pts = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
            served = [p for p in pts if p.get("requests")]
            replicas = [p["replicas"] for p in pts if "replicas" in p]
            changes += [(p["ts"], jid, p["replicas"]) for p in pts if "replicas" in p]
            assert served and all(0 <= p["slo_attainment"] <= 1 for p in served)
            report.append((jid, len(ev), max(replicas) if replicas else 1,
                           sum(p["slo_attainment"] * p["requests"] for p in served) / sum(p["requests"] for p in served)))
        print("autoscaler report (job, scaling events, max replicas, SLO attainment):", report, codes)
        assert any(n > 0 for _, n, _, _ in report), "the autoscaler never changed a replica count"
        assert max(m for _, _, m, _ in report) >= 2
        now = {}
        for _, jid, n in sorted(changes):  # never more replicas at once than workers
            now[jid] = n
            assert sum(now.values()) <= 4, changes


@alone  # no request may fail while a replica is replaced
def test_lost_replica_is_replaced_while_the_others_serve():
    """SIGKILL the worker of one of two replicas: the job is not requeued (the other replica keeps
    answering), and the autoscaler starts a replacement on the free worker"""
    with Stack(workers=3, scheduler_args=["--autoscale-control-s", "10"]) as s:
        _, tok = s.tenant("replicas")
        trained_model(s, tok, "kept")
        jid = s.submit(tok, serve_job("kept", replicas=2, timeout_ms=2000))
        s.wait_state(tok, jid, "running", timeout=60)
        running = wait_until("two replicas", lambda: (w := {e["source"] for e in s.events(tok, jid)
                                                         if e["reason"].startswith("replica ready")}) and len(w) == 2 and w, 30)
        data, _ = fmnist_samples(1)
        victim = sorted(running)[0].split(":", 1)[1]
        s.kill("worker" + victim[len("w_test"):])
        t0, codes = time.time(), {}
        while time.time() - t0 < 12:
            r = s.post("/v2/models/kept/infer", tok, infer_body(data, 1))
            codes[r.status] = codes.get(r.status, 0) + 1
        assert codes.get(200, 0) > 10 and set(codes) <= {200, 504}, codes
        wait_until("a replacement replica", lambda: len({e["source"] for e in s.events(tok, jid)
                                                          if e["reason"].startswith("replica ready")}) == 3, 30)
        ev = s.events(tok, jid)
        assert s.job(tok, jid)["state"] == "running"
        assert not [e for e in ev if e["state"] == "queued" and e["reason"] != "accepted"], "the job was requeued"
        assert any("the autoscaler starts another" in e["reason"] for e in ev), [e["reason"] for e in ev]
        assert s.post("/v2/models/kept/infer", tok, infer_body(data, 1)).status == 200


def test_scale_to_zero_then_cold_starts():
    """replicas {min 0}: after idle_s without a request the autoscaler releases the only replica (the job stays
    running, scaled to zero); the next request waits while a replica starts and gets its 200 (a cold start,
    counted); with no worker free to start one it gets 503 with Retry-After after cold_start_ms, then 200 once
    the worker is free again"""
    with Stack(workers=1) as s:
        tid, tok = s.tenant("zero")
        trained_model(s, tok, "sleepy")
        jid = s.submit(tok, serve_job("sleepy", replicas={"min": 0, "max": 1}, idle_s=2, cold_start_ms=8000, timeout_ms=2000))
        s.wait_state(tok, jid, "running", timeout=60)
        data, _ = fmnist_samples(1)
        wait_until("the first replica answers", lambda: s.post("/v2/models/sleepy/infer", tok, infer_body(data, 1)).status == 200, 30)

        def replicas():
            pts = [p for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"] if "replicas" in p]
            return pts[-1] if pts else None
        wait_until("scaled to zero", lambda: (p := replicas()) and p["replicas"] == 0 and p["target"] == 0, 30)
        assert any("scaled to zero" in e["reason"] for e in s.events(tok, jid))
        assert s.job(tok, jid)["state"] == "running"
        wait_until("the replica gone from its worker", lambda: all(w.get("running") in (None, "-") for w in s.workers()), 30)
        # a cold start: the request waits for the replica the autoscaler starts
        t0 = time.time()
        r = s.post("/v2/models/sleepy/infer", tok, infer_body(data, 1))
        waited = time.time() - t0
        print(f"cold start: answered {r.status} after {waited:.2f} s")
        assert r.status == 200, (r, [(e["ts"], e["source"], e["reason"]) for e in s.events(tok, jid)])
        assert any("cold start 1" in e["reason"] for e in s.events(tok, jid)), [e["reason"] for e in s.events(tok, jid)]
        assert replicas()["cold_starts"] == 1
        # asleep again, and the only worker taken by a training job: no replica can start
        wait_until("scaled to zero again", lambda: (p := replicas()) and p["replicas"] == 0 and p["target"] == 0, 30)
        from test_program_jobs import program_job, program_root
        program_root(s, tid, {"hold.py": "import time\ntime.sleep(600)\n"})
        hold = s.submit(tok, program_job(["python3", "hold.py"], name="hold"))
        s.wait_state(tok, hold, "running", timeout=60)
        t0 = time.time()
        r = s.post("/v2/models/sleepy/infer", tok, infer_body(data, 1))
        assert r.status == 503 and r.headers.get("retry-after") == "10", (r.status, r.json, r.headers)
        assert "scaled to zero" in r.json["error"]["message"] and time.time() - t0 >= 7.9, r.json
        assert s.post(f"/v1/jobs/{hold}/cancel", tok).status == 200
        wait_until("a replica once the worker is free", lambda: s.post("/v2/models/sleepy/infer", tok, infer_body(data, 1)).status == 200, 60)


# a TorchScript model slow enough that a Python client can overload one replica: N tanh(x @ w) in a row
SLOW_MODEL = """import sys, torch
class Slow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(256, 256) / 16)
    def forward(self, x):
        for _ in range(2000):
            x = torch.tanh(x @ self.w)
        return x
torch.jit.script(Slow()).save(sys.argv[1])
"""


@alone  # latency under overload measured
@timeout(240)
def test_overloaded_job_sheds_at_the_gateway_and_serves_the_rest_in_time():
    """one replica (max 1) offered about 2.5 times what it serves: once the autoscaler sees it cannot grow,
    the gateway answers the excess 429 at once ("overloaded"), and the requests it admits meet their SLO
    instead of all waiting into 504s"""
    import subprocess
    import tempfile
    from test_torchscript import TORCH_PY, upload
    with Stack(workers=1) as s:
        _, tok = s.tenant("overload")
        d = tempfile.mkdtemp(prefix="gantry-slow-")
        path = os.path.join(d, "slow.pt")
        with open(os.path.join(d, "make.py"), "w") as f:  # torch.jit.script reads the class's source file
            f.write(SLOW_MODEL)
        subprocess.run([TORCH_PY, os.path.join(d, "make.py"), path], check=True, timeout=120)
        meta = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 256]}],
                "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 256]}]}
        assert upload(s, tok, "slow", path, meta).status == 201
        slo_ms = 1000
        jid = s.submit(tok, serve_job("slow", replicas={"min": 1, "max": 1}, max_batch=1, timeout_ms=4000,
                                      slo={"latency_ms": slo_ms, "percentile": 99}))
        s.wait_state(tok, jid, "running", timeout=60)
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 256], "data": [0.01] * 256}]}
        wait_until("the replica answers", lambda: s.post("/v2/models/slow/infer", tok, body).status == 200, 60)
        lat = []
        for _ in range(10):
            t0 = time.time()
            assert s.post("/v2/models/slow/infer", tok, body).status == 200
            lat.append(time.time() - t0)
        service = sorted(lat)[5]
        rate = 2.5 / service  # two and a half times what one replica serves
        print(f"overload: one request takes {service * 1000:.0f} ms; offering {rate:.0f} req/s for 20 s")
        results = []

        def one(t_sent):
            t0 = time.time()
            r = s.post("/v2/models/slow/infer", tok, body, timeout=10)
            code = r.json["error"]["code"] if r.status != 200 and r.json else None
            results.append((t_sent, r.status, time.time() - t0, code))
        start = time.time()
        with concurrent.futures.ThreadPoolExecutor(max_workers=96) as pool:
            k = 0
            while time.time() - start < 20:
                due = start + k / rate
                if due > time.time():
                    time.sleep(due - time.time())
                pool.submit(one, time.time())
                k += 1
        events = s.events(tok, jid)
        began = [e for e in events if e["reason"].startswith("admission: ")]
        assert began, [e["reason"] for e in events]
        # the last 8 s: the gateways read the rate within a second, and it settles within a few ticks
        t_on = min(iso_seconds(e["ts"]) for e in began)
        assert t_on < start + 12, (t_on - start, [e["reason"] for e in events])
        after = [r for r in results if r[0] >= start + 12]
        codes = {}
        for r in after:
            codes[r[1]] = codes.get(r[1], 0) + 1
        served = sorted(r[2] for r in after if r[1] == 200)
        print(f"overload: admission began {t_on - start:.1f} s in; the last 8 s: {codes}; served p50 "
              f"{served[len(served) // 2] * 1000:.0f} ms, p90 {served[int(len(served) * 0.9)] * 1000:.0f} ms (SLO {slo_ms} ms)")
        assert codes.get(429, 0) > 0 and all(r[3] == "overloaded" for r in after if r[1] == 429), codes
        # queued, all would wait into 504s (offered 2.5x); admitted, they are served about in time
        assert codes.get(504, 0) == 0, codes
        assert len(served) >= 5 and served[len(served) // 2] <= slo_ms / 1000, served
        assert served[int(len(served) * 0.9)] <= 2 * slo_ms / 1000, served


STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
REAL = re.compile(r'-?\d+(?:\.\d+(?:[eE][-+]?\d+)?|[eE][-+]?\d+)')


def significant(token):
    """the significant digits of a number token: '0.88539999999999996' -> '88539999999999996'"""
    return re.sub(r"[-.]", "", token.lower().split("e")[0]).lstrip("0").rstrip("0") or "0"


def assert_short_reals(what, text):
    """every real in a raw JSON text is in its shortest round-trip form (as Python's repr finds it),
    never jansson's 17 digits for 0.8854; returns how many reals it saw"""
    reals = REAL.findall(STRING.sub('""', text))
    for tok in reals:
        best = significant(repr(float(tok)))
        assert len(significant(tok)) <= len(best), f"{what}: {tok} printed for {float(tok)!r}"
    return len(reals)


class RawSSE(SSEReader):
    """an SSE reader that keeps each event's data line as the server sent it"""

    def __init__(self, stack, token):
        self.raws = []
        super().__init__(stack, token)

    def run(self):
        try:
            for line in self.resp:
                line = line.decode().rstrip("\n")
                if line.startswith("data: "):
                    self.raws.append(line[6:])
                    self.events.append(json.loads(line[6:]))
        except (OSError, ValueError, http.client.HTTPException):
            pass


def test_numbers_people_read():
    """reals in answers and events are the shortest that round-trip, and progress events say
    "state": null, on GET /v1/jobs/ID, /metrics, /events and the SSE stream (training and serving)"""
    with Stack(workers=1) as s:
        _, tok = s.tenant("readers")
        sse = RawSSE(s, tok)
        jid = s.submit(tok, training_job(name="readable", steps=200))
        s.wait_state(tok, jid, "succeeded", timeout=240)
        job = s.get(f"/v1/jobs/{jid}", tok)
        assert job.status == 200 and job.json["result"]["metrics"]["test_accuracy"] > 0.5, job
        assert assert_short_reals("job", job.raw) >= 3, job.raw[:400]
        metrics = s.get(f"/v1/jobs/{jid}/metrics", tok)
        assert metrics.json["points"] and all(p["loss"] > 0 for p in metrics.json["points"]), metrics
        assert assert_short_reals("metrics", metrics.raw) >= 2 * len(metrics.json["points"]), metrics.raw[:400]
        events = s.get(f"/v1/jobs/{jid}/events", tok)
        assert_short_reals("events", events.raw)
        progress = [e for e in events.json["events"] if e["progress"] is not None and "loss" in e["reason"]]
        assert progress and all(e["state"] is None for e in progress), progress[:2]
        assert all(e["state"] != "" for e in events.json["events"]), events.raw[:400]

        # serving: the server's own per-window events, on the SSE stream
        jid2 = s.submit(tok, serve_job("readable"))
        s.wait_state(tok, jid2, "running", timeout=60)
        wait_until("ready", lambda: s.get("/v2/models/readable/ready", tok).status == 200, 30)
        data, _ = fmnist_samples(2)
        assert s.post("/v2/models/readable/infer", tok, infer_body(data, 2)).status == 200
        wait_until("a serving event", lambda: any(e["job_id"] == jid2 and e.get("metrics") for e in sse.events), 10)
        # the SSE event goes out before the point is committed (group commit): wait for the stored point
        served = wait_until("the serving point stored", lambda: (r := s.get(f"/v1/jobs/{jid2}/metrics", tok)) and any(
            "requests" in p for p in r.json["points"]) and r, 10)
        assert assert_short_reals("serving metrics", served.raw) >= 1, served.raw[:400]
        sse.close()
        ours = [e for e in sse.events if e["job_id"] in (jid, jid2)]
        assert any(e["job_id"] == jid and e["state"] is None and e.get("metrics") for e in ours), ours[:5]
        assert any(e["job_id"] == jid2 and e["state"] is None and e.get("metrics") for e in ours), ours[-5:]
        assert all(e["state"] != "" for e in ours), [e for e in ours if e["state"] == ""][:2]
        assert sum(assert_short_reals("event", raw) for raw in sse.raws) >= 2, sse.raws[-3:]


def test_documented_maximum_request_fits():
    """1,024 samples (the documented maximum) of pixels / 255 at full precision, written by json.dumps
    with its default spaces (16.1 MiB for 1/255, the longest value), fit the inference route's body
    limit and are answered, while the other routes keep the general 1 MiB limit"""
    with Stack(workers=1) as s:
        _, tok = s.tenant("big-requests")
        trained_model(s, tok, "big")
        jid = s.submit(tok, serve_job("big", timeout_ms=30000))
        s.wait_state(tok, jid, "running", timeout=60)
        wait_until("ready", lambda: s.get("/v2/models/big/ready", tok).status == 200, 30)
        raw = json.dumps(infer_body([1 / 255.0] * 784 * 1024, 1024)).encode()
        assert len(raw) > 16 << 20, len(raw)
        r = s.request("POST", "/v2/models/big/infer", tok, raw=raw, headers={"Content-Type": "application/json"}, timeout=60)
        assert r.status == 200, r
        out = {o["name"]: o for o in r.json["outputs"]}
        assert out["label"]["shape"] == [1024] and len(set(out["label"]["data"])) == 1, out["label"]["shape"]
        r = s.request("POST", f"/v1/jobs/{jid}/cancel", tok, raw=b'{"reason":"' + b"x" * (2 << 20) + b'"}',
                      headers={"Content-Type": "application/json"})
        assert r.status == 413, r
