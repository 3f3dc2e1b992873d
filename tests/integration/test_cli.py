"""The gantry CLI (libcurl) against a real stack: login writes a 0600 config (one readable by others
is refused), submit from a file and from stdin, list as a table and as JSON, get, follow over SSE
until the job ends, cancel, workers, models, admin commands; API errors print their message and
field, with exit status 1.  Help and --version without a config or a token; unknown commands are
usage errors (2).  Names with control characters are refused by the server, and those stored before
are printed escaped (a name must not rewrite the reader's terminal).  follow prints a queued job's
state and why it waits at once, and ends at once for a finished job."""

import calendar
import fcntl
import json
import os
import pty
import re
import selectors
import sqlite3
import struct
import subprocess
import tempfile
import termios
import time
import tty

from harness import ADMIN, BUILD, ROOT, Stack, placement_job, timeout, wait_until

CLI = os.path.join(BUILD, "cli", "gantry")


def run(args, env, stdin=None, check=True):
    r = subprocess.run([CLI, *args], env=env, input=stdin, capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
    return r


def assert_aligned(lines):
    """a table as people read it: every column starts (left-aligned) or ends (right-aligned, numbers) at
    the same place on every line; cells are separated by two spaces or more and may hold single spaces"""
    rows = [[m.span() for m in re.finditer(r"\S+(?: \S+)*", line)] for line in lines]
    assert len({len(r) for r in rows}) == 1, ("a row with another number of cells", lines)
    for c in range(len(rows[0])):
        starts, ends = {r[c][0] for r in rows}, {r[c][1] for r in rows}
        assert len(starts) == 1 or (len(ends) == 1 and c < len(rows[0]) - 1), (f"column {c} is not aligned", lines)


DURATION = r"(\d+\.\dms|\d+ms|\d+\.\ds|\d+m\d\ds|\d+h\d\dm|\d+d\d\dh)"


def iso_s(text):
    """the API's time (2026-11-22T07:12:00.123Z) in seconds since the epoch"""
    return calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + text[19:-1])


def test_cli_end_to_end():
    home = tempfile.mkdtemp(prefix="gantry-cli-")
    started = time.time()
    with Stack(workers=1) as s:
        tid, tok = s.tenant("cli-team")
        env = {"HOME": home, "PATH": os.environ.get("PATH", "")}
        out = run(["login", "--url", f"http://127.0.0.1:{s.port}/"], env, stdin=tok + "\n").stdout
        assert "as member of tenant cli-team" in out, out
        cfg = os.path.join(home, ".config", "gantry", "config")
        assert os.stat(cfg).st_mode & 0o777 == 0o600
        # submit from a file and from stdin
        path = os.path.join(home, "job.json")
        with open(path, "w") as f:
            json.dump(placement_job(), f)
        jid = run(["submit", path], env).stdout.strip()
        assert jid.startswith("j_"), jid
        second = json.loads(run(["--json", "submit", "-"], env, stdin=json.dumps(placement_job())).stdout)["id"]
        # follow: live events until it ends
        follow = run(["follow", jid], env).stdout
        assert "succeeded" in follow.splitlines()[-1], follow
        s.wait_state(tok, second, "succeeded", timeout=60)
        # follow of a finished job: its final state at once, status 0
        done = run(["follow", second], env)
        assert done.stdout.startswith("succeeded") and second in done.stdout, done.stdout
        table = run(["list"], env).stdout.splitlines()
        assert table[0].split()[:4] == ["ID", "NAME", "TYPE", "STATE"], table
        assert any(line.startswith(jid) and "succeeded" in line for line in table), table
        assert_aligned(table)
        listed = json.loads(run(["list", "--json", "--state", "succeeded", "--limit", "5"], env).stdout)
        assert {jid, second} <= {j["id"] for j in listed["jobs"]}, listed
        got = run(["get", jid], env).stdout
        assert f"id        {jid}" in got and "state     succeeded" in got, got
        assert re.search(r"^duration  " + DURATION + "$", got, re.M), got
        # the result's metrics under their whole names (devices_used, makespan_us), values in one column
        metrics = got.split("metrics\n", 1)[1].splitlines()
        result = json.loads(run(["get", jid, "--json"], env).stdout)["result"]["metrics"]
        assert sorted(m.split()[0] for m in metrics) == sorted(result) and "devices_used" in result, (metrics, result)
        assert len({m.index(m.split()[1], len(m.split()[0]) + 2) for m in metrics}) == 1, metrics
        assert json.loads(run(["get", jid, "--json"], env).stdout)["result"], "no result"
        workers = run(["workers"], env).stdout.splitlines()
        assert "w_test0" in workers[1], workers
        assert_aligned(workers)
        assert run(["models"], env).stdout.startswith("NAME")
        # errors: the API's message and field, exit status 1
        bad = run(["submit", "-"], env, stdin=json.dumps({"type": "training", "spec": {}}), check=False)
        assert bad.returncode == 1 and "(field spec.model)" in bad.stderr, bad.stderr
        missing = run(["get", "j_nope"], env, check=False)
        assert missing.returncode == 1 and "HTTP 404" in missing.stderr, missing.stderr
        assert run(["cancel", jid], env, check=False).returncode == 1  # already finished: 409
        assert run(["tenants"], env, check=False).returncode == 1     # a member is not an admin
        # admin commands with the token from the environment (overrides the config)
        admin = dict(env, GANTRY_TOKEN=ADMIN)
        tenants = run(["tenants"], admin).stdout.splitlines()
        assert any("cli-team" in t for t in tenants), tenants
        assert_aligned(tenants)
        # the system tenant was created with this stack's database (migrations/0008), not in 1970
        system = next(t.split() for t in tenants if t.split()[1] == "system")
        assert started - 5 <= iso_s(system[3]) <= time.time() + 5, (system, started)
        created = run(["tokens", "create", tid, "--role", "viewer", "--name", "ro"], admin).stdout
        assert created.startswith("gnt_") or len(created.split()[0]) > 20, created
        # a config others can read is refused
        os.chmod(cfg, 0o644)
        refused = run(["list"], env, check=False)
        assert refused.returncode == 1 and "chmod 600" in refused.stderr, refused.stderr
        assert run(["nonsense"], env, check=False).returncode in (1, 2)


