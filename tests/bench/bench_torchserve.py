#!/usr/bin/env python3
"""Benchmark: a TorchScript ResNet-18 served by gantry against the same model run by libtorch
in-process, on the same cores (issue 21's target: throughput ratio >= 0.9, added p50 < 1 ms).

  * gantry: the model uploaded (POST /v1/models/{name}/versions), one replica on one CPU worker
    (its libtorch pool: --threads T); latency: one client sending requests of batch B back to back
    over keep-alive (server -> Redis -> replica -> Redis -> server); throughput: --clients clients
    at once (default 1; on 2 cores a second client's transfers take CPU from the forward pass);
  * in-process: build/tests/bench/torch_inproc on the same file, T threads, the same batch (the
    tm_* calls a replica makes, without the service around them), run while the stack is up;
  * per batch, in-process runs before and after gantry's (their mean is the baseline: this
    machine drifts); samples/s ratio = gantry / in-process, added p50 = gantry's p50 - in-process
    p50; the replica's own time per request (parse, forward, reply; from its busy counter) shows
    where the rest goes.

    python3 tests/bench/bench_torchserve.py [--threads 2] [--requests 12] [--clients 1] [--batches 1,8] [--binary]
"""

import argparse
import concurrent.futures
import http.client
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import BUILD, Stack, wait_until  # noqa: E402
from test_torchscript import MODELS, RESNET_META, TORCH_PY, upload  # noqa: E402


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def inproc(model, batch, threads, seconds):
    out = subprocess.run([os.path.join(BUILD, "tests", "bench", "torch_inproc"), model, "--shape", f"{batch},3,224,224",
                          "--threads", str(threads), "--seconds", str(seconds)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def request_body(batch, binary):
    rng = random.Random(batch)
    values = [rng.uniform(-1, 1) for _ in range(batch * 3 * 224 * 224)]
    if not binary:
        doc = {"inputs": [{"name": "image", "shape": [batch, 3, 224, 224], "datatype": "FP32", "data": values}]}
        return json.dumps(doc).encode(), {"Content-Type": "application/json"}
    raw = struct.pack(f"<{len(values)}f", *values)
    head = json.dumps({"inputs": [{"name": "image", "shape": [batch, 3, 224, 224], "datatype": "FP32",
                                   "parameters": {"binary_data_size": len(raw)}}]}).encode()
    return head + raw, {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(head))}


def served(port, token, body, headers, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    h = dict(headers, Authorization=f"Bearer {token}")
    lat = []
    t_all = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("POST", "/v2/models/resnet/infer", body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200, (r.status, data[:300])
        lat.append((time.perf_counter() - t0) * 1000)
    conn.close()
    return lat, time.perf_counter() - t_all


def replica_busy(s, job):
    stats = s.redis("HGETALL", f"gantry:infer:stats:{job}").splitlines()
    vals = [v for v in (json.loads(x) for x in stats[1::2] if x.startswith("{")) if "busy_s" in v]  # the replicas'
    return sum(v["busy_s"] for v in vals), sum(v["served"] for v in vals)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=12, help="requests of each batch size through gantry")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--clients", type=int, default=1, help="clients at once in the throughput run")
    ap.add_argument("--binary", action="store_true", help="send the tensor as OIP binary data, not JSON numbers")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="gantry-bench-ts-")
    subprocess.run([TORCH_PY, MODELS, "make", d, "--resnet"], check=True)
    model = os.path.join(d, "resnet18.pt")
    print(f"ResNet-18 (torchvision, traced, {os.path.getsize(model) / 1e6:.1f} MB), {args.threads} libtorch threads on "
          f"both sides; latency with one client, samples/s with {args.clients} at once; "
          f"{'binary' if args.binary else 'JSON'} request bodies.\n")
    print("| batch | in-process samples/s | gantry samples/s | ratio | in-process p50 | gantry p50 | added p50 "
          "| replica per request | body |")
    print("|---|---|---|---|---|---|---|---|---|")
    with Stack(workers=1, server_args=["--infer-body-limit", str(64 << 20)]) as s:
        s.kill("worker0")  # again with the thread budget of the comparison
        s._spawn("worker0", [os.path.join(BUILD, "gantry-worker"), *s._redis_args("worker"), "--id", "w_test0",
                             "--threads", str(args.threads), "--fed-secret", s.fed_secret,
                             "--state", os.path.join(s.dir, "var", "worker")])
        wait_until("worker", lambda: len(s.workers()) == 1, 15)
        _, tok = s.tenant("bench")
        r = upload(s, tok, "resnet", model, RESNET_META)
        assert r.status == 201, r
        job = s.submit(tok, {"type": "inference", "name": "bench-resnet",
                             "spec": {"model": "resnet", "replicas": 1, "max_batch": 8, "batch_delay_ms": 0,
                                      "timeout_ms": 600000, "slo": {"latency_ms": 60000}}})
        s.wait_state(tok, job, "running", 60)
        wait_until("ready", lambda: s.get("/v2/models/resnet/ready", tok).status == 200, 60)
        for b in (int(x) for x in args.batches.split(",")):
            body, headers = request_body(b, args.binary)
            served(s.port, tok, body, headers, 2)  # warm-up: the replica's first passes are slow
            seconds = max(5, int(args.requests * b * 0.6))
            before = inproc(model, b, args.threads, seconds)
            busy0, n0 = replica_busy(s, job)
            lat, _ = served(s.port, tok, body, headers, args.requests)
            time.sleep(1.2)  # the replica publishes its counters every second
            busy1, n1 = replica_busy(s, job)
            t0 = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(args.clients) as ex:
                list(ex.map(lambda _: served(s.port, tok, body, headers, args.requests), range(args.clients)))
            wall = (time.perf_counter() - t0) / args.clients
            after = inproc(model, b, args.threads, seconds)
            base_rate = (before["per_s"] + after["per_s"]) / 2
            base_p50 = (before["p50_ms"] + after["p50_ms"]) / 2
            rate = args.requests * b / wall
            per_req = (busy1 - busy0) / max(1, n1 - n0) * 1000
            print(f"| {b} | {base_rate:.2f} | {rate:.2f} | **{rate / base_rate:.3f}** | {base_p50:.1f} ms | "
                  f"{pct(lat, 50):.1f} ms | **{pct(lat, 50) - base_p50:+.1f} ms** | {per_req:.1f} ms | "
                  f"{len(body) / 1e6:.1f} MB |", flush=True)


if __name__ == "__main__":
    main()
