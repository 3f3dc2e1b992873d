"""The Python SDK (python/gantry, docs/sdk.md) against the real stack: every call of gantry.Client, the
API's errors as typed exceptions (401, 404, 400 naming the field, 409, 422), a wait that times out, a
submission retried through a connection that drops its answer (one job, by its Idempotency-Key), logs
followed until the job ends, outputs downloaded with their SHA-256 checked (a changed file refused),
models uploaded (a wrong SHA-256 refused by the server), aliases, predictions through the OIP binary
extension and as JSON equal to torch's own outputs (in Debian's /usr/bin/python3 with numpy and torch,
and with plain lists in this process, which has neither), placement; the in-job helpers (gantry.job)
alone and inside real sandboxed ranks, whose metrics lines of every rank reach the API
(GET /v1/jobs/{id}/metrics?rank=R); and the README's ```python block, run as written."""

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

from harness import ROOT, Stack, TINY_GRAPH, placement_job, timeout, wait_until
from test_program_jobs import job_dir, program_job, program_root
from test_torchscript import MLP_META, models, torch_ref

sys.path.insert(0, os.path.join(ROOT, "python"))
import gantry  # noqa: E402
from gantry import job as gjob  # noqa: E402

TORCH_PY = "/usr/bin/python3"
PKG = os.path.join(ROOT, "python", "gantry")


def client(s, token, **kw):
    return gantry.Client(f"http://127.0.0.1:{s.port}", token, **kw)


def raises(exc, fn, *a, **kw):
    try:
        fn(*a, **kw)
    except exc as e:
        return e
    raise AssertionError(f"{fn.__name__} did not raise {exc.__name__}")


class DropFirstAnswer:
    """a loopback TCP proxy to the server that forwards the first connection's request but closes it
    without its answer (a connection lost after the server acted); later connections pass through"""

    def __init__(self, port):
        self.target = port
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _pump(self, a, b):
        try:
            while (d := a.recv(65536)):
                b.sendall(d)
        except OSError:
            pass
        finally:
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _serve(self):
        while True:
            c, _ = self.srv.accept()
            self.connections += 1
            up = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pump, args=(c, up), daemon=True).start()
            if self.connections == 1:
                up.recv(65536)  # the server's answer: read and dropped
                c.close()
                up.close()
            else:
                threading.Thread(target=self._pump, args=(up, c), daemon=True).start()


