"""Hyper-parameter searches over a program (spec.search, docs/search.md) through the real stack: a tiny
pure-Python training script (no torch) reports a metric per epoch that follows from its trial's
parameters, so the test knows what every trial must report.  ASHA's stops are checked against the
metrics the trials reported, the best trial against every trial's last metric, the trials' variables
against their parameters; register_model registers the best trial that finished (its file, its metrics,
under the search's model_name), nothing when none finished; cancel stops every trial; bad searches are
400s naming the field; `gantry trials` prints the trials as a table; a stopped trial's cancel key that
Redis never got is set again when the server restarts; the paused variant promotes the top of each rung, each
run resuming from the trial's checkpoint."""

import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

from harness import BUILD, ROOT, Stack, timeout, wait_until
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
with open(os.path.join(os.environ["GANTRY_OUTPUT_DIR"], "model.pt"), "w") as f:  # what register_model names
    json.dump({"trial": int(os.environ["GANTRY_TRIAL_ID"]), "params": params}, f)
print("trial", os.environ["GANTRY_TRIAL_ID"], "done", flush=True)
"""

# a trial by script: argv[2] is {trial: {"values": [the metric at epoch 1, 2, ...], "end": what then}}:
# "model" writes model.pt and exits 0, "fail" exits 1, "wait" waits (for its SIGTERM: a stop)
SCRIPTED = """import json, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
trial = os.environ["GANTRY_TRIAL_ID"]
plan = json.loads(sys.argv[2])[trial]
for epoch, acc in enumerate(plan["values"], 1):
    time.sleep(0.2)
    with open(os.environ["GANTRY_METRICS"], "a") as m:
        m.write(json.dumps({"epoch": epoch, "test_accuracy": acc}) + "\\n")
if plan["end"] == "model":
    with open(os.path.join(os.environ["GANTRY_OUTPUT_DIR"], "model.pt"), "w") as f:
        f.write("trial " + trial)
elif plan["end"] == "fail":
    sys.exit(1)
else:
    time.sleep(600)
"""

# the paused variant's trial: resumes from GANTRY_CHECKPOINT_DIR/state.json (the epochs done, the runs so far),
# trains to GANTRY_TRIAL_MAX_EPOCHS (where this run ends: the next rung), reporting FAKE's metric with the run's
# number; checkpoints after each epoch (write, then rename)
PAUSING = """import json, math, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
lr, width = float(os.environ["LR"]), int(os.environ["WIDTH"])
until = int(float(os.environ["GANTRY_TRIAL_MAX_EPOCHS"]))
assert float(os.environ["GANTRY_TRIAL_BUDGET_MAX"]) == 9, os.environ["GANTRY_TRIAL_BUDGET_MAX"]
ck = os.path.join(os.environ["GANTRY_CHECKPOINT_DIR"], "state.json")
state = json.load(open(ck)) if os.path.exists(ck) else {"epoch": 0, "runs": 0}
assert state["epoch"] < until, (state, until)
q = 1 - abs(math.log10(lr) + 2) / 4 - (64 - width) / 400

def save():
    with open(ck + ".tmp", "w") as f:
        json.dump(state, f)
    os.replace(ck + ".tmp", ck)

for epoch in range(state["epoch"] + 1, until + 1):
    time.sleep(float(os.environ.get("EPOCH_S", "0.1")))
    with open(os.environ["GANTRY_METRICS"], "a") as m:
        m.write(json.dumps({"epoch": epoch, "run": state["runs"], "rung": int(os.environ["GANTRY_TRIAL_RUNG"]),
                            "test_accuracy": round(q * (1 - 0.5 ** epoch), 6)}) + "\\n")
    state["epoch"] = epoch
    save()
state["runs"] += 1
save()
with open(os.path.join(os.environ["GANTRY_OUTPUT_DIR"], "model.pt"), "w") as f:
    json.dump({"trial": int(os.environ["GANTRY_TRIAL_ID"]), "epoch": until}, f)
