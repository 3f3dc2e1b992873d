"""Training jobs through the real stack: one CPU worker trains an MLP on Fashion-MNIST (the
Debian dataset), reports progress, registers its model; bad datasets and paths outside the
tenant's roots are refused or fail with a clear reason."""

import os
import tempfile

from harness import ADMIN, Stack, wait_until

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
        assert os.path.exists(m["versions"][0]["artifact"]), m


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
