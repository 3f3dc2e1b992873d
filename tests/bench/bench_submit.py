#!/usr/bin/env python3
"""Benchmark: durable job submissions per second (1, 16, 64 concurrent clients,
wrk as the load generator) and submit -> on-a-worker latency (p50/p99).

Every 201 is a job committed to SQLite with synchronous=FULL (group commit);
after each load step the bench counts the jobs in the database and checks that
it equals the number of 201s wrk saw.  Prints a markdown table.

Then the queued-depth sweep: for each depth (default 0, 1,000, 10,000, 100,000) a
fresh stack without workers gets that many jobs queued (inserted straight into
the database and published by the outbox: fill.py; the scheduler holds them all
before the load starts), then 64 clients submit for --depth-seconds.  Printed with
the ratio to the empty queue: what a submission costs must not grow with the queue.

    python3 tests/bench/bench_submit.py [--seconds 10] [--latency-jobs 300]
                                        [--depths 0,1000,10000,100000] [--depth-seconds 10]
"""

import argparse
import os
import re
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import Stack, placement_job, wait_until  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fill  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def wrk(stack, token, clients, seconds):
    env = dict(os.environ, GANTRY_TOKEN=token)
    threads = min(2, clients)
    r = subprocess.run(["wrk", "-t", str(threads), "-c", str(clients), "-d", f"{seconds}s", "--latency",
                        "-s", os.path.join(HERE, "submit.lua"), f"http://127.0.0.1:{stack.port}/v1/jobs"],
                       env=env, capture_output=True, text=True, check=True)
    out = r.stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+\w+)", out, re.M))
    return {"requests": total, "non2xx": int(non2xx.group(1)) if non2xx else 0, "rps": rps,
            "p50": lat.get("50"), "p99": lat.get("99"), "socket_errors": errors.group(1) if errors else "",
            # requests wrk gave up on (its 2 s timeout) or lost mid-read may still have been committed
            "unanswered": sum(int(n) for n in re.findall(r"(?:read|write|timeout) (\d+)", errors.group(1))) if errors else 0}


def slack(created, clients, r):
    """the most jobs a load step may store beyond the 201s wrk counted: requests still in flight when it
    stops (one a connection), those it counts as socket errors (it sends a request again on a new
    connection after a read or write error), and a margin of 0.5% (at 64 connections and 9,000/s wrk
    was seen to leave up to 80 answers uncounted)"""
    return created + clients + r["unanswered"] + created // 200


def count_jobs(stack):
    db = sqlite3.connect(os.path.join(stack.dir, "state", "gantry.db"))
    try:
        return db.execute("SELECT count(*) FROM jobs").fetchone()[0]
    finally:
        db.close()


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def latency(stack, token, n):
    """Sequential submissions to idle workers: ms from commit (created_at) to the worker taking the task."""
    db = sqlite3.connect(os.path.join(stack.dir, "state", "gantry.db"))
    ids = []
    for i in range(n):
        ids.append(stack.submit(token, placement_job(f"lat-{i}")))
        time.sleep(0.005)  # pacing so that a worker is free: this measures the path, not a queue
    wait_until("latency jobs finished", lambda: db.execute(
        "SELECT count(*) FROM jobs WHERE state = 'succeeded' AND name LIKE 'lat-%'").fetchone()[0] == n, 120, 0.2)
    rows = db.execute("""SELECT j.created_at, e.ts FROM jobs j JOIN job_events e ON e.job_id = j.id
                         WHERE e.state = 'running' AND j.name LIKE 'lat-%'""").fetchall()
    db.close()
    d = [ts - created for created, ts in rows]
    return percentile(d, 50), percentile(d, 99), len(d)


def depth_sweep(depths, seconds, clients=64):
    """[(depth, wrk result, stored, seconds the scheduler took to hold the queue, queued after)]"""
    out = []
    for depth in depths:
        with Stack(workers=0, server_args=["--rate-limit", "0"]) as s:
            tid, tok = s.tenant("bench-depth")
            fill.fill(s, tid, depth)
            held_s = fill.wait_scheduler_holds(s, depth)
            before = count_jobs(s)
            r = wrk(s, tok, clients, seconds)
            stored = count_jobs(s) - before
            created = r["requests"] - r["non2xx"]
            assert created <= stored <= slack(created, clients, r), f"{created} answered 201 but {stored} stored"
            out.append((depth, r, stored, held_s, count_jobs(s)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--latency-jobs", type=int, default=300)
    ap.add_argument("--depths", default="0,1000,10000,100000", help="queued jobs before the load, comma-separated ('' skips)")
    ap.add_argument("--depth-seconds", type=int, default=10)
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",") if d.strip()]
    rows = []
    with Stack(workers=0, server_args=["--rate-limit", "0"]) as s:  # no worker, no rate limit
        _, tok = s.tenant("bench")
        for clients in (1, 16, 64):
            before = count_jobs(s)
            r = wrk(s, tok, clients, args.seconds)
            stored = count_jobs(s) - before
            created = r["requests"] - r["non2xx"]
            # requests still in flight when wrk stops are committed but not counted by wrk
            assert created <= stored <= slack(created, clients, r), f"{created} answered 201 but {stored} stored"
            rows.append((clients, r, stored))
    with Stack(workers=2) as s:
        _, tok = s.tenant("bench-lat")
        p50, p99, n = latency(s, tok, args.latency_jobs)

    print("| concurrent clients | durable submissions/s | HTTP p50 | HTTP p99 | jobs stored = 201s |")
    print("|---|---|---|---|---|")
    for clients, r, stored in rows:
        print(f"| {clients} | {r['rps']:.0f} | {r['p50']} | {r['p99']} | {stored} |")
    print()
    print(f"submit -> on a worker ({n} jobs, idle workers): p50 {p50} ms, p99 {p99} ms "
          "(created_at to the worker's 'running' event, ms clock)")
    if not depths:
        return
    sweep = depth_sweep(depths, args.depth_seconds)
    base = sweep[0][1]["rps"]
    print()
    print(f"Queued-depth sweep: 64 clients for {args.depth_seconds} s each on a fresh stack that already holds that many queued "
          "jobs (no workers, so every job stays queued)")
    print()
    print(f"| queued before | durable submissions/s | ratio to {sweep[0][0]:,} queued | HTTP p99 | jobs stored = 201s | "
          "queued after |")
    print("|---|---|---|---|---|---|")
    for depth, r, stored, held_s, after in sweep:
        print(f"| {depth:,} | {r['rps']:.0f} | {r['rps'] / base:.2f} | {r['p99']} | {stored} | {after:,} |")


if __name__ == "__main__":
    main()
