#!/usr/bin/env python3
"""Benchmark: the direct request path across hosts (issue 29).  The MLP 784-256-10 (TorchScript, as
tests/bench/bench_peer.py makes it) served by one replica, loaded by wrk through the server, in two
stacks up at once: one on loopback (server and worker on one host) and one across hosts (network
namespaces joined by a bridge, as tests/integration/test_multihost.py builds them: the server on h0,
the workers on h1 and h2, TCP between them and the replica's worker).  The two alternate, ROUNDS
rounds, medians.  Needs root (network namespaces); says SKIP otherwise.

    python3 tests/bench/bench_hosts.py [--seconds 4] [--rounds 3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from bench_peer import MAKE_MLP, MLP_META, body, wrk  # noqa: E402
from harness import BUILD, Stack, sandbox_uid, wait_until  # noqa: E402
from test_multihost import hosts  # noqa: E402
from test_torchscript import TORCH_PY, upload  # noqa: E402


class Near(Stack):
    """the one-host stack, its worker's sandbox uid apart from the hosts' workers (one process: one uid range)"""

    def start_worker(self, i, labels=""):
        self._spawn(f"worker{i}", [os.path.join(BUILD, "gantry-worker"), *self._redis_args("worker"), "--id", f"w_test{i}",
                                   "--fed-secret", self.fed_secret, "--state", os.path.join(self.dir, "var", "worker"),
                                   "--sandbox-uid", str(sandbox_uid(i + 4))])


def serve(s, model_file):
    """the MLP uploaded and served by one replica on s; the tenant's token"""
    _, tok = s.tenant("bench")
    assert upload(s, tok, "mlp", model_file, MLP_META).status == 201
    s.submit(tok, {"type": "inference", "name": "bench-mlp",
                   "spec": {"model": "mlp", "replicas": 1, "max_batch": 8, "batch_delay_ms": 0, "timeout_ms": 60000,
                            "slo": {"latency_ms": 60000}}})
    wait_until("ready", lambda: s.get("/v2/models/mlp/ready", tok).status == 200, 120)
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="gantry-bench-hosts-")
    model = os.path.join(d, "mlp.pt")
    subprocess.run([TORCH_PY, "-c", MAKE_MLP, model], check=True)
    with hosts(f"b{os.getpid() % 10000}") as far, Near(workers=1) as near:
        if far is None:
            return
        urls = {"one host": (f"http://127.0.0.1:{near.port}/v2/models/mlp/infer", serve(near, model)),
                "two hosts": (f"http://{far.ip[0]}:{far.port}/v2/models/mlp/infer", serve(far, model))}
        print(f"MLP 784-256-10, batch 1, one replica; wrk, keep-alive, {args.seconds} s per measurement, "
              f"{args.rounds} rounds alternating, medians.\n")
        print("| body | clients | one host req/s | two hosts req/s | ratio | one host p50 | two hosts p50 |")
        print("|---|---|---|---|---|---|---|")
        for binary in (False, True):
            data, ctype, head_len = body("mlp", 1, binary)
            with tempfile.NamedTemporaryFile(delete=False) as f:
                f.write(data)
            for clients in (1, 8):
                res = {k: [] for k in urls}
                for who in urls:  # warm-up: the gateway learns the endpoint, the replica its first passes
                    wrk(urls[who][0], f.name, ctype, head_len, urls[who][1], 1, 2)
                for r in range(args.rounds):
                    for who in (list(urls) if r % 2 == 0 else list(urls)[::-1]):
                        res[who].append(wrk(urls[who][0], f.name, ctype, head_len, urls[who][1], clients, args.seconds))
                near_rps, far_rps = (statistics.median(x[0] for x in res[k]) for k in urls)
                near_p50, far_p50 = (statistics.median(x[1] for x in res[k]) for k in urls)
                print(f"| {'binary' if binary else 'JSON'} | {clients} | {near_rps:,.1f} | {far_rps:,.1f} | "
                      f"**{far_rps / near_rps:.2f}** | {near_p50:.2f} ms | {far_p50:.2f} ms |", flush=True)
            os.unlink(f.name)


if __name__ == "__main__":
    main()
