"""Operations documents checked by real tools against a running stack: the OpenAPI document by an
OpenAPI 3.1 validator from npm, and /metrics by Prometheus's promtool (naming and types)."""

import os
import subprocess
import urllib.request

from harness import ADMIN, ROOT, Stack, placement_job, wait_until


def test_openapi_document_is_valid_openapi_3_1():
    """the document passes an OpenAPI 3.1 validator; its job schema (compiled by Ajv) accepts the jobs
    the server accepts, alternatives included (elastic workers, policies, a search, a fedavg run)"""
    import json
    from test_federated import fed_job
    with Stack(workers=1) as s:
        tid, tok = s.tenant("ops-openapi")
        with open(os.path.join(ROOT, "deploy", "examples", "training.json")) as f:
            training = json.load(f)
        training["spec"].update({"workers": {"min": 1, "max": 2}, "schedule": {"type": "step", "step_size": 10},
                                 "policies": [{"name": "gns"}, {"name": "adaptive_batch", "min": 32, "scale_lr": "sqrt"}],
                                 "search": {"type": "random", "configurations": 2,
                                            "params": {"optimizer.lr": {"min": 1e-4, "max": 1e-2, "log": True},
                                                       "batch_size": [32, 64]}}})
        training["spec"]["workers"] = 2  # model selection needs a fixed number of workers
        program = _program_job()
        program["spec"]["program"]["workdir"] = _program_root(s, tid)
        jobs = [placement_job(), training, fed_job(3), fed_job(4, aggregation="fedavg", masking=False), program]
        for j in jobs:  # the server takes every one
            r = s.post("/v1/jobs", tok, j)
            assert r.status == 201, r
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_JOBS=json.dumps(jobs))
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "openapi.test.mjs")], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "paths valid" in r.stdout and "ok job schemas: 9 jobs valid" in r.stdout, r.stdout


def _program_job():
    """deploy/examples/pytorch/job.json with every member of the program variant given (docs/programs.md)"""
    import json
    with open(os.path.join(ROOT, "deploy", "examples", "pytorch", "job.json")) as f:
        job = json.load(f)
    job["spec"].update({"max_restarts": 2, "rendezvous_timeout_s": 60,
                        "resources": {"memory_mb": 2048, "processes": 512, "open_files": 1024},
                        "register_model": {"output": "model.pt", "format": "torchscript"}, "model_name": "fashion-cnn"})
    return job


def _program_root(s, tid):
    """gives the tenant a root holding a 'pytorch' directory; returns that directory"""
    import tempfile
    root = tempfile.mkdtemp(prefix="gantry-ops-root-", dir=s.dir)
    os.mkdir(os.path.join(root, "pytorch"))
    assert s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"roots": [root]}).status == 200
    return os.path.join(root, "pytorch")


def test_metrics_pass_promtool():
    with Stack(workers=1) as s:
        _, tok = s.tenant("ops")
        s.wait_state(tok, s.submit(tok, placement_job()), "succeeded", timeout=60)
        s.get("/v1/jobs", tok)  # some traffic in the histograms
        text = urllib.request.urlopen(f"http://127.0.0.1:{s.port}/metrics", timeout=10).read()
        assert b"gantry_http_requests_total" in text
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60)
        problems = (r.stdout + r.stderr).decode()
        assert r.returncode == 0 and not problems.strip(), problems


