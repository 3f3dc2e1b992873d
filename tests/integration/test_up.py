"""./deploy/up itself, as a user runs it (a temp state directory and free ports through GANTRY_STATE,
GANTRY_PORT and GANTRY_REDIS_PORT; GANTRY_NO_BUILD=1 because the test runner has built GANTRY_BUILD):

- it is a supervisor: while 3 tenants submit a stream of placement jobs, a worker, the scheduler, the
  server and redis-server are each killed with SIGKILL in turn; deploy/up starts each again (saying so on
  its stderr and in the process's log), every job that got a 201 (or a 200 replay) succeeds once (one
  'succeeded' event, no 'running' after it); a process that keeps dying is reported with its count and
  its restarts back off (0.5 s, 1 s, 2 s ...);
- SIGTERM stops the whole stack within 10 s while an inference replica serves and a training gang of 2
  trains: no process of the stack remains (every process in /proc is checked, not only the PIDs the test
  knows), and the running jobs were handed back: started again on the same state, both run again;
- a worker running a federated site hands it back on SIGTERM at once, and the other sites stop with it
  instead of waiting out the exchange timeout (on the test launcher: deploy/up gives every worker the same
  labels)."""

import http.client
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time

from harness import ADMIN, BUILD, ROOT, Client, Stack, free_port, placement_job, wait_until
from test_federated import fed_job
from test_inference import serve_job
from test_training import training_job

ALONE = True  # run.py runs these tests with nothing beside them: deploy/up's sandbox uids, and a 10 s stop measured

UP = os.path.join(ROOT, "deploy", "up")


def proc_info(pid):
    """(argv, environ) of a live process, None when it is gone or unreadable"""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
        return argv, env
    except OSError:
        return None