"""

CLI = os.path.join(BUILD, "cli", "gantry")
sys.path.insert(0, os.path.join(ROOT, "python"))
import gantry  # noqa: E402
METADATA = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 2]}], "description": "tuned by a search"}


def accuracy(params, epoch):
    q = 1 - abs(math.log10(params["lr"]) + 2) / 4 - (64 - params["width"]) / 400
    return round(q * (1 - 0.5 ** epoch), 6)


def search_job(marker, epoch_s="0.15", spec=None, **search):
    job = program_job(["python3", "fake.py", marker, epoch_s], name="tune", grace_s=3, **(spec or {}))
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
        sid = s.submit(tok, search_job("mark-asha", spec={"register_model": {"output": "model.pt", "metadata": METADATA},
                                                          "model_name": "tuned"}))
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
        # register_model: the best trial that finished, registered as the search's model_name the way a program
        # job registers its own output (its file, its hash and size, its metrics, the declared signature)
        chosen = max((t for t in ts if t["state"] == "succeeded"), key=lambda t: (t["last"]["value"], -t["trial"]))
        assert res["registered"] == {"model": "tuned", "version": 1, "trial": chosen["trial"], "job_id": chosen["job_id"]}, res
        versions = s.get("/v1/models/tuned", tok).json["versions"]
        assert len(versions) == 1, versions
        v, chosen_job = versions[0], s.job(tok, chosen["job_id"])
        listed = {f["path"]: f for f in chosen_job["result"]["outputs"]["files"]}["model.pt"]
        assert v["job_id"] == chosen["job_id"] and v["format"] == "torchscript", v
        assert v["sha256"] == listed["sha256"] and v["size_bytes"] == listed["bytes"], (v, listed)
        assert v["metrics"] == chosen_job["result"]["metrics"] and v["metrics"]["test_accuracy"] == chosen["last"]["value"], v
        assert v["signature"]["inputs"] == METADATA["inputs"] and v["description"] == METADATA["description"], v
        assert v["architecture"] == {"format": "torchscript", "program": True}, v
        assert [m["name"] for m in s.get("/v1/models", tok).json["models"]] == ["tuned"]  # no trial registered itself
        note = [e for e in s.events(tok, sid) if e["reason"].startswith(f"registered trial {chosen['trial']}'s model (job "
                                                                         f"{chosen['job_id']}, test_accuracy ")]
        assert len(note) == 1 and " as tuned version 1" in note[0]["reason"], note
        assert (best["trial"] == chosen["trial"]) == ("did not finish" not in note[0]["reason"]), (best, note)
        # a trial stopped by the last decision may still be in its SIGTERM when the search ends
        wait_until("no trial's process left", lambda: not marker_pids("mark-asha"), timeout=30)


def scripted_search(marker, plans, name, **search):
    """a search over SCRIPTED's trials, registering its model under its own name"""
    job = program_job(["python3", "scripted.py", marker, json.dumps(plans)], name=name, grace_s=3,
                      register_model={"output": "model.pt", "metadata": METADATA}, model_name=name)
    job["spec"]["search"] = {"space": {"lr": {"loguniform": [1e-4, 1e-1]}, "width": {"choice": [16, 32, 64]}},
                             "algorithm": "asha", "metric": "test_accuracy", "mode": "max", "max_trials": len(plans),
                             "parallel": 1, "budget": {"resource": "epoch", "min": 1, "max": 3, "reduction": 3}, "seed": 5}
    job["spec"]["search"].update(search)
    job["spec"]["search"] = {k: v for k, v in job["spec"]["search"].items() if v is not None}
    return job


# one at a time: trial 0 finishes (0.95 at rung 0, then worse: 0.5 at its end) and writes its model; trial 1's
# 0.9 at rung 0 is below trial 0's 0.95 there: stopped, though its last value beats trial 0's
STOPPED_BEST = {"0": {"values": [0.95, 0.6, 0.5], "end": "model"}, "1": {"values": [0.9], "end": "wait"}}


def cli(s, tok, *args):
    env = {"HOME": s.dir, "PATH": os.environ.get("PATH", ""), "GANTRY_URL": f"http://127.0.0.1:{s.port}", "GANTRY_TOKEN": tok}
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=60)


