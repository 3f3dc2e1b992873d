"""Per-tenant job limits (issue 16): an admin sets max_runtime_s, max_epochs, max_steps and
max_memory_bytes with PATCH /v1/tenants/{id}; the defaults show in GET /v1/tenants and
/v1/whoami; a spec over the epochs/steps limit is a 400 naming the field; a running job over
its runtime or memory limit fails (not requeued) with the reason, and its worker runs the next
job."""

import time

from harness import ADMIN, Stack, alone, iso_seconds, placement_job, wait_until
from test_federated import fed_job

MLP = {"input": [1, 28, 28], "layers": [{"type": "flatten"}, {"type": "dense", "units": 32}, {"type": "relu"},
                                        {"type": "dense", "units": 10}]}
DEFAULTS = {"max_runtime_s": 86400, "max_epochs": 1000, "max_steps": 10000000, "max_memory_bytes": 8589934592}


def training_job(name="limits-mlp", workers=1, **length):
    spec = {"model": MLP, "dataset": {"name": "fashion-mnist"}, "optimizer": {"type": "adam", "lr": 0.001},
            "batch_size": 64, "seed": 1, "progress_every_steps": 20}
    spec.update(length or {"steps": 100})
    if workers > 1:
        spec.update({"workers": workers, "collective_timeout_s": 20})
    return {"type": "training", "name": name, "spec": spec}


def patch(s, tid, body):
    return s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, body)


def tenant_row(s, tid):
    return next(t for t in s.get("/v1/tenants", ADMIN).json["tenants"] if t["id"] == tid)


def ms(iso):
    return iso_seconds(iso) * 1000


def never_requeued(s, tok, jid):
    return not [e for e in s.events(tok, jid) if e["state"] == "queued" and e["reason"] != "accepted"]


def test_limits_defaults_patch_and_validation():
    with Stack(workers=0) as s:
        tid, tok = s.tenant("limits-api")
        row = tenant_row(s, tid)
        assert {k: row[k] for k in DEFAULTS} == DEFAULTS, row
        me = s.get("/v1/whoami", tok).json
        assert {k: me["tenant"][k] for k in DEFAULTS} == DEFAULTS, me
        # every limit: a negative number, a fraction, a string, zero and true are 400 naming the field
        for field in DEFAULTS:
            for bad in (-1, 1.5, "10", 0, True, 2 ** 62):
                r = patch(s, tid, {field: bad})
                assert r.status == 400 and r.json["error"]["field"] == field, (field, bad, r)
                assert "integer" in r.json["error"]["message"], r
        assert {k: tenant_row(s, tid)[k] for k in DEFAULTS} == DEFAULTS  # nothing changed by the refusals
        r = patch(s, tid, {"max_runtime_s": 3600, "max_epochs": 5, "max_steps": 500, "max_memory_bytes": 1 << 30,
                           "weight": 2})
        assert r.status == 200, r
        assert (r.json["max_runtime_s"], r.json["max_epochs"], r.json["max_steps"], r.json["max_memory_bytes"],
                r.json["weight"]) == (3600, 5, 500, 1 << 30, 2.0), r
        assert patch(s, tid, {"weight": 3}).json["max_epochs"] == 5  # unchanged when not named
        assert s.get("/v1/whoami", tok).json["tenant"]["max_steps"] == 500
        # over the limits: 400 naming the field, the limit in the message; at the limit: accepted
        r = s.post("/v1/jobs", tok, training_job(epochs=6))
        assert r.status == 400 and r.json["error"]["field"] == "spec.epochs", r
        assert "5" in r.json["error"]["message"] and "max_epochs" in r.json["error"]["message"], r
        r = s.post("/v1/jobs", tok, training_job(steps=501))
        assert r.status == 400 and r.json["error"]["field"] == "spec.steps", r
        assert "500" in r.json["error"]["message"] and "max_steps" in r.json["error"]["message"], r
        assert s.post("/v1/jobs", tok, training_job(epochs=5)).status == 201
        assert s.post("/v1/jobs", tok, training_job(steps=500)).status == 201
        # a federated job: every site trains rounds x local_steps (40) steps
        r = s.post("/v1/jobs", tok, fed_job(3, rounds=13))
        assert r.status == 400 and r.json["error"]["field"] == "spec.rounds", r
        assert "520" in r.json["error"]["message"] and "500" in r.json["error"]["message"], r
        assert s.post("/v1/jobs", tok, fed_job(3, rounds=12)).status == 201
        # null: no limit
        r = patch(s, tid, {"max_epochs": None, "max_steps": None})
        assert r.status == 200 and r.json["max_epochs"] is None and r.json["max_steps"] is None, r
        assert s.post("/v1/jobs", tok, training_job(epochs=100000)).status == 201
        # limits can be given when the tenant is created; another tenant keeps the defaults
        r = s.post("/v1/tenants", ADMIN, {"name": "limits-small", "max_runtime_s": 60})
        assert r.status == 201 and r.json["max_runtime_s"] == 60 and r.json["max_epochs"] == 1000, r
        assert s.post("/v1/tenants", ADMIN, {"name": "limits-bad", "max_memory_bytes": -5}).json["error"]["field"] == \
            "max_memory_bytes"
        assert patch(s, tid, {"max_epochs": 3}).status == 200
        assert s.request("PATCH", f"/v1/tenants/{tid}", tok, {"max_epochs": 100}).status == 403  # admins only


