"""Federated jobs whose sites run the team's own program (spec.program; docs/federated.md, "Your own PyTorch
model") through the real stack: three CPU workers, real bubblewrap sandboxes, real python3 programs using
gantry.federated (python/gantry/federated.py), the exchange's files in GANTRY_FED_DIR, the updates aggregated by
masked sums through Redis.  The aggregation's arithmetic is checked exactly with a numpy program whose updates
are known (FedAvg and SecureD-FL give each round's weighted average of the sites' updates); a malformed update
fails the job naming the site and the file; bad specs are refused naming the field; the PyTorch example
(deploy/examples/pytorch-federated) runs a short job and reports its global model's accuracy."""

import json
import os
import shutil
import tempfile

from harness import ADMIN, ROOT, Stack, alone, timeout, wait_until
from test_federated import kill_a_site_after_round
from test_program_fence import PROBE_FN
from test_program_jobs import marker_pids

# a site program with a known update: the global model g it gets in round k becomes
# g + (site + 1) * k / 10 + the element's index / 100, trained on 10 * (site + 1) samples; the initial model is
# site + 1 everywhere (site 0's, 1.0, is every site's start).  Each site writes what it got and gave to its
# output directory, with the rounds it was handed (numbers, resumed_from: not 1.. after a restart).  ROUND_SLEEP: seconds
# each round takes besides (a round long enough to kill a worker in).
NUMPY_SITE = """import json, os, sys, time
import numpy as np
from gantry import federated
site = federated.site()
model = {"w": np.full((2, 3), site + 1.0, dtype=np.float32), "b": np.full(4, site + 1.0, dtype=np.float32)}
log = {"site": site, "sites": federated.sites(), "name": federated.site_name(), "got": [], "gave": [], "numbers": [],
       "resumed_from": [],
       "env": {k: v for k, v in os.environ.items() if k.startswith("GANTRY_FED") or k in ("RANK", "WORLD_SIZE", "COLOR")}}
bad = os.environ.get("BAD_SITE") == str(site)
for rnd in federated.rounds(model):
    log["got"].append({k: v.tolist() for k, v in model.items()})
    log["numbers"].append(rnd.number), log["resumed_from"].append(rnd.resumed_from)
    time.sleep(float(os.environ.get("ROUND_SLEEP", "0")))
    for k, v in model.items():
        v += np.float32((site + 1) * rnd.number / 10) + np.arange(v.size, dtype=np.float32).reshape(v.shape) / 100
    log["gave"].append({k: v.tolist() for k, v in model.items()})
    if bad and rnd.number == 2:  # a tensor of the wrong shape
        federated.write(os.path.join(os.environ["GANTRY_FED_DIR"], "round_2.out"),
                        {"w": np.zeros((3, 2), np.float32), "b": model["b"]}, {"num_samples": "10"})
        rnd.submitted = True
    else:
        rnd.submit(model, num_samples=10 * (site + 1))
log["final"] = {k: v.tolist() for k, v in model.items()}
with open(os.path.join(os.environ["GANTRY_OUTPUT_DIR"], f"site-{site}.json"), "w") as f:
    json.dump(log, f)
print(f"site {site} done", flush=True)
"""


def site_root(s, tid, scripts, extra_dirs=()):
    """a tenant root (readable by the sandboxes' uids) with workdir 'code': the scripts and gantry's package;
    extra_dirs: (source, name) folders copied beside 'code'"""
    root = tempfile.mkdtemp(prefix="gantry-fedprog-")
    code = os.path.join(root, "code")
    os.mkdir(code)
    for name, text in scripts.items():
        with open(os.path.join(code, name), "w") as f:
            f.write(text)
    shutil.copytree(os.path.join(ROOT, "python", "gantry"), os.path.join(code, "gantry"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    for src, name in extra_dirs:
        shutil.copytree(src, os.path.join(root, name), ignore=shutil.ignore_patterns("__pycache__"))
    for d, _, files in os.walk(root):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    assert s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"roots": [root]}).status == 200
    return root


