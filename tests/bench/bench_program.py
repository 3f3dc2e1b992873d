#!/usr/bin/env python3
"""Benchmark: teams' own programs (docs/programs.md) through the real stack.

1. Launch overhead: a 1-rank program job whose script prints its own clock as its
   first line (`date +%s%N`), submitted one after another to idle workers: from
   the client's clock before POST /v1/jobs to that line (the program running in
   its sandbox: rendezvous, directories, cgroups, bwrap, the rank init), p50/p99.
   Also to the line as the API shows it (GET /v1/jobs/{id}/logs polled every
   10 ms): what a user watching the logs waits.
2. DDP throughput: deploy/examples/pytorch/train.py (2 ranks, gloo) for one
   epoch, through gantry (2 workers, each rank in its sandbox) and by hand (two
   /usr/bin/python3 processes with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE set,
   no sandbox), alternating (each side first in every other round), each --reps
   times; samples/s is what the script
   itself measures over its epoch (its metrics line), so both sides are timed
   by the same code.  The ratio is of the medians.

    python3 tests/bench/bench_program.py [--launches 30] [--reps 2]

On this 2-core machine the two ranks share the cores with the stack's idle
processes (both sides run while the stack is up).
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import ROOT, Stack  # noqa: E402
from test_program_jobs import program_job, program_root  # noqa: E402

FIRST_LINE = "#!/bin/sh\ndate +%s%N\n"
EXAMPLE = os.path.join(ROOT, "deploy", "examples", "pytorch")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def launches(s, tok, n):
    started, shown = [], []
    for i in range(n):
        t0 = time.time()
        jid = s.submit(tok, program_job(["/bin/sh", "first.sh"], name=f"launch-{i}"))
        seen = None
        while seen is None and time.time() - t0 < 60:
            r = s.get(f"/v1/jobs/{jid}/logs?tail=1", tok)
            if r.status == 200 and r.raw.strip():
                seen = time.time()
            else:
                time.sleep(0.01)
        line = s.get(f"/v1/jobs/{jid}/logs?tail=1", tok).raw.strip()
        started.append(int(line) / 1e6 - t0 * 1000)
        shown.append((seen - t0) * 1000)
        s.wait_state(tok, jid, "succeeded", timeout=60)
    return started, shown


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def by_hand(workdir):
    """train.py for one epoch as two plain processes; its samples/s"""
    tmp = tempfile.mkdtemp(prefix="gantry-bench-hand-")
    port = free_port()
    procs = []
    for rank in range(2):
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "LANG": "C.UTF-8", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "LOCAL_WORLD_SIZE": "2", "GANTRY_CHECKPOINT_DIR": os.path.join(tmp, "ckpt"),
               "GANTRY_OUTPUT_DIR": os.path.join(tmp, "out"), "GANTRY_METRICS": os.path.join(tmp, "metrics.jsonl")}
        for d in ("ckpt", "out"):
            os.makedirs(os.path.join(tmp, d), exist_ok=True)
        procs.append(subprocess.Popen(["/usr/bin/python3", "train.py", "--epochs", "1"], cwd=workdir, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for p in procs:
        assert p.wait(timeout=900) == 0, "train.py by hand failed"
    with open(os.path.join(tmp, "metrics.jsonl")) as f:
        rate = json.loads(f.readlines()[-1])["samples_per_s"]
    shutil.rmtree(tmp, ignore_errors=True)
    return rate


def through_gantry(s, tok, i):
    job = program_job(["/usr/bin/python3", "train.py", "--epochs", "1"], name=f"ddp-{i}", workers=2)
    job["spec"]["program"]["workdir"] = "pytorch"
    jid = s.submit(tok, job)
    done = s.wait_state(tok, jid, "succeeded", timeout=900)
    return done["result"]["metrics"]["samples_per_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=30)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    with Stack(workers=2) as s:
        tid, tok = s.tenant("bench-program")
        root = program_root(s, tid, {"first.sh": FIRST_LINE})
        shutil.copytree(EXAMPLE, os.path.join(root, "pytorch"))
        for d, _, files in os.walk(os.path.join(root, "pytorch")):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)

        started, shown = launches(s, tok, args.launches)
        print(f"| launch ({args.launches} one-rank jobs, idle workers) | p50 | p99 |")
        print("|---|---|---|")
        print(f"| submit -> the program's first line runs | {pct(started, 0.5):.0f} ms | {pct(started, 0.99):.0f} ms |")
        print(f"| submit -> that line in GET /v1/jobs/{{id}}/logs | {pct(shown, 0.5):.0f} ms | {pct(shown, 0.99):.0f} ms |")
        print()

        hand, gantry = [], []
        for i in range(args.reps):  # alternating, each side first in every other round (no order bias)
            if i % 2:
                gantry.append(through_gantry(s, tok, i))
            hand.append(by_hand(os.path.join(root, "pytorch")))
            if not i % 2:
                gantry.append(through_gantry(s, tok, i))
        ratio = statistics.median(gantry) / statistics.median(hand)
        print("| DDP, deploy/examples/pytorch, 2 ranks, 1 epoch | samples/s (each run) | median |")
        print("|---|---|---|")
        print(f"| by hand (two python3 processes) | {', '.join(f'{x:.0f}' for x in hand)} | {statistics.median(hand):.0f} |")
        print(f"| through gantry (2 workers, sandboxed) | {', '.join(f'{x:.0f}' for x in gantry)} | "
              f"{statistics.median(gantry):.0f} |")
        print(f"\nthrough gantry / by hand: **{ratio:.3f}** (target >= 0.97)")


if __name__ == "__main__":
    main()
