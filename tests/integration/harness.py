"""Starts a real gantry stack on loopback for one test: redis-server on a free
port, gantry-server, gantry-scheduler and N gantry-workers from the build
directory, each with its own temp state.  Python standard library only.

Every wait is a poll with a deadline (wait_until), never a bare sleep."""

import copy
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("GANTRY_BUILD", "build"))
ADMIN = "admin-token-for-tests-0123456789"

TINY_GRAPH = {
    "ops": [{"name": "a", "compute_us": 10, "output_bytes": [100]},
            {"name": "b", "compute_us": 20, "output_bytes": [100]},
            {"name": "c", "compute_us": 15, "output_bytes": [100]}],
    "edges": [{"src": "a", "dst": "b", "bytes": 100}, {"src": "b", "dst": "c", "bytes": 100}],
    "devices": [{"name": "d0", "memory_bytes": 1000000}, {"name": "d1", "memory_bytes": 1000000}],
    "comm": {"latency_us": 5, "bytes_per_us": 100},
}


def placement_job(name="job", graph=None):
    return {"type": "placement", "name": name, "spec": {"graph": copy.deepcopy(graph or TINY_GRAPH), "algorithms": ["m-topo"]}}


# the uids program ranks run as (workers/program/prog_netfence.h PROG_NETFENCE_UID_MIN, 65536 of them): each test worker gets its
# own (--sandbox-uid), distinct from another test run's on this machine
SANDBOX_UID_MIN = 1879048192


def sandbox_uid(i):
    return SANDBOX_UID_MIN + (os.getpid() % 8000) * 8 + i


# Ports for the stacks' daemons: below the kernel's ephemeral range (32768 and up by default, where bind(0) and
# every outgoing connection take theirs), in a block of PORT_BLOCK per test (run.py numbers the tests it runs:
# GANTRY_TEST_PORT_BLOCK; else by pid), never the same one twice in a process.  bind(0) could hand the same port to two tests running side by side (run.py runs two at
# once), or twice to one stack, between its close here and the daemon's bind.
PORT_LOW, PORT_HIGH, PORT_BLOCK = 20000, 32760, 48
_ports_given = set()


def free_port():
    """a port on 127.0.0.1 nothing listens on, not given before in this process"""
    blocks = (PORT_HIGH - PORT_LOW) // PORT_BLOCK
    start = PORT_LOW + (int(os.environ.get("GANTRY_TEST_PORT_BLOCK", os.getpid())) % blocks) * PORT_BLOCK
    for k in range(PORT_HIGH - PORT_LOW):  # this process's block first, then the ones after it
        port = PORT_LOW + (start - PORT_LOW + k) % (PORT_HIGH - PORT_LOW)
        if port in _ports_given:
            continue
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _ports_given.add(port)
        return port
    raise OSError("no free port left below the ephemeral range")


def timeout(seconds):
    """decorator: this test's time limit in seconds, instead of run.py's default (run.py reads fn.timeout)"""
    def mark(fn):
        fn.timeout = seconds
        return fn
    return mark


def alone(fn):
    """decorator: run.py runs this test with no other test beside it (it measures time or load, or it holds
    something every test would share: deploy/up's sandbox uids, network namespaces).  A module whose tests all
    need it says ALONE = True instead"""
    fn.alone = True
    return fn


def iso_seconds(iso):
    """the API's ISO 8601 UTC times (2026-11-28T09:05:33.384Z) in seconds since the epoch"""
    from datetime import datetime
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def wait_until(what, fn, timeout=20.0, interval=0.02):
    """Polls fn until it returns a truthy value; raises AssertionError naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except (OSError, http.client.HTTPException) as e:
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.raw = status, headers, body
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    def __repr__(self):
        return f"<{self.status} {self.raw[:200]!r}>"


class Client:
    """HTTP requests to a stack's API; the class that mixes it in says how to connect (connection())"""

    def request(self, method, path, token=None, body=None, headers=None, raw=None, timeout=30):
        conn = self.connection(timeout)
        h = dict(headers or {})
        if token:
            h["Authorization"] = f"Bearer {token}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=data, headers=h)
            r = conn.getresponse()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode(errors="replace"))
        finally:
            conn.close()

    def get(self, path, token=None, **kw):
        return self.request("GET", path, token, **kw)

    def post(self, path, token=None, body=None, **kw):
        return self.request("POST", path, token, body if body is not None else {}, **kw)


