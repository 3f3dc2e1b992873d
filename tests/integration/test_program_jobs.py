"""Training jobs that run a team's own program (spec.program, docs/programs.md) through the real
stack: real bubblewrap sandboxes, real /bin/sh and python3 scripts written into a temporary tenant
root, real signals.  Each test asserts what the program saw (it writes its environment to its output
directory), what the job's result says, and that no process of the job is left (/proc)."""

import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from harness import ADMIN, ROOT, Stack, alone, placement_job, timeout, wait_until

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
# the checkpoint: "<generation that wrote it> <step it started from> <step reached>"; a rank that starts
# after its generation's rank 0 already wrote one (a slow start on a loaded machine) starts where rank 0 did
wgen, base, reached = open(ckpt).read().split() if os.path.exists(ckpt) else ("", 0, 0)
start = int(base) if wgen == gen else int(reached)
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
            f.write(f"{gen} {start} {step + 1}")
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


def example_root(s, tid):
    """deploy/examples/pytorch as a user installs it: the folder under a root of the tenant as 'pytorch',
    python/gantry beside the script, everything readable by the ranks' uids; returns the root"""
    root = program_root(s, tid, {})
    shutil.copytree(os.path.join(ROOT, "deploy", "examples", "pytorch"), os.path.join(root, "pytorch"))
    shutil.copytree(os.path.join(ROOT, "python", "gantry"), os.path.join(root, "pytorch", "gantry"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    for d, _, files in os.walk(os.path.join(root, "pytorch")):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
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
    """the job's log stream as [(rank, generation, "t" or "end", text)]"""
    out = subprocess.run(["redis-cli", "-p", str(s.rport), *s.redis_cli_args(), "--json", "-2", "XRANGE", f"gantry:logs:{jid}", "-", "+"],
                         capture_output=True, text=True, timeout=10).stdout
    entries = []
    for _, fields in json.loads(out) or []:
        f = dict(zip(fields[::2], fields[1::2]))
        kind = "end" if "end" in f else "t"
        entries.append((int(f["r"]), int(f["g"]), kind, f[kind].rstrip("\n") if kind == "t" else f[kind]))
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
    """a script that prints and exits 3: restarted as torchrun would (max_restarts 1), then the job fails
    with the rank's exit code and its last 20 lines"""
    script = "#!/bin/sh\nfor i in $(seq 1 24); do echo \"line $i of a long enough output to fill the reason\"; done\n" \
             "echo 'Traceback: it broke' >&2\nexit 3\n"
    with Stack(workers=1) as s:
        tid, tok = s.tenant("prog-exit")
        program_root(s, tid, {"fail.sh": script})
        jid = s.submit(tok, program_job(["/bin/sh", "fail.sh", "mark-exit"], max_restarts=1))
        job = s.wait_state(tok, jid, "failed", timeout=60)
        assert job["error"].startswith("rank 0 exited with code 3 (no restarts left: 1 of 1 used)"), job["error"]
        # the last 20 lines, whole: lines 6 to 24 and the traceback
        assert "; its last lines:\nline 6 of" in job["error"], job["error"]
        assert "line 24 of a long enough output to fill the reason\nTraceback: it broke" in job["error"], job["error"]
        assert job["result"]["exit_codes"] == [3] and "line 24" in job["result"]["log_tail"], job["result"]
        restarts = [e for e in s.events(tok, jid) if e["state"] == "queued" and e["reason"] != "accepted"]
        assert len(restarts) == 1 and "rank 0 exited with code 3; restarting from the checkpoint (restart 1 of 1)" \
            in restarts[0]["reason"], restarts


def rank_pids(marker, rank):
    """the program processes of one rank (its RANK in /proc/PID/environ), not its sandbox's bwrap and init
    (whose command lines hold the program's)"""
    found = []
    for pid in marker_pids(marker):
        if open_cmd(pid).split(" ")[0].endswith(("bwrap", "gantry-init")):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"RANK={rank}".encode() in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            pass
    return found


def last_step(s, tok, jid):
    pts = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
    return pts[-1]["step"] if pts else 0


def starts(s, jid, rank=0):
    """[(generation, world, step it started from)] as the program recorded them"""
    with open(os.path.join(job_dir(s, jid), "checkpoint", f"starts-{rank}")) as f:
        return [tuple(map(int, line.split())) for line in f]


def test_killed_rank_restarts_from_the_checkpoint():
    """SIGKILL to rank 1's program mid-run: every rank stops, an event says the job restarts and why,
    the next generation resumes from the checkpoint and finishes"""
    with Stack(workers=2) as s:
        tid, tok = s.tenant("prog-kill")
        program_root(s, tid, {"loop.py": RESUMABLE})
        jid = s.submit(tok, program_job(["python3", "loop.py", "mark-kill", "60"], workers=2, max_restarts=2))
        wait_until("the program past step 15", lambda: last_step(s, tok, jid) >= 15, 60)
        victims = wait_until("rank 1's program", lambda: rank_pids("mark-kill", 1), 10)
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        restart = wait_until("the restart event", lambda: [e for e in s.events(tok, jid) if e["state"] == "queued"
                                                          and "restarting from the checkpoint" in e["reason"]], 60)
        assert restart[0]["reason"].startswith("rank 1 killed by signal 9"), restart[0]
        assert "(restart 1 of 2)" in restart[0]["reason"], restart[0]
        job = s.wait_state(tok, jid, "succeeded", timeout=120)
        assert job["result"]["metrics"]["restarts"] == 1 and job["result"]["exit_codes"] == [0, 0], job["result"]
        gens = starts(s, jid)
        assert [g[0] for g in gens] == [0, 1] and gens[0][2] == 0 and gens[1][2] >= 15, gens
        assert not marker_pids("mark-kill")


def test_restarts_run_out():
    """max_restarts 0: a rank killed by a signal fails the job at once, saying so"""
    with Stack(workers=1) as s:
        tid, tok = s.tenant("prog-norestart")
        program_root(s, tid, {"loop.py": RESUMABLE})
        jid = s.submit(tok, program_job(["python3", "loop.py", "mark-norestart", "600"], max_restarts=0))
        pids = wait_until("the program", lambda: rank_pids("mark-norestart", 0), 30)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        job = s.wait_state(tok, jid, "failed", timeout=60)
        assert job["error"].startswith("rank 0 killed by signal 9") and "no restarts left: 0 of 0 used" in job["error"], job


def test_cancel_leaves_no_process():
    """cancel a 2-rank job whose script ignores SIGTERM: after the grace period no process of the job
    remains, and the job is cancelled"""
    stubborn = "#!/bin/sh\ntrap '' TERM\n(trap '' TERM; sleep 600) &\nsleep 600 &\nwait\n"
    with Stack(workers=2) as s:
        tid, tok = s.tenant("prog-cancel")
        program_root(s, tid, {"stubborn.sh": stubborn})
        jid = s.submit(tok, program_job(["/bin/sh", "stubborn.sh", "mark-cancel"], workers=2, grace_s=2))
        wait_until("both ranks running", lambda: rank_pids("mark-cancel", 0) and rank_pids("mark-cancel", 1), 30)
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 200
        t0 = time.time()
        wait_until("no process of the job", lambda: not marker_pids("mark-cancel"), 15)
        assert time.time() - t0 >= 1.5, "killed before its grace period"
        wait_until("both workers idle", lambda: [w["state"] for w in s.workers()] == ["idle", "idle"], 20)
        assert s.job(tok, jid)["state"] == "cancelled"
        sleeps = [p for p in os.listdir("/proc") if p.isdigit() and open_cmd(p).startswith("sleep 600")]
        assert not sleeps, sleeps


def open_cmd(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_memory_limit_fails_the_job():
    """a script that allocates past resources.memory_mb fails the job with "memory limit" in the reason"""
    hog = "import sys\nblocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n"
    with Stack(workers=1) as s:
        tid, tok = s.tenant("prog-mem")
        program_root(s, tid, {"hog.py": hog})
        jid = s.submit(tok, program_job(["python3", "hog.py", "mark-mem"], resources={"memory_mb": 64}))
        job = s.wait_state(tok, jid, "failed", timeout=60)
        assert "memory limit of 64 MiB exceeded" in job["error"], job["error"]
        assert not [e for e in s.events(tok, jid) if e["state"] == "queued" and e["reason"] != "accepted"]


# each attempt prints "DENIED what" or "ALLOWED what"; the program itself always succeeds
SNOOP = """import os, sys
state, other, jobs = sys.argv[2], sys.argv[3], sys.argv[4]
def attempt(what, fn):
    try:
        fn()
        print("ALLOWED", what, flush=True)
    except OSError:
        print("DENIED", what, flush=True)
attempt("state-dir", lambda: os.listdir(state))
attempt("admin-token", lambda: open(os.path.join(state, "gantry.db"), "rb").read(1))
attempt("other-jobs", lambda: os.listdir(jobs))
attempt("other-tenant", lambda: open(os.path.join(other, "secret.txt")).read())
attempt("write-workdir", lambda: open("written.txt", "w").write("x"))
attempt("write-tmp-outside", lambda: open("/var/tmp/x", "w").write("x"))
attempt("write-output", lambda: open(os.path.join(os.environ["GANTRY_OUTPUT_DIR"], "ok.txt"), "w").write("x"))
"""


def test_sandbox_denies_what_is_not_the_jobs():
    """the program cannot read the server's state directory (its database holds the tokens' hashes), the
    worker's directories of other jobs, another tenant's root, nor write outside its output and checkpoint
    directories; its output directory works"""
    with Stack(workers=1) as s:
        other_root = tempfile.mkdtemp(prefix="gantry-other-")
        os.chmod(other_root, 0o755)
        with open(os.path.join(other_root, "secret.txt"), "w") as f:
            f.write("other tenant's data\n")
        os.chmod(os.path.join(other_root, "secret.txt"), 0o644)
        other_tid, _ = s.tenant("prog-other")
        assert s.request("PATCH", f"/v1/tenants/{other_tid}", ADMIN, {"roots": [other_root]}).status == 200
        tid, tok = s.tenant("prog-snoop")
        program_root(s, tid, {"snoop.py": SNOOP})
        state = os.path.join(s.dir, "state")
        jobs = os.path.join(s.dir, "var", "worker", "jobs")  # every job's directories on the worker
        jid = s.submit(tok, program_job(["python3", "snoop.py", "mark-snoop", state, other_root, jobs]))
        job = s.wait_state(tok, jid, "succeeded", timeout=60)
        lines = "\n".join(t for r, g, f, t in log_entries(s, jid) if f == "t").split("\n")
        verdicts = dict(line.split(" ", 1)[::-1] for line in lines if line.startswith(("DENIED", "ALLOWED")))
        assert verdicts == {"state-dir": "DENIED", "admin-token": "DENIED", "other-jobs": "DENIED", "other-tenant": "DENIED",
                            "write-workdir": "DENIED", "write-tmp-outside": "DENIED", "write-output": "ALLOWED"}, verdicts
        assert [f["path"] for f in job["result"]["outputs"]["files"]] == ["ok.txt"]


@timeout(600)
def test_elastic_job_grows_and_the_program_sees_the_new_world():
    """workers {min 1, max 3} on one worker: the job starts with 1 rank; a second worker joins, the
    scheduler resizes the gang (SIGTERM, the program checkpoints), and the next generation runs 2 ranks
    from the checkpoint, its program seeing WORLD_SIZE 2"""
    with Stack(workers=1) as s:
        tid, tok = s.tenant("prog-elastic")
        program_root(s, tid, {"loop.py": RESUMABLE})
        jid = s.submit(tok, program_job(["python3", "loop.py", "mark-elastic", "150"], workers={"min": 1, "max": 3}))
        wait_until("one rank past step 10", lambda: last_step(s, tok, jid) >= 10, 60)
        s.start_worker(1)
        wait_until("a resize", lambda: [e for e in s.events(tok, jid) if e["reason"].startswith("resize:")], 60)
        job = s.wait_state(tok, jid, "succeeded", timeout=120)
        assert job["result"]["metrics"]["world_size"] == 2 and job["result"]["metrics"]["restarts"] == 0, job["result"]
        gens = starts(s, jid)
        assert gens[0][:2] == (0, 1) and gens[-1][1] == 2 and gens[-1][2] >= 10, gens
        assert starts(s, jid, rank=1)[-1] == gens[-1], "both ranks of the last generation started from the checkpoint"
        pts = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        assert {p["world"] for p in pts} == {1, 2}, pts
        assert not marker_pids("mark-elastic")


def test_preempted_job_resumes_from_its_checkpoint():
    """a low-priority preemptible program job on the only worker; a high-priority job arrives: the program
    is stopped (SIGTERM, it checkpoints), the high-priority job runs, and the program job comes back and
    continues from its checkpoint"""
    with Stack(workers=1) as s:
        tid, tok = s.tenant("prog-preempt")
        program_root(s, tid, {"loop.py": RESUMABLE})
        job = program_job(["python3", "loop.py", "mark-preempt", "80"])
        job.update(priority="low", preemptible=True)
        jid = s.submit(tok, job)
        wait_until("the program past step 10", lambda: last_step(s, tok, jid) >= 10, 60)
        urgent = placement_job("urgent")
        urgent["priority"] = "high"
        uid = s.submit(tok, urgent)
        s.wait_state(tok, uid, "succeeded", timeout=60)
        done = s.wait_state(tok, jid, "succeeded", timeout=120)
        assert any(e["reason"].startswith("preempted by") for e in s.events(tok, jid)), s.events(tok, jid)
        gens = starts(s, jid)
        assert len(gens) == 2 and gens[1][2] >= 10, gens
        assert done["result"]["metrics"]["restarts"] == 0


def fmnist_test(n):
    """the first n Fashion-MNIST test images (bytes) and labels"""
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
        img = f.read(16 + n * 784)[16:]
    with gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz") as f:
        lab = list(f.read(8 + n)[8:])
    return list(img), lab


@alone  # real PyTorch on two ranks
@timeout(900)
def test_pytorch_example_trains_and_registers_its_model():
    """deploy/examples/pytorch as a user runs it: the folder copied to the tenant's first root as
    'pytorch' with the gantry package beside it (python/gantry, the README's cp), job.json submitted (on
    the first 20,000 training images, TRAIN_SIZE in its env, to keep the suite short: the whole run is the
    README's); 2 workers run DDP over gloo, the job reaches 85% test accuracy in result.metrics, its points
    carry a step (the dashboard's curves) and an epoch fraction (its progress), and it registers its
    TorchScript model"""
    example = os.path.join(ROOT, "deploy", "examples", "pytorch")
    with Stack(workers=2) as s:
        tid, tok = s.tenant("prog-pytorch")
        root = example_root(s, tid)
        with open(os.path.join(example, "job.json")) as f:
            job = json.load(f)
        job["spec"]["program"]["env"]["TRAIN_SIZE"] = "20000"
        jid = s.submit(tok, job)
        done = s.wait_state(tok, jid, "succeeded", timeout=840)
        m = done["result"]["metrics"]
        assert m["test_accuracy"] >= 0.85 and m["world_size"] == 2 and m["epoch"] == 3, m
        assert "model.pt" in [f["path"] for f in done["result"]["outputs"]["files"]], done["result"]["outputs"]
        model = s.get("/v1/models/fashion-cnn", tok).json
        v = model["versions"][0]
        assert v["job_id"] == jid and v["metrics"]["test_accuracy"] == m["test_accuracy"], model
        assert v["architecture"] == {"format": "torchscript", "program": True}, v
        points = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        assert [p["epoch"] for p in points if "test_accuracy" in p] == [1, 2, 3], points
        steps = [p["step"] for p in points]
        assert len(steps) > 6 and steps == sorted(steps) and all(p["epochs"] == 3 for p in points), points
        # the team's model, served by alias on a libtorch replica: the signature its register_model declared
        listed = {f["path"]: f for f in done["result"]["outputs"]["files"]}["model.pt"]
        assert v["format"] == "torchscript" and v["sha256"] == listed["sha256"] and v["size_bytes"] == listed["bytes"], v
        assert v["signature"]["inputs"][0]["name"] == "image", v
        r = s.request("PUT", "/v1/models/fashion-cnn/aliases/production", tok, {"version": v["version"]})
        assert r.status == 200, r
        sid = s.submit(tok, {"type": "inference", "name": "serve-cnn", "spec": {"model": "fashion-cnn@production"}})
        s.wait_state(tok, sid, "running", timeout=60)
        wait_until("ready", lambda: s.get("/v2/models/fashion-cnn/ready", tok).status == 200, 30)
        images, labels = fmnist_test(64)
        x = [(p / 255.0 - 0.2860) / 0.3530 for p in images]
        r = s.post("/v2/models/fashion-cnn/infer", tok,
                   {"inputs": [{"name": "image", "datatype": "FP32", "shape": [64, 1, 28, 28], "data": x}]})
        assert r.status == 200 and r.json["model_version"] == str(v["version"]), r
        logits = r.json["outputs"][0]["data"]
        right = sum(max(range(10), key=lambda k: logits[10 * i + k]) == labels[i] for i in range(64))
        assert right >= 48, right  # ~87% on the test set


@timeout(600)
def test_elastic_job_shrinks_when_a_worker_is_lost():
    """workers {min 1, max 3} on 2 workers; one worker dies (SIGKILL: its rank dies with it): the scheduler
    requeues the job when the worker's heartbeat stops, the survivor's rank is stopped, and the next
    generation runs 1 rank from the checkpoint, its program seeing WORLD_SIZE 1"""
    with Stack(workers=2) as s:
        tid, tok = s.tenant("prog-shrink")
        program_root(s, tid, {"loop.py": RESUMABLE})
        jid = s.submit(tok, program_job(["python3", "loop.py", "mark-shrink", "120"], workers={"min": 1, "max": 3}))
        wait_until("two ranks past step 10", lambda: last_step(s, tok, jid) >= 10 and rank_pids("mark-shrink", 1), 60)
        s.kill("worker1")  # both workers run a rank
        job = s.wait_state(tok, jid, "succeeded", timeout=180)
        assert job["result"]["metrics"]["world_size"] == 1, job["result"]
        gens = starts(s, jid)
        assert gens[0][:2] == (0, 2) and gens[-1][1] == 1 and gens[-1][2] >= 10, gens
        assert not marker_pids("mark-shrink")


def test_wall_clock_limit_fails_the_job():
    """max_runtime_s 1 on a script that sleeps: SIGTERM, then SIGKILL after grace_s; the job fails with the
    wall-clock limit"""
    with Stack(workers=1) as s:
        tid, tok = s.tenant("prog-clock")
        program_root(s, tid, {"sleep.sh": "#!/bin/sh\ntrap '' TERM\nsleep 60\n"})
        jid = s.submit(tok, program_job(["/bin/sh", "sleep.sh", "mark-clock"], max_runtime_s=1, grace_s=1))
        job = s.wait_state(tok, jid, "failed", timeout=30)
        assert job["error"].startswith("rank 0: wall-clock limit of 1 s exceeded"), job["error"]
        assert not marker_pids("mark-clock")
