#!/usr/bin/env python3
"""Benchmark: model selection by model hopping (Cerebro) against the same configurations trained
one after another, data-parallel, on the same workers.

A grid over the learning rate and the hidden units of the MLP of deploy/examples/training.json
(Fashion-MNIST, Adam, batch 64) runs as one model-hopping job on W workers, then every
configuration runs as its own W-worker data-parallel job, one after another.  Reported: wall time
of each way, the ratio, and each configuration's test accuracy both ways.

    python3 tests/bench/bench_mop.py [--workers 2] [--epochs 2]
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import ROOT, Stack  # noqa: E402

GRID = {"optimizer.lr": [0.0003, 0.001, 0.003], "model.layers.1.units": [64, 128]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args()
    with open(os.path.join(ROOT, "deploy", "examples", "training.json")) as f:
        base = json.load(f)
    base["spec"].update({"epochs": args.epochs, "workers": args.workers, "progress_every_steps": 200})
    base["spec"].pop("schedule", None)  # the data-parallel runs and the hopping runs count steps differently
    with Stack(workers=args.workers) as s:
        _, tok = s.tenant("bench-mop")
        job = json.loads(json.dumps(base))
        job["name"] = "bench-mop"
        job["spec"]["search"] = {"type": "grid", "params": GRID}
        t0 = time.time()
        res = s.wait_state(tok, s.submit(tok, job), "succeeded", timeout=7200)["result"]
        mop_s = time.time() - t0
        seq = []
        t0 = time.time()
        for row in res["configurations"]:
            one = json.loads(json.dumps(base))
            one["name"] = f"bench-seq-{row['index']}"
            one["spec"]["optimizer"]["lr"] = row["params"]["optimizer.lr"]
            one["spec"]["model"]["layers"][1]["units"] = row["params"]["model.layers.1.units"]
            done = s.wait_state(tok, s.submit(tok, one), "succeeded", timeout=7200)
            seq.append(done["result"]["metrics"]["test_accuracy"])
        seq_s = time.time() - t0
    n = len(res["configurations"])
    print(f"{n} configurations, {args.epochs} epochs, {args.workers} workers: model hopping {mop_s:.1f} s, "
          f"one after another (data-parallel) {seq_s:.1f} s, ratio {seq_s / mop_s:.2f}x")
    print()
    print("| configuration | test accuracy, model hopping | test accuracy, data-parallel |")
    print("|---|---|---|")
    for row, acc in zip(res["configurations"], seq):
        p = row["params"]
        print(f"| lr {p['optimizer.lr']}, {p['model.layers.1.units']} units | {row['test_accuracy'] * 100:.2f}% "
              f"| {acc * 100:.2f}% |")


if __name__ == "__main__":
    main()