class Up(Client):
    """deploy/up in its own session, with its own state directory and ports"""

    def __init__(self, workers=2, state=None):
        self.dir = state or tempfile.mkdtemp(prefix="gantry-up-")
        self.port, self.rport = free_port(), free_port()
        self.nworkers = workers
        self.env = dict(os.environ, GANTRY_STATE=self.dir, GANTRY_PORT=str(self.port),
                        GANTRY_REDIS_PORT=str(self.rport), GANTRY_WORKERS=str(workers), GANTRY_ADMIN_TOKEN=ADMIN,
                        GANTRY_BUILD=os.path.relpath(BUILD, ROOT), GANTRY_NO_BUILD="1")
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=0")  # processes are killed on purpose
        self.env.pop("GANTRY_WORKER_LABELS", None)
        self.proc = None

    def start(self):
        self.out = open(os.path.join(self.dir, "up.out"), "ab")
        self.err_path = os.path.join(self.dir, "up.err")
        self.err = open(self.err_path, "ab")
        # its own session: the test's signals are the only ones it gets
        self.proc = subprocess.Popen([UP], stdout=self.out, stderr=self.err, env=self.env, cwd=ROOT,
                                     start_new_session=True)
        wait_until("deploy/up's stack ready", lambda: self.proc.poll() is None and self.ready(), 90, 0.1)
        return self

    def ready(self):
        if self.get("/readyz").status != 200:
            return False
        r = self.get("/v1/workers", ADMIN)
        return r.status == 200 and len(r.json["workers"]) == self.nworkers

    def __enter__(self):
        try:
            return self.start()
        except BaseException as e:  # __exit__ is not called when __enter__ fails: stop what started
            self.__exit__(type(e), e, e.__traceback__)
            raise

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for pid in self.ours():  # never leave a stack behind, whatever failed
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if exc[0] is not None:
            self.dump()
        self.out.close()
        self.err.close()
        if exc[0] is None:
            shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def dump(self, lines=30):
        logs = os.path.join(self.dir, "logs")
        for path in [self.err_path] + sorted(os.path.join(logs, n) for n in (os.listdir(logs) if os.path.isdir(logs) else [])):
            with open(path, errors="replace") as f:
                tail = f.readlines()[-lines:]
            print(f"---- {path} (last {len(tail)} lines) ----")
            print("".join(tail), end="")

    def sanitizer_reports(self):
        """ASan/UBSan reports in the processes' logs (a supervisor would hide such a crash by restarting)"""
        logs = os.path.join(self.dir, "logs")
        found = []
        for n in sorted(os.listdir(logs)):
            with open(os.path.join(logs, n), errors="replace") as f:
                found += [f"{n}: {line.strip()}" for line in f if "ERROR: AddressSanitizer" in line or "runtime error:" in line]
        return found

    def stderr(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def log(self, name):
        with open(os.path.join(self.dir, "logs", name + ".log"), errors="replace") as f:
            return f.read()

    # ---- processes: found in /proc, never only through PIDs we were told ----
    def ours(self):
        """every live process of this stack: its environment names our state directory (deploy/up and all it
        starts inherit GANTRY_STATE), or its command line names the directory or one of our ports (redis-server
        rewrites its title to 'redis-server 127.0.0.1:PORT')"""
        marks = (self.dir, f"127.0.0.1:{self.rport}", f"127.0.0.1:{self.port}")
        env_mark = f"GANTRY_STATE={self.dir}".encode()
        found = []
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            if pid == os.getpid():
                continue
            info = proc_info(pid)
            if info and (env_mark in info[1] or any(m in a for a in info[0] for m in marks)):
                found.append(pid)
        return found

    def daemons(self, name):
        """PIDs of this stack's processes running the named program"""
        out = []
        for pid in self.ours():
            info = proc_info(pid)
            if info and info[0] and os.path.basename(info[0][0].split()[0]) == name:
                out.append(pid)
        return sorted(out)

    def worker(self, i):
        """the PID of CPU worker i (deploy/up names it <host>-cpu<i>), None when it does not run"""
        for pid in self.daemons("gantry-worker"):
            argv = (proc_info(pid) or ([], []))[0]
            if "--id" in argv and argv.index("--id") + 1 < len(argv) and argv[argv.index("--id") + 1].endswith(f"-cpu{i}"):
                return pid
        return None

    def describe(self):
        return {pid: " ".join((proc_info(pid) or ([], []))[0])[:120] for pid in self.ours()}

    # ---- HTTP (harness.Client) ----
    def connection(self, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def tenant(self, name):
        r = self.post("/v1/tenants", ADMIN, {"name": name})
        assert r.status == 201, r
        t = self.post(f"/v1/tenants/{r.json['id']}/tokens", ADMIN, {"role": "member", "name": name})
        assert t.status == 201, t
        return t.json["token"]

    def submit(self, token, job):
        r = self.post("/v1/jobs", token, job)
        assert r.status == 201, r
        return r.json["id"]

    def job(self, token, jid):
        r = self.get(f"/v1/jobs/{jid}", token)
        return r.json if r.status == 200 else None


class Stream(threading.Thread):
    """one tenant's stream of placement jobs, about 12 a second, each with its Idempotency-Key; retried
    through outages until answered 201 (or 200, a replay), so every accepted key has its job id"""

    def __init__(self, up, token, tenant):
        super().__init__(daemon=True)
        self.up, self.token, self.tenant = up, token, tenant
        self.accepted = {}
        self.stop = threading.Event()
        self.retries = 0

    def run(self):
        n = 0
        while not self.stop.is_set():
            key = f"{self.tenant}-{n}"
            while not self.stop.is_set():
                try:
                    r = self.up.post("/v1/jobs", self.token, placement_job(key), headers={"Idempotency-Key": key},
                                     timeout=10)
                    if r.status in (200, 201):
                        self.accepted[key] = r.json["id"]
                        break
                    assert r.status >= 500 or r.status == 429, r
                except (OSError, http.client.HTTPException):
                    pass
                self.retries += 1
                self.stop.wait(0.05)
            n += 1
            self.stop.wait(0.08)  # pacing: a stream, not a flood (the stack runs under ASan on 2 cores in CI)


def restart_lines(up, name):
    return [line for line in up.stderr().splitlines() if re.search(rf"\b{re.escape(name)}\b.*(exited|killed)", line)]


def test_up_restarts_each_process_that_dies():
    with Up(workers=2) as up:
        streams = [Stream(up, up.tenant(f"up-{i}"), f"up-{i}") for i in range(3)]
        for s in streams:
            s.start()

        def accepted():
            return sum(len(s.accepted) for s in streams)

        # name in deploy/up's messages and logs, program
        victims = (("worker-cpu0", "gantry-worker"), ("scheduler", "gantry-scheduler"), ("server", "gantry-server"),
                   ("redis", "redis-server"))
        timings = {}
        for name, program in victims:
            base = accepted()
            wait_until(f"20 more jobs accepted before killing {name}", lambda: accepted() >= base + 20, 60, 0.05)
            before = up.daemons(program)
            assert before, (program, up.describe())
            pid = (up.worker(0) or before[0]) if program == "gantry-worker" else before[0]
            t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            wait_until(f"deploy/up started {program} again",
                       lambda: (now := up.daemons(program)) and len(now) == len(before) and pid not in now, 30, 0.05)
            wait_until(f"deploy/up says {name} died", lambda: restart_lines(up, name), 10, 0.05)
            # the stack is whole again: ready (Redis and the database), every worker registered
            wait_until(f"the stack ready after {name}", up.ready, 30, 0.1)
            timings[name] = round(time.monotonic() - t0, 2)
            assert "restart" in up.log(name), up.log(name)[-2000:]
        line = restart_lines(up, "worker-cpu0")[0]
        assert "SIGKILL" in line and f"{up.dir}/logs/worker-cpu0.log" in line, line

        # a process that keeps dying: its restarts back off and the message counts them
        gaps = []
        for _ in range(3):
            pid = wait_until("worker-cpu1 running", lambda: up.worker(1), 30, 0.02)
            os.kill(pid, signal.SIGKILL)
            t0 = time.monotonic()
            wait_until("worker-cpu1 back", lambda: up.worker(1) not in (None, pid), 30, 0.02)
            gaps.append(time.monotonic() - t0)
        # waits of 0.5 s, 1 s, 2 s (at least those, and growing: a start takes some time too)
        assert gaps[0] >= 0.45 and gaps[1] >= 0.95 and gaps[2] >= 1.95 and gaps[2] - gaps[0] > 1.0, gaps
        assert any(re.search(r"worker-cpu1 exited 3 times in 60 s \(last: killed by SIGKILL\b.*\); restarting it in 2 s", line)
                   for line in up.stderr().splitlines()), up.stderr()[-2000:]
        # nothing else died meanwhile (a crash would be restarted, and said so here)
        exits = [line for line in up.stderr().splitlines() if " exited " in line]
        assert len(exits) == 7 and all("killed by SIGKILL" in line for line in exits), exits
        wait_until("both workers registered", up.ready, 30, 0.1)

        base = accepted()
        wait_until("20 more jobs accepted after the kills", lambda: accepted() >= base + 20, 60, 0.05)
        for s in streams:
            s.stop.set()
        for s in streams:
            s.join(timeout=30)
        ids = {k: v for s in streams for k, v in s.accepted.items()}

        db = sqlite3.connect(os.path.join(up.dir, "gantry.db"), timeout=10)

        def unfinished():
            rows = db.execute("SELECT id, state FROM jobs WHERE name LIKE 'up-%'").fetchall()
            states = dict(rows)
            return [j for j in ids.values() if states.get(j) not in ("succeeded", "failed", "cancelled")]

        wait_until("every accepted job finished", lambda: not unfinished(), 90, 0.2)
        states = dict(db.execute("SELECT id, state FROM jobs WHERE name LIKE 'up-%'").fetchall())
        names = db.execute("SELECT name, count(*) FROM jobs WHERE name LIKE 'up-%' GROUP BY name HAVING count(*) > 1").fetchall()
        events = {}
        for jid, state in db.execute("SELECT job_id, state FROM job_events WHERE state != '' ORDER BY seq"):
            events.setdefault(jid, []).append(state)
        db.close()
        failed = [j for j in ids.values() if states[j] != "succeeded"]
        twice = [j for j in ids.values() if events.get(j, []).count("succeeded") != 1]
        rerun = [j for j in ids.values() if j not in twice and "running" in events[j][events[j].index("succeeded"):]]
        print(f"up: accepted {len(ids)} jobs from 3 tenants, client retries {sum(s.retries for s in streams)}; "
              f"killed and back (s): {timings}; restart gaps of a crashing worker (s): "
              f"{[round(g, 2) for g in gaps]}")
        assert not names and not failed and not twice and not rerun, (names, failed[:5], twice[:5], rerun[:5])
        assert not up.sanitizer_reports(), up.sanitizer_reports()


def test_up_sigterm_stops_everything_within_10s():
    with Up(workers=3) as up:
        tok = up.tenant("serving")
        jid = up.submit(tok, training_job(name="fm", steps=30))
        wait_until("the model trained", lambda: (j := up.job(tok, jid)) and j["state"] == "succeeded", 120, 0.2)
        serve = up.submit(tok, serve_job("fm"))
        wait_until("the model served", lambda: up.get("/v2/models/fm/ready", tok).status == 200, 60, 0.1)
        gang = training_job(name="gang", steps=1000000)
        gang["spec"]["workers"] = 2
        gang = up.submit(tok, gang)
        wait_until("the gang trains", lambda: any("loss" in e["reason"] for e in
                                                  up.get(f"/v1/jobs/{gang}/events", tok).json["events"]), 120, 0.2)
        assert len(up.daemons("gantry-worker")) == 3 and up.daemons("redis-server")
        assert " exited " not in up.stderr(), up.stderr()  # nothing crashed (and was restarted) so far

        t0 = time.monotonic()
        up.proc.send_signal(signal.SIGTERM)
        try:
            up.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        wait_until("no process of the stack left", lambda: not up.ours(), max(0.1, 10 - (time.monotonic() - t0)), 0.05)
        took = time.monotonic() - t0
        assert up.proc.poll() is not None, "deploy/up still runs"
        print(f"up: SIGTERM with an inference replica and a training gang running: everything gone in {took:.2f} s "
              f"(deploy/up exit status {up.proc.returncode})")
        assert took < 10 and up.proc.returncode == 0, (took, up.proc.returncode)
        assert "gantry: stopping" in up.stderr() and "SIGKILL" not in up.stderr(), up.stderr()[-2000:]

        # handed back, not lost: the same state started again runs both jobs again
        up.start()
        wait_until("the model served again", lambda: up.get("/v2/models/fm/ready", tok).status == 200, 60, 0.1)
        wait_until("the gang trains again", lambda: (j := up.job(tok, gang)) and j["state"] == "running"
                   and j["attempts"] >= 2, 60, 0.2)
        assert up.job(tok, serve)["state"] == "running"
        assert " exited " not in up.stderr() and not up.sanitizer_reports(), (up.stderr(), up.sanitizer_reports())


def test_worker_sigterm_hands_back_a_federated_site():
    with Stack(workers=0) as s:
        for i in range(3):
            s.start_worker(i, labels=f"site=s{i}")
        wait_until("3 site workers", lambda: len(s.workers()) == 3, 15)
        _, tok = s.tenant("sites")
        job = fed_job(3, rounds=1000, name="fed-stop")  # exchange_timeout_s 60
        for site in job["spec"]["sites"]:
            site.pop("label", None)  # site sN on the worker labelled site=sN, or on any: one site per worker
        jid = s.submit(tok, job)
        wait_until("a round done", lambda: any("round" in e["reason"] for e in s.events(tok, jid)), 120, 0.1)

        def handed_back():
            return [e for e in s.events(tok, jid) if e["state"] == "queued" and "handed back" in e["reason"]]

        # one site's worker stops (a rolling restart): it exits at once, the job goes back once, not as a failure,
        # and the other two sites stop with it (they would otherwise wait 60 s for its exchange)
        t0 = time.monotonic()
        s.procs["worker1"].send_signal(signal.SIGTERM)
        s.procs.pop("worker1").wait(timeout=5)
        exited = time.monotonic() - t0
        back = wait_until("the job handed back", handed_back, 5, 0.05)
        assert "worker w_test1 is stopping" in back[0]["reason"] and "failure" not in back[0]["reason"], back

        def peers_stopped():
            logs = [open(os.path.join(s.dir, f"worker{i}.log")).read() for i in (0, 2)]
            return all(f"job {jid}: handed back: worker w_test1 is stopping" in log for log in logs)

        wait_until("the other sites stopped too", peers_stopped, 5, 0.05)
        peers = time.monotonic() - t0
        # the whole stack stops (deploy/up's SIGTERM reaches every worker at once): all of them exit at once
        s.start_worker(1, labels="site=s1")
        wait_until("the sites run again", lambda: (j := s.job(tok, jid))["state"] == "running" and j["attempts"] >= 2
                   and any("round" in e["reason"] for e in s.events(tok, jid)[-5:]), 120, 0.1)
        t0 = time.monotonic()
        for i in range(3):
            s.procs[f"worker{i}"].send_signal(signal.SIGTERM)
        for i in range(3):
            s.procs.pop(f"worker{i}").wait(timeout=5)
        all_exited = time.monotonic() - t0
        wait_until("handed back twice", lambda: len(handed_back()) == 2, 5, 0.05)
        # back in the queue, not failed (the scheduler may already have offered it to a worker whose registry
        # entry has not expired yet: "scheduled", as CI's sanitizer run saw once)
        assert s.job(tok, jid)["state"] in ("queued", "scheduled"), s.job(tok, jid)
        print(f"up: a federated site's worker exits {exited:.2f} s after SIGTERM, the other sites stop within "
              f"{peers:.2f} s; all three sites' workers exit within {all_exited:.2f} s")


def test_up_control_only_node_with_private_state_and_redis_credentials():
    """GANTRY_WORKERS=0: Redis, the server and the scheduler, no worker (was a division by zero), said so.
    The stack's secrets: the state directory 700, the database, admin token, federation secret and
    secrets/ (made by deploy/secrets) 600; Redis refuses a client without credentials; every daemon runs
    in the state directory (not the checkout) and authenticates as its own ACL user; the scrape token
    reads every /metrics series."""
    state = tempfile.mkdtemp(prefix="gantry-up-")
    os.chmod(state, 0o755)  # deploy/up closes it
    with Up(workers=0, state=state) as up:
        wait_until("the message", lambda: "no worker: a control-only node" in open(os.path.join(up.dir, "up.out")).read(), 10)
        assert not up.daemons("gantry-worker") and up.daemons("gantry-scheduler") and up.daemons("redis-server")
        mode = lambda p: oct(os.stat(os.path.join(up.dir, p)).st_mode & 0o777)
        assert mode(".") == oct(0o700) and mode("secrets") == oct(0o700)
        for f in ("gantry.db", "gantry.db-wal", "admin.token", "fed.secret", *("secrets/" + n for n in os.listdir(os.path.join(up.dir, "secrets")))):
            if os.path.exists(os.path.join(up.dir, f)):
                assert mode(f) == oct(0o600), f
        assert os.path.exists(os.path.join(up.dir, "secrets", "redis.acl"))
        noauth = subprocess.run(["redis-cli", "-p", str(up.rport), "PING"], capture_output=True, text=True, timeout=10).stdout
        assert "NOAUTH" in noauth, noauth
        for name in ("gantry-server", "gantry-scheduler"):
            for pid in up.daemons(name):
                assert os.readlink(f"/proc/{pid}/cwd") == os.path.realpath(up.dir), name
                argv = proc_info(pid)[0]
                assert argv[argv.index("--redis-user") + 1] == name, argv
        with open(os.path.join(up.dir, "secrets", "metrics.token")) as f:
            scrape = f.read().strip()
        tok = up.tenant("control-only")
        assert 'tenant="control-only"' in up.get("/metrics", scrape).raw
        assert "control-only" not in up.get("/metrics").raw
        assert up.submit(tok, placement_job("waits"))  # accepted: it waits for a worker to join