class Stack(Client):
    def __init__(self, workers=2, redis_persist=True, env=None, server_args=(), tls_ca=None, redis_password=None,
                 scheduler_args=(), redis_acl=True):
        self.dir = tempfile.mkdtemp(prefix="gantry-it-")
        self.port = free_port()
        self.rport = free_port()
        self.nworkers = workers
        self.redis_persist = redis_persist
        self.server_args = list(server_args)
        self.scheduler_args = list(scheduler_args)
        self.tls_ca = tls_ca  # when set, the server speaks HTTPS with a certificate signed by this file
        # Redis credentials (docs/operations.md, "Redis credentials"): by default Redis runs with deploy/up's ACL
        # file (made by deploy/secrets), its default user off, and each daemon authenticates as its own user
        # with its own password file, so every test goes through the ACLs a deployment has.  The harness keeps
        # gantry-admin (every command) for itself: redis() and redis_cli_args().  redis_password instead: the
        # old single password (requirepass, --redis-password); redis_acl=False: no credentials at all.
        self.redis_password = redis_password
        self.redis_acl = redis_acl and not redis_password
        self.secrets = os.path.join(self.dir, "secrets")
        if self.redis_acl:
            subprocess.run([os.path.join(ROOT, "deploy", "secrets"), self.secrets], check=True)
        self.env = dict(os.environ, **(env or {}))
        # leaks at exit are the unit tests' business; daemons are killed on purpose here
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        self.procs = {}
        self.redis_extra = []  # more redis-server options (test_redis_tls.py: a TLS port)
        self.logs = []
        # the cluster secret federated sites authenticate their keys with (workers' --fed-secret)
        self.fed_secret = os.path.join(self.dir, "fed.secret")
        with open(os.open(self.fed_secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(os.urandom(32).hex() + "\n")

    # ---- processes ----
    def _spawn(self, name, argv):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        self.logs.append(log)
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                            cwd=self.dir)
        return self.procs[name]

    def start_redis(self):
        argv = ["redis-server", "--port", str(self.rport), "--bind", "127.0.0.1", "--dir", self.dir, "--save", ""]
        if self.redis_password:
            argv += ["--requirepass", self.redis_password]
        if self.redis_acl:
            argv += ["--aclfile", os.path.join(self.secrets, "redis.acl")]
        argv += ["--appendonly", "yes", "--appendfsync", "always"] if self.redis_persist else ["--appendonly", "no"]
        self._spawn("redis", argv + self.redis_extra)
        wait_until("redis", lambda: self.redis("PING") == "PONG", 10)

    def redis_user_password(self, user):
        """the password of a Redis ACL user of this stack (server, scheduler, worker, admin)"""
        with open(os.path.join(self.secrets, f"redis-{user}.password")) as f:
            return f.read().strip()

    def _redis_args(self, user):
        """a daemon's Redis options: its own ACL user and password file (user: server, scheduler, worker)"""
        args = ["--redis", f"127.0.0.1:{self.rport}"]
        if self.redis_acl:
            return args + ["--redis-user", f"gantry-{user}",
                           "--redis-password-file", os.path.join(self.secrets, f"redis-{user}.password")]
        return args + ["--redis-password", self.redis_password] if self.redis_password else args

    def redis_auth(self):
        """the AUTH command (a tuple) the harness's own raw connections send first, or None without credentials"""
        if self.redis_acl:
            return ("AUTH", "gantry-admin", self.redis_user_password("admin"))
        return ("AUTH", self.redis_password) if self.redis_password else None

    def redis_cli_args(self):
        """redis-cli's credentials options for the harness's admin user ([] without credentials)"""
        if self.redis_acl:
            return ["--no-auth-warning", "--user", "gantry-admin", "--pass", self.redis_user_password("admin")]
        return ["--no-auth-warning", "-a", self.redis_password] if self.redis_password else []

    def start_server(self):
        self._spawn("server", [os.path.join(BUILD, "gantry-server"), "--listen", f"127.0.0.1:{self.port}",
                               *self._redis_args("server"), "--state", os.path.join(self.dir, "state"),
                               "--admin-token", ADMIN, "--web", os.path.join(ROOT, "web"),
                               "--migrations", os.path.join(ROOT, "migrations"), *self.server_args])
        wait_until("server /healthz", lambda: self.get("/healthz").status == 200, 15)

    def start_scheduler(self, name="scheduler"):
        self._spawn(name, [os.path.join(BUILD, "gantry-scheduler"), *self._redis_args("scheduler"), "--name", name, *self.scheduler_args])

    def site_key(self, i):
        """worker i's federated identity key file (made once, as ./deploy/up does) and its public key's text"""
        path = os.path.join(self.dir, f"site-{i}.key")
        out = subprocess.run([os.path.join(BUILD, "gantry-worker"), "--make-site-key", path], check=True,
                             capture_output=True, text=True, env=self.env)
        return path, out.stdout.strip()

    def start_worker(self, i, labels="", site_key=False):
        """worker w_test<i>; site_key: with its own identity key (site_key(i))"""
        key = ["--site-key", self.site_key(i)[0]] if site_key else []
        self._spawn(f"worker{i}", [os.path.join(BUILD, "gantry-worker"), *self._redis_args("worker"),
                                   "--id", f"w_test{i}", "--labels", labels, "--fed-secret", self.fed_secret,
                                   "--state", os.path.join(self.dir, "var", "worker"),  # shared by the stack's workers
                                   "--sandbox-uid", str(sandbox_uid(i)), *key])

    def __enter__(self):
        try:
            self.start_redis()
            self.start_server()
            self.start_scheduler()
            for i in range(self.nworkers):
                self.start_worker(i)
            wait_until("workers registered", lambda: len(self.workers()) == self.nworkers, 15)
            wait_until("server ready", lambda: self.get("/readyz").status == 200, 15)
        except BaseException as e:  # __exit__ is not called when __enter__ fails (a timeout too): stop what started
            self.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def pause(self, name):
        self.procs[name].send_signal(signal.SIGSTOP)

    def resume(self, name):
        self.procs[name].send_signal(signal.SIGCONT)

    def events(self, token, job_id):
        return self.get(f"/v1/jobs/{job_id}/events", token).json["events"]

    def kill(self, name, sig=signal.SIGKILL):
        p = self.procs.pop(name)
        p.send_signal(sig)
        p.wait(timeout=15)
        return p.returncode

    def acl_denials(self):
        """what Redis refused a gantry daemon user (ACL LOG: a command, a key or a channel it has no right to);
        [] when Redis is not running with the ACL users"""
        if not self.redis_acl or "redis" not in self.procs or self.procs["redis"].poll() is not None:
            return []
        out = subprocess.run(["redis-cli", "-p", str(self.rport), *self.redis_cli_args(), "--json", "ACL", "LOG", "64"],
                             capture_output=True, text=True, timeout=10).stdout
        try:
            entries = json.loads(out or "[]")
        except ValueError:
            return []
        return [e for e in entries if isinstance(e, dict) and e.get("reason") in ("command", "key", "channel")
                and e.get("username") in ("gantry-server", "gantry-scheduler", "gantry-worker")]

    def __exit__(self, *exc):
        # every test checks that the daemons' ACL users can run what the code runs: a refusal here is a
        # command or a key missing from deploy/secrets's rules (tests that provoke one on purpose reset the log)
        denied = self.acl_denials() if exc[0] is None else []
        for name in list(self.procs):
            p = self.procs[name]
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for log in self.logs:
            log.close()
        if exc[0] is not None:
            self.dump_logs()
        if denied:
            raise AssertionError("Redis refused a gantry daemon (ACL LOG): " + "; ".join(
                f"{e.get('username')} {e.get('reason')} {e.get('object')} ({e.get('context')})" for e in denied))
        return False

    def dump_logs(self, lines=25):
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(".log"):
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    tail = f.readlines()[-lines:]
                print(f"---- {name} (last {len(tail)} lines) ----")
                print("".join(tail), end="")

    # ---- Redis ----
    def redis(self, *args):
        out = subprocess.run(["redis-cli", "-p", str(self.rport), *self.redis_cli_args(), *map(str, args)], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip()

    # ---- HTTP ----
    def connection(self, timeout=30):
        if self.tls_ca:
            ctx = ssl.create_default_context(cafile=self.tls_ca)
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=ctx)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    # ---- API helpers ----
    def tenant(self, name, role="member"):
        """creates a tenant and a token for it; returns (tenant_id, token)"""
        r = self.post("/v1/tenants", ADMIN, {"name": name})
        assert r.status == 201, r
        t = self.post(f"/v1/tenants/{r.json['id']}/tokens", ADMIN, {"role": role, "name": name + "-" + role})
        assert t.status == 201, t
        return r.json["id"], t.json["token"]

    def token(self, tenant_id, role):
        t = self.post(f"/v1/tenants/{tenant_id}/tokens", ADMIN, {"role": role})
        assert t.status == 201, t
        return t.json["token"]

    def submit(self, token, job=None, **kw):
        r = self.post("/v1/jobs", token, job or placement_job(), **kw)
        assert r.status == 201, r
        return r.json["id"]

    def job(self, token, job_id):
        return self.get(f"/v1/jobs/{job_id}", token).json

    def wait_state(self, token, job_id, state="succeeded", timeout=30):
        return wait_until(f"job {job_id} {state}",
                          lambda: (j := self.job(token, job_id)) and j["state"] == state and j, timeout)

    def workers(self):
        r = self.get("/v1/workers", ADMIN)
        return r.json["workers"] if r.status == 200 else []
