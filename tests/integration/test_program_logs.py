"""A program job's logs and outputs through the API (server/logs.c, server/outputs.c).

The entries are written here in the decided format (wire/keys.h K_LOGS_PREFIX: `r <rank> g <gen>
t <lines>`, `r g end <reason>`) and the outputs listed through a job event carrying result.outputs, as
a worker writes them, so the reading side is tested on its own: the tail (ranks, N, order, the
"[rank R] " prefix, pages of entries), scrubbing (invalid UTF-8, ESC, NUL, CR), the live follow (sees an
entry written after it started, ends when the job ends), the follower cap, tenants (another tenant's job
is a 404), the outputs' listing and download (streamed, sha256 equal), every way out of the output
directory refused (a path not listed, .., absolute, a symbolic link planted as a file or a directory,
a file changed since it was listed), and the directory never shown (the job, its events, the SSE
stream, the listing)."""

import hashlib
import http.client
import json
import os
import socket
import threading
import time
import uuid

from harness import ADMIN, Stack, placement_job, wait_until


def _b(x):
    return x if isinstance(x, bytes) else str(x).encode()


def redis_raw(s, *cmds):
    """sends commands (each a tuple of str/bytes) in one write on one connection: binary-safe (NUL, invalid
    UTF-8), pipelined; returns the raw replies"""
    auth = s.redis_auth()  # the harness's own Redis user, answered "+OK\r\n" (one more CRLF)
    want = 2 * len(cmds) + (1 if auth else 0)
    cmds = ((auth,) if auth else ()) + cmds
    out = b""
    for cmd in cmds:
        out += b"*%d\r\n" % len(cmd) + b"".join(b"$%d\r\n%s\r\n" % (len(_b(a)), _b(a)) for a in cmd)
    with socket.create_connection(("127.0.0.1", s.rport), timeout=10) as sock:
        sock.sendall(out)
        got = b""
        while got.count(b"\r\n") < want and not got.startswith(b"-"):  # XADD answers "$N\r\nid\r\n"
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    assert not got.startswith(b"-"), got
    return got[len(b"+OK\r\n"):] if auth else got


def log_cmd(jid, rank, gen, text=None, end=None):
    cmd = ["XADD", f"gantry:logs:{jid}", "MAXLEN", "~", "20000", "*", "r", rank, "g", gen]
    return tuple(cmd + (["t", text] if text is not None else ["end", end]))


def xadd(s, jid, rank, gen=0, text=None, end=None):
    redis_raw(s, log_cmd(jid, rank, gen, text, end))


