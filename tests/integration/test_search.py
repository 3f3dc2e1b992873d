"""Hyper-parameter searches over a program (spec.search, docs/search.md) through the real stack: a tiny
pure-Python training script (no torch) reports a metric per epoch that follows from its trial's
parameters, so the test knows what every trial must report.  ASHA's stops are checked against the
metrics the trials reported, the best trial against every trial's last metric, the trials' variables
against their parameters; cancel stops every trial; bad searches are 400s naming the field."""

import json
import math
import os

from harness import Stack, timeout, wait_until
from test_program_jobs import job_dir, marker_pids, program_job, program_root

# one metrics line per epoch up to GANTRY_TRIAL_MAX_EPOCHS: test_accuracy = q * (1 - 0.5^epoch), q from
# LR and WIDTH (the trial's variables); EPOCH_S seconds an epoch; SIGTERM ends it at once
FAKE = """import json, math, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
marker, epoch_s = sys.argv[1], float(sys.argv[2])
lr, width = float(os.environ["LR"]), int(os.environ["WIDTH"])
params = json.loads(os.environ["GANTRY_TRIAL_PARAMS"])
assert params["lr"] == lr and params["width"] == width, params
assert json.load(open(os.environ["GANTRY_TRIAL_FILE"]))["params"] == params
epochs = int(float(os.environ["GANTRY_TRIAL_MAX_EPOCHS"]))
q = 1 - abs(math.log10(lr) + 2) / 4 - (64 - width) / 400
for epoch in range(1, epochs + 1):
    time.sleep(epoch_s)
    acc = round(q * (1 - 0.5 ** epoch), 6)
    with open(os.environ["GANTRY_METRICS"], "a") as m:
        m.write(json.dumps({"epoch": epoch, "epochs": epochs, "test_accuracy": acc}) + "\\n")
print("trial", os.environ["GANTRY_TRIAL_ID"], "done", flush=True)
"""


def accuracy(params, epoch):
    q = 1 - abs(math.log10(params["lr"]) + 2) / 4 - (64 - params["width"]) / 400
    return round(q * (1 - 0.5 ** epoch), 6)


def search_job(marker, epoch_s="0.15", **search):
    job = program_job(["python3", "fake.py", marker, epoch_s], name="tune", grace_s=3)
    job["spec"]["search"] = {"space": {"lr": {"loguniform": [1e-4, 1e-1]}, "width": {"choice": [16, 32, 64]}},
                             "algorithm": "asha", "metric": "test_accuracy", "mode": "max", "max_trials": 8, "parallel": 2,
                             "budget": {"resource": "epoch", "min": 1, "max": 9, "reduction": 3}, "seed": 3}
    job["spec"]["search"].update(search)
    return job