@timeout(150)
def test_register_model_takes_the_best_trial_that_finished_and_gantry_trials_shows_them():
    from test_cli import assert_aligned
    with Stack(workers=1) as s:
        tid, tok = s.tenant("search-register")
        program_root(s, tid, {"scripted.py": SCRIPTED})
        sid = s.submit(tok, scripted_search("mark-reg", STOPPED_BEST, "tuned"))
        job = s.wait_state(tok, sid, "succeeded", timeout=60)
        trials = s.get(f"/v1/jobs/{sid}/trials", tok).json
        t0, t1 = trials["trials"]
        assert (t0["state"], t1["state"]) == ("succeeded", "stopped") and trials["best"] == 1, trials
        assert t0["last"]["value"] == 0.5 and t1["last"]["value"] == 0.9, trials
        # the best (trial 1, by its last value) was stopped and wrote no model: trial 0's is registered
        res = job["result"]
        assert res["best"]["trial"] == 1 and res["best"]["state"] == "stopped", res
        assert res["registered"] == {"model": "tuned", "version": 1, "trial": 0, "job_id": t0["job_id"]}, res
        v = s.get("/v1/models/tuned", tok).json["versions"][0]
        assert v["job_id"] == t0["job_id"] and v["metrics"]["test_accuracy"] == 0.5 and v["size_bytes"] == len("trial 0"), v
        events = [e["reason"] for e in s.events(tok, sid)]
        assert f"registered trial 0's model (job {t0['job_id']}, test_accuracy 0.5) as tuned version 1; trial 1, the best by " \
               "its last test_accuracy, did not finish: it wrote no model" in events, events

        # gantry trials: a row per trial, a column per parameter, the best marked; --json is the API's answer
        r = cli(s, tok, "trials", sid)
        assert r.returncode == 0, r
        lines = r.stdout.rstrip("\n").split("\n")
        assert lines[0] == f"{sid}: asha, test_accuracy (max), rungs at epoch 1; 2 of 2 trials started; best: trial 1 (*)", lines
        assert lines[1] == "" and re.split(r"\s{2,}", lines[2].strip()) == [
            "TRIAL", "STATE", "LR", "WIDTH", "TEST_ACCURACY", "EPOCH", "RUNGS", "FAILURES", "JOB"], lines
        assert_aligned(lines[2:])
        rows = [re.split(r"\s{2,}", line.strip()) for line in lines[3:]]
        for row, t, mark, rung in zip(rows, (t0, t1), ("0", "*1"), ("r0 ok", "r0 stop")):
            assert row == [mark, t["state"], f"{t['params']['lr']:.6g}", str(t["params"]["width"]), f"{t['last']['value']:.6g}",
                           f"{t['last']['resource']:g}", rung, "0", t["job_id"]], (row, t)
        r = cli(s, tok, "--json", "trials", sid)
        assert r.returncode == 0 and json.loads(r.stdout) == s.get(f"/v1/jobs/{sid}/trials", tok).json, r
        r = cli(s, tok, "trials", t0["job_id"])  # a trial is not a search
        assert r.returncode == 1 and "HTTP 404" in r.stderr, r
        r = cli(s, tok, "help", "trials")
        assert r.returncode == 0 and r.stdout.startswith("usage: gantry [--json] trials ID") and "r0 ok" in r.stdout, r
        assert "trials ID" in cli(s, tok, "--help").stdout
        r = cli(s, tok, "trials")  # usage: status 2, nothing asked of the server
        assert r.returncode == 2 and r.stdout == "" and r.stderr.startswith("usage: gantry [--json] trials ID"), r

        # no trial finished (the only one failed after reporting): the search succeeds, nothing is registered
        sid2 = s.submit(tok, scripted_search("mark-reg", {"0": {"values": [0.7], "end": "fail"}}, "unfinished",
                                             algorithm="random", budget=None, max_failures=0))
        res2 = s.wait_state(tok, sid2, "succeeded", timeout=60)["result"]
        assert res2["best"]["state"] == "failed" and res2["registered"] is None, res2
        assert res2["unregistered"].startswith("nothing registered: no trial finished with test_accuracy"), res2
        assert res2["unregistered"] in [e["reason"] for e in s.events(tok, sid2)]
        assert s.get("/v1/models/unfinished", tok).status == 404
        wait_until("no trial's process left", lambda: not marker_pids("mark-reg"), timeout=30)