def fed_program_job(rounds=3, aggregation="fedavg", env=None, name="fedprog", **extra):
    spec = {"program": {"command": ["/usr/bin/python3", "site.py"], "workdir": "code", "env": env or {}},
            "rounds": rounds, "aggregation": aggregation, "grace_s": 3, "exchange_timeout_s": 60,
            "sites": [{"name": "a", "env": {"COLOR": "red"}}, {"name": "b"}, {"name": "c"}]}
    spec.update(extra)
    return {"type": "federated", "name": name, "spec": spec}


def expected_rounds(rounds):
    """every round's global model (the one the sites get), then the final one, as {"w", "b"} flat lists"""
    shapes = {"w": 6, "b": 4}
    g = {k: [1.0] * n for k, n in shapes.items()}  # site 0's initial model
    out = [g]
    for k in range(1, rounds + 1):
        n = [10 * (i + 1) for i in range(3)]
        g = {key: [sum(n[i] * (g[key][j] + (i + 1) * k / 10 + j / 100) for i in range(3)) / sum(n) for j in range(size)]
             for key, size in shapes.items()}
        out.append(g)
    return out


def flat(m):
    return {k: [x for row in v for x in (row if isinstance(row, list) else [row])] for k, v in m.items()}


def close(a, b, tol):
    return all(abs(x - y) <= tol * max(1.0, abs(y)) for k in b for x, y in zip(a[k], b[k]))


def job_output(s, jid):
    return os.path.join(s.dir, "var", "worker", "jobs", jid, "output")


def test_aggregation_is_the_weighted_average_of_the_updates():
    """FedAvg's and SecureD-FL's global model after each round is the sample-weighted average of what the sites
    submitted (FP32 files, fixed-point sums: within 1e-5); every site starts from site 0's initial model and
    ends with the final one; the program sees its site's variables; site 0 writes the global model"""
    with Stack(workers=3) as s:
        tid, tok = s.tenant("fedprog-math")
        site_root(s, tid, {"site.py": NUMPY_SITE})
        want = expected_rounds(3)
        for agg in ("fedavg", "securedfl"):
            jid = s.submit(tok, fed_program_job(aggregation=agg, name=f"math-{agg}"))
            done = s.wait_state(tok, jid, "succeeded", timeout=120)
            res = done["result"]
            assert res["metrics"]["sites"] == 3 and res["metrics"]["rounds"] == 3, res
            assert res["global_model"]["parameters"] == 10 and res["global_model"]["tensors"] == 2, res
            logs = {}
            for i in range(3):
                with open(os.path.join(job_output(s, jid), f"site-{i}.json")) as f:
                    logs[i] = json.load(f)
            for i, log in logs.items():
                assert log["sites"] == 3 and log["name"] == "abc"[i], log
                assert log["env"]["RANK"] == str(i) and log["env"]["WORLD_SIZE"] == "3", log["env"]
                assert log["env"]["GANTRY_FED_ROUNDS"] == "3" and log["env"]["GANTRY_FED_DIR"] == "/gantry/run", log
                assert log["env"].get("COLOR") == ("red" if i == 0 else None), log["env"]
                got = [flat(m) for m in log["got"]] + [flat(log["final"])]
                for k, (g, w) in enumerate(zip(got, want)):
                    assert close(g, w, 1e-5), (agg, i, k, g, w)
            # the global model site 0's worker wrote: the final one
            from_file = read_safetensors(res["global_model"]["path"])
            assert close(from_file, want[-1], 1e-5), (from_file, want[-1])
            points = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
            rounds = [p for p in points if "residual" in p]
            assert [p["round"] for p in rounds] == [1, 2, 3] and all(p["samples"] == 60 for p in rounds), rounds
            assert all(p["residual"] < 1e-6 for p in rounds), rounds


