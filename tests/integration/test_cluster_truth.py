"""What the cluster view and a program job's page read, against what ran: a 2-rank program job on 2
workers has a busy interval on each worker in GET /v1/cluster/timeline (not only on the one the job
row names), a worker's intervals never overlap, the slots a tenant uses in GET /v1/cluster are the
workers running its tasks (never more than the cluster has), and a program job shows a progress only
when its metrics lines say how far it is (no false 0% from the worker's notes)."""

import calendar
import os
import time

from harness import Stack, wait_until
from test_program_jobs import program_job, program_root

# each rank waits until the test removes a file it can see (the tenant's root), so that the test
# reads the cluster while both ranks run; rank 0 writes two metrics lines: without a total, then
# with "epochs"
HOLD = """import json, os, sys, time
rank = int(os.environ["RANK"])
if rank == 0:
    with open(os.environ["GANTRY_METRICS"], "a") as m:
        m.write(json.dumps({"epoch": 1, "loss": 0.5}) + "\\n")
deadline = time.time() + 60
while os.path.exists(sys.argv[1]) and time.time() < deadline:
    time.sleep(0.05)
if rank == 0:
    with open(os.environ["GANTRY_METRICS"], "a") as m:
        m.write(json.dumps({"epoch": 2, "epochs": 4, "loss": 0.25}) + "\\n")
    time.sleep(1.5)  # the worker ships the line before the job ends
"""


def iso_ms(s):
    """the API's "2026-01-02T03:04:05.678Z" in ms since the epoch"""
    return calendar.timegm(time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S")) * 1000 + int(s[20:23])


def test_gang_on_every_worker_and_slots_per_tenant():
    with Stack(workers=2) as s:
        tid, tok = s.tenant("truth-gang")
        root = program_root(s, tid, {"hold.py": HOLD})
        hold = f"{root}/code/hold"
        open(hold, "w").close()
        jid = s.submit(tok, program_job(["python3", "hold.py", "hold"], name="gang", workers=2))
        try:
            wait_until("both ranks run", lambda: sum(
                1 for iv in s.get("/v1/cluster/timeline?minutes=5", tok).json["intervals"]
                if iv["job_id"] == jid and iv["end"] is None) == 2, 60)
            wait_until("rank 0's first metrics line", lambda: s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"], 30)
            job = s.job(tok, jid)
            assert job["state"] == "running" and job["progress"] is None, job  # no total declared: no progress
            # another tenant sees its own zero, and "other tenants" using both workers (once both
            # workers' heartbeats name the job in the registry)
            _, tok2 = s.tenant("truth-other")
            tenants = lambda: {t["id"]: t["slots_used"] for t in s.get("/v1/cluster", tok2).json["tenants"]}
            wait_until("the registry names the job on both workers", lambda: tenants()["other"] == 2, 10)
            assert sum(tenants().values()) == 2, tenants()
            c = s.get("/v1/cluster", tok).json
            mine = [t for t in c["tenants"] if t["id"] == tid]
            assert mine and mine[0]["slots_used"] == 2, c["tenants"]
            assert sum(t["slots_used"] for t in c["tenants"]) <= len(c["workers"]), c
        finally:
            os.remove(hold)
        job = s.wait_state(tok, jid, "succeeded", timeout=60)
        events = s.events(tok, jid)
        assert all(e["progress"] is None for e in events if "waiting for the other workers" in e["reason"]), events
        points = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        assert [p["epoch"] for p in points] == [1, 2], points
        # the second line's epoch 2 of 4 was the job's progress (50%) until it succeeded
        assert any(e["progress"] == 0.5 for e in events), [e["progress"] for e in events]
        tl = s.get("/v1/cluster/timeline?minutes=5", tok).json["intervals"]
        mine = [iv for iv in tl if iv["job_id"] == jid]
        assert sorted(iv["worker"] for iv in mine) == sorted(w["id"] for w in s.get("/v1/workers", tok).json["workers"]), mine
        assert all(iv["end"] is not None for iv in mine), mine
        # a worker's intervals never overlap
        by_worker = {}
        for iv in tl:
            by_worker.setdefault(iv["worker"], []).append((iso_ms(iv["start"]), iso_ms(iv["end"])))
        for w, ivs in by_worker.items():
            ivs.sort()
            assert all(a[1] <= b[0] for a, b in zip(ivs, ivs[1:])), (w, ivs)
        # the workers free their slots as their heartbeats say they are idle again
        wait_until("no slot in use", lambda: all(t["slots_used"] == 0 for t in s.get("/v1/cluster", tok).json["tenants"]), 10)