@timeout(150)
def test_a_stopped_trials_cancel_key_redis_never_got_is_set_after_a_restart():
    """docs/search.md: the commit that stops a trial owes its cancel key (migrations/0011_cancel_outbox.sql);
    Redis refusing the SET stands in for a server killed between the commit and Redis"""
    with Stack(workers=1) as s:
        tid, tok = s.tenant("search-gap")
        program_root(s, tid, {"scripted.py": SCRIPTED})
        assert s.redis("ACL", "SETUSER", "gantry-server", "-set") == "OK"
        sid = s.submit(tok, scripted_search("mark-gap", STOPPED_BEST, "gap"))
        s.wait_state(tok, sid, "succeeded", timeout=60)
        stopped = s.get(f"/v1/jobs/{sid}/trials", tok).json["trials"][1]
        assert stopped["state"] == "stopped" and s.job(tok, stopped["job_id"])["state"] == "cancelled", stopped
        key = f"gantry:cancel:{stopped['job_id']}"
        time.sleep(3)  # the sweep's every 2 s are refused too
        assert marker_pids("mark-gap") and s.redis("EXISTS", key) == "0", "the stopped trial runs on, no key"
        s.kill("server", signal.SIGKILL)
        db = sqlite3.connect(os.path.join(s.dir, "state", "gantry.db"), timeout=10)
        owed = [r[0] for r in db.execute("SELECT job_id FROM cancel_outbox")]
        db.close()
        assert owed == [stopped["job_id"]], owed
        assert s.redis("ACL", "LOAD") == "OK"  # the server's rules again, as deploy/secrets wrote them
        assert s.redis("ACL", "LOG", "RESET") == "OK"  # the refusals were this test's own
        s.start_server()
        wait_until("the cancel key set again", lambda: s.redis("EXISTS", key) == "1", timeout=15)
        wait_until("the stopped trial's process gone", lambda: not marker_pids("mark-gap"), timeout=30)
        db = sqlite3.connect(os.path.join(s.dir, "state", "gantry.db"), timeout=10)
        wait_until("the debt paid", lambda: not list(db.execute("SELECT job_id FROM cancel_outbox")), timeout=10)
        db.close()
        assert s.job(tok, stopped["job_id"])["state"] == "cancelled"


