"""Hyper-parameter searches (docs/search.md) over the real PyTorch example, deploy/examples/pytorch/train.py
with Debian's torch, through the real stack: the example's folder copied to the tenant's root with the gantry
package beside it (the README's steps), its search.json scaled down (6 trials, the first 3,000 training and
1,000 test images through train.py's TRAIN_SIZE / TEST_SIZE: a trial takes seconds).  test_search.py checks
the same controller with a fake program whose metric the test knows; here the metrics are torch's own:

- ASHA stops exactly the trials below their rung's cut, replayed on what each trial's job reported, and
  the result names the trial with the best last metric;
- a trial's process killed (SIGKILL) takes the job's own path first (a restart from its checkpoint, the
  same job), and once the job's max_restarts are used the search's (a new job for the trial, `failures`);
- the scheduler killed (SIGKILL) mid-search and started again: the search finishes, no trial ran twice;
- cancel of the search leaves no process of any trial (/proc).

The whole file takes about 3 minutes on 2 loaded cores."""

import json
import os
import signal
import time

from harness import ROOT, Stack, iso_seconds, timeout, wait_until
from test_program_jobs import example_root

ALONE = True  # run.py runs these tests with nothing beside them: real PyTorch trials, a core each

EXAMPLE = os.path.join(ROOT, "deploy", "examples", "pytorch")


def example_search(train_size=3000, test_size=1000, grace_s=10, **search):
    """deploy/examples/pytorch/search.json, on the first train_size / test_size images (0: all), its search
    members replaced by those given"""
    with open(os.path.join(EXAMPLE, "search.json")) as f:
        job = json.load(f)
    if train_size or test_size:
        job["spec"]["program"]["env"] = {"TRAIN_SIZE": str(train_size), "TEST_SIZE": str(test_size)}
    job["spec"]["grace_s"] = grace_s
    job["spec"]["search"].update(search)
    return job


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def job_pids(job_ids, generation=None, programs=True):
    """the processes running train.py for one of job_ids (GANTRY_JOB_ID in their environment), of that
    generation if given; programs: only python3 itself, not its sandbox's init (whose command line holds
    the program's)"""
    want = {f"GANTRY_JOB_ID={j}".encode() for j in job_ids}
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        argv = cmdline(pid)
        if b"train.py" not in argv or (programs and argv[0].endswith((b"bwrap", b"gantry-init"))):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
        except OSError:
            continue
        if env & want and (generation is None or f"GANTRY_GENERATION={generation}".encode() in env):
            found.append(int(pid))
    return found


def left(job_ids):
    """every process of those jobs still there, the sandboxes' own included"""
    return job_pids(job_ids, programs=False)


def trials_of(s, tok, sid):
    return s.get(f"/v1/jobs/{sid}/trials", tok).json


def all_trial_jobs(s, tok, sid):
    return [j for t in trials_of(s, tok, sid)["trials"] for j in t["jobs"]]


def accuracy_points(s, tok, jid):
    """{epoch: test_accuracy} of what the job reported (its points with the metric)"""
    points = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
    return {p["epoch"]: p["test_accuracy"] for p in points if "test_accuracy" in p}


