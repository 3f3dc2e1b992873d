#!/usr/bin/env python3
"""Benchmark: elastic resizes of a training gang through the real stack.

An elastic job (workers {min 1, max 4}; the MLP of deploy/examples/training.json
with --units hidden units, Adam) starts on one worker; workers join one at a
time, so the gang grows 1 -> 2 -> 3 -> 4; then one worker is killed with SIGKILL
and the gang goes on with the 3 left.  Per resize:

- request -> training: from the scheduler's resize request (or the SIGKILL) to
  the first step of the next generation (its "resize" point);
- stop -> ready: from the moment the old generation stopped (its state kept)
  to the new generation holding the same state on every rank;
- state: bytes broadcast from the survivor with the newest step, and how long
  that agreement took;
- samples lost: request -> training times the throughput before the resize
  (work the gang could have done meanwhile).

    python3 tests/bench/bench_resize.py [--units 128] [--units 1024]

On this 2-core machine the workers share the cores; the ring's bandwidth is
that of loopback.
"""

import argparse
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import ROOT, Stack, wait_until  # noqa: E402


def ms(event):  # an event's ISO 8601 time in ms since the epoch
    return datetime.datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp() * 1000


def run(units):
    with open(os.path.join(ROOT, "deploy", "examples", "training.json")) as f:
        job = json.load(f)
    job["name"] = f"bench-resize-{units}"
    job["spec"]["model"]["layers"][1]["units"] = units
    job["spec"].update({"workers": {"min": 1, "max": 4}, "epochs": 1000, "progress_every_steps": 20,
                        "checkpoint_every_steps": 100000, "collective_timeout_s": 20})
    rows = []
    with Stack(workers=1) as s:
        _, tok = s.tenant("bench-resize")
        jid = s.submit(tok, job)

        def points():
            return s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]

        def rate(world):  # steady samples/s at this size: the last regular points
            pts = [p for p in points() if p.get("workers") == world and "samples_per_s" in p]
            return sum(p["samples_per_s"] for p in pts[-3:]) / max(1, len(pts[-3:]))

        def resized(after_ms, world):
            return [p for p in points() if p.get("event") == "resize" and p["ts"] > after_ms and p["workers"] == world]

        wait_until("training on 1 worker", lambda: [p for p in points() if p.get("workers") == 1 and p["step"] >= 100], 120)
        for k in (1, 2, 3):
            time.sleep(2)  # a few steady points at this size
            before = rate(k)
            t0 = time.time() * 1000
            s.start_worker(k)
            req = wait_until("the resize request", lambda: [e for e in s.events(tok, jid)
                                                            if e["reason"].startswith("resize:") and ms(e) > t0], 60)[0]
            p = wait_until(f"the gang on {k + 1} workers", lambda: resized(t0, k + 1), 60)[0]
            took = p["ts"] - ms(req)
            rows.append((f"{k} -> {k + 1} (grow)", took, p["resize_s"] * 1000, p["rendezvous_s"] * 1000, p["load_s"] * 1000,
                         p["state_bytes"], p["state_s"] * 1000, before * took / 1000))
        time.sleep(4)
        before = rate(4)
        workers = sorted({e["source"].split(":", 1)[1] for e in s.events(tok, jid)
                          if e["state"] == "running" and e["source"].startswith("worker:")})
        t0 = time.time() * 1000
        s.kill("worker" + workers[-1][len("w_test"):])
        try:
            p = wait_until("the gang on 3 workers", lambda: resized(t0, 3), 60)[0]
        except AssertionError:
            for e in s.events(tok, jid)[-15:]:
                print(e, file=sys.stderr)
            print([p for p in points() if p.get("event")], file=sys.stderr)
            raise
        rows.append(("4 -> 3 (SIGKILL)", p["ts"] - t0, p["resize_s"] * 1000, p["rendezvous_s"] * 1000, p["load_s"] * 1000,
                     p["state_bytes"], p["state_s"] * 1000, before * (p["ts"] - t0) / 1000))
        s.post(f"/v1/jobs/{jid}/cancel", tok)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, action="append")
    args = ap.parse_args()
    print("| hidden units | resize | request -> training (ms) | stop -> ready (ms) | of which rendezvous + ring (ms) "
          "| data loading (ms, rank 0) | state (MB) | state agreement (ms) | samples lost |")
    print("|---|---|---|---|---|---|---|---|---|")
    for units in args.units or [128, 1024]:
        for what, total, ready, rdv, load, nbytes, agree, lost in run(units):
            print(f"| {units} | {what} | {total:.0f} | {ready:.0f} | {rdv:.0f} | {load:.0f} | {nbytes / 1e6:.2f} | {agree:.0f} "
                  f"| {lost:.0f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