def test_online_backup_and_restore():
    """sqlite3's .backup (SQLite's online backup API) copies the database while the server runs and
    writes; the copy passes integrity_check, and a server started on the restored copy has every job
    the copy had"""
    import shutil
    import tempfile
    with Stack(workers=1) as s:
        _, tok = s.tenant("ops-backup")
        ids = [s.submit(tok, placement_job()) for _ in range(20)]
        for j in ids:
            s.wait_state(tok, j, "succeeded", timeout=60)
        db = os.path.join(s.dir, "state", "gantry.db")
        copy = os.path.join(tempfile.mkdtemp(prefix="gantry-backup-"), "gantry.db")
        more = [s.submit(tok, placement_job()) for _ in range(5)]  # writes go on during the backup
        r = subprocess.run(["sqlite3", db, f".backup '{copy}'"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        check = subprocess.run(["sqlite3", copy, "PRAGMA integrity_check;"], capture_output=True, text=True).stdout.strip()
        assert check == "ok", check
        n = int(subprocess.run(["sqlite3", copy, "SELECT count(*) FROM jobs;"], capture_output=True, text=True).stdout)
        assert n >= 20, n
        for j in more:
            s.wait_state(tok, j, "succeeded", timeout=60)
        # restore: stop the server, put the copy in place, start it again
        s.kill("server")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
        shutil.copy(copy, db)
        s.start_server()
        for j in ids:
            assert s.job(tok, j)["state"] == "succeeded", j


def test_grafana_dashboard_uses_real_metrics():
    """deploy/grafana/gantry.json: every metric its queries name is one /metrics exposes (by name and type)"""
    import json
    import re
    with open(os.path.join(ROOT, "deploy", "grafana", "gantry.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 9 and all(p["datasource"]["type"] == "prometheus" for p in dash["panels"])
    names = {re.sub(r"_(bucket|sum|count)$", "", m) for e in exprs for m in re.findall(r"gantry_[a-z_]+", e)}
    with open(os.path.join(ROOT, "server", "metrics.c")) as f:
        src = f.read()
    for extra in ("httpstats.c", "infer.c", "bus.c", "store.c", "api_ops.c"):
        path = os.path.join(ROOT, "server", extra)
        if os.path.exists(path):
            with open(path) as f:
                src += f.read()
    declared = set(re.findall(r"# TYPE (gantry_[a-z_]+) ", src))
    assert names <= declared, names - declared
    with Stack(workers=1) as s:
        text = s.get("/metrics", ADMIN).raw  # every series: the per-tenant ones need an admin or the scrape token
        exposed = set(re.findall(r"^# TYPE (gantry_[a-z_]+) ", text, re.M))
        # the inference families appear once an inference job runs; every other one is there now
        assert {n for n in names if "inference" not in n} <= exposed, names - exposed


def _mutations(schema, value, path, comps):
    """(path, new value or _UNKNOWN marker) pairs that break one rule of the schema at a time: a bound
    passed, a value not in an enumeration, a boolean given as text, an unknown member; plain objects
    and the first item of arrays are walked, and of alternatives (oneOf) the one the value takes (its type,
    its constant tags, its required members)"""
    if "$ref" in schema:
        schema = comps[schema["$ref"].rsplit("/", 1)[1]]
    if "oneOf" in schema:
        kinds = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}

        def fits(alt):
            if alt.get("type") != kinds.get(type(value)):
                return False
            tags = {k: p["const"] for k, p in alt.get("properties", {}).items() if "const" in p}
            return all(value.get(k) == c for k, c in tags.items()) and all(k in value for k in alt.get("required", []))
        return next((_mutations(a, value, path, comps) for a in schema["oneOf"] if fits(a)), [])
    t = schema.get("type")
    t = t[0] if isinstance(t, list) else t
    out = []
    if t == "object" and isinstance(value, dict):
        if schema.get("additionalProperties") is False:
            out.append((path + ".no_such_field", 1))
        for name, sub in schema.get("properties", {}).items():
            out += [(p, v) for p, v in _mutations(sub, value.get(name), f"{path}.{name}", comps)]
    elif t == "array" and isinstance(value, list) and value and "items" in schema:
        out += _mutations(schema["items"], value[0], f"{path}[0]", comps)
    elif t in ("integer", "number"):
        if "maximum" in schema:
            out.append((path, schema["maximum"] + 1))
        if "minimum" in schema:
            out.append((path, schema["minimum"] - 1))
        if "exclusiveMinimum" in schema:
            out.append((path, schema["exclusiveMinimum"]))
        if "exclusiveMaximum" in schema:
            out.append((path, schema["exclusiveMaximum"]))
    elif t == "string" and "enum" in schema:
        out.append((path, "no-such-value"))
    elif t == "boolean":
        out.append((path, "yes"))
    return out


def _set(doc, path, value):
    import re
    keys = [k for k in re.findall(r"[^.\[\]]+", path)]
    for k in keys[:-1]:
        doc = doc[int(k)] if isinstance(doc, list) else doc.setdefault(k, {})
    doc[int(keys[-1]) if isinstance(doc, list) else keys[-1]] = value


def test_job_schemas_are_what_the_server_enforces():
    """The document's job spec schemas come from the shapes the server validates with: every bound,
    enumeration and closed object the document states, broken one at a time on a valid job of each
    type (and of each variant: training's program too), is refused with 400 naming exactly that field
    (hundreds of submissions)."""
    import copy
    import json
    from test_federated import fed_job
    with Stack(workers=1) as s:
        _, tok = s.tenant("ops-schemas")
        doc = s.get("/v1/openapi.json").json
        comps = doc["components"]["schemas"]
        body = doc["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": "#/components/schemas/JobSubmission"}, body
        examples = {}
        for kind in ("training", "inference"):
            with open(os.path.join(ROOT, "deploy", "examples", kind + ".json")) as f:
                examples[kind] = json.load(f)
        jobs = {"placement": placement_job(), "federated": fed_job(3), "program": _program_job(), **examples}
        titles = {"placement": "PlacementSpec", "training": "TrainingSpec", "inference": "InferenceSpec",
                  "federated": "FederatedSpec", "program": "TrainingSpec"}
        checked = 0
        for kind, job in jobs.items():
            for path, bad in _mutations(comps[titles[kind]], job["spec"], "spec", comps):
                j = copy.deepcopy(job)
                _set(j, path, bad)
                r = wait_until(f"{path} answered", lambda: (r := s.post("/v1/jobs", tok, j)).status != 429 and r, timeout=30)
                assert r.status == 400, (kind, path, bad, r)
                assert r.json["error"]["field"] == path, (kind, path, bad, r.json)
                checked += 1
        assert checked >= 120, checked  # 110 when written, 132 with the program variant
