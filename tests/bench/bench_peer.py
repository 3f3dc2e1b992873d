#!/usr/bin/env python3
"""Benchmark: gantry's serving path against the server a team would write itself (issue 29): a
one-file FastAPI + uvicorn server around torch.jit.load (tests/bench/fastapi_peer.py) serving the
same TorchScript file with the same torch threads, measured side by side in one run.

  * models: an MLP 784-256-10 and a ResNet-18 (torchvision, random weights, traced), TorchScript;
  * gantry: each model uploaded and served by one replica (its sandboxed process, as in
    production: no bypass) on a CPU worker started with --threads T; the peer: one uvicorn
    process per model, one executor thread, T torch threads;
  * cases: batch 1 with 1 and 8 clients (both models), ResNet-18 batch 8 with 1 client; each with
    JSON bodies and with the binary extension; load from wrk (keep-alive, --seconds each);
  * ROUNDS rounds, the two systems alternating (the first one swaps each round: these 2-core VMs
    drift); the table gives medians of requests/s and p50, and the ratio gantry / peer.

    python3 tests/bench/bench_peer.py [--threads 2] [--seconds 4] [--rounds 3] [--only mlp|resnet]
"""

import argparse
import json
import os
import random
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import BUILD, Stack, wait_until  # noqa: E402
from test_torchscript import MODELS, RESNET_META, TORCH_PY, upload  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MLP_META = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 784]}],
            "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}]}
MAKE_MLP = """
import sys, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).eval()
torch.jit.script(m).save(sys.argv[1])
"""
# (model, batch, clients)
CASES = [("mlp", 1, 1), ("mlp", 1, 8), ("resnet", 1, 1), ("resnet", 1, 8), ("resnet", 8, 1)]
SHAPE = {"mlp": [784], "resnet": [3, 224, 224]}
INPUT = {"mlp": "x", "resnet": "image"}


def body(model, batch, binary):
    """the request body, its content type and its JSON head's length (binary) or None"""
    n = batch
    for d in SHAPE[model]:
        n *= d
    rng = random.Random(batch)
    values = [round(rng.uniform(-1, 1), 4) for _ in range(n)]
    shape = [batch] + SHAPE[model]
    if not binary:
        doc = {"inputs": [{"name": INPUT[model], "shape": shape, "datatype": "FP32", "data": values}]}
        return json.dumps(doc).encode(), "application/json", None
    raw = struct.pack(f"<{n}f", *values)
    head = json.dumps({"inputs": [{"name": INPUT[model], "shape": shape, "datatype": "FP32",
                                   "parameters": {"binary_data_size": len(raw)}}]}).encode()
    return head + raw, "application/octet-stream", len(head)


def wrk(url, body_file, ctype, head_len, token, clients, seconds):
    """requests/s and p50 in ms; fails on any non-200 answer"""
    env = dict(os.environ, BENCH_BODY=body_file, BENCH_CTYPE=ctype, BENCH_HEAD_LEN=str(head_len or ""),
               BENCH_TOKEN=token or "")
    out = subprocess.run(["wrk", "-t", "1", "-c", str(clients), "-d", f"{seconds}s", "--latency", "--timeout", "60s",
                          "-s", os.path.join(HERE, "post.lua"), url], env=env, capture_output=True, text=True,
                         check=True).stdout
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    assert not bad, out
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    v, unit = re.search(r"^\s+50%\s+([\d.]+)(\w+)", out, re.M).groups()
    return rps, float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=["mlp", "resnet"])
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="gantry-bench-peer-")
    subprocess.run([TORCH_PY, "-c", MAKE_MLP, os.path.join(d, "mlp.pt")], check=True)
    subprocess.run([TORCH_PY, MODELS, "make", d, "--resnet"], check=True, stdout=subprocess.DEVNULL)
    files = {"mlp": os.path.join(d, "mlp.pt"), "resnet": os.path.join(d, "resnet18.pt")}
    metas = {"mlp": MLP_META, "resnet": RESNET_META}
    models = [args.only] if args.only else ["mlp", "resnet"]
    cases = [c for c in CASES if c[0] in models]
    peers, procs = {}, []
    with Stack(workers=len(models), server_args=["--infer-body-limit", str(64 << 20)]) as s:
        for i in range(len(models)):  # again with the thread budget of the comparison
            s.kill(f"worker{i}")
            s._spawn(f"worker{i}", [os.path.join(BUILD, "gantry-worker"), *s._redis_args("worker"), "--id",
                                    f"w_test{i}", "--threads", str(args.threads), "--fed-secret", s.fed_secret,
                                    "--state", os.path.join(s.dir, "var", f"worker{i}")])
        wait_until("workers", lambda: len(s.workers()) == len(models), 15)
        _, tok = s.tenant("bench")
        try:
            for m in models:
                assert upload(s, tok, m, files[m], metas[m]).status == 201
                s.submit(tok, {"type": "inference", "name": f"bench-{m}",
                               "spec": {"model": m, "replicas": 1, "max_batch": 8, "batch_delay_ms": 0,
                                        "timeout_ms": 600000, "slo": {"latency_ms": 60000}}})
                port = free_port()
                procs.append(subprocess.Popen([TORCH_PY, os.path.join(HERE, "fastapi_peer.py"), "--model", files[m],
                                               "--port", str(port), "--threads", str(args.threads)]))
                peers[m] = port
            for m in models:
                wait_until(f"{m} ready", lambda: s.get(f"/v2/models/{m}/ready", tok).status == 200, 120)
                wait_until(f"peer {m}", lambda: subprocess.run(
                    ["curl", "-sf", f"http://127.0.0.1:{peers[m]}/v2/health/ready"], capture_output=True).returncode == 0,
                    120)
            print(f"{args.threads} torch threads on both sides; wrk, keep-alive, {args.seconds} s per measurement, "
                  f"{args.rounds} rounds alternating, medians.\n")
            print("| model | batch | clients | body | gantry req/s | peer req/s | ratio | gantry p50 | peer p50 |")
            print("|---|---|---|---|---|---|---|---|---|")
            for m, b, c in cases:
                for binary in (False, True):
                    data, ctype, head_len = body(m, b, binary)
                    with tempfile.NamedTemporaryFile(delete=False) as f:
                        f.write(data)
                    urls = {"gantry": (f"http://127.0.0.1:{s.port}/v2/models/{m}/infer", tok),
                            "peer": (f"http://127.0.0.1:{peers[m]}/v2/models/{m}/infer", None)}
                    res = {"gantry": [], "peer": []}
                    for who in urls:  # warm-up
                        wrk(urls[who][0], f.name, ctype, head_len, urls[who][1], 1, 1)
                    for r in range(args.rounds):
                        for who in (("gantry", "peer") if r % 2 == 0 else ("peer", "gantry")):
                            res[who].append(wrk(urls[who][0], f.name, ctype, head_len, urls[who][1], c, args.seconds))
                    os.unlink(f.name)
                    g_rps = statistics.median(x[0] for x in res["gantry"])
                    p_rps = statistics.median(x[0] for x in res["peer"])
                    g_p50 = statistics.median(x[1] for x in res["gantry"])
                    p_p50 = statistics.median(x[1] for x in res["peer"])
                    print(f"| {m} | {b} | {c} | {'binary' if binary else 'JSON'} | {g_rps:,.1f} | {p_rps:,.1f} | "
                          f"**{g_rps / p_rps:.2f}** | {g_p50:.2f} ms | {p_p50:.2f} ms |", flush=True)
        finally:
            for p in procs:
                p.terminate()
                p.wait(10)


if __name__ == "__main__":
    main()
