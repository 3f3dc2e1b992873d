#!/usr/bin/env python3
"""Benchmark: federated jobs through the real stack, the aggregations side by side.

For each number of sites (one CPU worker labelled site=sK each, all on this machine), Fashion-MNIST split
non-IID (Dirichlet alpha 0.5) by the job's partition, the MLP 784-32-10 (25,450 parameters), 40 local steps a
round: one job per aggregation with the same seed and local training.  The aggregations (--aggs):
  securedfl    SecureD-FL, 7 ADMM iterations (the default before issue 32's change)
  securedfl:K  SecureD-FL with K iterations
  fedavg       FedAvg, one masked sum a round (the default now)
Reported per (sites, aggregation): final test accuracy, the consensus residual, rounds per second (1 / the
mean round time, local training included), the aggregation's time per round (site 0's, waits for the slowest
peer's training included) and the bytes each site sends and receives per round (site 0's
metrics points, averaged over the rounds), and each row's traffic and rate against the first aggregation's.
Dropouts are not built yet (issue 32), so there is no column for the time one costs.

    python3 tests/bench/bench_fed.py [--sites 3,9,15] [--rounds 5] [--aggs securedfl,securedfl:1,fedavg]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import Stack  # noqa: E402
from test_federated import fed_job  # noqa: E402


def job_for(n, agg, rounds):
    name, _, iters = agg.partition(":")
    extra = {"aggregation": name}
    if iters:
        extra["admm"] = {"iterations": int(iters)}
    return fed_job(n, rounds=rounds, name=f"fed-{agg.replace(':', '-')}", **extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sites", default="3,9,15")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--aggs", default="securedfl,securedfl:1,fedavg")
    args = ap.parse_args()
    aggs = args.aggs.split(",")
    print(f"load average at start: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    print("| sites | aggregation | accuracy | residual | rounds/s | aggregation s per round | MB sent / received per site "
          f"per round | traffic, rounds/s vs {aggs[0]} |")
    print("|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in args.sites.split(",")]:
        with Stack(workers=0) as s:
            for i in range(n):
                s.start_worker(i, labels=f"site=s{i}")
            _, tok = s.tenant("bench-fed")
            base = None
            for agg in aggs:
                jid = s.submit(tok, job_for(n, agg, args.rounds))
                done = s.wait_state(tok, jid, "succeeded", timeout=3600)
                pts = [p for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"] if "round" in p]
                m = done["result"]["metrics"]
                rate = len(pts) / sum(p["round_s"] for p in pts)
                agg_s = sum(p.get("aggregate_s", 0) for p in pts) / len(pts)
                sent = sum(p["bytes_sent"] for p in pts) / len(pts) / 1e6
                got = sum(p.get("bytes_received", 0) for p in pts) / len(pts) / 1e6
                base = base or (sent + got, rate)
                print(f"| {n} | {agg} | {m['test_accuracy'] * 100:.2f}% | {m['residual']:.1e} | {rate:.2f} "
                      f"| {agg_s:.3f} | {sent:.3f} / {got:.3f} | {(sent + got) / base[0]:.3f}x, {rate / base[1]:.2f}x |", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")


if __name__ == "__main__":
    main()
