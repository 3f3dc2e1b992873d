"""Chaos: 1,000 jobs from 3 tenants while a worker, the active scheduler, the server
and redis-server are each killed with SIGKILL in turn (and restarted).  Every job that
was accepted (201, or 200 for a replayed Idempotency-Key) must reach a terminal state;
none may be lost or duplicated, and no result may be recorded twice.  Prints the counts."""

import http.client
import json
import os
import sqlite3
import threading
import time

from harness import ADMIN, Stack, placement_job, timeout, wait_until

ALONE = True  # run.py runs these tests with nothing beside them: kills every daemon in turn under 1,000 jobs: it measures recovery

JOBS = int(os.environ.get("GANTRY_CHAOS_JOBS", "1000"))


class Submitter(threading.Thread):
    """Submits its share with an Idempotency-Key per job, retrying through outages."""

    def __init__(self, stack, token, tenant, keys):
        super().__init__(daemon=True)
        self.stack, self.token, self.tenant, self.keys = stack, token, tenant, keys
        self.accepted = {}  # key -> job id
        self.retries = 0

    def run(self):
        for key in self.keys:
            while True:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=10)
                    conn.request("POST", "/v1/jobs", body=json.dumps(placement_job(key)),
                                 headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
                                          "Idempotency-Key": key})
                    r = conn.getresponse()
                    body = json.loads(r.read() or b"null")
                    conn.close()
                    if r.status in (200, 201):
                        self.accepted[key] = body["id"]
                        break
                    assert r.status >= 500 or r.status == 429, (r.status, body)
                except (OSError, http.client.HTTPException, ValueError):
                    pass
                self.retries += 1
                time.sleep(0.05)  # a client's back-off between retries of one key (the retries are what is tested)


@timeout(600)
def test_chaos_kill_everything_in_turn():
    with Stack(workers=3) as s:
        s.start_scheduler("scheduler-b")
        tenants = [s.tenant(f"chaos-{i}") for i in range(3)]
        threads = []
        for i, (tid, tok) in enumerate(tenants):
            keys = [f"chaos-{i}-{n}" for n in range(i, JOBS, 3)]
            for half in (keys[0::2], keys[1::2]):
                threads.append(Submitter(s, tok, tid, half))
        for t in threads:
            t.start()

        def accepted():
            return sum(len(t.accepted) for t in threads)

        kills = []
        for at, victim in ((0.15, "worker0"), (0.35, "leader"), (0.55, "server"), (0.75, "redis")):
            wait_until(f"{int(at * JOBS)} jobs accepted", lambda: accepted() >= at * JOBS, 120, 0.05)
            name = s.redis("GET", "gantry:leader") if victim == "leader" else victim
            s.kill(name)
            kills.append(name)
            if victim == "worker0":
                s.start_worker(0)
            elif victim == "leader":
                s.start_scheduler(name)
            elif victim == "server":
                s.start_server()
            else:
                s.start_redis()
        for t in threads:
            t.join(timeout=180)
        ids = {key: jid for t in threads for key, jid in t.accepted.items()}
        assert len(ids) == JOBS, f"only {len(ids)} of {JOBS} submissions were accepted"

        db = sqlite3.connect(os.path.join(s.dir, "state", "gantry.db"))

        def unfinished():
            return db.execute("SELECT count(*) FROM jobs WHERE name LIKE 'chaos-%' AND state NOT IN "
                              "('succeeded', 'failed', 'cancelled')").fetchone()[0]

        wait_until("every accepted job finished", lambda: unfinished() == 0, 180, 0.5)
        rows = db.execute("SELECT id, name, state FROM jobs WHERE name LIKE 'chaos-%'").fetchall()
        by_name = {}
        for jid, name, state in rows:
            by_name.setdefault(name, []).append((jid, state))
        duplicated = [n for n, v in by_name.items() if len(v) > 1]
        lost = [k for k, jid in ids.items() if not any(j == jid for j, _ in by_name.get(k, []))]
        results = dict(db.execute("SELECT job_id, count(*) FROM job_events WHERE state IN ('succeeded', 'failed') "
                                  "GROUP BY job_id").fetchall())
        twice = [j for j, n in results.items() if n > 1]
        states = {}
        for _, v in by_name.items():
            states[v[0][1]] = states.get(v[0][1], 0) + 1
        retried = db.execute("SELECT count(*) FROM jobs WHERE name LIKE 'chaos-%' AND attempts > 1").fetchone()[0]
        db.close()
        print(f"chaos: killed {', '.join(kills)}; accepted {len(ids)}, stored {len(rows)}, states {states}, "
              f"lost {len(lost)}, duplicated {len(duplicated)}, results twice {len(twice)}, "
              f"placed more than once {retried}, client retries {sum(t.retries for t in threads)}")
        assert not lost and not duplicated and not twice
        assert len(rows) == JOBS
