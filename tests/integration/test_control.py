"""The control plane with real processes: quotas, wait reasons, a lost worker's work
given back, a frozen worker fenced, scheduler failover."""

import signal
import time

from harness import ADMIN, Stack, alone, placement_job, wait_until


def reasons(s, token, job_id):
    return [e["reason"] for e in s.events(token, job_id)]


def test_max_queued_is_429_with_retry_after():
    with Stack(workers=0) as s:
        tid, tok = s.tenant("queue-quota")
        r = s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"max_queued": 2})
        assert r.status == 200 and r.json["max_queued"] == 2, r
        s.submit(tok)
        s.submit(tok)
        r = s.post("/v1/jobs", tok, placement_job())
        assert r.status == 429 and r.headers["retry-after"] == "5", r
        assert "max_queued" in r.json["error"]["message"]
        assert s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"max_queued": "many"}).status == 400
        assert s.request("PATCH", "/v1/tenants/t_nope", ADMIN, {"weight": 2}).status == 404
        assert s.request("PATCH", f"/v1/tenants/{tid}", tok, {"weight": 2}).status == 403
        r = s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"roots": ["/srv/data/queue-quota"], "weight": 2.5})
        assert r.status == 200 and r.json["roots"] == ["/srv/data/queue-quota"] and r.json["weight"] == 2.5, r
        assert r.json["max_queued"] == 2  # unchanged
        for bad in (["relative"], ["/a/../b"], "/not-a-list"):
            assert s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"roots": bad}).status == 400


def test_max_slots_makes_jobs_wait_with_a_reason():
    with Stack(workers=2) as s:
        tid, tok = s.tenant("slot-quota")
        assert s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"max_slots": 1}).status == 200
        # freeze both workers: a placed task stays on its worker, holding the tenant's one slot
        s.pause("worker0")
        s.pause("worker1")
        ids = [s.submit(tok, placement_job(f"q{i}")) for i in range(3)]
        wait_until("two jobs wait for the quota", lambda: sum(
            any("quota: tenant uses 1 of its 1 slots" in r for r in reasons(s, tok, j)) for j in ids) == 2)
        assert sum(s.job(tok, j)["state"] == "scheduled" for j in ids) == 1
        s.resume("worker0")
        s.resume("worker1")
        for j in ids:
            s.wait_state(tok, j)


def test_lost_worker_work_is_given_back():
    with Stack(workers=1) as s:
        _, tok = s.tenant("lost-worker")
        s.pause("worker0")  # alive in the registry for a few seconds more, then silent
        jid = s.submit(tok)
        wait_until("placed on the frozen worker", lambda: s.job(tok, jid)["state"] == "scheduled")
        s.start_worker(1)
        job = s.wait_state(tok, jid, timeout=30)
        assert job["worker"] == "w_test1", job
        assert any("worker w_test0 lost" in r and "requeued (failure 1 of 3 allowed)" in r for r in reasons(s, tok, jid))
        # the frozen worker wakes up fenced: it does not run the job a second time
        s.resume("worker0")
        wait_until("w_test0 registered again", lambda: any(w["id"] == "w_test0" for w in s.workers()), 15)
        jid2 = s.submit(tok)
        s.wait_state(tok, jid2)
        runs = [e for e in s.events(tok, jid) if e["state"] == "running"]
        assert [e["source"] for e in runs] == ["worker:w_test1"], runs


@alone  # the standby's takeover is timed
def test_scheduler_failover():
    with Stack(workers=1) as s:
        s.start_scheduler("scheduler-b")
        _, tok = s.tenant("failover")
        s.wait_state(tok, s.submit(tok))
        leader = s.redis("GET", "gantry:leader")
        assert leader in ("scheduler", "scheduler-b"), leader
        t0 = time.monotonic()
        s.kill(leader, signal.SIGKILL)
        jid = s.submit(tok)
        s.wait_state(tok, jid, timeout=20)
        took = time.monotonic() - t0
        assert s.redis("GET", "gantry:leader") != leader
        assert took < 10, f"standby took {took:.1f}s to take over"


def test_restarted_worker_gives_back_its_task():
    with Stack(workers=1) as s:
        _, tok = s.tenant("restart")
        s.pause("worker0")  # its blocked BLMOVE still takes the task into its in-flight list
        jid = s.submit(tok)
        wait_until("in the frozen worker's in-flight list",
                   lambda: s.redis("LLEN", "gantry:inflight:w_test0") == "1")
        s.kill("worker0")  # dies holding it, and comes back under the same id before its TTL runs out
        s.start_worker(0)
        job = s.wait_state(tok, jid, timeout=20)
        assert any("worker restarted; requeued" in r for r in reasons(s, tok, jid)), reasons(s, tok, jid)
        assert job["attempts"] == 2
