"""The security boundary around Redis, the secrets and /metrics (issue 27; docs/operations.md, "Redis
credentials", "Secrets and the state directory", "Metrics"), on real redis-server, daemons and Prometheus:

- Redis runs with deploy/secrets's ACL file (as every harness stack and deploy/up): a script's writes
  survive a Redis crash (AOF replay under the ACL); without credentials
  every command is refused (NOAUTH), a wrong password too (WRONGPASS); each daemon user is refused
  FLUSHALL, CONFIG, ACL, KEYS, SHUTDOWN and keys outside gantry:*; every daemon connects as its own user
  and a placement job runs to success; a daemon with a wrong password says so by user name; a password file
  others can read is refused;
- the server's state directory is 700, its database (-wal, -shm) and admin.token 600;
- /metrics shows tenant names and job ids only to an admin token or the scrape token (--metrics-token-file),
  not without a token nor to a member; a wrong token is a 401; Prometheus scrapes it with the shipped
  example's credentials_file;
- the inference gateway's per-job counters (server/infer.c) are never freed under a request in flight:
  more jobs than the table keeps, each with requests pending, all answered (run under ASan in CI)."""

import concurrent.futures
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
import zipfile

from harness import ADMIN, BUILD, ROOT, Stack, free_port, placement_job, wait_until

USERS = ("server", "scheduler", "worker")


def resp(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in (x if isinstance(x, bytes) else str(x).encode() for x in args))


def raw(port, *cmds):
    """sends each command (a tuple) on one fresh connection, in order; returns each reply's first line"""
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        f = sock.makefile("rb")
        for cmd in cmds:
            sock.sendall(resp(*cmd))
            line = f.readline().decode(errors="replace").rstrip("\r\n")
            if line[:1] == "$" and int(line[1:]) >= 0:  # a bulk string: read (and drop) its body
                f.read(int(line[1:]) + 2)
            elif line[:1] == "*":  # an array: good enough to know it was not an error
                pass
            out.append(line)
    return out


