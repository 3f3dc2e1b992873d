"""Training jobs through the real stack: one CPU worker trains an MLP on Fashion-MNIST (the
Debian dataset), reports progress, registers its model; bad datasets and paths outside the
tenant's roots are refused or fail with a clear reason."""

import os
import tempfile
import time

from harness import ADMIN, Stack, alone, timeout, wait_until

MLP = {"input": [1, 28, 28], "layers": [{"type": "flatten"}, {"type": "dense", "units": 64}, {"type": "relu"},
                                        {"type": "dense", "units": 10}]}


def training_job(name="mnist-mlp", dataset=None, steps=300):
    return {"type": "training", "name": name,
            "spec": {"model": MLP, "dataset": dataset or {"name": "fashion-mnist"},
                     "optimizer": {"type": "adam", "lr": 0.001}, "batch_size": 64, "steps": steps, "seed": 1}}


def test_training_job_registers_a_model():
    with Stack(workers=1) as s:
        _, tok = s.tenant("trainers")
        jid = s.submit(tok, training_job())
        job = s.wait_state(tok, jid, "succeeded", timeout=240)
        acc = job["result"]["metrics"]["test_accuracy"]
        assert acc > 0.7, job["result"]["metrics"]
        progress = [e for e in s.events(tok, jid) if e["progress"] is not None and "loss" in e["reason"]]
        assert progress, "no progress events with the loss"
        points = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        assert len(points) >= 2 and points[-1]["step"] == 300, points[-3:]
        assert all(p["loss"] > 0 and p["samples_per_s"] > 0 and p["ts"] > 0 for p in points), points[:3]
        assert [p["step"] for p in points] == sorted(p["step"] for p in points)
        assert s.get("/v1/jobs/j_nope/metrics", tok).status == 404
        models = s.get("/v1/models", tok).json["models"]
        assert [m["name"] for m in models] == ["mnist-mlp"] and models[0]["latest_version"] == 1, models
        m = s.get("/v1/models/mnist-mlp", tok).json
        assert m["versions"][0]["job_id"] == jid and m["versions"][0]["metrics"]["test_accuracy"] == acc
        # the artifact is named in the model store, never by a server path; the worker wrote it there
        assert not m["versions"][0]["artifact"].startswith("/") and stored(s, m["versions"][0]["artifact"]), m


def stored(s, artifact):
    """whether the stack's model store holds a file of this name"""
    return any(artifact in files for _, _, files in os.walk(s.dir))


def test_training_paths_and_bad_data():
    root = tempfile.mkdtemp(prefix="gantry-data-")
    bad = os.path.join(root, "bad-images.idx")
    with open(bad, "wb") as f:
        f.write(b"this is not an IDX file")
    with Stack(workers=1) as s:
        tid, tok = s.tenant("data-team")
        ds = {"format": "idx", "train_images": bad, "train_labels": bad, "test_images": bad, "test_labels": bad}
        r = s.post("/v1/jobs", tok, training_job(dataset=ds))
        assert r.status == 400 and r.json["error"]["field"].startswith("spec.dataset."), r  # no roots yet
        assert s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"roots": [root]}).status == 200
        r = s.post("/v1/jobs", tok, training_job(dataset=dict(ds, train_images="/etc/passwd")))
        assert r.status == 400 and r.json["error"]["field"] == "spec.dataset.train_images", r
        jid = s.submit(tok, training_job(dataset=ds))
        job = s.wait_state(tok, jid, "failed", timeout=60)
        assert "bad-images.idx" in job["error"], job["error"]
        r = s.post("/v1/jobs", tok, {"type": "training", "spec": {"model": {"layers": "x"}}})
        assert r.status == 400 and r.json["error"]["field"].startswith("spec."), r


def gang_job(workers, steps, name="mnist-dp", **extra):
    job = training_job(name=name, steps=steps)
    job["spec"].update({"workers": workers, "progress_every_steps": 20, "collective_timeout_s": 20}, **extra)
    return job


def running_workers(s, tok, jid):
    return sorted({e["source"].split(":", 1)[1] for e in s.events(tok, jid)
                   if e["state"] == "running" and e["source"].startswith("worker:")})