def version():
    with open(os.path.join(ROOT, "meson.build")) as f:
        return re.search(r"version:\s*'([^']+)'", f.read()).group(1)


def test_cli_help_and_version_need_no_config_or_token():
    home = tempfile.mkdtemp(prefix="gantry-cli-help-")
    env = {"HOME": home, "PATH": os.environ.get("PATH", "")}  # no config file, no GANTRY_TOKEN
    for config in (None, "unreadable", "readable-by-others"):
        if config:  # with a config file too: a broken one, or one refused for its mode
            cfg = os.path.join(home, "config")
            with open(cfg, "w") as f:
                f.write("{not json" if config == "unreadable" else json.dumps({"url": "http://127.0.0.1:1", "token": "x"}))
            os.chmod(cfg, 0o600 if config == "unreadable" else 0o644)
            env = dict(env, GANTRY_CONFIG=cfg)
        for args in (["--help"], ["-h"], ["help"], ["--json", "--help"]):
            r = run(args, env, check=False)
            assert r.returncode == 0, (config, args, r.returncode, r.stderr)
            assert r.stdout.startswith("usage: gantry") and "follow ID" in r.stdout and "--version" in r.stdout, r.stdout
        for args in (["help", "submit"], ["submit", "--help"], ["submit", "-h"]):
            r = run(args, env, check=False)
            assert r.returncode == 0, (config, args, r.returncode, r.stderr)
            assert r.stdout.startswith("usage: gantry [--json] submit FILE|-"), r.stdout
            assert "example:" in r.stdout and "gantry submit deploy/examples/placement.json" in r.stdout, r.stdout
        follow = run(["follow", "--help"], env, check=False)
        assert follow.returncode == 0 and "why it waits" in follow.stdout, follow
        tokens = run(["help", "tokens"], env, check=False)
        assert tokens.returncode == 0 and "--role ROLE" in tokens.stdout and "--name NAME" in tokens.stdout, tokens
        v = run(["--version"], env, check=False)
        assert v.returncode == 0 and v.stdout.strip() == f"gantry {version()}", v
        # usage errors: the usage on stderr, nothing on stdout, status 2, before any config or token
        for args in (["nonsense"], ["help", "nonsense"], [], ["get"], ["follow", "a", "b"], ["list", "--state"]):
            r = run(args, env, check=False)
            assert r.returncode == 2 and r.stdout == "" and "usage: gantry" in r.stderr, (config, args, r)


