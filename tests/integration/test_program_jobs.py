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

# ranks that reach each other through the variables: rank 0 listens on MASTER_ADDR:MASTER_PORT, every
# other rank connects and says hello; each writes what it saw to its output directory
GANG = """import json, os, socket, sys, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
heard = []
if rank == 0:
    srv = socket.create_server((addr, port))
    for _ in range(world - 1):
        c, _ = srv.accept()
        heard.append(c.recv(100).decode())
else:
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection((addr, port), timeout=5).sendall(f"hello from {rank}".encode())
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
with open(os.path.join(os.environ["GANTRY_OUTPUT_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump({"env": dict(os.environ), "heard": sorted(heard)}, f)
print(f"rank {rank} of {world} done", flush=True)
if rank == 0:
    with open(os.environ["GANTRY_METRICS"], "a") as m:
        m.write(json.dumps({"epoch": 1, "epochs": 1, "test_accuracy": 0.5}) + "\\n")
"""

# a resumable loop: STEPS steps of 0.1 s, the step checkpointed after each (per rank), SIGTERM honoured
# at the next step; rank 0 writes a metrics point every 5 steps with the world size; at the end each
# rank writes where each generation started from
RESUMABLE = """import json, os, signal, sys, time
marker, steps = sys.argv[1], int(sys.argv[2])
rank, world, gen = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), os.environ["GANTRY_GENERATION"]
ckpt = os.path.join(os.environ["GANTRY_CHECKPOINT_DIR"], "step")
start = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
starts = os.path.join(os.environ["GANTRY_CHECKPOINT_DIR"], f"starts-{rank}")
with open(starts, "a") as f:
    f.write(f"{gen} {world} {start}\\n")
print(f"rank {rank} of {world}, generation {gen}: from step {start}", flush=True)
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
for step in range(start, steps):
    time.sleep(0.1)
    if rank == 0:
        with open(ckpt + ".tmp", "w") as f:
            f.write(str(step + 1))
        os.replace(ckpt + ".tmp", ckpt)
        if step % 5 == 0:
            with open(os.environ["GANTRY_METRICS"], "a") as m:
                m.write(json.dumps({"step": step + 1, "world": world}) + "\\n")
    if stop:
        print(f"rank {rank}: SIGTERM at step {step + 1}", flush=True)
        sys.exit(0)
os.system(f"cp {starts} {os.environ['GANTRY_OUTPUT_DIR']}/")
print(f"rank {rank}: finished", flush=True)
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


def log_entries(s, jid):
    """the job's log stream as [(rank, generation, field, text)]"""
    out = s.redis("XRANGE", f"gantry:logs:{jid}", "-", "+").split("\n")
    entries, i = [], 0
    while i < len(out):  # redis-cli: id, then field/value lines (r, R, g, G, t|end, text)
        if i + 6 < len(out) and out[i + 1] == "r" and out[i + 3] == "g":
            entries.append((int(out[i + 2]), int(out[i + 4]), out[i + 5], out[i + 6]))
            i += 7
        else:
            i += 1
    return entries


def test_two_ranks_reach_each_other():
    """a 2-rank job: each rank gets its RANK, WORLD_SIZE 2, LOCAL_* and rank 0's MASTER_ADDR/MASTER_PORT;
    rank 1 reaches rank 0 there; both ranks' output is in the log stream, each with its end"""
    with Stack(workers=2) as s:
        tid, tok = s.tenant("prog-gang")
        program_root(s, tid, {"gang.py": GANG})
        jid = s.submit(tok, program_job(["python3", "gang.py", "mark-gang"], workers=2))
        job = s.wait_state(tok, jid, "succeeded", timeout=90)
        res = job["result"]
        assert res["exit_codes"] == [0, 0] and res["metrics"]["world_size"] == 2, res
        out = os.path.join(job_dir(s, jid), "output")
        seen = [json.load(open(os.path.join(out, f"rank-{r}.json"))) for r in (0, 1)]
        assert seen[0]["heard"] == ["hello from 1"], seen[0]["heard"]
        for r, rank in enumerate(seen):
            env = rank["env"]
            assert env["RANK"] == str(r) and env["WORLD_SIZE"] == "2" and env["GANTRY_JOB_ID"] == jid, env
            assert env["LOCAL_RANK"] == str(r) and env["LOCAL_WORLD_SIZE"] == "2", env
            assert env["MASTER_ADDR"] == "127.0.0.1" and env["MASTER_PORT"] == seen[0]["env"]["MASTER_PORT"], env
            assert env["GANTRY_CHECKPOINT_DIR"] == "/gantry/checkpoint" and env["GANTRY_OUTPUT_DIR"] == "/gantry/output"
        assert sorted(f["path"] for f in res["outputs"]["files"]) == ["rank-0.json", "rank-1.json"], res["outputs"]
        assert "dir" not in res["outputs"], "the output directory's path is the worker's, never shown"
        logs = log_entries(s, jid)
        for r in (0, 1):
            assert (r, 0, "t", f"rank {r} of 2 done") in logs, logs
            assert (r, 0, "end", "exited with code 0") in logs, logs
        assert not marker_pids("mark-gang")


def test_exit_code_fails_the_job_with_its_last_lines():
    """a script that prints and exits 3: the job fails with the rank's exit code and its last lines"""
    script = "#!/bin/sh\nfor i in 1 2 3 4 5; do echo \"line $i\"; done\necho 'Traceback: it broke' >&2\nexit 3\n"
    with Stack(workers=1) as s:
        tid, tok = s.tenant("prog-exit")
        program_root(s, tid, {"fail.sh": script})
        jid = s.submit(tok, program_job(["/bin/sh", "fail.sh", "mark-exit"]))
        job = s.wait_state(tok, jid, "failed", timeout=60)
        assert job["error"].startswith("rank 0 exited with code 3"), job["error"]
        assert "line 5\nTraceback: it broke" in job["error"], job["error"]
        assert job["result"]["exit_codes"] == [3] and "line 1" in job["result"]["log_tail"], job["result"]
        assert not [e for e in s.events(tok, jid) if e["state"] == "queued" and e["reason"] != "accepted"]
