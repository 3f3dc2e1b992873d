"""Training jobs that run a team's own program (spec.program, docs/programs.md) through the real
stack: real bubblewrap sandboxes, real /bin/sh and python3 scripts written into a temporary tenant
root, real signals.  Each test asserts what the program saw (it writes its environment to its output
directory), what the job's result says, and that no process of the job is left (/proc)."""

import hashlib
import json
import os
import signal
import tempfile
import time

from harness import ADMIN, Stack, timeout, wait_until

# every script takes a marker argument (its job's own, unique) so the test finds its processes in /proc
ENV_DUMP = """#!/bin/sh
# writes what the rank saw to its output directory, a metrics line, then exits with $1
marker=$2
env | sort > "$GANTRY_OUTPUT_DIR/env-$RANK.txt"
echo "rank $RANK of $WORLD_SIZE at $MASTER_ADDR:$MASTER_PORT"
echo '{"epoch": 1, "epochs": 2, "loss": 0.5}' >> "$GANTRY_METRICS"
sleep 0.2  # pacing: the worker sends at most 20 points a second to the curves
echo '{"epoch": 2, "epochs": 2, "loss": 0.25, "test_accuracy": 0.9}' >> "$GANTRY_METRICS"
exit "$1"
"""


def program_root(s, tid, scripts):
    """a temporary root for the tenant (readable by the sandbox's uid 65534) holding workdir 'code'
    with the scripts {name: text}; returns the root"""
    root = tempfile.mkdtemp(prefix="gantry-prog-")
    os.chmod(root, 0o755)
    code = os.path.join(root, "code")
    os.mkdir(code)
    os.chmod(code, 0o755)
    for name, text in scripts.items():
        path = os.path.join(code, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
    assert s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"roots": [root]}).status == 200
    return root


def program_job(command, name="prog", workers=1, **spec):
    job = {"type": "training", "name": name,
           "spec": {"program": {"command": command, "workdir": "code"}, "workers": workers, "grace_s": 3}}
    job["spec"].update(spec)
    return job


def job_dir(s, jid):
    """the job's directory on the workers (they share the harness's state directory)"""
    return os.path.join(s.dir, "var", "worker", "jobs", jid)


def marker_pids(marker):
    """pids of the processes whose command line holds marker"""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read().split(b"\0"):
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def read_env(path):
    with open(path) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def test_one_rank_runs_in_its_sandbox():
    """a 1-rank program job: the program runs with gantry's variables, its metrics lines become the
    job's points and result.metrics, its output is listed with sha256"""
    with Stack(workers=1) as s:
        tid, tok = s.tenant("prog-one")
        program_root(s, tid, {"run.sh": ENV_DUMP})
        jid = s.submit(tok, program_job(["/bin/sh", "run.sh", "0", "mark-one"]))
        job = s.wait_state(tok, jid, "succeeded", timeout=60)
        res = job["result"]
        assert res["exit_codes"] == [0], res
        assert res["metrics"]["test_accuracy"] == 0.9 and res["metrics"]["world_size"] == 1, res
        assert res["metrics"]["restarts"] == 0, res
        env = read_env(os.path.join(job_dir(s, jid), "output", "env-0.txt"))
        assert env["RANK"] == "0" and env["WORLD_SIZE"] == "1" and env["GANTRY_JOB_ID"] == jid, env
        assert env["MASTER_ADDR"] == "127.0.0.1" and int(env["MASTER_PORT"]) > 0, env
        assert env["LOCAL_RANK"] == "0" and env["LOCAL_WORLD_SIZE"] == "1", env
        files = {f["path"]: f for f in res["outputs"]["files"]}
        with open(os.path.join(job_dir(s, jid), "output", "env-0.txt"), "rb") as f:
            data = f.read()
        assert files["env-0.txt"]["sha256"] == hashlib.sha256(data).hexdigest(), files
        assert files["env-0.txt"]["bytes"] == len(data)
        points = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        assert [p["epoch"] for p in points] == [1, 2] and points[-1]["test_accuracy"] == 0.9, points
        assert not marker_pids("mark-one")