def test_runtime_limit_fails_a_long_job_and_frees_its_worker():
    with Stack(workers=2) as s:
        tid, tok = s.tenant("limits-runtime")
        assert patch(s, tid, {"max_runtime_s": 2}).status == 200
        jid = s.submit(tok, training_job(name="too-long", steps=1000000))  # ~1,000 s at full speed
        job = s.wait_state(tok, jid, "failed", timeout=60)
        assert "exceeded the tenant's max runtime of 2 s" in job["error"], job
        assert 2000 <= ms(job["finished_at"]) - ms(job["started_at"]) < 30000, job
        failed = [e for e in s.events(tok, jid) if e["state"] == "failed"]
        assert failed and "max runtime of 2 s" in failed[0]["reason"], failed
        assert never_requeued(s, tok, jid)
        # a gang: every member stops, the job fails once, nothing is requeued
        gang = s.submit(tok, training_job(name="too-long-gang", workers=2, steps=1000000))
        job = s.wait_state(tok, gang, "failed", timeout=90)
        assert "exceeded the tenant's max runtime of 2 s" in job["error"], job
        wait_until("both workers idle", lambda: [w["state"] for w in s.workers()] == ["idle", "idle"], 30)
        assert never_requeued(s, tok, gang)
        # the workers are healthy: the next jobs run (a placement under the same limit; a short training job
        # with room for loading the data under sanitizers)
        assert s.wait_state(tok, s.submit(tok, placement_job("after")), "succeeded")
        assert patch(s, tid, {"max_runtime_s": 120}).status == 200
        nxt = s.submit(tok, training_job(name="short", workers=2, steps=30))
        assert s.wait_state(tok, nxt, "succeeded", timeout=60)["result"]["metrics"]["steps"] == 30
        assert s.job(tok, gang)["state"] == "failed"  # and stays failed


def test_memory_limit_fails_the_job_and_the_worker_runs_the_next():
    with Stack(workers=1) as s:
        tid, tok = s.tenant("limits-memory")
        assert patch(s, tid, {"max_memory_bytes": 1 << 20}).json["max_memory_bytes"] == 1 << 20
        jid = s.submit(tok, training_job(name="hungry", steps=100000))
        job = s.wait_state(tok, jid, "failed", timeout=60)
        assert "worker memory grew by" in job["error"] and "over the tenant's limit of 1 MiB" in job["error"], job
        assert never_requeued(s, tok, jid)
        wait_until("the worker idle", lambda: [w["state"] for w in s.workers()] == ["idle"], 20)
        assert patch(s, tid, {"max_memory_bytes": DEFAULTS["max_memory_bytes"]}).status == 200
        nxt = s.submit(tok, training_job(name="fits", steps=30))
        job = s.wait_state(tok, nxt, "succeeded", timeout=60)
        assert job["worker"] == "w_test0" and job["result"]["metrics"]["steps"] == 30, job


@alone  # a runtime limit is timed
def test_runtime_counts_every_generation():
    """a job stopped and requeued (here preempted) keeps what it ran: the next generation fails
    when the total passes the limit, not after a whole limit of its own"""
    with Stack(workers=1) as s:
        tid, tok = s.tenant("limits-generations")
        assert patch(s, tid, {"max_runtime_s": 8}).status == 200
        jid = s.submit(tok, training_job(name="preempted", steps=1000000))
        started = ms(s.wait_state(tok, jid, "running", timeout=30)["started_at"])
        wait_until("training, 2.5 s into the first generation", lambda: time.time() * 1000 - started > 2500 and s.get(
            f"/v1/jobs/{jid}/metrics", tok).json["points"], 8)
        assert s.redis("SET", f"gantry:preempt:{jid}:0", "job j_other", "EX", 600) == "OK"
        job = s.wait_state(tok, jid, "failed", timeout=60)
        assert "exceeded the tenant's max runtime of 8 s" in job["error"], job
        assert "over all its generations" in job["error"], job
        events = s.events(tok, jid)
        requeued = [ms(e["ts"]) for e in events
                    if e["state"] == "queued" and e["reason"].startswith("preempted by job j_other")]
        assert requeued, events
        first, second = [ms(e["ts"]) for e in events if e["state"] == "running"][:2]
        # the second generation ran what was left of the 8 s (plus a poll), not 8 s of its own
        assert ms(job["finished_at"]) - second < 8000 - (requeued[0] - first) + 1000, (job, events)