def test_jobs_events_errors_and_retries():
    with Stack(workers=1) as s:
        tid, tok = s.tenant("sdk")
        _, viewer = s.tenant("sdk-viewer", role="viewer")
        g = client(s, tok)
        assert g.whoami()["tenant"]["id"] == tid and g.whoami()["role"] == "member"

        # 401 / 403 / 404 / 400 naming the field / 409 / 422, each with the API's code and message
        e = raises(gantry.Unauthorized, client(s, "gty_not-a-token").jobs)
        assert e.status == 401 and e.code == "unauthorized" and e.message, e
        e = raises(gantry.Forbidden, client(s, viewer).submit, placement_job())
        assert e.status == 403 and e.code == "forbidden", e
        e = raises(gantry.NotFound, g.job, "j_doesnotexist")
        assert e.status == 404 and e.code == "not_found", e
        bad = placement_job("bad")
        bad["spec"]["graph"]["ops"][1]["compute_us"] = -5
        e = raises(gantry.BadRequest, g.submit, bad)
        assert e.status == 400 and e.field == "spec.graph.ops[1].compute_us" and e.code == "invalid_field", e
        e = raises(gantry.NotFound, g.metrics, "j_x")
        assert e.field == "id", e

        # submit a dict and a file; idempotency: the same key is the same job, another body with it a 422
        first = g.submit(placement_job("one"), idempotency_key="sdk-key-1")
        assert g.submit(placement_job("one"), idempotency_key="sdk-key-1")["id"] == first["id"]
        e = raises(gantry.BadRequest, g.submit, placement_job("other"), idempotency_key="sdk-key-1")
        assert e.status == 422 and e.field == "Idempotency-Key", e
        path = os.path.join(s.dir, "job.json")
        with open(path, "w") as f:
            json.dump(placement_job("from-file"), f)
        second = g.submit(path)
        done = g.wait(second["id"], timeout=60)
        assert done["state"] == "succeeded" and done["name"] == "from-file" and done["result"]["best"], done
        assert g.wait(first["id"], timeout=60)["state"] == "succeeded"

        # events: every one once, in order, ending with the final state
        evs = list(g.events(second["id"]))
        states = [e["state"] for e in evs if e["state"]]
        assert states[0] == "queued" and states[-1] == "succeeded", states
        assert len({e["id"] for e in evs}) == len(evs)

        # a gang of 2 on one worker waits: wait() times out with the job as it was, follow() too; cancel, then 409
        gang = g.submit({"type": "training", "name": "gang", "spec": dict(
            json.load(open(os.path.join(ROOT, "deploy", "examples", "training.json")))["spec"], workers=2)})
        e = raises(gantry.WaitTimeout, g.wait, gang["id"], timeout=1.0)
        assert isinstance(e, TimeoutError) and e.job["id"] == gang["id"] and e.job["state"] in ("queued", "scheduled"), e.job
        raises(gantry.WaitTimeout, lambda: list(g.events(gang["id"], timeout=1.0)))
        assert g.cancel(gang["id"])["state"] == "cancelled"
        e = raises(gantry.Conflict, g.cancel, gang["id"])
        assert e.status == 409 and e.code == "conflict", e
        assert [e["state"] for e in g.events(gang["id"]) if e["state"]][-1] == "cancelled"

        # lists and their filters, across pages
        all_jobs = g.jobs()
        assert {j["id"] for j in all_jobs} == {first["id"], second["id"], gang["id"]}, all_jobs
        assert [j["id"] for j in g.jobs(state="cancelled")] == [gang["id"]]
        assert {j["id"] for j in g.jobs(type="placement", page_size=1)} == {first["id"], second["id"]}
        assert len(g.jobs(limit=2, page_size=1)) == 2

        # placement: the graph in, the plan out
        plan = g.place(TINY_GRAPH, algorithms=["m-topo", "m-etf"], name="sdk-plan")
        assert plan["best"] in ("m-topo", "m-etf") and set(plan["plan"]["placement"]) == {"a", "b", "c"}, plan
        assert plan["metrics"]["makespan_us"] > 0, plan
        assert g.workers()[0]["id"] == "w_test0" and "workers" in g.cluster()

        # a submission whose answer is lost is sent again with its Idempotency-Key: one job, not two
        proxy = DropFirstAnswer(s.port)
        p = gantry.Client(f"http://127.0.0.1:{proxy.port}", tok, retries=2)
        again = p.submit(placement_job("lost-answer"))
        assert proxy.connections == 2, proxy.connections
        assert [j["id"] for j in g.jobs() if j["name"] == "lost-answer"] == [again["id"]]
        # a server that is not there: ConnectionFailed after the retries
        e = raises(gantry.ConnectionFailed, gantry.Client(f"http://127.0.0.1:{free()}", tok, retries=1).jobs)
        assert "127.0.0.1" in str(e)


def free():
    with socket.socket() as x:
        x.bind(("127.0.0.1", 0))
        return x.getsockname()[1]


# a 2-rank program that uses gantry.job (the package copied beside it, as the README does for the
# example): every rank reports steps; rank 0 prints lines while the test follows its logs, writes an
# output; a rank told to stop (SIGTERM) checkpoints and exits 0 in its grace period
HELPERS = """import json, os, sys, time
from gantry import job
mode = sys.argv[1]
r = job.rank()
if mode == "steps":
    for step in range(1, 4):
        job.report(step=step, loss=1.0 / step + r, epoch=step, epochs=3)
        print(f"rank {r} step {step}", flush=True)
        time.sleep(0.3)
    if r == 0:
        with open(os.path.join(job.output_dir(), "result.bin"), "wb") as f:
            f.write(bytes(range(256)) * 64)
else:
    step = 0
    while not job.should_stop():
        step += 1
        time.sleep(0.05)
        if step == 1:
            print("looping", flush=True)
    with open(os.path.join(job.checkpoint_dir(), "stopped-at"), "w") as f:
        f.write(str(step))
    print("SIGTERM: checkpointed", flush=True)
"""