def raw_get(s, path, token, method="GET"):
    """status, headers, body as bytes"""
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    try:
        conn.request(method, path, headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def finish_job(s, jid, state="succeeded", result=None):
    """what a worker's final event does: the job moves to state with result"""
    ev = {"id": "e_" + uuid.uuid4().hex[:16], "job_id": jid, "ts": int(time.time() * 1000), "source": "worker:w_fake",
          "state": state, "reason": "done", "progress": -1, "result": result}
    redis_raw(s, ("XADD", "gantry:events", "*", "event", json.dumps(ev)))


class Follow:
    """GET .../logs?follow=1 read in a thread: events [(name, data)] as they come, done when the stream ended"""

    def __init__(self, s, jid, token, query=""):
        self.events, self.done, self.status = [], threading.Event(), None
        self.conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        self.conn.request("GET", f"/v1/jobs/{jid}/logs?follow=1{query}", headers={"Authorization": f"Bearer {token}"})
        self.sock = self.conn.sock
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()
        else:
            self.body = self.resp.read()
            self.done.set()

    def _read(self):
        name, data = None, []
        try:
            for raw in self.resp:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif line == "" and data:
                    self.events.append((name, "\n".join(data)))
                    name, data = None, []
        except (OSError, ValueError, http.client.HTTPException):
            pass  # closed by close()
        finally:
            self.done.set()

    def lines(self):
        return [d for n, d in self.events if n == "log"]

    def close(self):
        """really closes the connection (the response's file keeps the socket open otherwise)"""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self.done.wait(5)


def test_logs_tail_ranks_scrubbing_and_tenants():
    with Stack(workers=0) as s:
        _, tok = s.tenant("logs-a")
        _, other = s.tenant("logs-b")
        jid = s.submit(tok, placement_job("two-ranks"))
        # not a program job, nothing written: a 404 that says why
        r = s.get(f"/v1/jobs/{jid}/logs", tok)
        assert r.status == 404 and "program" in r.json["error"]["message"], r
        xadd(s, jid, 0, text="a0\na1\n")
        xadd(s, jid, 1, text="b0\n")
        xadd(s, jid, 0, text="a2\n")
        xadd(s, jid, 1, text=b"bad \xff\xfe esc \x1b[31mred\x1b[0m tab\tok nul\x00x c1 \xc2\x9b2J\r\n")
        xadd(s, jid, 0, text="progress 10%\rprogress 50%\rprogress 100%\n")
        xadd(s, jid, 0, end="exited with code 0")
        st, hd, body = raw_get(s, f"/v1/jobs/{jid}/logs", tok)
        assert st == 200 and hd["content-type"].startswith("text/plain"), (st, hd)
        text = body.decode("utf-8")  # valid UTF-8 whatever the program wrote
        lines = text.split("\n")
        assert lines[-1] == "" and lines[:4] == ["[rank 0] a0", "[rank 0] a1", "[rank 1] b0", "[rank 0] a2"], lines
        bad = lines[4]
        assert b"\x1b" not in body and b"\x00" not in body and b"\r" not in body and b"\xc2\x9b" not in body, body
        assert bad == "[rank 1] bad ?? esc \\x1b[31mred\\x1b[0m tab\tok nul?x c1 \\u009b2J", bad
        assert lines[5] == "[rank 0] progress 100%", lines  # what a terminal shows of a line CR rewrote
        # one rank: no prefix; the last N lines
        assert s.get(f"/v1/jobs/{jid}/logs?rank=0", tok).raw == "a0\na1\na2\nprogress 100%\n"
        assert s.get(f"/v1/jobs/{jid}/logs?rank=0&tail=2", tok).raw == "a2\nprogress 100%\n"
        assert s.get(f"/v1/jobs/{jid}/logs?rank=1&tail=1", tok).raw.startswith("bad ")
        assert s.get(f"/v1/jobs/{jid}/logs?tail=0", tok).raw == ""
        assert s.get(f"/v1/jobs/{jid}/logs?rank=7", tok).raw == ""
        for q, field in (("tail=10001", "tail"), ("tail=-1", "tail"), ("rank=-1", "rank"), ("rank=x", "rank"),
                         ("follow=2", "follow"), ("tail=", "tail")):
            r = s.get(f"/v1/jobs/{jid}/logs?{q}", tok)
            assert r.status == 400 and r.json["error"]["field"] == field, (q, r)
        # tenants: another tenant's job is a 404, an admin sees it
        assert s.get(f"/v1/jobs/{jid}/logs", other).status == 404
        assert Follow(s, jid, other).status == 404
        assert s.get(f"/v1/jobs/{jid}/logs?rank=0", ADMIN).raw.startswith("a0\n")

        # one rank only: no prefix; many entries (pages of the backwards read) in order; the default tail is 100
        one = s.submit(tok, placement_job("one-rank"))
        redis_raw(s, *[log_cmd(one, 0, 0, f"line {i}\n") for i in range(300)])
        got = s.get(f"/v1/jobs/{one}/logs?tail=250", tok).raw.splitlines()
        assert got == [f"line {i}" for i in range(50, 300)], got[:3]
        got = s.get(f"/v1/jobs/{one}/logs", tok).raw.splitlines()
        assert got == [f"line {i}" for i in range(200, 300)], got[:3]
        # a chunk of many lines, cut to the last N
        big = s.submit(tok, placement_job("chunk"))
        xadd(s, big, 0, text="".join(f"row {i}\n" for i in range(5000)))
        assert s.get(f"/v1/jobs/{big}/logs?tail=3", tok).raw == "row 4997\nrow 4998\nrow 4999\n"
        assert len(s.get(f"/v1/jobs/{big}/logs?tail=10000", tok).raw.splitlines()) == 5000


def test_logs_follow_live_until_the_job_ends():
    with Stack(workers=0) as s:
        _, tok = s.tenant("follow-a")
        jid = s.submit(tok, placement_job("followed"))
        xadd(s, jid, 0, text="before 1\nbefore 2\n")
        f = Follow(s, jid, tok, "&tail=1")
        assert f.status == 200 and f.headers["content-type"] == "text/event-stream", f.status
        wait_until("the tail", lambda: f.lines() == ["before 2"], 10)
        xadd(s, jid, 0, text="after \x1b[2J\n")
        wait_until("a line written after the follow started", lambda: f.lines() == ["before 2", "after \\x1b[2J"], 10)
        # one rank's follow sees that rank only
        r1 = Follow(s, jid, tok, "&rank=1&tail=5")
        xadd(s, jid, 1, text="from one\n")
        wait_until("rank 1's line", lambda: r1.lines() == ["from one"], 10)
        # a second rank turns the prefix on in the all-ranks follow
        wait_until("prefixed", lambda: f.lines()[-1:] == ["[rank 1] from one"], 10)
        xadd(s, jid, 0, end="exited with code 0")
        xadd(s, jid, 1, end="exited with code 0")
        wait_until("the end entries", lambda: len([e for e in f.events if e[0] == "end"]) == 2, 10)
        assert not f.done.is_set(), "ended before the job did"
        t0 = time.monotonic()
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 200
        assert f.done.wait(10) and r1.done.wait(10), "the follow did not end with the job"
        assert time.monotonic() - t0 < 5, "every rank had ended: the follow should end at once"
        assert f.events[-1] == ("done", '{"state":"cancelled"}'), f.events[-3:]
        end = json.loads([d for n, d in f.events if n == "end"][0])
        assert end == {"rank": 0, "generation": 0, "reason": "exited with code 0"}, end
        f.close()
        r1.close()
        # a finished job's follow: its tail, then done at once
        again = Follow(s, jid, tok)
        assert again.done.wait(10), "a finished job's follow did not end"
        assert again.lines()[0] == "[rank 0] before 1" and again.events[-1][0] == "done", again.events
        again.close()


def test_logs_followers_per_tenant_are_capped():
    with Stack(workers=0) as s:
        _, tok = s.tenant("cap-a")
        _, other = s.tenant("cap-b")
        jid = s.submit(tok, placement_job("capped"))
        xadd(s, jid, 0, text="x\n")
        open_ = [Follow(s, jid, tok) for _ in range(16)]
        assert all(f.status == 200 for f in open_)
        refused = Follow(s, jid, tok)
        assert refused.status == 429 and b"16" in refused.body, refused.body
        # another tenant's follows are its own
        oj = s.submit(other, placement_job("theirs"))
        xadd(s, oj, 0, text="y\n")
        theirs = Follow(s, oj, other)
        assert theirs.status == 200
        for f in open_:
            f.close()
        theirs.close()
        # a closed follow is noticed when it is next written to (a line, or the keepalive every 15 s)
        def another():
            xadd(s, jid, 0, text="tick\n")
            f = Follow(s, jid, tok)
            f.close()
            return f.status == 200
        wait_until("a follower's place given back", another, 10, interval=0.3)


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def test_outputs_listed_downloaded_and_confined():
    with Stack(workers=0) as s:
        _, tok = s.tenant("out-a")
        _, other = s.tenant("out-b")
        jid = s.submit(tok, placement_job("outputs"))
        outdir = os.path.join(s.dir, "state-w", "jobs", jid, "output")
        model = os.urandom(700 * 1024 + 17)  # several chunks of the streamed download
        _write(os.path.join(outdir, "model.pt"), model)
        _write(os.path.join(outdir, "sub", "metrics.json"), b'{"acc": 0.9}\n')
        _write(os.path.join(outdir, "grows.txt"), b"abc")
        _write(os.path.join(outdir, "empty"), b"")
        os.symlink("/etc/passwd", os.path.join(outdir, "evil"))
        os.symlink("/etc", os.path.join(outdir, "linkdir"))
        files = [{"path": p, "bytes": len(d), "sha256": hashlib.sha256(d).hexdigest()}
                 for p, d in (("model.pt", model), ("sub/metrics.json", b'{"acc": 0.9}\n'), ("grows.txt", b"abc"),
                              ("empty", b""))]
        passwd = open("/etc/passwd", "rb").read()
        files += [{"path": "evil", "bytes": len(passwd), "sha256": "0" * 64},
                  {"path": "linkdir/passwd", "bytes": len(passwd), "sha256": "0" * 64}]
        assert s.get(f"/v1/jobs/{jid}/outputs", tok).status == 404  # none before the job ends
        # the SSE stream while the result arrives
        sse = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        sse.request("GET", "/v1/events", headers={"Authorization": f"Bearer {tok}"})
        stream = sse.getresponse()
        finish_job(s, jid, "succeeded", {"metrics": {"test_accuracy": 0.9}, "outputs": {"dir": outdir, "files": files}})
        seen = b""
        while b'"succeeded"' not in seen:
            seen += stream.fp.readline()
        sse.close()
        assert outdir.encode() not in seen and b"state-w" not in seen, seen
        job = s.get(f"/v1/jobs/{jid}", tok)
        assert job.json["result"]["outputs"]["files"] == files and "dir" not in job.json["result"]["outputs"], job
        assert "state-w" not in job.raw and "state-w" not in s.get(f"/v1/jobs/{jid}/events", tok).raw
        assert "state-w" not in s.get(f"/v1/jobs/{jid}", ADMIN).raw  # admins neither
        listing = s.get(f"/v1/jobs/{jid}/outputs", tok)
        assert listing.status == 200 and listing.json == {"job_id": jid, "files": files}, listing
        assert "state-w" not in listing.raw

        st, hd, body = raw_get(s, f"/v1/jobs/{jid}/outputs/model.pt", tok)
        assert st == 200 and hashlib.sha256(body).hexdigest() == files[0]["sha256"], (st, len(body))
        assert hd["content-type"] == "application/octet-stream" and int(hd["content-length"]) == len(model), hd
        assert hd["content-disposition"].startswith('attachment; filename="model.pt"'), hd
        st, hd, body = raw_get(s, f"/v1/jobs/{jid}/outputs/sub/metrics.json", tok)
        assert st == 200 and body == b'{"acc": 0.9}\n' and 'filename="metrics.json"' in hd["content-disposition"], hd
        assert raw_get(s, f"/v1/jobs/{jid}/outputs/sub%2Fmetrics.json", tok)[2] == b'{"acc": 0.9}\n'
        assert raw_get(s, f"/v1/jobs/{jid}/outputs/empty", tok)[:1] == (200,)
        st, hd, body = raw_get(s, f"/v1/jobs/{jid}/outputs/model.pt", tok, method="HEAD")
        assert st == 200 and body == b"" and int(hd["content-length"]) == len(model), hd

        # refused: a symbolic link planted as a file, as a directory; a file changed since it was listed
        for p in ("evil", "linkdir/passwd"):
            st, _, body = raw_get(s, f"/v1/jobs/{jid}/outputs/{p}", tok)
            assert st == 409 and b"root:" not in body, (p, st, body)
        with open(os.path.join(outdir, "grows.txt"), "ab") as f:
            f.write(b"more")
        assert raw_get(s, f"/v1/jobs/{jid}/outputs/grows.txt", tok)[0] == 409
        # nothing that is not listed: .., absolute, encoded, a directory, a missing file
        for p in ("nothere", "../../../../etc/passwd", "%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/etc/passwd", "%2Fetc%2Fpasswd",
                  "sub", "sub/"):
            st, _, body = raw_get(s, f"/v1/jobs/{jid}/outputs/{p}", tok)
            assert st == 404 and b"root:" not in body, (p, st, body[:200])
        os.unlink(os.path.join(outdir, "sub", "metrics.json"))
        st, _, body = raw_get(s, f"/v1/jobs/{jid}/outputs/sub/metrics.json", tok)
        assert st == 404 and b"no longer exists" in body, body
        # tenants
        assert s.get(f"/v1/jobs/{jid}/outputs", other).status == 404
        assert raw_get(s, f"/v1/jobs/{jid}/outputs/model.pt", other)[0] == 404
        assert raw_get(s, f"/v1/jobs/{jid}/outputs/model.pt", ADMIN)[0] == 200
        # a job without outputs
        plain = s.submit(tok, placement_job("plain"))
        r = s.get(f"/v1/jobs/{plain}/outputs", tok)
        assert r.status == 404 and "no outputs" in r.json["error"]["message"], r


def test_openapi_lists_the_routes():
    with Stack(workers=0) as s:
        paths = s.get("/v1/openapi.json").json["paths"]
        for p in ("/v1/jobs/{id}/logs", "/v1/jobs/{id}/outputs", "/v1/jobs/{id}/outputs/{path}"):
            assert "get" in paths[p], p
        names = [q["name"] for q in paths["/v1/jobs/{id}/outputs/{path}"]["get"]["parameters"]]
        assert names == ["id", "path"], names


# a 1-rank program: says it started, waits for the test's go (a file the test creates in its read-only
# workdir), then prints more, writes an output file and exits 0
GATED = """#!/bin/sh
echo "started $1"
i=0
while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
echo "after go"
printf 'tab\\there \\033[2J\\n'
head -c 300000 /dev/urandom > "$GANTRY_OUTPUT_DIR/model.bin"
"""


def test_real_program_job_logs_live_and_its_output_downloads():
    """end to end with a real worker and sandbox (workers/exec_program.c writes the stream and the
    result): the follow shows the program's first line while it runs, a later line as it is printed,
    the end, and ends with the job; its output downloads with the listed sha256"""
    from test_program_jobs import job_dir, program_job, program_root
    with Stack(workers=1) as s:
        tid, tok = s.tenant("logs-real")
        root = program_root(s, tid, {"gated.sh": GATED})
        jid = s.submit(tok, program_job(["/bin/sh", "gated.sh", "mark-logs"]))
        f = wait_until("a follow of the running job", lambda: (x := Follow(s, jid, tok)).status == 200 and x, 60)
        wait_until("the program's first line, live", lambda: f.lines()[:1] == ["started mark-logs"], 60)
        assert not f.done.is_set()
        with open(os.path.join(root, "code", "go"), "w"):
            pass
        assert f.done.wait(60), f"the follow did not end with the job: {f.events}"
        assert f.lines() == ["started mark-logs", "after go", "tab\there \\x1b[2J"], f.events
        assert [n for n, _ in f.events][-2:] == ["end", "done"] and f.events[-1][1] == '{"state":"succeeded"}', f.events
        f.close()
        assert s.get(f"/v1/jobs/{jid}/logs", tok).raw == "started mark-logs\nafter go\ntab\there \\x1b[2J\n"
        listed = {x["path"]: x for x in s.get(f"/v1/jobs/{jid}/outputs", tok).json["files"]}
        st, _, body = raw_get(s, f"/v1/jobs/{jid}/outputs/model.bin", tok)
        assert st == 200 and len(body) == 300000 == listed["model.bin"]["bytes"], (st, len(body))
        assert hashlib.sha256(body).hexdigest() == listed["model.bin"]["sha256"]
        with open(os.path.join(job_dir(s, jid), "output", "model.bin"), "rb") as fh:
            assert fh.read() == body
        assert job_dir(s, jid) not in s.get(f"/v1/jobs/{jid}", tok).raw