def http_get(port, path):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def test_redis_refuses_without_credentials_and_limits_each_daemon_user():
    with Stack(workers=1) as s:
        # each process authenticates as its own user; nobody as the default user
        clients = s.redis("CLIENT", "LIST")
        users = {kv.split("=", 1)[1] for line in clients.splitlines() for kv in line.split() if kv.startswith("user=")}
        assert {"gantry-server", "gantry-scheduler", "gantry-worker"} <= users and "default" not in users, clients
        _, tok = s.tenant("acl-team")
        s.wait_state(tok, s.submit(tok, placement_job("acl")))  # the whole path, every process through its ACL user

        # a script's writes (logged in the AOF as MULTI ... EXEC) survive a Redis crash: Redis 7.0 checks the
        # replayed transactions against the default user's rules (deploy/secrets; redis/redis#14541)
        wrk = ("AUTH", "gantry-worker", s.redis_user_password("worker"))
        got = raw(s.rport, wrk, ("EVAL", "redis.call('SET', KEYS[1], 'a'); redis.call('HSET', KEYS[2], 'f', 'v'); return 1",
                                 "2", "gantry:aof-a", "gantry:aof-h"))
        assert got[1] == ":1", got
        jobs_before = s.redis("XLEN", "gantry:jobs")
        s.kill("redis")
        s.start_redis()
        assert s.redis("GET", "gantry:aof-a") == "a" and s.redis("HGET", "gantry:aof-h", "f") == "v"
        assert s.redis("XLEN", "gantry:jobs") == jobs_before
        with open(os.path.join(s.dir, "redis.log"), errors="replace") as f:
            assert "CRITICAL" not in f.read()
        wait_until("the server back on Redis", lambda: s.get("/readyz").status == 200, 15)
        s.wait_state(tok, s.submit(tok, placement_job("after-crash")))

        # no credentials: nothing at all
        for cmd in (("PING",), ("GET", "gantry:epoch"), ("XADD", "gantry:jobs", "*", "job", "{}"),
                    ("EVAL", "return 1", "0"), ("KEYS", "*")):
            got = raw(s.rport, cmd)[0]
            assert got.startswith("-NOAUTH"), (cmd, got)
        # a wrong password, a wrong user, and the default user (off)
        assert raw(s.rport, ("AUTH", "gantry-worker", "not-the-password"))[0].startswith("-WRONGPASS")
        assert raw(s.rport, ("AUTH", "nobody", s.redis_user_password("worker")))[0].startswith("-WRONGPASS")
        assert raw(s.rport, ("AUTH", "default", ""))[0].startswith("-WRONGPASS")
        for user in USERS:
            auth = ("AUTH", f"gantry-{user}", s.redis_user_password(user))
            ok = raw(s.rport, auth, ("PING",), ("SET", "gantry:acl-test", "1"), ("GET", "gantry:acl-test"))
            assert ok[:3] == ["+OK", "+PONG", "+OK"], (user, ok)
            for cmd in (("FLUSHALL",), ("FLUSHDB",), ("CONFIG", "GET", "requirepass"), ("ACL", "LIST"), ("ACL", "WHOAMI"),
                        ("KEYS", "*"), ("SHUTDOWN", "NOSAVE"), ("MONITOR",), ("INFO",), ("CLIENT", "KILL", "TYPE", "normal"),
                        ("SUBSCRIBE", "gantry:x"), ("SCRIPT", "FLUSH"), ("FUNCTION", "FLUSH")):
                got = raw(s.rport, auth, cmd)[1]
                assert got.startswith("-NOPERM"), (user, cmd, got)
            # keys outside gantry:*, directly or from a script
            for cmd in (("GET", "other"), ("SET", "session:1", "x"), ("EVAL", "return redis.call('GET', 'other')", "0")):
                got = raw(s.rport, auth, cmd)[1]
                assert got.startswith("-NOPERM") or "can't access" in got, (user, cmd, got)
        # only the server loads scripts (its inference enqueue script)
        srv = ("AUTH", "gantry-server", s.redis_user_password("server"))
        assert raw(s.rport, srv, ("SCRIPT", "LOAD", "return 1"))[1].startswith("$")
        assert raw(s.rport, wrk, ("SCRIPT", "LOAD", "return 1"))[1].startswith("-NOPERM")
        assert raw(s.rport, wrk, ("EVAL", "return redis.call('TIME')[1]", "0"))[1].startswith("$")
        assert s.redis("GET", "gantry:acl-test") == "1"  # nothing above flushed anything
        assert s.redis("DBSIZE") != "0"

        # a daemon with a wrong password says which user Redis refused, and keeps trying
        bad = os.path.join(s.dir, "bad.password")
        with open(os.open(bad, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("wrong-password\n")
        p = s._spawn("badworker", [os.path.join(BUILD, "gantry-worker"), "--redis", f"127.0.0.1:{s.rport}",
                                   "--redis-user", "gantry-worker", "--redis-password-file", bad, "--id", "w_bad",
                                   "--state", os.path.join(s.dir, "var", "worker")])
        log = os.path.join(s.dir, "badworker.log")
        wait_until("the refusal in the worker's log",
                   lambda: "Redis refused our credentials (user gantry-worker): WRONGPASS" in open(log).read(), 10)
        assert p.poll() is None
        s.kill("badworker")
        # the server's asynchronous connections too (wire/redis_uv.c)
        bad_port = free_port()
        s._spawn("badserver", [os.path.join(BUILD, "gantry-server"), "--listen", f"127.0.0.1:{bad_port}",
                               "--redis", f"127.0.0.1:{s.rport}", "--redis-user", "gantry-server", "--redis-password-file", bad,
                               "--state", os.path.join(s.dir, "badstate"), "--admin-token", ADMIN,
                               "--web", os.path.join(ROOT, "web"), "--migrations", os.path.join(ROOT, "migrations")])
        log = os.path.join(s.dir, "badserver.log")
        wait_until("the refusal in the server's log",
                   lambda: "Redis refused our credentials (user gantry-server): WRONGPASS" in open(log).read(), 10)
        ready = http_get(bad_port, "/readyz")
        assert ready[0] == 503 and json.loads(ready[1])["redis"] is False, ready  # a probe sees it
        s.kill("badserver")
        # a password file its group or others can read is refused before anything starts
        os.chmod(bad, 0o644)
        for daemon in ("gantry-worker", "gantry-scheduler", "gantry-server"):
            r = subprocess.run([os.path.join(BUILD, daemon), "--redis", f"127.0.0.1:{s.rport}", "--redis-user", "gantry-worker",
                                "--redis-password-file", bad,
                                *(["--state", os.path.join(s.dir, "st-" + daemon)] if daemon != "gantry-scheduler" else [])],
                               capture_output=True, text=True, timeout=10, env=s.env)
            assert r.returncode == 2 and "neither its group nor others can read" in r.stderr and "chmod 600" in r.stderr, (daemon, r)

        # the server's state: the directory 700, the database and the admin token 600
        state = os.path.join(s.dir, "state")
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
        for name in ("gantry.db", "gantry.db-wal", "gantry.db-shm", "admin.token"):
            path = os.path.join(state, name)
            if name == "admin.token" and not os.path.exists(path):
                continue  # the harness gives the server --admin-token: no file is written
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, name
        # and deploy/secrets's files
        assert stat.S_IMODE(os.stat(s.secrets).st_mode) == 0o700
        for name in os.listdir(s.secrets):
            assert stat.S_IMODE(os.stat(os.path.join(s.secrets, name)).st_mode) == 0o600, name
        with open(os.path.join(s.secrets, "redis.acl")) as f:
            acl = f.read()
        assert all(s.redis_user_password(u) not in acl for u in USERS + ("admin",))  # hashes only
        s.redis("ACL", "LOG", "RESET")  # the refusals above were on purpose (the harness fails a test on any)


def test_server_state_files_private_from_scratch():
    """a state directory made by an older version (755, a 644 database) is closed when the server starts"""
    with Stack(workers=0) as s:
        state = os.path.join(s.dir, "state")
        s.kill("server")
        os.chmod(state, 0o755)
        os.chmod(os.path.join(state, "gantry.db"), 0o644)
        s.start_server()
        assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(os.path.join(state, "gantry.db")).st_mode) == 0o600


def metrics_token(d):
    path = os.path.join(d, "metrics.token")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(uuid.uuid4().hex + uuid.uuid4().hex + "\n")
    with open(path) as f:
        return path, f.read().strip()


def test_metrics_names_tenants_and_jobs_only_to_admins_and_the_scrape_token():
    d = tempfile.mkdtemp(prefix="gantry-metrics-")
    path, token = metrics_token(d)
    with Stack(workers=0, server_args=["--metrics-token-file", path]) as s:
        tid, member = s.tenant("metrics-secret-team")
        jid = s.submit(member, placement_job("queued"))
        # a tenant name and a job id that /metrics can show (slots per tenant; inference counters per job)
        name = "metrics-secret-team"

        def text(tok):
            r = s.get("/metrics", tok)
            assert r.status == 200 and "text/plain" in r.headers["content-type"], r
            return r.raw

        for who, tok in (("no token", None), ("member", member), ("viewer", s.token(tid, "viewer"))):
            t = text(tok)
            assert "gantry_http_requests_total" in t and "gantry_jobs{" in t, who  # cluster-wide series stay
            assert name not in t and tid not in t and jid not in t and "tenant=" not in t and "job=" not in t, (who, t)
        for who, tok in (("scrape token", token), ("admin", ADMIN)):
            t = text(tok)
            assert f'gantry_tenant_slots_used{{tenant="{name}"}}' in t, (who, t)
        assert s.get("/metrics", "not-a-token-at-all").status == 401
        assert s.get("/metrics", token[:-1] + ("0" if token[-1] != "0" else "1")).status == 401
        r = s.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}", "X": "1"})
        assert r.status == 200

        # Prometheus, configured as deploy/prometheus/prometheus.yml says (credentials_file), sees every series
        if shutil.which("prometheus"):
            with open(os.path.join(ROOT, "deploy", "prometheus", "prometheus.yml")) as f:
                conf = f.read()
            assert "credentials_file: /etc/prometheus/gantry-metrics.token" in conf
            conf = conf.replace("/etc/prometheus/gantry-metrics.token", path).replace("127.0.0.1:8080", f"127.0.0.1:{s.port}")
            conf = conf.replace("scrape_interval: 15s", "scrape_interval: 1s")
            cfg = os.path.join(d, "prometheus.yml")
            with open(cfg, "w") as f:
                f.write(conf)
            check = subprocess.run(["promtool", "check", "config", cfg], capture_output=True, text=True, timeout=30)
            assert check.returncode == 0, check.stdout + check.stderr
            pport = free_port()
            plog = open(os.path.join(d, "prometheus.log"), "wb")
            prom = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={d}/tsdb",
                                     f"--web.listen-address=127.0.0.1:{pport}"], stdout=plog, stderr=subprocess.STDOUT)
            try:
                q = urllib.parse.quote('gantry_tenant_slots_used{tenant="%s"}' % name)

                def scraped():
                    with urllib.request.urlopen(f"http://127.0.0.1:{pport}/api/v1/query?query={q}", timeout=5) as r:
                        return json.load(r)["data"]["result"]
                wait_until("Prometheus scraped the per-tenant series", scraped, 30, 0.3)
            finally:
                prom.terminate()
                prom.wait(timeout=10)
                plog.close()

        # a token file others can read is refused
        os.chmod(path, 0o644)
        r = subprocess.run([os.path.join(BUILD, "gantry-server"), "--metrics-token-file", path, "--state",
                            os.path.join(d, "state"), "--listen", f"127.0.0.1:{free_port()}", "--redis", f"127.0.0.1:{s.rport}"],
                           capture_output=True, text=True, timeout=10, env=s.env)
        assert r.returncode == 2 and "--metrics-token-file" in r.stderr and "chmod 600" in r.stderr, r
    shutil.rmtree(d, ignore_errors=True)


