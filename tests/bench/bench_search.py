#!/usr/bin/env python3
"""Benchmark: hyper-parameter search (docs/search.md), ASHA against random search at the same epoch budget,
on the PyTorch example (deploy/examples/pytorch: train.py, search.json) through the real stack with two CPU
workers, as ./deploy/up runs by default.

For each seed, on one stack, one search after the other:
1. ASHA: search.json as it is (asha over its space: lr, width, batch; epochs 1/3, reduction 3; max_trials,
   parallel and seed from the file unless given), every image of Fashion-MNIST;
2. random: the same space, seed, parallel and max 3 epochs, every trial trained to the max, with
   ceil(E / 3) trials, E the epochs ASHA's trials completed (so random gets at least ASHA's budget; trial
   i's parameters follow from (seed, i) alone, so random's trials are ASHA's first ones).
Reported for each: epochs completed (the sum of the trials' last reported epoch), the time from the search's
submission to the first point of any trial with test_accuracy >= the target (the points' own server
timestamps), the best accuracy the search names (the best last reported value, docs/search.md), the
search's wall time (created_at to finished_at) and the workers' busy fraction over it (GET
/v1/cluster/timeline: each worker's running intervals, clipped to the search, over 2 x its wall time).
Then the ratios ASHA / random and the issue's targets: time to target <= 1/3 of random's, best accuracy
>= random's, workers >= 90% busy.  With --pause, a third search between the two: ASHA with "pause": true
(the paper's pause-and-promote, each run resuming from the trial's checkpoint), same seed and trials.

    python3 tests/bench/bench_search.py [--target 0.89] [--seeds 1] [--max-trials N] [--parallel N] [--pause]
    python3 tests/bench/bench_search.py --quick    # a smoke run: 6 trials on 3,000 training and 1,000
                                                   # test images (train.py's TRAIN_SIZE / TEST_SIZE),
                                                   # target 0.80; 3-4 minutes on 2 loaded cores

The full run trains about 30 epochs of 60,000 images (15 per search) on two single-thread ranks: about
10-15 minutes per seed on a quiet 2-core machine (estimated; 23 minutes measured at load average 5.5).  Timings need a quiet machine: the load average at the
start and the end is printed with the table.
"""

import argparse
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import Stack, iso_seconds, wait_until  # noqa: E402
from test_search_torch import example_root, example_search  # noqa: E402


def ms(iso):
    """milliseconds since the epoch of the API's ISO 8601 UTC times (2026-11-28T09:05:33.384Z)"""
    return iso_seconds(iso) * 1000


def busy(s, tok, t0, t1, workers):
    """the share of [t0, t1] (ms) the workers spent running jobs, from their running intervals, and where
    the rest went: {"fraction", "gaps_s" (between two intervals of a worker: a trial's process ending, the
    next one scheduled), "ends_s" (before a worker's first interval and after its last: fewer trials left
    than workers)}"""
    minutes = min(1440, math.ceil((time.time() * 1000 - t0) / 60000) + 1)
    timeline = s.get(f"/v1/cluster/timeline?minutes={minutes}", tok).json
    per = {}
    for iv in timeline["intervals"]:
        a = max(ms(iv["start"]), t0)
        b = min(ms(iv["end"]) if iv["end"] else t1, t1)
        if b > a:
            per.setdefault(iv["worker"], []).append((a, b))
    total, gaps, ends = 0.0, [], 0.0
    for ivs in per.values():
        ivs.sort()
        total += sum(b - a for a, b in ivs)
        gaps += [max(0.0, c - b) for (_, b), (c, _) in zip(ivs, ivs[1:])]
        ends += ivs[0][0] - t0 + t1 - ivs[-1][1]
    ends += (workers - len(per)) * (t1 - t0)  # a worker that ran nothing
    return {"fraction": total / (workers * (t1 - t0)), "gaps_s": [g / 1000 for g in gaps], "ends_s": ends / 1000}


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run_search(s, tok, job, target, workers):
    """submits one search, waits for its end (sampling the 1-minute load average every second); its figures"""
    sid = s.submit(tok, job)
    loads = []

    def finished():  # once a second, not the harness's 50 a second: the bench's own load stays small
        loads.append(load1())
        job = s.job(tok, sid)
        assert job["state"] in ("queued", "running", "succeeded"), job
        return job["state"] == "succeeded" and job

    done = wait_until(f"search {sid} succeeded", finished, timeout=7200, interval=1.0)
    t0, t1 = ms(done["created_at"]), ms(done["finished_at"])
    trials = s.get(f"/v1/jobs/{sid}/trials", tok).json["trials"]
    reached = None
    for t in trials:
        for jid in t["jobs"]:
            for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]:
                if p.get("test_accuracy", -1) >= target and (reached is None or p["ts"] < reached):
                    reached = p["ts"]
    states = {}
    for t in trials:
        states[t["state"]] = states.get(t["state"], 0) + 1
    return {"id": sid, "trials": len(trials), "states": states,
            "epochs": sum(t["last"]["resource"] or 0 for t in trials if t["last"]),
            "to_target": (reached - t0) / 1000 if reached is not None else None,
            "best": done["result"]["metrics"]["test_accuracy"], "best_trial": done["result"]["best"],
            "wall": (t1 - t0) / 1000, "load": (statistics.mean(loads), max(loads)), **busy(s, tok, t0, t1, workers)}