def test_program_helpers_every_rank_logs_and_outputs():
    with Stack(workers=2) as s:
        tid, tok = s.tenant("sdk-prog")
        root = program_root(s, tid, {"helpers.py": HELPERS})
        shutil.copytree(PKG, os.path.join(root, "code", "gantry"), ignore=shutil.ignore_patterns("__pycache__"))
        for d, _, fs in os.walk(root):
            os.chmod(d, 0o755)
            for f in fs:
                os.chmod(os.path.join(d, f), 0o644)
        g = client(s, tok)
        j = g.submit(program_job([TORCH_PY, "helpers.py", "steps"], name="steps", workers=2))
        # follow the logs while it runs, until it ends
        stream = list(g.follow_logs(j["id"]))
        lines = [v for k, v in stream if k == "log"]
        assert "[rank 0] rank 0 step 3" in lines and "[rank 1] rank 1 step 3" in lines, lines
        ends = [v for k, v in stream if k != "log"]
        assert ends[-1] == {"state": "succeeded"} and {e["rank"] for e in ends[:-1]} == {0, 1}, ends
        tail = list(g.logs(j["id"], follow=True))  # after the end: the tail, then done (either rank may be last)
        assert "[rank 1] rank 1 step 3" in tail and tail[-1] in ("[rank 0] rank 0 step 3", "[rank 1] rank 1 step 3"), tail
        done = g.wait(j["id"], timeout=30)
        assert done["state"] == "succeeded" and done["progress"] == 1.0, done
        assert g.logs(j["id"], rank=1, tail=1).strip() == "rank 1 step 3"

        # every rank's lines: rank 0 the job's curves, rank 1 on request
        assert [p["step"] for p in g.metrics(j["id"])] == [1, 2, 3]
        assert all("rank" not in p for p in g.metrics(j["id"]))
        ones = g.metrics(j["id"], rank=1)
        assert [(p["step"], p["loss"], p["rank"]) for p in ones] == [(1, 2.0, 1), (2, 1.5, 1), (3, 1.0 + 1 / 3, 1)], ones
        assert g.metrics_ranks(j["id"]) == [0, 1] and g.metrics(j["id"], rank=5) == []
        assert done["result"]["metrics"]["loss"] == 1.0 / 3, done["result"]  # rank 0's only
        e = raises(gantry.BadRequest, g.metrics, j["id"], rank="x")
        assert e.field == "rank", e

        # outputs: listed, downloaded with their SHA-256 checked; a file changed on the worker is refused
        files = g.outputs(j["id"])
        assert [f["path"] for f in files] == ["result.bin"], files
        out = tempfile.mkdtemp(prefix="gantry-sdk-")
        got = g.download(j["id"], "result.bin", out)
        with open(got, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == files[0]["sha256"]
        on_worker = os.path.join(job_dir(s, j["id"]), "output", "result.bin")
        with open(on_worker, "r+b") as f:
            f.write(b"\xff")  # same size, other bytes
        raises(gantry.IntegrityError, g.download, j["id"], "result.bin", os.path.join(out, "changed.bin"))
        assert not os.path.exists(os.path.join(out, "changed.bin")) and not os.path.exists(os.path.join(out, "changed.bin.part"))
        raises(gantry.NotFound, g.download, j["id"], "../etc/passwd", out)

        # should_stop(): a cancelled rank checkpoints in its grace period and exits 0
        k = g.submit(program_job([TORCH_PY, "helpers.py", "loop"], name="loop", grace_s=20))
        wait_until("the loop runs", lambda: "looping" in g.logs(k["id"]), 60)
        g.cancel(k["id"])
        ends = [v for kind, v in g.follow_logs(k["id"]) if kind == "end"]
        assert ends and "exited with code 0" in ends[-1]["reason"], ends
        assert os.path.exists(os.path.join(job_dir(s, k["id"]), "checkpoint", "stopped-at"))
        assert "SIGTERM: checkpointed" in g.logs(k["id"])


def test_job_helpers_alone():
    """gantry.job in a process of its own (no stack): the environment, report's lines, should_stop"""
    d = tempfile.mkdtemp(prefix="gantry-sdk-job-")
    script = """import json, os, signal, sys
from gantry import job
assert job.in_job() and job.rank() == 1 and job.world_size() == 2 and job.job_id() == "j_test" and job.generation() == 2
assert job.checkpoint_dir() == os.environ["GANTRY_CHECKPOINT_DIR"] and os.path.isdir(job.checkpoint_dir())
class T:
    def item(self): return 0.25
print(json.dumps(job.report(step=3, loss=T(), acc=float("nan"), note="x")))
job.report(step=4, loss=0.125)
try:
    job.report(step=5, rank=3)
    sys.exit("rank accepted")
except ValueError:
    pass
called = []
assert not job.should_stop()
os.kill(os.getpid(), signal.SIGTERM)   # before any handler of its own: gantry's, installed at import
assert job.should_stop()
print("stopped")
"""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), GANTRY_JOB_ID="j_test", RANK="1", WORLD_SIZE="2",
               GANTRY_GENERATION="2", GANTRY_METRICS=os.path.join(d, "metrics.jsonl"),
               GANTRY_CHECKPOINT_DIR=os.path.join(d, "ckpt"), GANTRY_OUTPUT_DIR=os.path.join(d, "out"))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[0]) == {"step": 3, "loss": 0.25, "note": "x"}, r.stdout
    assert r.stdout.splitlines()[1] == "stopped"
    with open(os.path.join(d, "metrics.jsonl")) as f:
        assert [json.loads(x) for x in f] == [{"step": 3, "loss": 0.25, "note": "x"}, {"step": 4, "loss": 0.125}]

    # outside a job: defaults, nothing written, the handler at the first should_stop
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANTRY_") and k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = os.path.join(ROOT, "python")
    r = subprocess.run([sys.executable, "-c", "from gantry import job\n"
                        "assert not job.in_job() and job.rank() == 0 and job.world_size() == 1\n"
                        "assert job.report(step=1, x=2) == {'step': 1, 'x': 2}\n"
                        "import os, signal; assert not job.should_stop(); os.kill(os.getpid(), signal.SIGTERM)\n"
                        "assert job.should_stop(); print('ok')"], env=env, cwd=d, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr

    # the CLI's config: GANTRY_URL/GANTRY_TOKEN over the file; a file others can read is refused
    cfg = os.path.join(d, "config")
    with open(cfg, "w") as f:
        json.dump({"url": "http://127.0.0.1:1/", "token": "gty_file"}, f)
    os.chmod(cfg, 0o600)
    old = {k: os.environ.pop(k, None) for k in ("GANTRY_URL", "GANTRY_TOKEN", "GANTRY_CONFIG")}
    try:
        os.environ["GANTRY_CONFIG"] = cfg
        c = gantry.Client()
        assert (c.url, c.token) == ("http://127.0.0.1:1", "gty_file")
        os.environ["GANTRY_TOKEN"] = "gty_env"
        assert gantry.Client().token == "gty_env"
        os.chmod(cfg, 0o644)
        e = raises(gantry.GantryError, gantry.Client)
        assert "readable by others" in str(e)
    finally:
        for k, v in old.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


# run in Debian's /usr/bin/python3 (numpy, torch): torch's own output of the uploaded file against
# predict() with a numpy array (binary extension), a torch tensor (binary), and JSON (binary=False)
PREDICT_TORCH = """import json, sys
import numpy as np, torch
import gantry
url, tok, model_path, alias = sys.argv[1:5]
g = gantry.Client(url, tok)
torch.manual_seed(1)
x = torch.randn(5, 4)
ref = torch.jit.load(model_path)(x).detach().numpy()
a = g.predict(alias, x.numpy())["logits"]
b = g.predict(alias, {"x": x})["logits"]
c = g.predict(alias, x.numpy(), binary=False)["logits"]
raw = g.predict(alias, x.numpy(), raw=True)
print(json.dumps({"shapes": [list(a.shape), list(b.shape), list(c.shape)], "dtype": str(a.dtype),
                  "diff": [float(np.abs(v - ref).max()) for v in (a, b, c)], "version": raw["model_version"]}))
"""


@timeout(400)
def test_models_aliases_and_predict():
    d = models()
    with Stack(workers=1) as s:
        _, tok = s.tenant("sdk-models")
        g = client(s, tok)
        v1 = g.upload_model("mlp", os.path.join(d, "mlp_v1.pt"), metadata=MLP_META)
        with open(os.path.join(d, "mlp_v1.pt"), "rb") as f:
            data = f.read()
        assert v1["version"] == 1 and v1["sha256"] == hashlib.sha256(data).hexdigest(), v1
        meta_file = os.path.join(s.dir, "meta.json")
        with open(meta_file, "w") as f:
            json.dump({"inputs": MLP_META["inputs"]}, f)
        v2 = g.upload_model("mlp", os.path.join(d, "mlp_v2.pt"), metadata=meta_file, outputs=MLP_META["outputs"],
                            description="second")
        assert v2["version"] == 2 and v2["description"] == "second" and v2["signature"]["outputs"] == MLP_META["outputs"], v2

        # a file that is not what its SHA-256 says (changed on the way) is refused, nothing stored
        e = raises(gantry.BadRequest, g._upload, "mlp", data, MLP_META, "0" * 64)
        assert e.field == "sha256" and "SHA-256" in e.message, e
        e = raises(gantry.BadRequest, g._upload, "mlp", data, MLP_META, "not-hex")
        assert e.field == "sha256", e
        e = raises(gantry.BadRequest, g.upload_model, "mlp", os.path.join(d, "mlp_v1.pt"), inputs=[{"name": "x"}])
        assert e.field == "metadata.inputs[0].datatype", e
        assert [v["version"] for v in g.versions("mlp")] == [2, 1]
        assert [m["name"] for m in g.models()] == ["mlp"]

        # aliases
        g.set_alias("mlp", "prod", 1)
        assert g.aliases("mlp") == {"prod": 1}
        g.set_alias("mlp", "staging", 2)
        g.delete_alias("mlp", "staging")
        assert g.aliases("mlp") == {"prod": 1}
        raises(gantry.NotFound, g.model, "nope")

        # serve mlp@prod; predictions equal torch's
        j = g.submit({"type": "inference", "name": "serve", "spec": {"model": "mlp@prod", "replicas": 1,
                                                                     "slo": {"latency_ms": 500, "percentile": 99}}})
        raises(gantry.WaitTimeout, g.wait_ready, "mlp", timeout=0.01) if not g.ready("mlp") else None
        g.wait_ready("mlp", timeout=60)
        assert g.model_metadata("mlp")["platform"] == "pytorch_torchscript"
        r = subprocess.run([TORCH_PY, "-c", PREDICT_TORCH, g.url, tok, os.path.join(d, "mlp_v1.pt"), "mlp"],
                           env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")), capture_output=True, text=True,
                           timeout=180)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        assert got["shapes"] == [[5, 3]] * 3 and got["dtype"] == "float32" and got["version"] == "1", got
        assert max(got["diff"]) <= 1e-5, got
        # this process has no numpy: lists in, nested lists out, as JSON and as binary (struct-packed)
        x = [[0.5, -1.0, 2.0, 0.25], [1.0, 1.0, -3.0, 0.0]]
        ref = torch_ref(os.path.join(d, "mlp_v1.pt"), [{"name": "x", "datatype": "FP32", "shape": [2, 4],
                                                         "data": sum(x, [])}])[0]
        for binary in (False, True):
            out = g.predict("mlp", x, binary=binary)["logits"]
            assert len(out) == 2 and len(out[0]) == 3, out
            assert max(abs(a - b) for a, b in zip(sum(out, []), ref["data"])) <= 1e-5, (out, ref)
        e = raises(gantry.BadRequest, g.predict, "mlp", [[1.0, 2.0]])
        assert e.field and e.field.startswith("inputs"), e
        raises(gantry.NotFound, g.predict, "nope", [[1.0]])
        g.cancel(j["id"])


def readme_python_block():
    """the README's ```python block of the quick start (the one after 'Using it from Python')"""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text[text.index("## Using it from Python"):]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "no ```python block after 'Using it from Python'"
    return m.group(1)


def test_readme_python_block_runs_as_written():
    code = readme_python_block()
    with Stack(workers=1) as s:
        _, tok = s.tenant("readme-py")
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_TOKEN=tok,
                   PYTHONPATH=os.path.join(ROOT, "python"))
        r = subprocess.run([TORCH_PY, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, (r.stdout, r.stderr)
        out = r.stdout
        assert re.search(r"^succeeded best: m-\S+ makespan: [0-9.e+]+ us$", out, re.M), out
        assert re.search(r"^refused: invalid_field spec\.graph\S* - ", out, re.M), out
        assert "queued" in out and "token of readme-py as member" in out, out
        jobs = s.get("/v1/jobs", tok).json["jobs"]
        assert jobs and all(j["state"] == "succeeded" for j in jobs), jobs


def test_pip_installs_the_package():
    """pip builds and installs python/ offline with Debian's setuptools and wheel (--no-build-isolation),
    into a directory of its own (never the system's); the installed package imports from elsewhere"""
    d = tempfile.mkdtemp(prefix="gantry-sdk-pip-")
    src = os.path.join(d, "src")
    shutil.copytree(os.path.join(ROOT, "python"), src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    r = subprocess.run([TORCH_PY, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-index",
                        "--target", os.path.join(d, "site"), src], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([TORCH_PY, "-c", "import gantry, gantry.job; print(gantry.__file__, gantry.__version__)"], cwd=d,
                       env=dict(os.environ, PYTHONPATH=os.path.join(d, "site")), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith(os.path.join(d, "site", "gantry")), (r.stdout, r.stderr)
