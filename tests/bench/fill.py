"""Fills a running stack's queue fast, for the queued-depth sweeps of bench_submit.py and bench_sched.py.

Jobs are inserted straight into the server's SQLite database as a submission would leave them (a job
row in state queued, not yet published, and its "accepted" event, ids of the same form as the
server's, common/ids.h id_sortable), 20,000 a transaction: 100,000 take a second or two instead of minutes of HTTP.  The server's outbox
publishes them to gantry:jobs (its sweep takes unpublished jobs older than a second, every 2 s), so
the scheduler holds them exactly as it holds submitted jobs; wait_scheduler_holds waits until it has
read them all.  The per-tenant queued counter follows by itself (its triggers, migrations/0006)."""

import json
import os
import secrets
import sqlite3
import time

import harness

FILL_SPEC = json.dumps({"graph": harness.TINY_GRAPH, "algorithms": ["m-topo"]}, separators=(",", ":"))


def fill(stack, tenant_id, n, priority=1, name="fill", chunk=20000):
    """inserts n queued placement jobs of tenant_id, chunk by chunk, each published before the next; returns their ids"""
    db = sqlite3.connect(os.path.join(stack.dir, "state", "gantry.db"), timeout=60)
    ids = []
    try:
        while len(ids) < n:
            created = int(time.time() * 1000) - 5000  # older than the outbox sweep's minimum age
            part = [f"j_{created + k // 100:012x}{secrets.token_hex(4)}" for k in range(min(chunk, n - len(ids)))]
            with db:
                db.executemany("INSERT INTO jobs (id, tenant_id, type, name, priority, slots, state, spec, created_at, "
                               "updated_at) VALUES (?, ?, 'placement', ?, ?, 1, 'queued', ?, ?, ?)",
                               ((j, tenant_id, f"{name}-{len(ids) + i}", priority, FILL_SPEC, created, created)
                                for i, j in enumerate(part)))
                db.executemany("INSERT INTO job_events (id, job_id, ts, state, reason, source) VALUES (?, ?, ?, 'queued', "
                               "'accepted', 'server')", ((f"e_{j[2:14]}{secrets.token_hex(10)}", j, created) for j in part))
            ids += part
            harness.wait_until("the outbox published the jobs", lambda: db.execute(
                "SELECT count(*) FROM jobs WHERE published = 0").fetchone()[0] == 0, 120, 0.1)
        return ids
    finally:
        db.close()


def scheduler_holds(stack):
    """entries of gantry:jobs the scheduler has read and not yet acknowledged (its queue)"""
    out = stack.redis("XPENDING", "gantry:jobs", "schedulers").split("\n")
    return int(out[0]) if out and out[0].strip().isdigit() else 0


def wait_scheduler_holds(stack, n, timeout=600):
    """waits until the scheduler has read at least n jobs it has not placed; returns the seconds it took"""
    t0 = time.monotonic()
    harness.wait_until(f"the scheduler holds {n} jobs", lambda: scheduler_holds(stack) >= n, timeout, 0.2)
    return time.monotonic() - t0
