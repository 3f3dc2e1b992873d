#!/usr/bin/env python3
"""Benchmark: the serving path (Open Inference Protocol v2 through server -> Redis -> replica
-> Redis -> server) on loopback, with CPU replicas serving the Fashion-MNIST MLP of
deploy/examples/training.json.

  * latency: one client, keep-alive, 2,000 sequential single-sample requests: p50/p99 end to
    end, beside GET /healthz on the same connection (the HTTP floor) and the replica's own
    compute per request (its busy time / requests served);
  * throughput: wrk with 64 connections for 10 s, single-sample and 8-sample requests, 2
    replicas with dynamic batching (max_batch 64, batch_delay_ms 1): predictions/s.

    python3 tests/bench/bench_infer.py [--replicas 2] [--seconds 10]
"""

import argparse
import gzip
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import ROOT, Stack, wait_until  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def samples(n):
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
        img = f.read(16 + n * 784)[16:]
    return [round(b / 255.0, 4) for b in img]


def body(n):
    return json.dumps({"inputs": [{"name": "input", "shape": [n, 1, 28, 28], "datatype": "FP32", "data": samples(n)}]})


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def sequential(port, token, path, data, n):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    h = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("POST" if data else "GET", path, body=data, headers=h)
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
        lat.append((time.perf_counter() - t0) * 1000)
    conn.close()
    return pct(lat, 50), pct(lat, 99)


def wrk(port, token, body_file, clients, seconds):
    env = dict(os.environ, GANTRY_TOKEN=token, GANTRY_INFER_BODY=body_file)
    r = subprocess.run(["wrk", "-t", "2", "-c", str(clients), "-d", f"{seconds}s", "--latency",
                        "-s", os.path.join(HERE, "infer.lua"), f"http://127.0.0.1:{port}/v2/models/bench-mlp/infer"],
                       env=env, capture_output=True, text=True, check=True)
    out = r.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    lat = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+\w+)", out, re.M))
    return rps, int(non2xx.group(1)) if non2xx else 0, lat.get("50"), lat.get("99")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    with open(os.path.join(ROOT, "deploy", "examples", "training.json")) as f:
        train = json.load(f)
    train["name"] = "bench-mlp"
    train["spec"].pop("epochs")
    train["spec"]["steps"] = 300
    with Stack(workers=args.replicas, server_args=["--rate-limit", "0"]) as s:
        _, tok = s.tenant("bench-infer")
        s.wait_state(tok, s.submit(tok, train), "succeeded", timeout=300)
        jid = s.submit(tok, {"type": "inference", "name": "bench-serve",
                             "spec": {"model": "bench-mlp", "replicas": args.replicas, "max_batch": 64,
                                      "batch_delay_ms": 1, "queue_limit": 100000, "slo": {"latency_ms": 100}}})
        s.wait_state(tok, jid, "running", timeout=60)
        wait_until("ready", lambda: s.get("/v2/models/bench-mlp/ready", tok).status == 200, 30)
        one, eight = body(1), body(8)
        sequential(s.port, tok, "/v2/models/bench-mlp/infer", one, 200)  # warm-up
        hz50, hz99 = sequential(s.port, tok, "/healthz", None, 2000)
        p50, p99 = sequential(s.port, tok, "/v2/models/bench-mlp/infer", one, 2000)
        stats = {k: v for k, v in zip(*[iter(s.redis("HGETALL", f"gantry:infer:stats:{jid}").split("\n"))] * 2)}
        busy = served = 0
        for k, v in stats.items():
            if k.startswith("w_"):
                st = json.loads(v)
                busy += st["busy_s"]
                served += st["served"]
        compute_ms = busy / served * 1000 if served else 0
        print("| one client, single-sample requests | p50 | p99 |")
        print("|---|---|---|")
        print(f"| GET /healthz (HTTP floor) | {hz50:.3f} ms | {hz99:.3f} ms |")
        print(f"| POST /v2/models/bench-mlp/infer | {p50:.3f} ms | {p99:.3f} ms |")
        print(f"| replica compute per request (parse, forward, reply body) | {compute_ms:.3f} ms | |")
        print(f"\nserving path overhead p50 (infer - healthz - compute): {p50 - hz50 - compute_ms:.3f} ms\n")
        print("| wrk, 64 connections | requests/s | predictions/s | p50 | p99 | non-200 |")
        print("|---|---|---|---|---|---|")
        for n, b in ((1, one), (8, eight)):
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                f.write(b)
            rps, bad, l50, l99 = wrk(s.port, tok, f.name, 64, args.seconds)
            os.unlink(f.name)
            print(f"| {n} sample{'s' if n > 1 else ''} per request | {rps:,.0f} | {rps * n:,.0f} | {l50} | {l99} | {bad} |")


if __name__ == "__main__":
    main()
