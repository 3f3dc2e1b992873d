"""The direct request path (docs/inference.md "The request path"): the server's gateway sends each
request straight to a replica's worker over a connection that starts with the endpoint's token
(wire/infer_frame.h), not through Redis; a stranger (no hello, a wrong token, another protocol) is
cut off; a replica lost with requests in flight costs those requests one retry on another replica,
never a hang."""

import concurrent.futures
import socket
import struct
import time

from harness import Stack, alone, wait_until
from test_inference import fmnist_samples, infer_body, serve_job, trained_model


def endpoints(s, jid):
    lines = s.redis("HGETALL", f"gantry:infer:ep:{jid}").splitlines()
    return dict(zip(lines[::2], lines[1::2]))


def frame(kind, arg, rid, body):
    return struct.pack("<3scIQQ", b"GF1", kind, arg, rid, len(body)) + body


def closed_within(sock, seconds):
    """the peer closes the connection (EOF) within seconds, without sending anything"""
    sock.settimeout(seconds)
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


@alone  # the retries are timed
def test_direct_path_refuses_strangers_and_retries_a_lost_replica():
    with Stack(workers=2) as s:
        _, tok = s.tenant("direct")
        trained_model(s, tok, "direct")
        jid = s.submit(tok, serve_job("direct", replicas=2, timeout_ms=10000))
        s.wait_state(tok, jid, "running", timeout=60)
        eps = wait_until("two endpoints", lambda: (e := endpoints(s, jid)) and len(e) == 2 and e, 30)
        wait_until("ready", lambda: s.get("/v2/models/direct/ready", tok).status == 200, 30)
        data, _ = fmnist_samples(1)
        # once the gateway knows the endpoints, requests leave Redis: no queue, but arrivals still counted
        wait_until("the gateway connected", lambda: s.post("/v2/models/direct/infer", tok, infer_body(data, 1)).status == 200 and
                   s.redis("EXISTS", f"gantry:infer:q:{jid}") == "0" and s.redis("LLEN", f"gantry:infer:q:{jid}") == "0", 10)
        before = int(s.redis("HGET", f"gantry:infer:stats:{jid}", "arrivals") or 0)
        for _ in range(20):
            assert s.post("/v2/models/direct/infer", tok, infer_body(data, 1)).status == 200
        assert s.redis("EXISTS", f"gantry:infer:q:{jid}") == "0", "a request went through the Redis queue"
        wait_until("arrivals counted for the autoscaler",
                   lambda: int(s.redis("HGET", f"gantry:infer:stats:{jid}", "arrivals") or 0) >= before + 20, 5)

        host, port, token, _ = eps["w_test0"].split()
        addr = (host, int(port))
        strangers = {"another protocol": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                     "a wrong token": frame(b"H", 0, 0, b"d_" + b"0" * 48),
                     "a request before the hello": frame(b"Q", 2, 1, b"{}")}
        for what, payload in strangers.items():
            with socket.create_connection(addr, 5) as c:
                c.sendall(payload)
                assert closed_within(c, 5), f"{what}: the connection stays open"
        with socket.create_connection(addr, 5) as c:  # says nothing: cut off after the hello's deadline
            assert closed_within(c, 8), "a silent connection stays open"
        with socket.create_connection(addr, 5) as c:  # the gateway's own way in works
            body = str(infer_body(data, 1)).replace("'", '"').encode()
            c.sendall(frame(b"H", 0, 0, token.encode()) + frame(b"Q", len(body), 77, body))
            c.settimeout(10)
            head = b""
            while len(head) < 24:
                head += c.recv(24 - len(head))
            magic, kind, status, rid, n = struct.unpack("<3scIQQ", head)
            assert (magic, kind, status, rid) == (b"GF1", b"R", 200, 77), head

        # one replica stalls with requests in hand, then dies: each of them is retried once on the other
        s.pause("worker0")
        try:
            t0 = time.time()
            with concurrent.futures.ThreadPoolExecutor(6) as ex:
                futs = [ex.submit(s.post, "/v2/models/direct/infer", tok, infer_body(data, 1)) for _ in range(6)]
                time.sleep(1)  # the requests are in flight: some on the stalled replica's connection
                done = [f.result().status for f in futs if f.done()]
                assert len(done) < 6, f"no request waited on the stalled replica: {done}"
                s.kill("worker0")
                codes = [f.result().status for f in futs]
        finally:
            if "worker0" in s.procs:
                s.resume("worker0")
        assert codes == [200] * 6, codes
        assert time.time() - t0 < 9, "the retried requests waited for their timeout"


def test_a_tenants_program_cannot_reach_a_replica():
    """the endpoint's token is one lock; the program sandbox's network fence is the other: a program
    job of the very tenant whose model is served, on the other worker, given the replica's address,
    connects to nothing (docs/security.md), while the gateway keeps being answered there"""
    from test_program_fence import PROBE, output_lines
    from test_program_jobs import program_job, program_root
    with Stack(workers=2) as s:
        tid, tok = s.tenant("direct-fence")
        trained_model(s, tok, "fenced")
        jid = s.submit(tok, serve_job("fenced", replicas=1, timeout_ms=10000))
        s.wait_state(tok, jid, "running", timeout=60)
        eps = wait_until("the endpoint", lambda: (e := endpoints(s, jid)) and e, 30)
        host, port, _, _ = next(iter(eps.values())).split()
        wait_until("ready", lambda: s.get("/v2/models/fenced/ready", tok).status == 200, 30)
        data, _ = fmnist_samples(1)
        assert s.post("/v2/models/fenced/infer", tok, infer_body(data, 1)).status == 200
        program_root(s, tid, {"probe.py": PROBE})
        b = s.submit(tok, program_job(["python3", "probe.py", "mark-direct", f"replica:{host}:{port}"], name="prober"))
        s.wait_state(tok, b, "succeeded", timeout=90)
        seen = {ln.split()[1]: ln.split()[2] for ln in output_lines(s, b) if ln.startswith("PROBE ")}
        assert seen.get("own") == "CONNECTED", seen  # the probe's network works: its own listener
        assert seen.get("replica") in ("TIMEOUT", "REFUSED"), seen
        assert s.post("/v2/models/fenced/infer", tok, infer_body(data, 1)).status == 200