def test_cli_control_characters_refused_and_escaped():
    home = tempfile.mkdtemp(prefix="gantry-cli-ctl-")
    with Stack(workers=0) as s:  # no worker: jobs stay queued
        tid, tok = s.tenant("ctl-team")
        env = {"HOME": home, "PATH": os.environ.get("PATH", ""), "GANTRY_URL": f"http://127.0.0.1:{s.port}",
               "GANTRY_TOKEN": tok}
        # (a) the server refuses control characters in names, naming the field
        for name in ("\x1b]0;pwned\x07", "line\r\nbreak", "tab\there", "del\x7f", "csi\u009b31m", "nul\u0001"):
            r = s.post("/v1/jobs", tok, placement_job(name))
            assert r.status == 400 and r.json["error"]["field"] == "name", (name, r)
            assert "control characters" in r.json["error"]["message"], r
        bad = run(["submit", "-"], env, stdin=json.dumps(placement_job("\x1b[2Jgone")), check=False)
        assert bad.returncode == 1 and "(field name)" in bad.stderr and "\x1b" not in bad.stderr, bad
        ok = s.post("/v1/jobs", tok, placement_job("caf\u00e9 \u20ac run #1 \u00a0ok"))  # printable non-ASCII stays fine
        assert ok.status == 201, ok
        r = s.post(f"/v1/tenants/{tid}/tokens", ADMIN, {"role": "viewer", "name": "ci\x1b[31m"})
        assert r.status == 400 and r.json["error"]["field"] == "name", r
        r = s.post("/v1/tenants", ADMIN, {"name": "evil\x1b]0;x\x07"})
        assert r.status == 400 and r.json["error"]["field"] == "name", r
        inference = {"type": "inference", "name": "serve", "spec": {"model": "m\x1b[2J"}}
        r = s.post("/v1/jobs", tok, inference)
        assert r.status == 400 and r.json["error"]["field"] == "spec.model", r

        # (b) strings stored before this check (written straight into SQLite) are printed escaped
        jid = s.submit(tok, placement_job("plain"))
        evil = "\x1b]0;pwned\x07\r\nfake line\u009b31m\x7f"
        db = sqlite3.connect(os.path.join(s.dir, "state", "gantry.db"), timeout=10)
        with db:
            db.execute("UPDATE jobs SET name = ? WHERE id = ?", (evil, jid))
            db.execute("UPDATE tenants SET name = ? WHERE id = ?", ("ctl\x1b[2J-team", tid))
        db.close()
        escaped = "\\x1b]0;pwned\\x07\\r\\nfake line\\u009b31m\\x7f"

        def clean(out):
            return not re.search("[\x00-\x09\x0b-\x1f\x7f\u0080-\u009f]", out)

        table = run(["list"], env).stdout
        assert clean(table), repr(table)
        row = next(line for line in table.splitlines() if line.startswith(jid))
        assert "\\x1b]0;pwned" in row and "queued" in row, repr(row)  # the NAME column, cut to 20 characters
        got = run(["get", jid], env).stdout
        assert clean(got) and f"name      {escaped}\n" in got, repr(got)
        tenants = run(["tenants"], dict(env, GANTRY_TOKEN=ADMIN)).stdout
        assert clean(tenants) and "ctl\\x1b[2J-team" in tenants, repr(tenants)
        # --json stays valid JSON with the same string; no raw control character reaches the terminal
        for args in (["--json", "list"], ["--json", "get", jid]):
            out = run(args, env).stdout
            assert clean(out), repr(out)
            doc = json.loads(out)
            names = [j["name"] for j in doc["jobs"]] if "jobs" in doc else [doc["name"]]
            assert evil in names, names

        # follow of a queued job: its state and why it waits, at once (the scheduler's note first)
        wait_until("the scheduler's note", lambda: any("no capacity" in (e["reason"] or "") for e in s.events(tok, jid)), 20)
        lines = follow_lines(env, jid, lambda ls: any(line.startswith("waiting") for line in ls), timeout=5)
        assert lines[0].startswith("queued") and jid in lines[0] and "\\x1b]0;pwned" in lines[0], lines
        waiting = next(line for line in lines if line.startswith("waiting"))
        assert "no capacity" in waiting and "0 of 0 workers free" in waiting, lines
        assert all(clean(line) for line in lines), lines
        # a cancelled job: follow ends at once with status 1
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status in (200, 202)
        s.wait_state(tok, jid, "cancelled", timeout=20)
        t0 = time.monotonic()
        r = run(["follow", jid], env, check=False)
        assert r.returncode == 1 and r.stdout.startswith("cancelled") and time.monotonic() - t0 < 10, r


