#!/usr/bin/env python3
"""Benchmark: scheduling throughput (assignments/s) and decision latency (p50/p99)
with 1,000 queued jobs and 16 workers.

The scheduler is paused (SIGSTOP) while 1,000 jobs are submitted, so all of them
are queued when it resumes; then it assigns them to 16 workers as they free up.
Assignments/s = jobs / (last 'scheduled' event - first).  Decision latency = the
time of policy_decide over the whole queue in each round, and the whole round
(decide + the atomic dispatches), from the scheduler's debug log.

    python3 tests/bench/bench_sched.py [--jobs 1000] [--workers 16]
"""

import argparse
import os
import re
import sqlite3
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import BUILD, Stack, placement_job, wait_until  # noqa: E402


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=16)
    args = ap.parse_args()
    with Stack(workers=0, server_args=["--rate-limit", "0"]) as s:
        s.kill("scheduler")
        s._spawn("scheduler", [os.path.join(BUILD, "gantry-scheduler"), "--redis", f"127.0.0.1:{s.rport}",
                               "--name", "scheduler", "--log-level", "debug"])
        for i in range(args.workers):
            s.start_worker(i)
        wait_until("workers", lambda: len(s.workers()) == args.workers, 30)
        _, tok = s.tenant("bench-sched")
        s.pause("scheduler")
        for i in range(args.jobs):
            s.submit(tok, placement_job(f"sched-{i}"))
        s.resume("scheduler")
        db = sqlite3.connect(os.path.join(s.dir, "state", "gantry.db"))
        wait_until("all jobs done", lambda: db.execute(
            "SELECT count(*) FROM jobs WHERE state = 'succeeded'").fetchone()[0] == args.jobs, 300, 0.2)
        ts = [r[0] for r in db.execute("SELECT ts FROM job_events WHERE state = 'scheduled'")]
        db.close()
        with open(os.path.join(s.dir, "scheduler.log")) as f:
            rounds = [tuple(map(int, m.groups())) for m in
                      re.finditer(r"queued=(\d+) workers=\d+ placed=(\d+) decide_us=(\d+) round_us=(\d+)", f.read())]
    span = (max(ts) - min(ts)) / 1000
    decide = [r[2] for r in rounds]
    whole = [r[3] for r in rounds]
    per_job = [r[3] / r[1] for r in rounds if r[1]]
    print(f"| jobs | workers | assignments/s | decision p50 | decision p99 | round p50 | round p99 | round per job p50 |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.jobs} | {args.workers} | {args.jobs / span:.0f} | {pct(decide, 50)} µs | {pct(decide, 99)} µs | "
          f"{pct(whole, 50)} µs | {pct(whole, 99)} µs | {pct(per_job, 50):.0f} µs |")
    print(f"\n{len(rounds)} rounds; largest queue seen by a round: {max(r[0] for r in rounds)}; "
          "assignments are bounded by how fast 16 workers on 2 cores finish their jobs")


if __name__ == "__main__":
    main()