# ---- the inference gateway's per-job counters under requests in flight ----

MLP_META = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
            "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, 3]}]}


def fake_torchscript():
    """a ZIP laid out as torch.jit.save writes one (the server checks the layout, not the model); no worker
    runs it here: the requests wait in the model's queue until the job's timeout_ms"""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("m/data.pkl", b"\x80\x02}q\x00.")
        z.writestr("m/constants.pkl", b"\x80\x02)q\x00.")
        z.writestr("m/code/__torch__.py", b"class M:\n  pass\n")
        z.writestr("m/version", b"3\n")
    return buf.getvalue()


def upload(s, tok, name, data):
    boundary = "gantryAclTestBoundary0123456789"
    body = b""
    for field, filename, part in (("metadata", None, json.dumps(MLP_META).encode()), ("file", "model.pt", data)):
        disp = f'form-data; name="{field}"' + (f'; filename="{filename}"' if filename else "")
        ctype = "application/octet-stream" if filename else "application/json"
        body += f"--{boundary}\r\nContent-Disposition: {disp}\r\nContent-Type: {ctype}\r\n\r\n".encode() + part + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return s.request("POST", f"/v1/models/{name}/versions", tok, raw=body,
                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})


def running(s, jid):
    """what a replica's worker reports when it starts serving: the job is running"""
    ev = {"id": "e_" + uuid.uuid4().hex[:16], "job_id": jid, "ts": int(time.time() * 1000), "source": "worker:w_fake",
          "state": "running", "reason": "serving", "progress": -1}
    s.redis("XADD", "gantry:events", "*", "event", json.dumps(ev))