def follow_lines(env, jid, enough, timeout):
    """runs gantry follow JID until enough(lines) holds or the deadline passes; the lines it printed"""
    p = subprocess.Popen([CLI, "follow", jid], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not enough(out.decode(errors="replace").splitlines()):
            if sel.select(timeout=max(0.0, deadline - time.monotonic())):
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
    finally:
        p.kill()
        p.wait(timeout=10)
        sel.close()
        p.stdout.close()
        p.stderr.close()
    lines = out.decode(errors="replace").splitlines()
    assert enough(lines), f"follow printed within {timeout}s: {lines!r}"
    return lines


def test_cli_logs_and_outputs():
    """gantry logs (tail, --rank, --tail, -f until the job ends) and gantry outputs (the listing, a file to a
    pipe, -o FILE checked against the listed sha256), written here in the worker's format
    (test_program_logs.py has the helpers); what the program printed reaches the terminal escaped"""
    import hashlib
    from test_program_logs import _write, finish_job, xadd
    home = tempfile.mkdtemp(prefix="gantry-cli-")
    with Stack(workers=0) as s:
        _, tok = s.tenant("cli-logs")
        env = {"HOME": home, "PATH": os.environ.get("PATH", ""), "GANTRY_URL": f"http://127.0.0.1:{s.port}",
               "GANTRY_TOKEN": tok}
        jid = s.submit(tok, placement_job("printed"))
        xadd(s, jid, 0, text="zero 1\nzero 2\n")
        xadd(s, jid, 1, text="one \x1b[2J\tcleared\n")
        out = run(["logs", jid], env).stdout
        assert out == "[rank 0] zero 1\n[rank 0] zero 2\n[rank 1] one \\x1b[2J\tcleared\n", out
        assert run(["logs", jid, "--rank", "0", "--tail", "1"], env).stdout == "zero 2\n"
        assert json.loads(run(["--json", "logs", jid, "--rank", "0", "--tail", "1"], env).stdout) == \
            {"event": "log", "line": "zero 2"}
        bad = run(["logs", jid, "--tail", "x"], env, check=False)
        assert bad.returncode == 1 and "(field tail)" in bad.stderr, bad.stderr
        assert run(["logs", jid, "--bogus"], env, check=False).returncode == 2
        plain = s.submit(tok, placement_job("silent"))
        none = run(["logs", plain], env, check=False)
        assert none.returncode == 1 and "HTTP 404" in none.stderr and "program" in none.stderr, none.stderr

        # -f: the tail, a line written while it runs, then the end of the job (cancelled: status 1)
        p = subprocess.Popen([CLI, "logs", jid, "-f", "--tail", "1"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            assert p.stdout.readline() == b"[rank 1] one \\x1b[2J\tcleared\n"
            xadd(s, jid, 0, text="live\n")
            assert p.stdout.readline() == b"[rank 0] live\n"
            assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 200
            assert p.wait(timeout=30) == 1  # no end entries: the follow waits a few seconds for them, then ends
            assert b"the job cancelled" in p.stderr.read()
        finally:
            p.kill()
            p.wait(timeout=10)
            p.stdout.close()
            p.stderr.close()

        # outputs
        made = s.submit(tok, placement_job("made"))
        outdir = os.path.join(s.dir, "out-" + made)
        model = os.urandom(300000)
        _write(os.path.join(outdir, "model.pt"), model)
        _write(os.path.join(outdir, "sub", "notes.txt"), b"hello\n")
        files = [{"path": "model.pt", "bytes": len(model), "sha256": hashlib.sha256(model).hexdigest()},
                 {"path": "sub/notes.txt", "bytes": 6, "sha256": "0" * 64}]  # a listing that does not match the file
        finish_job(s, made, "succeeded", {"outputs": {"dir": outdir, "files": files}})
        s.wait_state(tok, made, "succeeded")
        table = run(["outputs", made], env).stdout.splitlines()
        assert table[0].split() == ["BYTES", "SHA256", "PATH"] and table[1].split() == [str(len(model)), files[0]["sha256"],
                                                                                       "model.pt"], table
        assert_aligned(table)
        assert json.loads(run(["--json", "outputs", made], env).stdout)["files"] == files
        piped = subprocess.run([CLI, "outputs", made, "model.pt"], env=env, capture_output=True, timeout=60)
        assert piped.returncode == 0 and piped.stdout == model, (piped.returncode, piped.stderr)
        target = os.path.join(home, "model.pt")
        saved = run(["outputs", made, "model.pt", "-o", target], env).stdout
        assert open(target, "rb").read() == model and files[0]["sha256"] in saved, saved
        notes = os.path.join(home, "notes.txt")
        wrong = run(["outputs", made, "sub/notes.txt", "-o", notes], env, check=False)
        assert wrong.returncode == 1 and "sha256" in wrong.stderr, wrong.stderr
        assert not os.path.exists(notes) and not os.path.exists(notes + ".part")
        missing = run(["outputs", made, "nothere"], env, check=False)
        assert missing.returncode == 1 and "no output file" in missing.stderr, missing.stderr
        assert run(["outputs", made, "model.pt", "-x", "f"], env, check=False).returncode == 2


MLP_META = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
            "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, 3]}],
            "description": "a 4-8-3 MLP", "metrics": {"accuracy": 0.5}}


def test_cli_models_upload_show_alias():
    """gantry models upload (multipart through curl's mime API; the local SHA-256 equals the server's),
    show (aliases, versions with format, size, sha256 prefix, description), alias (previous -> new,
    the serving job that rolls), unalias (refused while a job serves the alias), upload errors with
    their field; a server that records another sha256 than the file's is an error"""
    import hashlib
    from test_torchscript import models
    d = models()
    home = tempfile.mkdtemp(prefix="gantry-cli-models-")
    meta = os.path.join(home, "mlp.json")
    with open(meta, "w") as f:
        json.dump(MLP_META, f)
    files = [os.path.join(d, f"mlp_v{v}.pt") for v in (1, 2)]
    sha = [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in files]
    with Stack(workers=0) as s:  # no worker: the serving job stays queued, and still rolls with its alias
        _, tok = s.tenant("cli-models")
        env = {"HOME": home, "PATH": os.environ.get("PATH", ""), "GANTRY_URL": f"http://127.0.0.1:{s.port}",
               "GANTRY_TOKEN": tok}
        out = run(["models", "upload", "mlp", files[0], "--metadata", meta], env).stdout
        size = os.path.getsize(files[0])
        assert out == f"mlp version 1: {size} bytes, sha256 {sha[0]} (matches {files[0]})\n", out
        up = json.loads(run(["--json", "models", "upload", "mlp", files[1], "--metadata", meta], env).stdout)
        assert up["version"] == 2 and up["sha256"] == sha[1] and up["format"] == "torchscript", up
        assert run(["models"], env).stdout.splitlines()[1].split()[:2] == ["mlp", "2"]

        show = run(["models", "show", "mlp"], env).stdout.splitlines()
        assert show[0] == "model    mlp" and show[1] == "aliases  -", show
        assert show[3].split() == ["VERSION", "FORMAT", "SIZE", "SHA256", "CREATED", "DESCRIPTION"], show
        row = show[4].split(None, 5)
        assert row[:4] == ["2", "torchscript", str(os.path.getsize(files[1])), sha[1][:12]], row
        assert row[5].endswith("a 4-8-3 MLP") and show[5].split()[0] == "1", show
        assert_aligned(show[3:])  # CREATED (24 characters) no longer pushes DESCRIPTION out of its column

        assert run(["models", "alias", "mlp", "production", "1"], env).stdout == \
            "mlp@production: (unset) -> v1\nrolled: no serving job uses the alias\n"
        jid = s.submit(tok, {"type": "inference", "name": "serve-mlp",
                             "spec": {"model": "mlp@production", "slo": {"latency_ms": 500, "percentile": 99}, "replicas": 1}})
        moved = run(["models", "alias", "mlp", "production", "2"], env).stdout
        assert moved == f"mlp@production: v1 -> v2\nrolled: {jid}\n", moved
        assert s.get(f"/v1/jobs/{jid}", tok).json["spec"]["resolved"]["version"] == 2
        assert "aliases  production -> v2" in run(["models", "show", "mlp"], env).stdout
        as_json = json.loads(run(["--json", "models", "show", "mlp"], env).stdout)
        assert as_json["aliases"] == {"production": 2}, as_json

        # errors: the API's message and field, status 1; a VERSION that is no number is a usage error
        busy = run(["models", "unalias", "mlp", "production"], env, check=False)
        assert busy.returncode == 1 and "HTTP 409" in busy.stderr and "(field alias)" in busy.stderr, busy.stderr
        none = run(["models", "alias", "mlp", "production", "7"], env, check=False)
        assert none.returncode == 1 and "(field version)" in none.stderr, none.stderr
        assert run(["models", "alias", "mlp", "production", "two"], env, check=False).returncode == 2
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status in (200, 202)
        s.wait_state(tok, jid, "cancelled", timeout=20)
        assert run(["models", "unalias", "mlp", "production"], env).stdout == "mlp@production: removed\n"
        gone = run(["models", "unalias", "mlp", "production"], env, check=False)
        assert gone.returncode == 1 and "HTTP 404" in gone.stderr, gone.stderr

        bad_meta = os.path.join(home, "bad.json")
        with open(bad_meta, "w") as f:
            json.dump({"inputs": [{"name": "x", "datatype": "FP32", "shape": [4]}]}, f)
        r = run(["models", "upload", "mlp", files[0], "--metadata", bad_meta], env, check=False)
        assert r.returncode == 1 and "HTTP 400" in r.stderr and "(field metadata.inputs[0].shape[0])" in r.stderr, r.stderr
        not_ts = os.path.join(home, "not.pt")
        with open(not_ts, "wb") as f:
            f.write(b"not a TorchScript archive" * 10)
        r = run(["models", "upload", "mlp", not_ts, "--metadata", meta], env, check=False)
        assert r.returncode == 1 and "HTTP 400" in r.stderr and "(field file)" in r.stderr, r.stderr
        r = run(["models", "upload", "mlp", os.path.join(home, "absent.pt"), "--metadata", meta], env, check=False)
        assert r.returncode == 1 and "cannot read" in r.stderr, r.stderr
        r = run(["models", "show", "nothere"], env, check=False)
        assert r.returncode == 1 and "HTTP 404" in r.stderr, r.stderr
        assert run(["models", "upload", "mlp", files[0]], env, check=False).returncode == 2  # no --metadata
        assert [v["version"] for v in s.get("/v1/models/mlp", tok).json["versions"]] == [2, 1]  # nothing stored


def test_cli_models_upload_checks_the_servers_sha256():
    """an answer whose sha256 is not the local file's is an error (exit status 1), named in the message"""
    import http.server
    import threading

    class Lying(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"name": "m", "version": 1, "format": "torchscript", "sha256": "0" * 64,
                               "size_bytes": 3}).encode()
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Lying)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        home = tempfile.mkdtemp(prefix="gantry-cli-sha-")
        model, meta = os.path.join(home, "m.pt"), os.path.join(home, "m.json")
        with open(model, "wb") as f:
            f.write(b"abc")
        with open(meta, "w") as f:
            json.dump(MLP_META, f)
        env = {"HOME": home, "PATH": os.environ.get("PATH", ""), "GANTRY_URL": f"http://127.0.0.1:{srv.server_port}",
               "GANTRY_TOKEN": "t"}
        r = run(["models", "upload", "m", model, "--metadata", meta], env, check=False)
        local = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256("abc")
        assert r.returncode == 1 and f"sha256 {'0' * 64}" in r.stderr and local in r.stderr and r.stdout == "", r
    finally:
        srv.shutdown()
        srv.server_close()


