"""A program job's spec at submission (issue 20; spec/program_spec.h, docs/programs.md "The job spec"):
every mistake is a 400 naming its field (the command, an env name, a workdir outside the tenant's roots or
not a directory, a built-in training member beside program, memory over the tenant's cap), a valid one is
accepted and its task carries the tenant's roots (published at submission and republished from the
outbox), and the API document describes the variant.  No worker runs here: the jobs stay queued."""

import copy
import json
import os
import shutil
import signal
import tempfile

from harness import ADMIN, ROOT, Stack, wait_until

PATH_OUTSIDE_ROOTS = "the path is outside this tenant's data roots"  # common/paths.h


def example_job():
    """deploy/examples/pytorch/job.json, as a user submits it"""
    with open(os.path.join(ROOT, "deploy", "examples", "pytorch", "job.json")) as f:
        return json.load(f)


def roots_with_code():
    """two roots; the first holds the example's workdir 'pytorch' and a plain file, the second a directory 'code'"""
    base = tempfile.mkdtemp(prefix="gantry-progspec-")
    first, second, outside = (os.path.join(base, n) for n in ("first", "second", "outside"))
    for d in (os.path.join(first, "pytorch"), os.path.join(second, "code"), outside):
        os.makedirs(d)
    with open(os.path.join(first, "notes.txt"), "w") as f:
        f.write("not a directory\n")
    os.symlink(outside, os.path.join(first, "to-outside"))  # a link out of the root: outside too
    return base, first, second, outside


def set_roots(s, tid, roots, **limits):
    r = s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"roots": roots, **limits})
    assert r.status == 200, r


def tasks_in_redis(s):
    """the tasks in gantry:jobs (wire/keys.h), by job id"""
    out = {}
    for line in s.redis("XRANGE", "gantry:jobs", "-", "+").splitlines():
        if line.startswith("{"):
            t = json.loads(line)
            out[t["job_id"]] = t
    return out


def with_spec(job, **changes):
    j = copy.deepcopy(job)
    for path, value in changes.items():
        doc, keys = j["spec"], path.split(".")
        for k in keys[:-1]:
            doc = doc.setdefault(k, {})
        if value is None:
            doc.pop(keys[-1], None)
        else:
            doc[keys[-1]] = value
    return j


def test_program_spec_errors_name_the_field():
    base, first, second, outside = roots_with_code()
    try:
        with Stack(workers=0) as s:
            tid, tok = s.tenant("progspec-errors")
            set_roots(s, tid, [first, second], max_memory_bytes=1 << 30)
            job = example_job()
            cases = [
                ({"program.command": "python3 train.py"}, "spec.program.command", "array"),
                ({"program.command": []}, "spec.program.command", "array"),
                ({"program.command": ["", "train.py"]}, "spec.program.command[0]", "program"),
                ({"program.command": ["python3", 3]}, "spec.program.command[1]", "string"),
                ({"program.workdir": None}, "spec.program.workdir", "directory"),
                ({"program.env": {"RANK": "1"}}, "spec.program.env.RANK", "set by gantry"),
                ({"program.env": {"MASTER_PORT": "1"}}, "spec.program.env.MASTER_PORT", "set by gantry"),
                ({"program.env": {"GANTRY_OUTPUT_DIR": "/tmp"}}, "spec.program.env.GANTRY_OUTPUT_DIR", "set by gantry"),
                ({"program.env": {"1LR": "0.1"}}, "spec.program.env.1LR", "variable name"),
                ({"program.env": {"LR": 0.1}}, "spec.program.env.LR", "string"),
                ({"program.workdir": outside}, "spec.program.workdir", PATH_OUTSIDE_ROOTS),
                ({"program.workdir": "/etc"}, "spec.program.workdir", PATH_OUTSIDE_ROOTS),
                ({"program.workdir": "to-outside"}, "spec.program.workdir", PATH_OUTSIDE_ROOTS),
                ({"program.workdir": "../second/code"}, "spec.program.workdir", "'..'"),
                ({"program.workdir": "notes.txt"}, "spec.program.workdir", "notes.txt is not a directory"),
                ({"program.workdir": "missing"}, "spec.program.workdir", "does not exist"),
                ({"dataset": {"name": "fashion-mnist"}}, "spec.dataset", "built-in training"),
                ({"optimizer": {"type": "sgd", "lr": 0.1}}, "spec.optimizer", "built-in training"),
                ({"epochs": 3}, "spec.epochs", "built-in training"),
                ({"workers": {"min": 3, "max": 2}}, "spec.workers.max", "workers.min"),
                ({"grace_s": 0}, "spec.grace_s", "[1, 3600]"),
                ({"resources": {"memory_mb": 2048}}, "spec.resources.memory_mb", "max_memory_bytes"),
                ({"register_model": {"output": "../model.pt"}}, "spec.register_model.output", "relative"),
                ({"register_model": None, "model_name": "fashion"}, "spec.model_name", "register_model"),
            ]
            for changes, field, words in cases:
                r = s.post("/v1/jobs", tok, with_spec(job, **changes))
                assert r.status == 400, (changes, r)
                assert r.json["error"]["field"] == field, (changes, r.json)
                assert words in r.json["error"]["message"], (changes, r.json)
            r = s.post("/v1/jobs", tok, with_spec(job, **{"resources": {"memory_mb": 1024}}))  # exactly the cap
            assert r.status == 201, r
    finally:
        shutil.rmtree(base)


