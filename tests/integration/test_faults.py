"""Nothing accepted is lost: the server killed with SIGKILL after accepting jobs,
Redis stopped while jobs are submitted."""

import concurrent.futures
import signal

from harness import ADMIN, Stack, placement_job, wait_until


def submit_many(s, token, n, threads=16):
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda i: s.submit(token, placement_job(f"bulk-{i}")), range(n)))


def all_done(s, token, ids):
    jobs = {j["id"]: j for j in s.get("/v1/jobs?limit=500", token).json["jobs"]}
    return all(jobs.get(i, {}).get("state") == "succeeded" for i in ids)


def test_server_sigkill_after_200_jobs():
    with Stack(workers=2) as s:
        _, tok = s.tenant("kill-server")
        ids = submit_many(s, tok, 200)
        s.kill("server", signal.SIGKILL)
        s.start_server()
        listed = {j["id"] for j in s.get("/v1/jobs?limit=500", tok).json["jobs"]}
        assert set(ids) <= listed, f"{len(set(ids) - listed)} accepted jobs missing after restart"
        wait_until("all 200 jobs succeeded", lambda: all_done(s, tok, ids), 90, 0.2)
        # every event persisted exactly once: one 'succeeded' per job, ids unique
        for jid in ids[:40]:
            events = s.get(f"/v1/jobs/{jid}/events", tok).json["events"]
            states = [e["state"] for e in events if e["state"]]
            assert states.count("succeeded") == 1 and states.count("running") == 1, (jid, states)
            assert len({e["id"] for e in events}) == len(events)


def test_redis_down_submissions_accepted_then_run():
    with Stack(workers=2) as s:
        _, tok = s.tenant("redis-down")
        warm = s.submit(tok)
        s.wait_state(tok, warm)
        s.kill("redis", signal.SIGTERM)
        wait_until("readyz reports redis down", lambda: s.get("/readyz").status == 503)
        ids = submit_many(s, tok, 20, threads=4)  # every one answered 201 by submit()
        assert all(s.job(tok, i)["state"] == "queued" for i in ids)
        s.start_redis()
        wait_until("jobs accepted while Redis was down ran", lambda: all_done(s, tok, ids), 60, 0.2)
        assert s.get("/readyz").status == 200
        assert len(s.workers()) == 2


def test_redis_wiped_unpublished_jobs_republished():
    with Stack(workers=1, redis_persist=False) as s:
        _, tok = s.tenant("redis-wipe")
        s.kill("redis", signal.SIGKILL)
        ids = submit_many(s, tok, 10, threads=2)
        s.start_redis()  # empty: no stream, no group, no registry
        wait_until("jobs ran after Redis came back empty", lambda: all_done(s, tok, ids), 60, 0.2)
        assert s.get("/v1/tenants", ADMIN).status == 200
