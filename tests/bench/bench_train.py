#!/usr/bin/env python3
"""Benchmark: data-parallel training through the real stack on Fashion-MNIST.

The same job (deploy/examples/training.json: MLP 784-128-10, Adam, cosine, global
batch 64, 10 epochs, seed 1) runs with 1, 2 and 4 CPU workers (a gang, ring
all-reduce over loopback).  Reported per worker count: test accuracy (the bar:
all within 0.5 points of each other), wall time, samples/s, and the time split
of rank 0 between compute, communication and data loading.

    python3 tests/bench/bench_train.py [--workers 1,2,4] [--epochs 10]

On a 2-core machine 2 and 4 workers share two cores, so samples/s measures the
ring's overhead rather than a speed-up; on a cluster each worker has its own.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import ROOT, Stack  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--epochs", type=int, default=10)
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    with open(os.path.join(ROOT, "deploy", "examples", "training.json")) as f:
        base = json.load(f)
    rows = []
    with Stack(workers=max(counts)) as s:
        _, tok = s.tenant("bench-train")
        for n in counts:
            job = json.loads(json.dumps(base))
            job["name"] = f"bench-dp{n}"
            job["spec"].update({"workers": n, "epochs": args.epochs, "progress_every_steps": 100})
            t0 = time.time()
            jid = s.submit(tok, job)
            done = s.wait_state(tok, jid, "succeeded", timeout=3600)
            wall = time.time() - t0
            m = done["result"]["metrics"]
            pts = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
            split = {k: sum(p.get(k, 0) for p in pts) for k in ("compute_s", "comm_s", "data_s")}
            tot = sum(split.values()) or 1
            rows.append((n, m["test_accuracy"] * 100, wall, m["samples_per_s"], split["compute_s"] / tot * 100,
                         split["comm_s"] / tot * 100, split["data_s"] / tot * 100))
    print("| workers | test accuracy | wall time | samples/s | compute | communication | data |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.2f}% | {r[2]:.1f} s | {r[3]:,.0f} | {r[4]:.0f}% | {r[5]:.0f}% | {r[6]:.0f}% |")
    accs = [r[1] for r in rows]
    print(f"\nspread of test accuracy: {max(accs) - min(accs):.2f} points (bar: <= 0.5)")


if __name__ == "__main__":
    main()
