#!/usr/bin/env python3
"""Benchmark: federated jobs through the real stack, SecureD-FL against FedAvg.

For 9 and 15 sites (one CPU worker labelled site=sK each, all on this machine), Fashion-MNIST split
non-IID (Dirichlet alpha 0.5) by the job's partition, the MLP 784-32-10: a SecureD-FL job (7 masked
ADMM iterations per round) and a FedAvg job with the same seed and local training.  Reported: final
test accuracy of both and the difference, the consensus residual, round time and the bytes each site
sends and receives per round, on average over the rounds (from the jobs' metrics points: site 0's).

    python3 tests/bench/bench_fed.py [--sites 9,15] [--rounds 10]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import Stack  # noqa: E402
from test_federated import fed_job  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sites", default="9,15")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    print("| sites | SecureD-FL accuracy | FedAvg accuracy | difference | residual | round time SecureD-FL / FedAvg "
          "| MB sent per site per round SecureD-FL / FedAvg | MB received per site per round SecureD-FL / FedAvg |")
    print("|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in args.sites.split(",")]:
        with Stack(workers=0) as s:
            for i in range(n):
                s.start_worker(i, labels=f"site=s{i}")
            _, tok = s.tenant("bench-fed")
            res = {}
            for agg in ("securedfl", "fedavg"):
                jid = s.submit(tok, fed_job(n, rounds=args.rounds, name=f"fed-{agg}", aggregation=agg))
                done = s.wait_state(tok, jid, "succeeded", timeout=3600)
                pts = [p for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"] if "round" in p]
                res[agg] = (done["result"]["metrics"], sum(p["round_s"] for p in pts) / len(pts),
                            sum(p["bytes_sent"] for p in pts) / len(pts) / 1e6,
                            sum(p.get("bytes_received", 0) for p in pts) / len(pts) / 1e6)
            (ms, ts, bs, rs), (ma, ta, ba, ra) = res["securedfl"], res["fedavg"]
            print(f"| {n} | {ms['test_accuracy'] * 100:.2f}% | {ma['test_accuracy'] * 100:.2f}% | "
                  f"{(ms['test_accuracy'] - ma['test_accuracy']) * 100:+.2f} | {ms['residual']:.1e} | {ts:.2f} s / {ta:.2f} s "
                  f"| {bs:.2f} / {ba:.2f} | {rs:.2f} / {ra:.2f} |", flush=True)


if __name__ == "__main__":
    main()