def test_two_and_three_worker_training():
    """a gang of 2, then 3 workers trains one model through the real stack (ring all-reduce over loopback)"""
    with Stack(workers=3) as s:
        _, tok = s.tenant("dp")
        for n in (2, 3):
            jid = s.submit(tok, gang_job(n, 300, name=f"mnist-dp{n}"))
            job = s.wait_state(tok, jid, "succeeded", timeout=240)
            m = job["result"]["metrics"]
            assert m["workers"] == n and m["steps"] == 300 and m["test_accuracy"] > 0.7, m
            assert len(running_workers(s, tok, jid)) == n
            points = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
            assert points and all(p["workers"] == n for p in points), points[-1]
            assert points[-1]["step"] == 300 and points[-1]["test_accuracy"] == m["test_accuracy"], points[-1]
            assert any(p["comm_s"] > 0 for p in points), points[-1]
            # one result: rank 0 reports, the others end silently
            assert sum(1 for e in s.events(tok, jid) if e["state"] == "succeeded") == 1


@alone  # the survivor's notice is timed
def test_gang_member_killed_mid_epoch_resumes_from_checkpoint():
    """SIGKILL one of two training workers mid-epoch: the survivor fails the step at once (the
    peer's socket closes), requeues the job once, and the job resumes from its last checkpoint
    on the workers it can get, then finishes."""
    with Stack(workers=3) as s:
        _, tok = s.tenant("dp-kill")
        jid = s.submit(tok, gang_job(2, 3000, checkpoint_every_steps=100))

        def at_step(n):
            pts = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
            return pts and pts[-1]["step"] >= n and pts[-1]["step"]
        wait_until("training past step 340", lambda: at_step(340), 120)
        victim = running_workers(s, tok, jid)[-1]
        killed_at = time.time()
        s.kill("worker" + victim[len("w_test"):])
        requeued = wait_until("the job requeued by a survivor",
                              lambda: [e for e in s.events(tok, jid)
                                       if e["state"] == "queued" and "lost a peer" in e["reason"]], 20)
        assert time.time() - killed_at < 5.0, "the survivor took too long to notice the lost peer"
        assert requeued[0]["source"].startswith("worker:") and requeued[0]["source"] != "worker:" + victim
        job = s.wait_state(tok, jid, "succeeded", timeout=240)
        assert job["result"]["metrics"]["steps"] == 3000 and job["result"]["metrics"]["workers"] == 2
        # one requeue only, although the survivor and the scheduler (dead heartbeat) both try
        assert sum(1 for e in s.events(tok, jid) if e["state"] == "queued") == 2  # accepted + the requeue
        # the second generation started from the checkpoint (step >= 300), not from scratch
        pts = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        after = [p["step"] for p in pts if p["ts"] > killed_at * 1000 + 500]
        assert after and min(after) > 300, after[:5]