def fmt_s(x):
    return "not reached" if x is None else f"{x:.0f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run on a subset of the data")
    ap.add_argument("--target", type=float, help="the test accuracy to reach (default 0.89; --quick 0.80)")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default: search.json's)")
    ap.add_argument("--max-trials", type=int, help="ASHA's trials (default: search.json's; --quick 6)")
    ap.add_argument("--parallel", type=int, help="trials at once (default: search.json's)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pause", action="store_true", help="also ASHA with pause and promote (spec.search.pause)")
    args = ap.parse_args()
    target = args.target if args.target is not None else (0.80 if args.quick else 0.89)
    sizes = {"train_size": 3000, "test_size": 1000} if args.quick else {"train_size": 0, "test_size": 0}
    base = example_search(grace_s=30, **sizes)["spec"]["search"]
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [base["seed"]]
    asha_search = {"max_trials": args.max_trials or (6 if args.quick else base["max_trials"])}
    if args.parallel:
        asha_search["parallel"] = args.parallel
    max_epochs = base["budget"]["max"]
    with open("/proc/loadavg") as f:
        load0 = f.read().split()[:3]
    rows = []
    with Stack(workers=args.workers) as s:
        tid, tok = s.tenant("bench-search")
        example_root(s, tid)
        for seed in seeds:
            asha = run_search(s, tok, example_search(grace_s=30, seed=seed, **asha_search, **sizes), target, args.workers)
            paused = (run_search(s, tok, example_search(grace_s=30, seed=seed, pause=True, **asha_search, **sizes), target,
                                 args.workers) if args.pause else None)
            n = max(1, math.ceil(asha["epochs"] / max_epochs - 1e-9))
            rnd_job = example_search(grace_s=30, seed=seed, algorithm="random", max_trials=n, **sizes)
            if args.parallel:
                rnd_job["spec"]["search"]["parallel"] = args.parallel
            rnd = run_search(s, tok, rnd_job, target, args.workers)
            rows.append((seed, asha, paused, rnd))
    with open("/proc/loadavg") as f:
        load_end = f.read().split()[:3]

    par = args.parallel or base["parallel"]
    data = "3,000 training / 1,000 test images (--quick)" if args.quick else "all 60,000 training / 10,000 test images"
    print(f"search.json's space, epochs {base['budget']['min']}/{max_epochs} (reduction {base['budget']['reduction']}), "
          f"{args.workers} CPU workers, parallel {par}, {data}; target test accuracy {target:.2f}; "
          f"load average {' '.join(load0)} at the start, {' '.join(load_end)} at the end")
    print()
    print("| seed | search | trials | epochs | time to target | best test accuracy (trial) | wall time | workers busy "
          "| idle between trials (mean) | idle at the ends | load average (mean, max) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for seed, asha, paused, rnd in rows:
        for name, r in (("ASHA", asha), ("ASHA, pause", paused), ("random", rnd)):
            if r is None:
                continue
            states = ", ".join(f"{v} {k}" for k, v in sorted(r["states"].items()))
            print(f"| {seed} | {name} | {r['trials']} ({states}) | {r['epochs']:.0f} | {fmt_s(r['to_target'])} | "
                  f"{r['best']:.4f} ({r['best_trial']['trial']}) | {r['wall']:.0f} s | {r['fraction'] * 100:.0f}% | "
                  f"{sum(r['gaps_s']):.1f} s ({statistics.mean(r['gaps_s'] or [0]):.1f} s x {len(r['gaps_s'])}) | {r['ends_s']:.1f} s | {r['load'][0]:.1f}, {r['load'][1]:.1f} |")
    print()
    print("| seed | epochs ASHA/random | time to target ASHA/random (target <= 0.33) | best accuracy ASHA - random (target >= 0) "
          "| wall time ASHA/random | workers busy ASHA, random (target >= 90%) |")
    print("|---|---|---|---|---|---|")
    ratios = []
    for seed, asha, paused, rnd in rows:
        if asha["to_target"] is not None and rnd["to_target"] is not None:
            ratio = asha["to_target"] / rnd["to_target"]
            ratios.append(ratio)
            tt = f"{ratio:.2f}"
        else:
            tt = f"ASHA {fmt_s(asha['to_target'])}, random {fmt_s(rnd['to_target'])}"
        print(f"| {seed} | {asha['epochs'] / max(rnd['epochs'], 1e-9):.2f} | {tt} | {(asha['best'] - rnd['best']) * 100:+.2f} points | "
              f"{asha['wall'] / rnd['wall']:.2f} | {asha['fraction'] * 100:.0f}%, {rnd['fraction'] * 100:.0f}% |")
        if paused:
            tt = (f"{paused['to_target'] / rnd['to_target']:.2f}" if paused["to_target"] is not None and rnd["to_target"] is not None
                  else f"pause {fmt_s(paused['to_target'])}, random {fmt_s(rnd['to_target'])}")
            print(f"| {seed} (pause) | {paused['epochs'] / max(rnd['epochs'], 1e-9):.2f} | {tt} | "
                  f"{(paused['best'] - rnd['best']) * 100:+.2f} points | {paused['wall'] / rnd['wall']:.2f} | "
                  f"{paused['fraction'] * 100:.0f}%, {rnd['fraction'] * 100:.0f}% |")
    if len(rows) > 1 and ratios:
        print(f"\nmedian time to target ASHA/random over {len(ratios)} seeds: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
