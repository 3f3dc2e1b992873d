"""The full job flow for two tenants, tenant isolation, live events over SSE."""

import http.client
import json
import threading

from harness import ADMIN, Stack, placement_job, wait_until


def test_two_tenants_full_flow():
    with Stack(workers=2) as s:
        _, tok_a = s.tenant("team-a")
        _, tok_b = s.tenant("team-b")
        ja = s.submit(tok_a, placement_job("a-job"))
        jb = s.submit(tok_b, placement_job("b-job"))
        for tok, jid in ((tok_a, ja), (tok_b, jb)):
            job = s.wait_state(tok, jid, "succeeded")
            assert job["result"]["best"] in ("m-topo", "single"), job["result"]
            assert set(job["result"]["plan"]["placement"]) == {"a", "b", "c"}
            assert job["result"]["metrics"]["makespan_us"] > 0
            assert job["started_at"] and job["finished_at"] and job["worker"].startswith("w_test")
            states = [e["state"] for e in s.get(f"/v1/jobs/{jid}/events", tok).json["events"] if e["state"]]
            assert states == ["queued", "scheduled", "running", "succeeded"], states


def test_tenant_isolation():
    with Stack(workers=1) as s:
        _, tok_a = s.tenant("iso-a")
        _, tok_b = s.tenant("iso-b")
        ja = s.submit(tok_a)
        s.wait_state(tok_a, ja)
        # another tenant's job does not exist for B: 404, never 403
        for method, path in (("GET", f"/v1/jobs/{ja}"), ("GET", f"/v1/jobs/{ja}/events"),
                             ("POST", f"/v1/jobs/{ja}/cancel")):
            r = s.request(method, path, tok_b, {} if method == "POST" else None)
            assert r.status == 404, (method, path, r)
        assert all(j["id"] != ja for j in s.get("/v1/jobs?limit=500", tok_b).json["jobs"])
        assert any(j["id"] == ja for j in s.get("/v1/jobs", tok_a).json["jobs"])
        # the admin sees every tenant's jobs
        assert any(j["id"] == ja for j in s.get("/v1/jobs", ADMIN).json["jobs"])


class SSEReader(threading.Thread):
    """Collects `event: job` payloads from GET /v1/events."""

    def __init__(self, stack, token):
        super().__init__(daemon=True)
        self.conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=60)
        self.conn.request("GET", "/v1/events", headers={"Authorization": f"Bearer {token}"})
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200 and self.resp.getheader("content-type") == "text/event-stream"
        self.events = []
        self.start()

    def run(self):
        try:
            for line in self.resp:
                line = line.decode().rstrip("\n")
                if line.startswith("data: "):
                    self.events.append(json.loads(line[6:]))
        except (OSError, ValueError, http.client.HTTPException):
            pass

    def close(self):
        self.conn.sock and self.conn.sock.close()


def test_sse_live_and_isolated():
    with Stack(workers=1) as s:
        _, tok_a = s.tenant("sse-a")
        _, tok_b = s.tenant("sse-b")
        sse_a, sse_b = SSEReader(s, tok_a), SSEReader(s, tok_b)
        ja = s.submit(tok_a)
        wait_until("SSE succeeded event for A", lambda: any(
            e["job_id"] == ja and e["state"] == "succeeded" for e in sse_a.events))
        seen = [e["state"] for e in sse_a.events if e["job_id"] == ja and e["state"]]
        assert seen[:1] == ["queued"] and "running" in seen, seen
        jb = s.submit(tok_b)
        wait_until("SSE event for B", lambda: any(e["job_id"] == jb for e in sse_b.events))
        # B's stream never carried A's job, and A's never carried B's
        assert not any(e["job_id"] == ja for e in sse_b.events)
        assert not any(e["job_id"] == jb for e in sse_a.events)
        sse_a.close()
        sse_b.close()


def test_cancel_queued_job():
    with Stack(workers=0) as s:  # no worker: the job stays queued
        _, tok = s.tenant("cancel-team")
        jid = s.submit(tok)
        r = s.post(f"/v1/jobs/{jid}/cancel", tok)
        assert r.status == 200 and r.json["state"] == "cancelled", r
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 409
        s.start_worker(9)
        wait_until("worker", lambda: len(s.workers()) == 1)
        jid2 = s.submit(tok)
        s.wait_state(tok, jid2)
        assert s.job(tok, jid)["state"] == "cancelled"
        assert s.redis("LLEN", "gantry:inflight:w_test9") == "0"