@timeout(150)
def test_paused_asha_promotes_the_top_of_each_rung_from_their_checkpoints():
    """pause: each run ends at the trial's next rung; a promoted trial's next run resumes from its first job's
    checkpoint (its epochs continue where the last run ended, never from 1); at the end the top floor(n/3) of
    every rung were promoted, the others stopped where they paused; the best trial's model registered"""
    with Stack(workers=2) as s:
        tid, tok = s.tenant("search-pause")
        program_root(s, tid, {"fake.py": PAUSING})
        job = search_job("mark-pause", spec={"register_model": {"output": "model.pt", "metadata": METADATA},
                                             "model_name": "paused"}, pause=True, max_trials=9, parallel=2)
        sid = s.submit(tok, job)
        done = s.wait_state(tok, sid, "succeeded", timeout=120)
        trials = s.get(f"/v1/jobs/{sid}/trials", tok).json
        assert trials["pause"] is True and trials["rungs"] == [1, 3], trials
        ts = trials["trials"]
        assert len(ts) == 9 and {t["state"] for t in ts} <= {"succeeded", "stopped"}, ts
        ends = [1, 3, 9]
        for t in ts:
            # run i of the trial (its i-th job) trained epochs ends[i-1]+1 .. ends[i], as run i, from the checkpoint
            assert len(t["jobs"]) == len([r for r in t["rungs"] if r["continued"]]) + 1, t
            for i, jid in enumerate(t["jobs"]):
                points = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
                want = list(range(ends[i - 1] + 1 if i else 1, ends[i] + 1))
                assert [p["epoch"] for p in points] == want, (t, i, points)
                assert all(p["run"] == i and p["rung"] == i for p in points), (t, i, points)
                assert all(p["test_accuracy"] == accuracy(t["params"], p["epoch"]) for p in points), points
                assert s.job(tok, jid)["state"] == "succeeded", (t, jid)
            for r in t["rungs"]:
                assert r["value"] == accuracy(t["params"], r["resource"]), (t, r)
            if t["state"] == "succeeded":
                assert len(t["jobs"]) == 3 and t["last"]["resource"] == 9, t
            else:
                assert not t["rungs"][-1]["continued"] and t["reason"].startswith(
                    f"paused at rung {t['rungs'][-1]['rung']}, never promoted"), t
        # at each rung the top floor(n / 3) (ties: the lower trial) were promoted, whatever the order they came in
        for k in (0, 1):
            at = sorted(((-r["value"], t["trial"], r["continued"]) for t in ts for r in t["rungs"] if r["rung"] == k))
            top = {trial for _, trial, _ in at[:len(at) // 3]}
            promoted = {trial for _, trial, c in at if c}
            assert at and top <= promoted, (k, at)
        assert len([r for t in ts for r in t["rungs"] if r["rung"] == 0]) == 9
        events = [e["reason"] for e in s.events(tok, sid)]
        assert any(re.match(r"trial \d+ paused at rung 0 \(epoch 1\)", e) for e in events), events
        assert any(re.match(r"trial \d+ promoted past rung 1 \(epoch 3\)", e) for e in events), events
        assert any(re.match(r"trial \d+ resumes from its checkpoint as job j_\w+, promoted to epoch 9", e) for e in events), events
        # every run of a trial kept its first job's checkpoint directory
        for t in ts:
            state = json.load(open(os.path.join(job_dir(s, t["jobs"][0]), "checkpoint", "state.json")))
            assert state == {"epoch": ends[len(t["jobs"]) - 1], "runs": len(t["jobs"])}, (t, state)
        best = max(ts, key=lambda t: (t["last"]["value"], -t["trial"]))
        assert done["result"]["best"]["trial"] == best["trial"] and best["state"] == "succeeded", (done["result"], best)
        assert done["result"]["registered"]["trial"] == best["trial"], done["result"]
        # the SDK's view of the same (python/gantry: trials, best_trial)
        g = gantry.Client(f"http://127.0.0.1:{s.port}", tok)
        assert g.trials(sid) == trials and g.best_trial(sid) == best
        try:
            g.trials(best["job_id"])  # a trial's job is not a search
            raise AssertionError("trials of a job that is not a search")
        except gantry.NotFound:
            pass


@timeout(120)
def test_cancel_ends_paused_trials_too():
    """pause: a cancel while one trial is paused and another runs ends both, and starts nothing"""
    with Stack(workers=1) as s:
        tid, tok = s.tenant("search-pause-cancel")
        program_root(s, tid, {"fake.py": PAUSING})
        job = search_job("mark-pcancel", pause=True, max_trials=6, parallel=1)
        job["spec"]["program"]["env"] = {"EPOCH_S": "1"}
        sid = s.submit(tok, job)

        def paused_and_running():
            ts = s.get(f"/v1/jobs/{sid}/trials", tok).json["trials"]
            states = [t["state"] for t in ts]
            return "paused" in states and any(s.job(tok, t["job_id"])["state"] == "running" for t in ts) and ts
        wait_until("a trial paused and the next running", paused_and_running, timeout=60)
        assert s.post(f"/v1/jobs/{sid}/cancel", tok).status == 200
        ts = s.get(f"/v1/jobs/{sid}/trials", tok).json["trials"]
        assert len(ts) >= 2 and all(t["state"] == "cancelled" for t in ts), ts
        assert s.job(tok, sid)["state"] == "cancelled"
        wait_until("no trial's process left", lambda: not marker_pids("mark-pcancel"), timeout=30)
        assert len(s.get(f"/v1/jobs/{sid}/trials", tok).json["trials"]) == len(ts)


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
            ({"algorithm": "random", "pause": True}, "spec.search.pause"),
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
