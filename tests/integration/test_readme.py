"""The README's examples, in its order, on the stack `./deploy/up` starts by default (2 CPU workers,
no labels): placement -> training -> inference -> the 2-worker training gang -> a placement job after
it.  Nothing waits forever: each job reaches a terminal state, or runs and serves, within a deadline,
and a job that cannot start yet says what it waits for and what would unblock it.  Then the federated
example on `GANTRY_WORKERS=3 ./deploy/up` (3 workers, no labels).

The shipped examples are submitted as they are, except training, which runs copies with fewer steps
(the suite runs under sanitizers on 2 cores)."""

import json
import os
import re
import subprocess
import tempfile
import threading

from harness import ROOT, Stack, timeout, wait_until

ALONE = True  # run.py runs these tests with nothing beside them: deploy/up's sandbox uids

EXAMPLES = os.path.join(ROOT, "deploy", "examples")


def example(name):
    with open(os.path.join(EXAMPLES, name + ".json")) as f:
        return json.load(f)


def short_training(name, steps, workers=1):
    job = example("training")
    job["name"] = name
    del job["spec"]["epochs"]
    job["spec"].update(steps=steps, workers=workers)
    job["spec"]["schedule"]["warmup_steps"] = min(job["spec"]["schedule"]["warmup_steps"], steps // 4)
    return job


def reasons(s, tok, jid):
    return [e["reason"] or "" for e in s.events(tok, jid)]


@timeout(900)
def test_readme_examples_in_order():
    with Stack(workers=2) as s:
        _, tok = s.tenant("vision")
        s.wait_state(tok, s.submit(tok, example("placement")), "succeeded", timeout=120)
        # the model the inference example serves (fashion-mlp), trained briefly
        s.wait_state(tok, s.submit(tok, short_training("fashion-mlp", 200)), "succeeded", timeout=300)
        models = s.get("/v1/models", tok).json["models"]
        assert [m["name"] for m in models] == ["fashion-mlp"], models

        iid = s.submit(tok, example("inference"))
        s.wait_state(tok, iid, "running", timeout=60)
        wait_until("the model serves", lambda: s.get("/v2/models/fashion-mlp/ready", tok).status == 200, 60)
        request, labels = make_request(tempfile.mkdtemp(prefix="gantry-readme-"))  # the README's request file
        with open(request) as f:
            r = s.post("/v2/models/fashion-mlp/infer", tok, json.load(f))
        assert r.status == 200 and output(r.json, "label") is not None, r

        # "data parallel: add "workers": 2": the inference job keeps one of the two workers at its
        # minimum replica, so the gang cannot start; it says so, names the job and what unblocks it,
        # and holds nothing back
        gid = s.submit(tok, short_training("fashion-mlp-dp", 100, workers=2))
        why = wait_until("the gang's wait reason",
                         lambda: [x for x in reasons(s, tok, gid) if "1 of 2 workers free" in x and iid in x], 30)[-1]
        assert f"cancel {iid} or add a worker" in why, why
        assert s.job(tok, gid)["state"] == "queued"

        # the jobs after it run meanwhile: a placement job and a training job of the same tenant
        s.wait_state(tok, s.submit(tok, example("placement")), "succeeded", timeout=120)
        s.wait_state(tok, s.submit(tok, short_training("after-the-gang", 50)), "succeeded", timeout=240)
        assert s.job(tok, gid)["state"] == "queued"

        # following the reason: cancel the inference job, and the gang runs on both workers
        assert s.post(f"/v1/jobs/{iid}/cancel", tok).status == 200
        done = s.wait_state(tok, gid, "succeeded", timeout=300)
        assert done["state"] == "succeeded"
        started = {e["source"] for e in s.events(tok, gid) if e["state"] == "running"}
        assert len(started) == 2, started

        # the federated example needs 3 workers: on 2 it is accepted as shipped and told so at once
        fid = s.submit(tok, example("federated"))
        why = wait_until("the federated job's wait reason",
                         lambda: [x for x in reasons(s, tok, fid) if "the cluster has 2" in x], 30)[-1]
        assert "needs 3 workers at once" in why and "add 1 worker" in why, why
        assert s.post(f"/v1/jobs/{fid}/cancel", tok).status == 200


def test_federated_example_on_three_unlabelled_workers():
    """GANTRY_WORKERS=3 ./deploy/up: no worker has a label, and the example's sites name none: each
    site runs on its own worker"""
    with Stack(workers=3) as s:
        _, tok = s.tenant("hospitals")
        job = example("federated")  # as shipped: 10 rounds take seconds
        assert all("label" not in site for site in job["spec"]["sites"])
        jid = s.submit(tok, job)
        done = s.wait_state(tok, jid, "succeeded", timeout=300)
        m = done["result"]["metrics"]
        assert m["sites"] == 3 and m["rounds"] == 10 and m["test_accuracy"] > 0.7 and m["residual"] < 1e-6, m
        assert [x["name"] for x in s.get("/v1/models", tok).json["models"]] == ["fmnist-federated"]
        started = {e["source"] for e in s.events(tok, jid) if e["state"] == "running"}
        assert started == {f"worker:w_test{i}" for i in range(3)}, started
        claims = s.redis("HGETALL", f"gantry:fed:{jid}:0:sites").split()
        assert sorted(claims[0::2]) == ["0", "1", "2"] and sorted(claims[1::2]) == [f"w_test{i}" for i in range(3)], claims


@timeout(600)
def test_inference_gives_a_replica_back_to_a_waiting_gang():
    """An inference job above its minimum gives a replica back to a gang of its priority that waits
    for it (the autoscaler drains one while its SLO allows); the gang then runs, and the inference
    job keeps serving on its minimum"""
    with Stack(workers=3, scheduler_args=["--autoscale-control-s", "2"]) as s:
        _, tok = s.tenant("vision")
        s.wait_state(tok, s.submit(tok, short_training("fashion-mlp", 100)), "succeeded", timeout=300)
        iid = s.submit(tok, example("inference"))  # replicas {min 1, max 2}
        wait_until("the model serves", lambda: s.get("/v2/models/fashion-mlp/ready", tok).status == 200, 60)
        stop, answered = threading.Event(), []

        def load():  # a light, steady load: Faro hands the spare worker to the job as headroom
            body = {"inputs": [{"name": "input", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": [0.5] * 784}]}
            while not stop.is_set():
                answered.append(s.post("/v2/models/fashion-mlp/infer", tok, body).status)
                stop.wait(0.05)  # pacing: a light load is what is tested; ends at once when the test stops it

        th = threading.Thread(target=load, daemon=True)
        th.start()
        try:
            wait_until("the inference job on 2 replicas",
                       lambda: sum(w["running"] == iid for w in s.get("/v1/workers", tok).json["workers"]) == 2, 90)
            gid = s.submit(tok, short_training("fashion-mlp-dp", 100, workers=2))
            why = wait_until("the gang's wait reason", lambda: [x for x in reasons(s, tok, gid) if iid in x], 30)[-1]
            assert f"waiting for inference job {iid} to give back a replica" in why, why
            s.wait_state(tok, gid, "succeeded", timeout=300)
        finally:
            stop.set()
            th.join(10)
        gave = [x for x in reasons(s, tok, iid) if "given back" in x]
        assert gave, reasons(s, tok, iid)
        assert s.job(tok, iid)["state"] == "running"
        assert answered and set(answered) <= {200}, sorted(set(answered))


def make_request(directory, *args):
    """runs deploy/examples/make_request.py ARGS in directory as the README does; the request file it wrote
    and the true labels of its images (which it prints on stderr)"""
    r = subprocess.run([os.path.join(EXAMPLES, "make_request.py"), *args], cwd=directory, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return os.path.join(directory, "fashion-request.json"), [int(x) for x in re.findall(r"label (\d+) \(", r.stderr)]


def output(answer, name):
    """an OIP v2 answer's output NAME's data"""
    return next((o["data"] for o in (answer or {}).get("outputs", []) if o["name"] == name), None)


@timeout(420)
def test_readme_inference_with_the_request_file():
    """the README's inference example as written: deploy/examples/make_request.py writes real Fashion-MNIST
    test images (shape [N,1,28,28], pixels / 255) to fashion-request.json; posted with the README's curl
    line, the served fashion-mlp labels them, most of them right (briefly trained: ~80%; chance is 10%); gantry
    follow of the serving job prints its window (requests/s, p50, p99, SLO) as a line"""
    with Stack(workers=1) as s:
        _, tok = s.tenant("vision")
        s.wait_state(tok, s.submit(tok, short_training("fashion-mlp", 400)), "succeeded", timeout=300)
        iid = s.submit(tok, example("inference"))
        wait_until("the model serves", lambda: s.get("/v2/models/fashion-mlp/ready", tok).status == 200, 60)
        d = tempfile.mkdtemp(prefix="gantry-readme-")

        def curl(path):
            r = subprocess.run(["curl", "-s", "-H", f"Authorization: Bearer {tok}", "-H", "Content-Type: application/json",
                                "--data", f"@{path}", f"http://127.0.0.1:{s.port}/v2/models/fashion-mlp/infer"],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout)

        # as the README runs it: no arguments, test image 0 (an ankle boot, label 9)
        path, labels = make_request(d)
        with open(path) as f:
            body = json.load(f)
        x = body["inputs"][0]
        assert x["name"] == "input" and x["shape"] == [1, 1, 28, 28] and x["datatype"] == "FP32", x["shape"]
        assert len(x["data"]) == 784 and all(0 <= v <= 1 for v in x["data"]) and max(x["data"]) == 1.0, "not pixels / 255"
        assert labels == [9], labels
        answer = curl(path)
        assert len(output(answer, "label")) == 1 and len(output(answer, "probabilities")) == 10, answer

        # a batch of 32 test images: the model's labels against the dataset's
        path, labels = make_request(d, "--index", "100", "--count", "32")
        got = output(curl(path), "label")
        assert len(got) == 32 and len(labels) == 32, (got, labels)
        right = sum(a == b for a, b in zip(got, labels))
        assert right >= 20, f"{right} of 32 right: {got} vs {labels}"

        # gantry follow of the serving job (into a pipe): its serving window as a line for people
        from test_cli import follow_lines
        env = {"HOME": d, "PATH": os.environ.get("PATH", ""), "GANTRY_URL": f"http://127.0.0.1:{s.port}", "GANTRY_TOKEN": tok}
        stop = threading.Event()

        def load():
            while not stop.is_set():
                curl(path)
                stop.wait(0.05)  # pacing: a light load

        th = threading.Thread(target=load, daemon=True)
        th.start()
        try:
            lines = follow_lines(env, iid, lambda ls: any(x.startswith("serving") for x in ls), timeout=30)
        finally:
            stop.set()
            th.join(30)
        window = next(x for x in lines if x.startswith("serving"))
        assert re.fullmatch(r"serving +[\d.]+ req/s, p50 \S+, p99 \S+, SLO [\d.]+% within 100ms, \d+ dropped, \d+ timed out",
                            window), window