@timeout(150)
def test_asha_stops_below_the_cut_and_names_the_best():
    with Stack(workers=2) as s:
        tid, tok = s.tenant("search-asha")
        program_root(s, tid, {"fake.py": FAKE})
        sid = s.submit(tok, search_job("mark-asha"))
        job = s.wait_state(tok, sid, "succeeded", timeout=120)
        trials = s.get(f"/v1/jobs/{sid}/trials", tok).json
        assert trials["algorithm"] == "asha" and trials["rungs"] == [1, 3], trials
        ts = trials["trials"]
        assert [t["trial"] for t in ts] == list(range(8)), ts
        assert {t["state"] for t in ts} <= {"succeeded", "stopped"}, ts
        assert any(t["state"] == "stopped" for t in ts), ts
        # every trial reported what its parameters give, and its job's points are the rung values
        for t in ts:
            points = s.get(f"/v1/jobs/{t['job_id']}/metrics", tok).json["points"]
            by_epoch = {p["epoch"]: p["test_accuracy"] for p in points}
            for e, v in by_epoch.items():
                assert v == accuracy(t["params"], e), (t, e, v)
            for r in t["rungs"]:
                assert r["value"] == by_epoch[r["resource"]], (t, r, by_epoch)
            assert t["last"]["value"] == by_epoch[max(by_epoch)], (t, by_epoch)
            if t["state"] == "succeeded":
                assert max(by_epoch) == 9 and all(r["continued"] for r in t["rungs"]), t
            else:
                assert t["rungs"] and not t["rungs"][-1]["continued"], t
                assert max(by_epoch) < 9, t
            job_t = s.job(tok, t["job_id"])
            assert job_t["state"] == ("succeeded" if t["state"] == "succeeded" else "cancelled"), job_t
        # ASHA's rule replayed on the decisions in their order: a result stops exactly when at least
        # ceil(n / 3) of the n at its rung (its own included) were strictly better
        for k in (0, 1):
            seen = sorted(((r["order"], r["value"], r["continued"], t["trial"]) for t in ts for r in t["rungs"] if r["rung"] == k))
            for i, (_, v, cont, trial) in enumerate(seen):
                better = sum(1 for _, w, _, _ in seen[:i] if w > v)
                keep = -(-(i + 1) // 3)
                assert cont == (better < keep), (k, i, seen)
        # the stop events name the trial, the rung and the cut
        events = [e["reason"] for e in s.events(tok, sid)]
        for t in ts:
            if t["state"] == "stopped":
                k = t["rungs"][-1]["rung"]
                assert any(e.startswith(f"trial {t['trial']} stopped at rung {k} (epoch ") and "below the rung's cut" in e
                           for e in events), (t, events)
        # the best: the best last metric of all, named in the result
        best = max(ts, key=lambda t: (t["last"]["value"], -t["trial"]))
        assert trials["best"] == best["trial"], trials
        res = job["result"]
        assert res["best"]["trial"] == best["trial"] and res["best"]["job_id"] == best["job_id"], res
        assert res["best"]["params"] == best["params"] and res["metrics"]["test_accuracy"] == best["last"]["value"], res
        assert sum(res["trials"].values()) == 8, res
        # the trials are in the search's own GET too; the search itself never ran on a worker
        got = s.job(tok, sid)
        assert [t["trial"] for t in got["trials"]] == list(range(8)) and got["worker"] is None, got
        # a trial stopped by the last decision may still be in its SIGTERM when the search ends
        wait_until("no trial's process left", lambda: not marker_pids("mark-asha"), timeout=30)


@timeout(120)
def test_cancel_stops_every_trial():
    with Stack(workers=2) as s:
        tid, tok = s.tenant("search-cancel")
        program_root(s, tid, {"fake.py": FAKE})
        sid = s.submit(tok, search_job("mark-cancel", epoch_s="5", algorithm="random", max_trials=6, parallel=3))
        wait_until("two trials running", lambda: sum(
            s.job(tok, t["job_id"])["state"] == "running" for t in s.get(f"/v1/jobs/{sid}/trials", tok).json["trials"]) >= 2,
            timeout=60)
        assert s.post(f"/v1/jobs/{sid}/cancel", tok).status == 200
        ts = s.get(f"/v1/jobs/{sid}/trials", tok).json["trials"]
        assert len(ts) == 3 and all(t["state"] == "cancelled" for t in ts), ts
        for t in ts:
            assert s.job(tok, t["job_id"])["state"] == "cancelled"
        wait_until("no trial's process left", lambda: not marker_pids("mark-cancel"), timeout=30)
        assert s.job(tok, sid)["state"] == "cancelled"
        assert len(s.get(f"/v1/jobs/{sid}/trials", tok).json["trials"]) == 3  # nothing new started after the cancel


def test_bad_searches_name_the_field():
    with Stack(workers=0) as s:
        tid, tok = s.tenant("search-bad")
        program_root(s, tid, {"fake.py": FAKE})
        cases = [
            ({"space": {"lr": {"loguniform": [0, 1]}}}, "spec.search.space.lr.loguniform"),
            ({"algorithm": "asha", "budget": None}, "spec.search.budget"),
            ({"space": {"rank": {"choice": [1]}}}, "spec.search.space.rank"),
            ({"parallel": 0}, "spec.search.parallel"),
            ({"algorithm": "grid"}, "spec.search.space.lr.loguniform"),
        ]
        for change, field in cases:
            job = search_job("mark-bad")
            job["spec"]["search"].update(change)
            job["spec"]["search"] = {k: v for k, v in job["spec"]["search"].items() if v is not None}
            r = s.post("/v1/jobs", tok, job)
            assert r.status == 400 and r.json["error"]["field"] == field, (change, r.status, r.json)
        job = program_job(["python3", "fake.py"])
        job["spec"]["trial"] = {"search": "j_x", "index": 0, "params": {}}
        r = s.post("/v1/jobs", tok, job)
        assert r.status == 400 and r.json["error"]["field"] == "spec.trial", r.json
        r = s.get("/v1/jobs/j_000000000000000000000000/trials", tok)
        assert r.status == 404, r.status