def test_gang_cancel_stops_every_member():
    """cancelling a 2-worker job stops both members at the same step; nothing is requeued and
    both workers are free again"""
    with Stack(workers=2) as s:
        _, tok = s.tenant("dp-cancel")
        jid = s.submit(tok, gang_job(2, 100000))
        wait_until("training started", lambda: s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"], 60)
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 200
        wait_until("both workers idle", lambda: [w["state"] for w in s.workers()] == ["idle", "idle"], 20)
        job = s.job(tok, jid)
        assert job["state"] == "cancelled"
        assert not [e for e in s.events(tok, jid) if e["state"] == "queued" and e["reason"] != "accepted"]


def test_gang_preempted_before_it_starts_stops_every_member_once():
    """a gang's generation is preempted before its members start (the scheduler's signal can
    arrive while the previous generation winds down): every member sees the signal and stops
    at once, none waits out the rendezvous timeout (60 s) for a peer that left; the job is
    requeued once, and the signal (kept until it expires) does not stop the next generation"""
    with Stack(workers=0) as s:
        _, tok = s.tenant("dp-preempt")
        jid = s.submit(tok, gang_job(2, 300))
        assert s.redis("SET", f"gantry:preempt:{jid}:0", "job j_other", "EX", 600) == "OK"
        s.start_worker(0)
        s.start_worker(1)
        s.wait_state(tok, jid, "succeeded", timeout=50)
        requeues = [e for e in s.events(tok, jid) if e["state"] == "queued" and e["reason"].startswith("preempted by job")]
        assert len(requeues) == 1, requeues
        assert s.redis("EXISTS", f"gantry:preempt:{jid}:0") == "1"


@timeout(600)
def test_elastic_gang_grows_when_a_worker_frees_up():
    """workers {min 2, max 3} on two workers: the job starts with 2; a third worker joins the cluster,
    the scheduler asks the gang to resize, it stops at a checkpoint and continues with 3 from where it
    stopped (the data state is independent of the world), and finishes"""
    with Stack(workers=2) as s:
        _, tok = s.tenant("elastic")
        job = gang_job(2, 5000, checkpoint_every_steps=200)
        job["spec"]["workers"] = {"min": 2, "max": 3}
        jid = s.submit(tok, job)

        def points():
            return s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        wait_until("training on 2 workers", lambda: [p for p in points() if p.get("workers") == 2 and p["step"] >= 200], 120)
        s.start_worker(2)
        resized = wait_until("a resize", lambda: [e for e in s.events(tok, jid) if e["reason"].startswith("resize:")], 60)
        done = s.wait_state(tok, jid, "succeeded", timeout=240)
        m = done["result"]["metrics"]
        assert m["steps"] == 5000 and m["workers"] == 3, m
        pts = points()
        three = [p for p in pts if p.get("workers") == 3]
        two = [p for p in pts if p.get("workers") == 2]
        assert three and two, "no points before or after the resize"
        assert min(p["step"] for p in three) >= max(p["step"] for p in two) - 200, (two[-3:], three[:3])
        assert any(e["state"] == "queued" and e["reason"].startswith("resize") for e in s.events(tok, jid)), resized


@timeout(600)
def test_elastic_gang_shrinks_for_inference_and_grows_back():
    """a low-priority, preemptible elastic gang {min 2, max 4} holds all 4 workers; an inference job
    needs 2: the gang is preempted at a checkpoint and comes back on the 2 workers left; when the
    inference job ends, the gang grows back to 4"""
    from test_inference import serve_job
    with Stack(workers=4) as s:
        _, tok = s.tenant("elastic-shrink")
        s.wait_state(tok, s.submit(tok, training_job(name="served", steps=100)), "succeeded", timeout=120)
        job = gang_job(2, 1000000, checkpoint_every_steps=200)
        job["spec"]["workers"] = {"min": 2, "max": 4}
        job.update(priority="low", preemptible=True)
        jid = s.submit(tok, job)

        def world_after(t0):
            pts = [p for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"] if p["ts"] > t0]
            return pts[-1].get("workers") if pts else None
        wait_until("the gang on 4 workers", lambda: world_after(0) == 4, 120)
        t_infer = time.time() * 1000
        serve = s.submit(tok, serve_job("served", replicas=2))
        s.wait_state(tok, serve, "running", timeout=60)
        # back on the workers the replicas left (2; 3 when the autoscaler already took a replica back)
        wait_until("the gang back on fewer workers", lambda: (world_after(t_infer) or 4) < 4, 60)
        assert s.job(tok, jid)["state"] == "running"
        t_cancel = time.time() * 1000
        assert s.post(f"/v1/jobs/{serve}/cancel", tok).status == 200
        wait_until("the gang grown back to 4", lambda: world_after(t_cancel) == 4, 90)
        reasons = [e["reason"] for e in s.events(tok, jid)]
        assert any(r.startswith("preempted by job") for r in reasons), reasons
        assert any(r.startswith("resize:") for r in reasons), reasons
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 200


@alone  # the survivors' pause is timed
@timeout(600)
def test_elastic_gang_continues_with_survivors_after_sigkill():
    """an elastic gang {min 2, max 3} on 3 workers; one worker is killed with SIGKILL: the survivors
    fail the step at once, the next generation forms on the 2 workers left within a bounded time,
    takes its state from a survivor (the last step, newer than the checkpoint) and reaches its
    accuracy target"""
    with Stack(workers=3) as s:
        _, tok = s.tenant("elastic-kill")
        job = gang_job(2, 1500, checkpoint_every_steps=500)
        job["spec"]["workers"] = {"min": 2, "max": 3}
        jid = s.submit(tok, job)

        def points():
            return s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        wait_until("training on 3 workers past step 120",
                   lambda: [p for p in points() if p.get("workers") == 3 and p["step"] >= 120], 120)
        victim = running_workers(s, tok, jid)[-1]
        killed_at = time.time()
        s.kill("worker" + victim[len("w_test"):])
        resumed = wait_until("the next generation on the survivors",
                             lambda: [p for p in points() if p.get("event") == "resize" and p["ts"] > killed_at * 1000], 60)
        took = resumed[0]["ts"] / 1000 - killed_at
        assert took < 10.0, f"the survivors took {took:.1f} s to continue"
        r = resumed[0]
        assert r["workers"] == 2 and r["state_from"] == "survivor" and r["state_bytes"] > 0, r
        assert 120 <= r["step"] < 500, r  # the survivors' last step: past every checkpoint (none before 500)
        done = s.wait_state(tok, jid, "succeeded", timeout=240)
        m = done["result"]["metrics"]
        assert m["steps"] == 1500 and m["workers"] == 2 and m["test_accuracy"] > 0.8, m
        reasons = [e["reason"] for e in s.events(tok, jid)]
        assert any("state from a survivor" in x for x in reasons), reasons


def test_model_selection_by_model_hopping():
    """a grid of 4 configurations (learning rate x hidden units) on 2 workers by model hopping: one
    row per configuration, a point per configuration and epoch, the best model registered; a search
    that would change the dataset is refused"""
    with Stack(workers=2) as s:
        _, tok = s.tenant("mop")
        job = training_job(name="mnist-mop")
        del job["spec"]["steps"]
        job["spec"].update({"epochs": 1, "workers": 2,
                            "search": {"type": "grid", "params": {"optimizer.lr": [0.0003, 0.003],
                                                                  "model.layers.1.units": [16, 64]}}})
        jid = s.submit(tok, job)
        done = s.wait_state(tok, jid, "succeeded", timeout=300)
        res = done["result"]
        rows = res["configurations"]
        assert len(rows) == 4 and res["metrics"]["configurations"] == 4, res["metrics"]
        assert [r["params"] for r in rows] == [{"optimizer.lr": lr, "model.layers.1.units": u}
                                               for lr in (0.0003, 0.003) for u in (16, 64)], rows
        best = res["metrics"]["best"]
        assert res["metrics"]["test_accuracy"] == max(r["test_accuracy"] for r in rows) > 0.75, rows
        assert rows[best]["test_accuracy"] == res["metrics"]["test_accuracy"]
        assert len(running_workers(s, tok, jid)) == 2
        points = [p for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"] if "config" in p]
        assert sorted(p["config"] for p in points) == [0, 1, 2, 3], points
        m = s.get("/v1/models/mnist-mop", tok).json["versions"][0]
        assert m["job_id"] == jid and stored(s, m["artifact"]), m
        # the best configuration's architecture is the one registered (its hidden units)
        assert m["architecture"]["layers"][1]["units"] == rows[best]["params"]["model.layers.1.units"], m
        job["spec"]["search"]["params"] = {"dataset.train_images": ["/etc/passwd"]}
        r = s.post("/v1/jobs", tok, job)
        assert r.status == 400 and r.json["error"]["field"] == "spec.search.params.dataset.train_images", r.json


@timeout(600)
def test_adaptation_policies_through_the_stack():
    """a 2-worker job with the gns monitor and the adaptive batch: the noise scale is in the progress
    points and the global batch grows with it (events); then a job with the strategy switch moves
    its all-reduce off the ring (a threshold of 0.99 makes almost any slower window a vote); both
    reach their accuracy"""
    with Stack(workers=2) as s:
        _, tok = s.tenant("adapt")
        job = gang_job(2, 600, name="mnist-adapt")
        job["spec"].update({"batch_size": 32, "progress_every_steps": 10, "policies": [
            {"name": "gns", "every_steps": 2},
            {"name": "adaptive_batch", "min": 16, "max": 512, "every_steps": 50, "warmup_steps": 50}]})
        jid = s.submit(tok, job)
        done = s.wait_state(tok, jid, "succeeded", timeout=300)
        assert done["result"]["metrics"]["test_accuracy"] > 0.7, done["result"]["metrics"]
        pts = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        assert any(p.get("gns", 0) > 0 for p in pts), pts[-1]
        batch = [p for p in pts if p.get("event") == "batch_size"]
        assert batch and batch[0]["batch_size"] != 32, batch
        assert {p["batch_size"] for p in pts if "loss" in p} - {32}, "no point at another batch size"
        reasons = [e["reason"] for e in s.events(tok, jid)]
        assert any(r.startswith("batch_size: global batch 32 -> ") for r in reasons), reasons

        job = gang_job(2, 1500, name="mnist-switch")
        job["spec"]["policies"] = [{"name": "strategy_switch", "threshold": 0.99, "window_steps": 10}]
        jid = s.submit(tok, job)
        done = s.wait_state(tok, jid, "succeeded", timeout=300)
        assert done["result"]["metrics"]["test_accuracy"] > 0.7, done["result"]["metrics"]
        pts = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        switched = [p for p in pts if p.get("event") == "strategy"]
        assert switched and switched[0]["strategy"] == "tree", [p for p in pts if p.get("event")]
        reasons = [e["reason"] for e in s.events(tok, jid)]
        assert any(r.startswith("strategy: all-reduce ring -> tree") for r in reasons), reasons
