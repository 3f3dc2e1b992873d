#!/usr/bin/env python3
"""Benchmark: scheduling throughput (assignments/s) and decision latency (p50/p99)
with 1,000 queued jobs and 16 workers, then the same with more jobs queued behind them.

The scheduler is paused (SIGSTOP) while 1,000 jobs are submitted, so all of them
are queued when it resumes; then it assigns them to 16 workers as they free up.
Assignments/s = jobs / (last 'scheduled' event - first).  Decision latency = the
time of policy_decide in each round, and the whole round (decide + the atomic
dispatches), from the scheduler's debug log.

Queued-depth sweep (--depths, default 0, 1,000, 10,000, 100,000): before the 1,000
jobs, that many more low-priority jobs of the same tenant are queued (inserted
straight into the database and published by the outbox: fill.py) and the
scheduler holds them all; they stay queued while the 1,000 normal-priority jobs go
first, so every round decides with the whole depth queued.  Printed with the ratio
of assignments/s to the first depth: a decision must not cost more with a longer queue.

    python3 tests/bench/bench_sched.py [--jobs 1000] [--workers 16] [--depths 0,1000,10000,100000]
"""

import argparse
import datetime
import os
import re
import sqlite3
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import BUILD, Stack, placement_job, wait_until  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fill  # noqa: E402


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else 0


def log_ms(line):
    """the ms epoch of a log line's ISO timestamp"""
    t = datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
    return int(t.timestamp() * 1000)


def run(jobs, workers, depth):
    """{'rate','decide','whole','per_job','rounds','largest'} for `jobs` jobs with `depth` more queued behind"""
    with Stack(workers=0, server_args=["--rate-limit", "0"]) as s:
        s.kill("scheduler")
        s._spawn("scheduler", [os.path.join(BUILD, "gantry-scheduler"), *s._redis_args("scheduler"),
                               "--name", "scheduler", "--log-level", "debug"])
        tid, tok = s.tenant("bench-sched")
        if depth:
            fill.fill(s, tid, depth, priority=0, name="queued")
            fill.wait_scheduler_holds(s, depth)
        s.pause("scheduler")
        for i in range(workers):
            s.start_worker(i)
        wait_until("workers", lambda: len(s.workers()) == workers, 30)
        for i in range(jobs):
            s.submit(tok, placement_job(f"sched-{i}"))
        s.resume("scheduler")
        db = sqlite3.connect(os.path.join(s.dir, "state", "gantry.db"))
        wait_until("all jobs done", lambda: db.execute(
            "SELECT count(*) FROM jobs WHERE state = 'succeeded' AND name LIKE 'sched-%'").fetchone()[0] == jobs, 600, 0.2)
        ts = [r[0] for r in db.execute("SELECT e.ts FROM job_events e JOIN jobs j ON j.id = e.job_id "
                                       "WHERE e.state = 'scheduled' AND j.name LIKE 'sched-%'")]
        db.close()
        end = max(ts)
        with open(os.path.join(s.dir, "scheduler.log")) as f:  # the rounds that placed the measured jobs
            rounds = [tuple(map(int, m.groups())) for line in f
                      if (m := re.search(r"queued=(\d+) workers=\d+ placed=(\d+) decide_us=(\d+) round_us=(\d+)", line))
                      and log_ms(line) <= end]
    span = (end - min(ts)) / 1000
    return {"rate": jobs / span, "decide": [r[2] for r in rounds], "whole": [r[3] for r in rounds],
            "per_job": [r[3] / r[1] for r in rounds if r[1]], "rounds": len(rounds),
            "largest": max((r[0] for r in rounds), default=0)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--depths", default="0,1000,10000,100000",
                    help="more jobs queued behind the measured ones, comma-separated (the first is the reference)")
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",") if d.strip()] or [0]
    results = [(d, run(args.jobs, args.workers, d)) for d in depths]

    first = results[0][1]
    print("| jobs | workers | assignments/s | decision p50 | decision p99 | round p50 | round p99 | round per job p50 |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.jobs} | {args.workers} | {first['rate']:.0f} | {pct(first['decide'], 50)} µs | "
          f"{pct(first['decide'], 99)} µs | {pct(first['whole'], 50)} µs | {pct(first['whole'], 99)} µs | "
          f"{pct(first['per_job'], 50):.0f} µs |")
    print(f"\n{first['rounds']} rounds; largest queue seen by a round: {first['largest']}; "
          f"assignments are bounded by how fast {args.workers} workers on {os.cpu_count()} cores finish their jobs")
    if len(results) < 2:
        return
    print(f"\nQueued-depth sweep: the same {args.jobs:,} jobs with more (low-priority) jobs queued behind them")
    print()
    print(f"| queued behind | largest queue in a round | assignments/s | ratio to {depths[0]:,} | decision p50 | "
          "decision p99 | round p50 | round p99 |")
    print("|---|---|---|---|---|---|---|---|")
    for d, r in results:
        print(f"| {d:,} | {r['largest']:,} | {r['rate']:.0f} | {r['rate'] / first['rate']:.2f} | {pct(r['decide'], 50)} µs | "
              f"{pct(r['decide'], 99)} µs | {pct(r['whole'], 50)} µs | {pct(r['whole'], 99)} µs |")


if __name__ == "__main__":
    main()