def test_infer_stats_are_never_freed_under_a_pending_request():
    """--infer-stats-jobs 8 (the default is 1,024: the same code, with fewer jobs to make): 8 jobs whose
    requests ended leave idle entries, then 24 jobs with a request each in flight at once (the idle entries
    are forgotten, the table grows past 8 rather than forget one a request points at), then 8 more while
    those are still pending.  Every request is answered (504: no replica reads the queue), the counters of
    the jobs the table kept are right, and the server (under ASan in CI) reports no use after free."""
    n_quick, n_slow, n_late = 8, 24, 8
    with Stack(workers=0, server_args=["--infer-stats-jobs", "8"]) as s:
        _, tok = s.tenant("many-models")
        model = fake_torchscript()
        jobs = []
        for i in range(n_quick + n_slow + n_late):
            r = upload(s, tok, f"m{i}", model)
            assert r.status == 201, r
            timeout_ms = 50 if i < n_quick else 3000
            jid = s.submit(tok, {"type": "inference", "name": f"serve-m{i}",
                                 "spec": {"model": f"m{i}", "slo": {"latency_ms": 100, "percentile": 99},
                                          "replicas": 1, "timeout_ms": timeout_ms}})
            running(s, jid)
            jobs.append(jid)
        wait_until("every job running", lambda: all(s.job(tok, j)["state"] == "running" for j in jobs), 20)
        body = {"id": "t", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}

        def infer(i):
            return s.post(f"/v2/models/m{i}/infer", tok, body, timeout=30)

        with concurrent.futures.ThreadPoolExecutor(max_workers=n_slow + n_late) as pool:
            quick = list(pool.map(infer, range(n_quick)))
            assert all(r.status == 504 for r in quick), quick
            slow = [pool.submit(infer, i) for i in range(n_quick, n_quick + n_slow)]
            # those are in flight (3 s timeout: no replica reads their queues) ...
            wait_until("the slow requests queued", lambda: all(
                s.redis("LLEN", f"gantry:infer:q:{j}") == "1" for j in jobs[n_quick:n_quick + n_slow]), 10)
            late = [pool.submit(infer, i) for i in range(n_quick + n_slow, len(jobs))]  # ... when these come
            answers = [f.result() for f in slow + late]
        assert all(r.status == 504 and r.json["error"]["code"] == "timeout" for r in answers), answers
        assert s.get("/healthz").status == 200
        text = s.get("/metrics", ADMIN).raw
        kept = [j for j in jobs if f'gantry_inference_requests_total{{job="{j}",outcome="timeout"}}' in text]
        assert kept, text
        for j in kept:
            assert f'gantry_inference_requests_total{{job="{j}",outcome="timeout"}} 1\n' in text, j
        with open(os.path.join(s.dir, "server.log"), errors="replace") as f:
            log = f.read()
        assert "AddressSanitizer" not in log and "runtime error:" not in log, log[-3000:]