def test_program_job_accepted_and_its_task_carries_the_roots():
    base, first, second, _ = roots_with_code()
    try:
        with Stack(workers=0, redis_persist=False) as s:
            tid, tok = s.tenant("progspec-ok")
            set_roots(s, tid, [first, second])
            job = example_job()  # workdir "pytorch": under the first root
            r = s.post("/v1/jobs", tok, job)
            assert r.status == 201, r
            assert r.json["type"] == "training" and r.json["spec"]["program"] == job["spec"]["program"], r.json
            jid = r.json["id"]
            absolute = with_spec(job, **{"program.workdir": os.path.join(second, "code"), "workers": {"min": 1, "max": 2},
                                         "register_model": {"output": "model.pt"}, "model_name": "fashion-cnn"})
            jid2 = s.submit(tok, absolute)
            tasks = wait_until("both tasks in gantry:jobs", lambda: (t := tasks_in_redis(s)) and jid in t and jid2 in t and t)
            for i, j in ((jid, job), (jid2, absolute)):
                assert tasks[i]["roots"] == [first, second], tasks[i]
                assert tasks[i]["spec"] == j["spec"] and tasks[i]["slots"] == (2 if i == jid else 1), tasks[i]
            assert s.job(tok, jid)["state"] == "queued"

            # republished from the outbox (Redis came back empty): the roots are still there, as they are now
            s.kill("redis", signal.SIGKILL)
            set_roots(s, tid, [second, first])
            jid3 = s.submit(tok, absolute)  # its workdir is absolute: the order of the roots does not matter
            s.start_redis()
            tasks = wait_until("the task republished", lambda: (t := tasks_in_redis(s)) and jid3 in t and t, 60)
            assert tasks[jid3]["roots"] == [second, first], tasks[jid3]
    finally:
        shutil.rmtree(base)


def test_openapi_describes_the_program_variant():
    with Stack(workers=0) as s:
        doc = s.get("/v1/openapi.json").json
        training = doc["components"]["schemas"]["TrainingSpec"]
        builtin, program = training["oneOf"]
        assert "model" in builtin["required"] and program["required"] == ["program"], training
        props = program["properties"]
        assert props["program"]["required"] == ["command", "workdir"]
        assert props["program"]["properties"]["command"]["items"]["type"] == "string"
        assert props["program"]["properties"]["env"]["additionalProperties"]["type"] == "string"
        assert props["grace_s"]["default"] == 30 and props["max_restarts"]["default"] == 3
        assert props["resources"]["properties"]["processes"]["default"] == 1024
        assert props["register_model"]["properties"]["format"]["const"] == "torchscript"
        assert "dataset" not in props and program["additionalProperties"] is False