@timeout(240)
def test_asha_on_the_example_stops_below_the_cut():
    """search.json (asha over lr, width, batch; epochs 1/3, reduction 3) with 6 trials on 3,000 images: every
    trial's rung values and last value are what its job reported; a trial stopped exactly when at least
    ceil(n/3) of the n results at its rung (in the decisions' order) were strictly better, and a stopped
    trial's job was cancelled before its last epoch; the result's best is the best last metric of all"""
    with Stack(workers=2) as s:
        tid, tok = s.tenant("storch-asha")
        example_root(s, tid)
        sid = s.submit(tok, example_search(max_trials=6))
        job = s.wait_state(tok, sid, "succeeded", timeout=220)
        trials = trials_of(s, tok, sid)
        assert trials["rungs"] == [1] and trials["resource"] == "epoch", trials
        ts = trials["trials"]
        assert [t["trial"] for t in ts] == list(range(6)), ts
        assert {t["state"] for t in ts} <= {"succeeded", "stopped"}, ts
        # the worst trial of this seed (lr 0.00016, 46% after an epoch) is never first at the rung: one stop at least
        assert any(t["state"] == "stopped" for t in ts), ts
        for t in ts:
            assert t["failures"] == 0 and t["jobs"] == [t["job_id"]], t
            acc = accuracy_points(s, tok, t["job_id"])
            assert acc and sorted(acc) == list(range(1, max(acc) + 1)), (t, acc)  # one point per finished epoch
            assert all(0.1 < v < 1 for v in acc.values()), acc  # torch's accuracies, not a stand-in
            for r in t["rungs"]:
                assert r["value"] == acc[r["resource"]], (t, r, acc)
            assert t["last"] == {"value": acc[max(acc)], "resource": max(acc)}, (t, acc)
            state = s.job(tok, t["job_id"])["state"]
            if t["state"] == "succeeded":
                assert max(acc) == 3 and [r["continued"] for r in t["rungs"]] == [True], (t, acc)
                assert state == "succeeded", state
            else:
                assert max(acc) < 3 and t["rungs"] and not t["rungs"][-1]["continued"], (t, acc)
                assert state == "cancelled", state
        # ASHA's rule replayed on the rung's values in the decisions' order
        seen = sorted((r["order"], r["value"], r["continued"], t["trial"]) for t in ts for r in t["rungs"] if r["rung"] == 0)
        assert len(seen) == 6, seen  # every trial was decided at epoch 1
        for i, (_, v, cont, trial) in enumerate(seen):
            better = sum(1 for _, w, _, _ in seen[:i] if w > v)
            assert cont == (better < -(-(i + 1) // 3)), (i, trial, seen)
        # the best: the best last reported metric (ties: the lower number), stopped trials included
        best = max(ts, key=lambda t: (t["last"]["value"], -t["trial"]))
        assert trials["best"] == best["trial"], trials
        res = job["result"]
        assert res["best"]["trial"] == best["trial"] and res["best"]["job_id"] == best["job_id"], res
        assert res["best"]["params"] == best["params"], res
        assert res["metrics"]["test_accuracy"] == best["last"]["value"] == max(accuracy_points(s, tok, best["job_id"]).items())[1], res
        assert res["trials"] == {k: sum(t["state"] == k for t in ts) for k in ("succeeded", "stopped") if any(t["state"] == k for t in ts)}, res
        # a trial stopped by the last decision may still be checkpointing after its SIGTERM
        wait_until("no trial's process left", lambda: not left(all_trial_jobs(s, tok, sid)), 30)


@timeout(240)
def test_killed_trial_restarts_then_runs_again():
    """max_restarts 1: SIGKILL to trial 0's train.py after its first epoch restarts its job from the checkpoint
    (the same job, generation 1, resumed at epoch 1: the trial's failures stay 0); a second SIGKILL leaves the
    job no restart, it fails, and the search runs the trial again as a new job (failures 1, two jobs), which
    finishes; trial 1 is untouched and the search succeeds"""
    with Stack(workers=2) as s:
        tid, tok = s.tenant("storch-kill")
        example_root(s, tid)
        job = example_search(algorithm="random", max_trials=2, parallel=2, max_failures=1)
        job["spec"]["max_restarts"] = 1
        sid = s.submit(tok, job)
        first = wait_until("trial 0's job", lambda: trials_of(s, tok, sid)["trials"][0]["job_id"], 30)
        wait_until("trial 0's first epoch", lambda: accuracy_points(s, tok, first), 120)
        for pid in wait_until("trial 0's process", lambda: job_pids([first], generation=0), 10):
            os.kill(pid, signal.SIGKILL)
        restart = wait_until("the job's restart", lambda: [e for e in s.events(tok, first) if e["state"] == "queued"
                                                         and "restarting from the checkpoint" in (e["reason"] or "")], 60)
        assert restart[0]["reason"].startswith("rank 0 killed by signal 9") and "(restart 1 of 1)" in restart[0]["reason"], restart
        t0 = trials_of(s, tok, sid)["trials"][0]
        assert t0["failures"] == 0 and t0["jobs"] == [first] and t0["state"] == "running", t0
        # the restarted generation: killed as soon as it runs
        for pid in wait_until("generation 1's process", lambda: job_pids([first], generation=1), 60):
            os.kill(pid, signal.SIGKILL)
        failed = s.wait_state(tok, first, "failed", timeout=60)
        assert failed["error"].startswith("rank 0 killed by signal 9") and "no restarts left: 1 of 1 used" in failed["error"], failed
        done = s.wait_state(tok, sid, "succeeded", timeout=180)
        t0, t1 = trials_of(s, tok, sid)["trials"]
        assert t0["failures"] == 1 and len(t0["jobs"]) == 2 and t0["jobs"][0] == first and t0["job_id"] == t0["jobs"][1], t0
        assert t0["state"] == "succeeded" and s.job(tok, t0["job_id"])["state"] == "succeeded", t0
        assert t1["failures"] == 0 and t1["jobs"] == [t1["job_id"]] and t1["state"] == "succeeded", t1
        again = accuracy_points(s, tok, t0["job_id"])  # the new job started from nothing: its own checkpoint directory
        assert sorted(again) == [1, 2, 3] and t0["last"]["value"] == again[3], (t0, again)
        reasons = [e["reason"] for e in s.events(tok, sid)]
        assert any(r.startswith("trial 0 failed (") and "running it again (retry 1 of 1)" in r for r in reasons), reasons
        assert done["result"]["trials"] == {"succeeded": 2}, done["result"]
        wait_until("no trial's process left", lambda: not left(t0["jobs"] + t1["jobs"]), 30)


@timeout(240)
def test_scheduler_killed_mid_search():
    """SIGKILL to the scheduler while trials 0 and 1 train; while it is down a trial ends and the search's
    next trial waits queued; a new scheduler schedules it (after its start) and the search finishes: every
    trial ran as one job that went to running once (no requeue, no second run of a finished trial)"""
    with Stack(workers=2) as s:
        tid, tok = s.tenant("storch-sched")
        example_root(s, tid)
        sid = s.submit(tok, example_search(max_trials=4))
        wait_until("trials 0 and 1 training", lambda: all(
            accuracy_points(s, tok, t["job_id"]) or job_pids([t["job_id"]]) for t in trials_of(s, tok, sid)["trials"]), 120)
        s.kill("scheduler")
        waiting = wait_until("a trial queued with no scheduler", lambda: [
            t for t in trials_of(s, tok, sid)["trials"] if s.job(tok, t["job_id"])["state"] == "queued"], 120)
        restarted = time.time()
        s.start_scheduler()
        s.wait_state(tok, sid, "succeeded", timeout=200)
        ts = trials_of(s, tok, sid)["trials"]
        assert len(ts) == 4 and {t["state"] for t in ts} <= {"succeeded", "stopped"}, ts
        for t in ts:
            assert t["jobs"] == [t["job_id"]] and t["failures"] == 0, t
            events = s.events(tok, t["job_id"])
            assert [e["state"] for e in events if e["state"] == "running"] == ["running"], events
            assert [e["reason"] for e in events if e["state"] == "queued"] == ["accepted"], events
        scheduled = [e for e in s.events(tok, waiting[0]["job_id"]) if e["state"] == "scheduled"]
        assert len(scheduled) == 1 and iso_seconds(scheduled[0]["ts"]) >= restarted, (scheduled, restarted)
        wait_until("no trial's process left", lambda: not left(all_trial_jobs(s, tok, sid)), 30)


@timeout(180)
def test_cancel_leaves_no_trial_process():
    """cancel of the search while two trials train (torch loaded, gloo up): every trial is cancelled at once,
    its job too, and within the grace period no train.py process of any trial remains"""
    with Stack(workers=2) as s:
        tid, tok = s.tenant("storch-cancel")
        example_root(s, tid)
        job = example_search(train_size=20000, max_trials=4, grace_s=10)
        job["spec"]["program"]["command"] += ["--report-every", "10"]  # a point within the first second of training
        sid = s.submit(tok, job)
        jobs = wait_until("two trials", lambda: len(ids := all_trial_jobs(s, tok, sid)) == 2 and ids, 30)
        wait_until("both trials training", lambda: all(
            any("samples_per_s" in p for p in s.get(f"/v1/jobs/{j}/metrics", tok).json["points"]) for j in jobs), 120)
        assert len(job_pids(jobs)) == 2, job_pids(jobs)
        assert s.post(f"/v1/jobs/{sid}/cancel", tok).status == 200
        ts = trials_of(s, tok, sid)["trials"]
        assert len(ts) == 2 and all(t["state"] == "cancelled" for t in ts), ts
        assert all(s.job(tok, j)["state"] == "cancelled" for j in jobs)
        t0 = time.time()
        wait_until("no trial's process left", lambda: not left(jobs), 20)
        print(f"the trials' processes were gone {time.time() - t0:.1f} s after the cancel")
        assert s.job(tok, sid)["state"] == "cancelled"
        assert len(trials_of(s, tok, sid)["trials"]) == 2  # nothing started after the cancel
        wait_until("both workers idle", lambda: [w["state"] for w in s.workers()] == ["idle", "idle"], 20)