def short_training(name, steps):
    """the README's training example (deploy/examples/training.json) with fewer steps"""
    with open(os.path.join(ROOT, "deploy", "examples", "training.json")) as f:
        job = json.load(f)
    job["name"] = name
    del job["spec"]["epochs"]
    job["spec"]["steps"] = steps
    job["spec"]["schedule"]["warmup_steps"] = steps // 4
    return job


def follow_on_a_terminal(env, jid, cols, timeout):
    """gantry follow JID with its stdout on a pseudo-terminal COLS wide (raw: no \\n -> \\r\\n); what it wrote
    and its exit status"""
    master, slave = pty.openpty()
    tty.setraw(slave)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    p = subprocess.Popen([CLI, "follow", jid], env=env, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(master, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the follow ended and closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
        rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        p.kill()
        p.wait(timeout=10)
        p.stderr.close()
        os.close(master)
    return out.decode(), rc


@timeout(420)
def test_cli_follow_progress_and_durations():
    """follow of the README's training example (fewer steps): state changes and notes on lines of their own;
    its progress points (up to twenty a second) as one line per tenth when stdout is not a terminal, and as
    one line rewritten in place (\\r, cut to the terminal's width) on a terminal; durations for people
    (1m48s, 12.3s, 850ms), never "119079.1 ms"; get prints the metrics' whole names"""
    home = tempfile.mkdtemp(prefix="gantry-cli-follow-")
    with Stack(workers=1) as s:
        _, tok = s.tenant("cli-follow")
        env = {"HOME": home, "PATH": os.environ.get("PATH", ""), "GANTRY_URL": f"http://127.0.0.1:{s.port}",
               "GANTRY_TOKEN": tok}
        jid = s.submit(tok, short_training("follow-pipe", 1500))
        r = run(["follow", jid], env)
        lines = r.stdout.splitlines()
        points = [line for line in lines if re.match(r"progress +\d+% epoch \S+ step \d+ loss", line)]
        sent = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        assert len(sent) >= 20, len(sent)  # stored points (the stream carried more): a follow printed a line for each
        tenths = [int(re.match(r"progress +(\d+)%", line).group(1)) // 10 for line in points]
        assert 3 <= len(points) <= 12 and tenths == sorted(set(tenths)), lines  # at most a line per tenth
        assert tenths[-1] == 10, lines  # the last point (100%) is printed
        assert len(lines) <= 20, lines
        assert re.fullmatch(r"succeeded +finished in " + DURATION, lines[-1]), lines  # the worker's event
        assert not re.search(r"\d ms\b", r.stdout), r.stdout
        assert "\r" not in r.stdout, repr(r.stdout)
        again = run(["follow", jid], env).stdout  # a finished job: its state, and how long it ran
        assert again.startswith("succeeded") and re.search(r", after " + DURATION + r"\)$", again.strip()), again

        got = run(["get", jid], env).stdout
        assert re.search(r"^duration  " + DURATION + "$", got, re.M), got
        metrics = got.split("metrics\n", 1)[1].splitlines()
        names = [m.split()[0] for m in metrics]
        assert "test_accuracy" in names and "samples_per_s" in names, metrics  # whole names, not "test_accu"
        assert len({len(m) - len(m.lstrip()) for m in metrics}) == 1, metrics
        assert len({m.index(m.split()[1], len(m.split()[0]) + 2) for m in metrics}) == 1, metrics  # one column of values

        # on a terminal: the progress line rewritten in place, never wider than the terminal
        jid = s.submit(tok, short_training("follow-tty", 1500))
        out, rc = follow_on_a_terminal(env, jid, 60, timeout=300)
        assert rc == 0, out
        rows = out.split("\n")
        assert rows[-1] == "", repr(out[-300:])  # ends with a newline
        live = [row for row in rows if "\rprogress" in row]
        assert len(live) == 1 and live[0].count("\r") >= 10, repr(out)  # one line, many updates
        pieces = live[0].split("\r")[1:]
        assert all(len(piece) == 59 for piece in pieces), pieces  # cut (or padded) to the terminal's width - 1
        assert re.match(r"progress +100% epoch", pieces[-1]), repr(pieces[-1])
        assert re.fullmatch(r"succeeded +finished in " + DURATION, rows[-2]), repr(out[-300:])