def test_a_lost_site_resumes_with_the_checkpointed_model():
    """A site's worker SIGKILLed after round 2 (its program with it): the job is requeued, the sites agree on the newest
    round a site checkpointed, and every site's program (started again; one on a new worker that holds no
    checkpoint) gets round_K+1.in with that round's global model, exactly: the rounds after it are the arithmetic of an
    uninterrupted run, down to the final model (docs/federated.md, "Restarts")."""
    rounds = 5
    with Stack(workers=3) as s:
        tid, tok = s.tenant("fedprog-resume")
        site_root(s, tid, {"site.py": NUMPY_SITE})
        want = expected_rounds(rounds)
        jid = s.submit(tok, fed_program_job(rounds=rounds, aggregation="securedfl", env={"ROUND_SLEEP": "0.6"},
                                            exchange_timeout_s=20, name="resume"))
        seen = kill_a_site_after_round(s, tok, jid, 2)
        done = s.wait_state(tok, jid, "succeeded", timeout=120)
        resumed = [e["reason"] for e in s.events(tok, jid) if "resumed at round" in (e.get("reason") or "")]
        assert len(resumed) == 1, s.events(tok, jid)
        k = int(resumed[0].split("checkpoint of round ")[1].split(" ")[0])
        assert seen <= k < rounds, (seen, resumed)
        for i in range(3):  # the programs of the last generation
            with open(os.path.join(job_output(s, jid), f"site-{i}.json")) as f:
                log = json.load(f)
            assert log["numbers"] == list(range(k + 1, rounds + 1)), log["numbers"]
            assert log["resumed_from"] == [k] + [0] * (rounds - k - 1), log["resumed_from"]
            got = [flat(m) for m in log["got"]] + [flat(log["final"])]
            for j, (g, w) in enumerate(zip(got, want[k:])):
                assert close(g, w, 1e-5), (i, k + j, g, w)
        assert close(read_safetensors(done["result"]["global_model"]["path"]), want[-1], 1e-5)
        got = [p["round"] for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"] if "residual" in p]
        assert got == sorted(set(got)) and got[-1] == rounds, got  # never back to round 1


def read_safetensors(path):
    import struct
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for k, e in hdr.items():
        if k == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[k] = list(struct.unpack(f"<{(end - b) // 4}f", raw[8 + n + b:8 + n + end]))
    return out


def test_malformed_update_fails_the_job_naming_the_site_and_file():
    """site b's program writes a tensor of another shape in round 2: the job fails, saying which site, which file
    and what is wrong"""
    with Stack(workers=3) as s:
        tid, tok = s.tenant("fedprog-bad")
        site_root(s, tid, {"site.py": NUMPY_SITE})
        jid = s.submit(tok, fed_program_job(env={"BAD_SITE": "1"}))
        job = s.wait_state(tok, jid, "failed", timeout=120)
        assert "site b (1): round_2.out: tensor 'w' has shape [3, 2], the model's is [2, 3]" in job["error"], job


def test_program_that_ends_early_fails_naming_the_site():
    """a program that exits before handing back its update: the job fails with its site, the file it owed and its
    last lines"""
    crash = "import sys\nfrom gantry import federated\nprint('bye', flush=True)\nsys.exit(3)\n"
    with Stack(workers=3) as s:
        tid, tok = s.tenant("fedprog-crash")
        site_root(s, tid, {"site.py": crash})
        jid = s.submit(tok, fed_program_job())
        job = s.wait_state(tok, jid, "failed", timeout=120)
        assert "its program exited with code 3 before writing round_0.out" in job["error"] and "bye" in job["error"], job


# a hostile site program: what it can reach and read, printed, then it exits without a model
HOSTILE_SITE = """import os, socket, sys
""" + PROBE_FN + """def read(path):
    try:
        with open(path, "rb") as f:
            return "READ %d bytes" % len(f.read())
    except OSError as e:
        return "DENIED-" + str(e.errno)
site = os.environ["RANK"]
for arg in sys.argv[1:]:
    kind, name, what = arg.split("=", 2)
    if kind == "port":
        host, port = what.rsplit(":", 1)
        print("SITE", site, "PROBE", name, probe(host, port), flush=True)
    else:
        print("SITE", site, "FILE", name, read(what), flush=True)
print("SITE", site, "FEDDIR", ",".join(sorted(os.listdir(os.environ["GANTRY_FED_DIR"]))), flush=True)
print("SITE", site, "ENVIRON1", read("/proc/1/environ"), flush=True)
print("SITE", site, "KEYS", ",".join(sorted(k for k in os.environ if "SECRET" in k or "TOKEN" in k or "PASSWORD" in k)), flush=True)
sys.exit(3)
"""


def test_a_hostile_site_program_reaches_nothing_but_its_files():
    """each site's program is as fenced as a program rank (docs/programs.md, "The sandbox"): it cannot
    connect to Redis, the API or the workers' ports, cannot read another tenant's root, the job's global-model
    checkpoints on the worker, the federation's secret or the workers' state; its exchange directory holds only
    the round files; no secret is in its environment; the job fails naming the site"""
    from test_program_fence import listening_ports
    from test_program_jobs import log_entries
    with Stack(workers=3) as s:
        tid, tok = s.tenant("fed-hostile")
        other_tid, _ = s.tenant("fed-other")
        other = site_root(s, other_tid, {"secret.txt": "the other tenant's data"})
        site_root(s, tid, {"site.py": HOSTILE_SITE})
        state = os.path.join(s.dir, "var", "worker")
        targets = [f"port=redis=127.0.0.1:{s.rport}", f"port=api=127.0.0.1:{s.port}",
                   "file=other=" + os.path.join(other, "code", "secret.txt"), f"file=state={state}",
                   f"file=checkpoints={os.path.join(state, 'jobs')}"]
        for w in ("worker0", "worker1", "worker2"):
            targets += [f"port={w}-{p}=127.0.0.1:{p}" for p in listening_ports(s.procs[w].pid)]
        secrets = [p for p in (os.path.join(s.dir, "fed-secret"), *[os.path.join(d, f) for d, _, fs in os.walk(s.dir)
                                                                    for f in fs if "secret" in f or "password" in f])]
        targets += [f"file=secret{i}={p}" for i, p in enumerate(secrets[:6])]
        job = fed_program_job(rounds=2, aggregation="securedfl")
        job["spec"]["program"]["command"] += targets
        jid = s.submit(tok, job)
        failed = s.wait_state(tok, jid, "failed", timeout=90)
        assert "its program exited with code 3 before writing round_0.out" in failed["error"], failed
        lines = [t for r, g, f, t in log_entries(s, jid) if f == "t"]
        sites = {ln.split()[1] for ln in lines if ln.startswith("SITE ")}
        assert sites, lines
        for ln in (ln for ln in lines if ln.startswith("SITE ")):
            parts = ln.split()
            if parts[2] == "PROBE":
                assert parts[4] in ("TIMEOUT", "REFUSED"), ln
            elif parts[2] == "FILE":
                assert parts[4].startswith("DENIED"), ln
            elif parts[2] == "FEDDIR":
                assert all(f.startswith("round_") for f in (parts[3].split(",") if len(parts) > 3 else [])), ln
            elif parts[2] == "ENVIRON1":
                assert parts[3].startswith("DENIED"), ln
            elif parts[2] == "KEYS":
                assert len(parts) == 3, ln  # no variable named like a secret
        assert {ln.split()[3] for ln in lines if ln.startswith("SITE ") and ln.split()[2] == "PROBE"} >= {"redis", "api"}, lines
        wait_until("no site program left", lambda: not marker_pids("site.py"), 30)


def test_spec_errors_name_the_field():
    with Stack(workers=0) as s:
        tid, tok = s.tenant("fedprog-spec")
        site_root(s, tid, {"site.py": NUMPY_SITE})
        cases = [
            ({"model": {"input": [1], "layers": []}}, "spec.model"),
            ({"sites": [{"name": "a"}, {"name": "b", "env": {"RANK": "1"}}, {"name": "c"}]}, "spec.sites[1].env.RANK"),
            ({"sites": [{"name": "a", "dataset": {"name": "fashion-mnist"}}, {"name": "b"}, {"name": "c"}]},
             "spec.sites[0].dataset"),
            ({"program": {"command": ["python3"], "workdir": "/etc"}}, "spec.program.workdir"),
            ({"program": {"command": [""], "workdir": "code"}}, "spec.program.command[0]"),
            ({"program": {"command": ["x"], "workdir": "code", "env": {"GANTRY_FED_DIR": "/"}}}, "spec.program.env.GANTRY_FED_DIR"),
            ({"sites": [{"name": "a"}, {"name": "b"}]}, "spec.sites"),
            ({"resources": {"memory_mb": 1}}, "spec.resources.memory_mb"),
            ({"update_timeout_s": 0}, "spec.update_timeout_s"),
        ]
        for extra, field in cases:
            r = s.request("POST", "/v1/jobs", tok, fed_program_job(**extra))
            assert r.status == 400 and r.json["error"]["field"] == field, (field, r.json)


@alone  # real PyTorch on every site
@timeout(600)
def test_pytorch_federated_example_reports_its_accuracy():
    """deploy/examples/pytorch-federated as the README runs it (both example folders under the tenant's root, the
    package beside the script), shortened: 3 rounds of 30 local steps on 6000 images; the global model's test
    accuracy is in result.metrics and the rounds in the curves"""
    examples = os.path.join(ROOT, "deploy", "examples")
    with Stack(workers=3) as s:
        tid, tok = s.tenant("fedprog-torch")
        root = site_root(s, tid, {}, extra_dirs=[(os.path.join(examples, "pytorch"), "pytorch"),
                                                  (os.path.join(examples, "pytorch-federated"), "pytorch-federated")])
        shutil.copytree(os.path.join(ROOT, "python", "gantry"), os.path.join(root, "pytorch-federated", "gantry"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        for d, _, files in os.walk(root):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)
        with open(os.path.join(examples, "pytorch-federated", "job.json")) as f:
            job = json.load(f)
        job["spec"]["rounds"] = 3
        job["spec"]["program"]["env"].update({"STEPS": "30", "SUBSET": "6000", "EVAL": "500"})
        jid = s.submit(tok, job)
        done = s.wait_state(tok, jid, "succeeded", timeout=540)
        m = done["result"]["metrics"]
        assert m["test_accuracy"] > 0.55 and m["sites"] == 3 and m["rounds"] == 3, m
        assert "model.pt" in [f["path"] for f in done["result"]["outputs"]["files"]], done["result"]["outputs"]
        points = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        assert [p["round"] for p in points if "residual" in p] == [1, 2, 3], points
        assert [p["round"] for p in points if "global_accuracy" in p] == [0, 1, 2], points


def test_cancel_stops_every_sites_program():
    """a job whose programs train slowly, cancelled in its first round: every site's program is gone within the
    grace period, the job is cancelled and the workers are free"""
    slow = ("import sys, time\nfrom gantry import federated\nmodel = {'w': __import__('numpy').zeros(3, 'float32')}\n"
            "for rnd in federated.rounds(model):\n    time.sleep(600)\n    rnd.submit(model, 1)\n")
    with Stack(workers=3) as s:
        tid, tok = s.tenant("fedprog-cancel")
        site_root(s, tid, {"site.py": slow})
        job = fed_program_job()
        job["spec"]["program"]["command"] += ["mark-fedcancel"]
        jid = s.submit(tok, job)
        wait_until("three programs in round 1", lambda: len(marker_pids("mark-fedcancel")) >= 3 and all(
            os.path.exists(os.path.join(s.dir, "var", "worker", "jobs", jid, f"run-{i}", "round_1.in")) for i in range(3)), 60)
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 200
        wait_until("no program of the job", lambda: not marker_pids("mark-fedcancel"), 20)
        wait_until("the workers idle", lambda: [w["state"] for w in s.workers()] == ["idle"] * 3, 30)
        assert s.job(tok, jid)["state"] == "cancelled"

