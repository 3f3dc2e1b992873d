"""Federated jobs through the real stack: sites as CPU workers labelled site=NAME (a site with
"label": "site=NAME" runs there; one without a label on any free worker), each training on its own
part of Fashion-MNIST (a Dirichlet split), aggregating by SecureD-FL (ADMM through a Kirkman design's
groups, sums masked over all sites and sealed through Redis), the model registered; bad specs refused
naming the field; a labelled site without a worker makes the job wait, saying which; a public key
swapped in Redis fails the job, saying so; sites pinned to their workers' identity keys (a roster in the spec)
run, and neither a wrong roster key nor a key forged with the cluster secret gets through."""

import hashlib
import hmac
import os
import struct
import time

from harness import Stack, wait_until

MLP = {"input": [1, 28, 28], "layers": [{"type": "flatten"}, {"type": "dense", "units": 32}, {"type": "relu"},
                                        {"type": "dense", "units": 10}]}


def fed_job(n, rounds=3, name="fed-mnist", labels=True, **extra):
    """n sites s0..s(n-1) of a Dirichlet split; labels: site k runs on the worker labelled site=sk
    (True: every site; a set: those sites; False: none)"""
    sites = [{"name": f"s{i}", "dataset": {"name": "fashion-mnist",
                                            "partition": {"sites": n, "index": i, "alpha": 0.5, "seed": 1}}}
             for i in range(n)]
    for i, site in enumerate(sites):
        if labels is True or (labels and i in labels):
            site["label"] = f"site=s{i}"
    spec = {"model": MLP, "optimizer": {"type": "adam", "lr": 0.002}, "batch_size": 32, "local_steps": 40,
            "rounds": rounds, "seed": 1, "sites": sites, "exchange_timeout_s": 60}
    spec.update(extra)
    return {"type": "federated", "name": name, "spec": spec}


def test_nine_sites_secured_fl():
    with Stack(workers=0) as s:
        for i in range(9):
            s.start_worker(i, labels=f"site=s{i},zone=test")
        _, tok = s.tenant("hospitals")
        jid = s.submit(tok, fed_job(9, rounds=4, aggregation="securedfl"))
        done = s.wait_state(tok, jid, "succeeded", timeout=300)
        m = done["result"]["metrics"]
        assert m["sites"] == 9 and m["rounds"] == 4 and m["test_accuracy"] > 0.6, m
        assert m["residual"] < 1e-6, m  # z reached FedAvg's average
        design = done["result"]["design"]
        assert design["classes"] == 4 and "AG(2,3)" in design["kind"], design
        pairs = {}
        for cls in design["groups"]:  # pairs meet once: a Kirkman triple system
            assert sorted(x for g in cls for x in g) == sorted(f"s{i}" for i in range(9))
            for g in cls:
                for a in g:
                    for b in g:
                        if a < b:
                            pairs[(a, b)] = pairs.get((a, b), 0) + 1
        assert len(pairs) == 36 and set(pairs.values()) == {1}
        points = s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        rounds = [p for p in points if "round" in p]
        assert [p["round"] for p in rounds] == [1, 2, 3, 4], rounds
        assert all(p["bytes_sent"] > 0 and p["residual"] < 1e-6 for p in rounds), rounds
        assert rounds[-1]["test_accuracy"] >= rounds[0]["test_accuracy"] - 0.02, rounds
        # each site ran on its own labelled worker
        started = {e["source"] for e in s.events(tok, jid) if e["state"] == "running"}
        assert started == {f"worker:w_test{i}" for i in range(9)}, started
        models = s.get("/v1/models", tok).json["models"]
        assert [x["name"] for x in models] == ["fed-mnist"], models


# Redis-side man in the middle: replaces site ARGV[1]'s entry in the stream of public keys (KEYS[1]) by
# the same header with ARGV[2] (hex: another key and tag); 1 when it found the entry
SWAP_KEY = """
local function unhex(h) return (h:gsub('..', function(b) return string.char(tonumber(b, 16)) end)) end
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  local d = e[2][2]
  if string.byte(d, 3) + 256 * string.byte(d, 4) == tonumber(ARGV[1]) then
    redis.call('XDEL', KEYS[1], e[1])
    redis.call('XADD', KEYS[1], '*', 'd', string.sub(d, 1, 22) .. unhex(ARGV[2]))
    return 1
  end
end
return 0
"""


def test_a_key_swapped_in_redis_fails_the_job():
    """Whoever can write to Redis swaps site 1's public key and its tag for another valid-looking pair before the
    sites read them: the tag does not verify under the workers' cluster secret (--fed-secret), every site refuses
    the key, and the job fails saying which site's key and why, without a retry.  GANTRY_TEST_FED_HOLD=1 (tests
    only) makes each site wait, after publishing its key, for a message on the channel "go": the swap lands first."""
    with Stack(workers=0, env={"GANTRY_TEST_FED_HOLD": "1"}) as s:
        for i in range(3):
            s.start_worker(i, labels=f"site=s{i}")
        _, tok = s.tenant("mitm")
        jid = s.submit(tok, fed_job(3, rounds=1, local_steps=5))
        keys = f"gantry:fed:{jid}:0:hello"
        wait_until("the three public keys in Redis", lambda: s.redis("XLEN", keys) == "3", 120)
        assert s.redis("EVAL", SWAP_KEY, "1", keys, "1", os.urandom(64).hex()) == "1"
        s.redis("XADD", f"gantry:fed:{jid}:0:go", "*", "d", "go")
        job = s.wait_state(tok, jid, "failed", timeout=60)
        assert "site 1's public key is not authenticated (tampered in Redis?" in job["error"], job
        assert [e["state"] for e in s.events(tok, jid)].count("queued") == 1  # failed, not retried
        # untouched, the next job runs on the same workers
        nxt = s.submit(tok, fed_job(3, rounds=1, local_steps=5, name="after"))
        wait_until("the next job's keys", lambda: s.redis("XLEN", f"gantry:fed:{nxt}:0:hello") == "3", 120)
        s.redis("XADD", f"gantry:fed:{nxt}:0:go", "*", "d", "go")
        assert s.wait_state(tok, nxt, "succeeded", timeout=120)["result"]["metrics"]["sites"] == 3


def hello_tag(secret, jid, attempt, site, n, pub):
    """the cluster secret's tag of a site's public key (workers/fed/secagg.c, hello_tag): what a holder of the
    secret can compute for a key of its own"""
    msg = b"gantry-fed-hello-1\0" + jid.encode() + b"\0" + struct.pack("<IHH", attempt, site, n) + pub
    return hmac.new(secret, msg, hashlib.sha256).digest()


def test_a_roster_of_site_keys():
    """Three workers, each with its own identity key (--site-key, made by gantry-worker --make-site-key as
    ./deploy/up does); a job pinning each site to its worker's public key (spec.sites[i].public_key) runs, every
    site signing its key and its group sums; without labels the keys alone place the sites.  Then: a roster naming
    a key no worker holds for site 1 waits, naming the field; and whoever holds the cluster secret and can write to
    Redis replaces site 1's public key by one of its own with a valid tag: the key is refused, it is not signed by
    site 1's roster key."""
    with Stack(workers=0, env={"GANTRY_TEST_FED_HOLD": "1"}) as s:
        keys = []
        for i in range(3):
            keys.append(s.site_key(i)[1])
            s.start_worker(i, labels=f"site=s{i}", site_key=True)
        assert all(k.startswith("ed25519:") and len(k) == 52 for k in keys) and len(set(keys)) == 3, keys
        _, tok = s.tenant("roster")
        # each worker shows its public key in GET /v1/workers (and logs it at start)
        wait_until("three workers registered", lambda: len(s.workers()) == 3, 15)
        shown = {w["id"]: w.get("site_key") for w in s.workers()}
        assert shown == {f"w_test{i}": keys[i] for i in range(3)}, shown

        def pinned(name, roster):
            job = fed_job(3, rounds=2, local_steps=5, name=name)
            for i, site in enumerate(job["spec"]["sites"]):
                site["public_key"] = roster[i]
            return job

        def go(jid, count=3):
            wait_until("the public keys", lambda: s.redis("XLEN", f"gantry:fed:{jid}:0:hello") == str(count), 120)
            s.redis("XADD", f"gantry:fed:{jid}:0:go", "*", "d", "go")

        jid = s.submit(tok, pinned("pinned", keys))
        go(jid)
        done = s.wait_state(tok, jid, "succeeded", timeout=180)
        assert done["result"]["metrics"]["sites"] == 3, done
        # each site's public key in Redis came with its signature: header 22, key 32, tag 32, signature 64 bytes
        sizes = s.redis("EVAL", "local t = {} for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do "
                        "t[#t + 1] = string.len(e[2][2]) end return table.concat(t, ',')", "1", f"gantry:fed:{jid}:0:hello")
        assert sizes == "150,150,150", sizes
        # without labels, the roster alone places and claims: site k on the worker holding its key (here reversed)
        job = pinned("keys-only", keys[::-1])
        for site in job["spec"]["sites"]:
            del site["label"]
        jid = s.submit(tok, job)
        go(jid)
        assert s.wait_state(tok, jid, "succeeded", timeout=180)["result"]["metrics"]["sites"] == 3
        # a spec error names the field
        bad = s.post("/v1/jobs", tok, pinned("dup", [keys[0], keys[0], keys[2]]))
        assert bad.status == 400 and bad.json["error"]["field"] == "spec.sites[1].public_key", bad.json
        # a roster naming another key for site 1: no worker holds it, so the scheduler places nothing and says why
        other = s.site_key(9)[1]
        jid = s.submit(tok, pinned("wrong-roster", [keys[0], other, keys[2]]))
        why = wait_until("the wait reason", lambda: [e["reason"] for e in s.events(tok, jid)
                                                     if "holds the key spec.sites[1].public_key" in e["reason"]], 30)[-1]
        assert f"no worker labelled site=s1 holds the key spec.sites[1].public_key ({other[:20]}...)" in why, why
        assert s.job(tok, jid)["state"] == "queued"
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 200
        # the cluster secret's holder, writing to Redis, poses as site 1 with a key of its own and a valid tag
        jid = s.submit(tok, pinned("forged", keys))
        stream = f"gantry:fed:{jid}:0:hello"
        wait_until("the three public keys in Redis", lambda: s.redis("XLEN", stream) == "3", 120)
        with open(s.fed_secret, "rb") as f:
            secret = f.read().rstrip(b"\r\n ")
        pub = os.urandom(32)
        forged = pub + hello_tag(secret, jid, 0, 1, 3, pub) + os.urandom(64)  # and a signature it cannot make
        assert s.redis("EVAL", SWAP_KEY, "1", stream, "1", forged.hex()) == "1"
        s.redis("XADD", f"gantry:fed:{jid}:0:go", "*", "d", "go")
        job = s.wait_state(tok, jid, "failed", timeout=60)
        assert "site 1's key is not signed by its roster key (spec.sites[1].public_key)" in job["error"], job
        assert [e["state"] for e in s.events(tok, jid)].count("queued") == 1  # failed, not retried


def round_points(s, tok, jid):
    """the job's metrics points that are rounds, in order"""
    return [p for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"] if "round" in p]


def kill_a_site_after_round(s, tok, jid, k):
    """once round k's point is in, SIGKILLs worker 1 (it runs one of the sites) and starts worker 3, a new worker
    that holds no checkpoint of the job; the newest round reported before the kill"""
    wait_until(f"round {k}'s point", lambda: any(p["round"] >= k for p in round_points(s, tok, jid)), 120, 0.05)
    s.kill("worker1")
    seen = max(p["round"] for p in round_points(s, tok, jid))
    s.start_worker(3)
    return seen


def test_a_lost_site_resumes_from_the_last_round():
    """A site's worker SIGKILLed after round 2: the job is requeued, and the sites (two on the workers that hold the
    checkpoint of the last round, one on a new worker that holds none) continue after the newest round a site
    checkpointed instead of round 1: the rounds' points never go back, the event says where it resumed, and the
    model is as good as a run that was not interrupted (docs/federated.md, "Restarts")."""
    rounds = 6
    with Stack(workers=3) as s:
        _, tok = s.tenant("hospitals")
        jid = s.submit(tok, fed_job(3, rounds=rounds, labels=False, local_steps=300, exchange_timeout_s=20))
        seen = kill_a_site_after_round(s, tok, jid, 2)
        done = s.wait_state(tok, jid, "succeeded", timeout=120)
        notes = [e.get("message") or e.get("reason") or "" for e in s.events(tok, jid)]
        resumed = [n for n in notes if "resumed at round" in n]
        assert len(resumed) == 1, notes
        k = int(resumed[0].split("checkpoint of round ")[1].split(" ")[0])
        assert k >= seen and f"resumed at round {k + 1} of {rounds} from the checkpoint of round {k}" in resumed[0], resumed
        assert "2 of 3 sites held it" in resumed[0], resumed  # the new worker's site got it from a survivor
        # the lost generation counted as a failure until the sites got past it: then the count starts again, so
        # sites lost now and then over a long run never add up to the job's max attempts
        assert any("earlier lost generations no longer count as failures" in n for n in notes), notes
        got = [p["round"] for p in round_points(s, tok, jid)]
        assert got == sorted(set(got)) and got[0] == 1 and got[-1] == rounds, got  # never back to round 1
        m = done["result"]["metrics"]
        assert m["rounds"] == rounds and m["test_accuracy"] > 0.6 and m["residual"] < 1e-6, m


def test_a_lost_site_is_dropped_and_the_rounds_go_on():
    """Four sites, FedAvg with its default threshold 3 (docs/federated.md, "Dropouts"): a site's worker SIGKILLed
    after round 2 is dropped, not the job: the scheduler notes it and requeues nothing, the other three complete
    every round without it (their Shamir shares rebuild the dropped site's masks), and the job finishes in its
    first generation, never back to round 1 and never restarted."""
    rounds = 6
    with Stack(workers=4) as s:
        _, tok = s.tenant("fleet")
        jid = s.submit(tok, fed_job(4, rounds=rounds, labels=False, local_steps=300, exchange_timeout_s=20))
        wait_until("round 2's point", lambda: any(p["round"] >= 2 for p in round_points(s, tok, jid)), 120, 0.05)
        claims = s.redis("HGETALL", f"gantry:fed:{jid}:0:sites").split()
        sites = dict(zip(claims[0::2], claims[1::2]))  # site index -> worker id
        victim = sites["2"]
        s.kill("worker" + victim[len("w_test"):])
        done = s.wait_state(tok, jid, "succeeded", timeout=150)
        evs = s.events(tok, jid)
        notes = [e.get("message") or e.get("reason") or "" for e in evs]
        assert any("site 2 dropped: the rounds go on with the other 3 sites (threshold 3)" in n for n in notes), notes
        assert any("3 of 4 sites delivered (without s2" in n for n in notes), notes
        assert not any("requeued" in n or "resumed at round" in n for n in notes), notes  # one generation throughout
        pts = round_points(s, tok, jid)
        got = [p["round"] for p in pts]
        assert got == list(range(1, rounds + 1)), got  # every round once, none repeated
        assert pts[0]["delivered"] == 4 and pts[-1]["delivered"] == 3, pts
        print("rounds (delivered, aggregate_s, round_s):",
              [(p["delivered"], round(p["aggregate_s"], 2), round(p["round_s"], 2)) for p in pts])
        m = done["result"]["metrics"]
        assert m["rounds"] == rounds and m["test_accuracy"] > 0.6, m


def test_federated_errors_and_waiting_for_a_site():
    with Stack(workers=0) as s:
        for i in range(3):
            s.start_worker(i, labels=f"site=s{i}")
        _, tok = s.tenant("banks")
        bad = [
            (fed_job(2), "spec.sites"),
            (fed_job(3, aggregation="securedfl", masking=False, admm={"iterations": 5}), "spec.admm.iterations"),
            # a spec with admm but no aggregation is SecureD-FL, as when that was the default
            (dict(fed_job(3), spec=dict(fed_job(3)["spec"], masking=False, admm={"iterations": 5})), "spec.admm.iterations"),
            (dict(fed_job(3), spec=dict(fed_job(3)["spec"], aggregation="median")), "spec.aggregation"),
            (dict(fed_job(5), spec=dict(fed_job(5)["spec"], threshold=2)), "spec.threshold"),
            (dict(fed_job(4), spec=dict(fed_job(4)["spec"], aggregation="securedfl", threshold=3)), "spec.threshold"),
            (dict(fed_job(3), spec=dict(fed_job(3)["spec"], sites=fed_job(3)["spec"]["sites"][:2] * 2)), "spec.sites[2].name"),
            (dict(fed_job(3), spec=dict(fed_job(3)["spec"], sites=[dict(fed_job(3)["spec"]["sites"][0], label="s0")]
                                        + fed_job(3)["spec"]["sites"][1:])), "spec.sites[0].label"),
            (dict(fed_job(3), spec=dict(fed_job(3)["spec"], sites=[dict(fed_job(3)["spec"]["sites"][0], label="site=a b")]
                                        + fed_job(3)["spec"]["sites"][1:])), "spec.sites[0].label"),
        ]
        for job, field in bad:
            r = s.post("/v1/jobs", tok, job)
            assert r.status == 400 and r.json["error"]["field"] == field, (field, r.json)
        # a labelled site whose worker is missing: the job waits and says which, and how to fix it
        job = fed_job(4, rounds=1, threshold=4)  # every site: the plain sum (the default, 3 of 4, is the dropouts' mode)
        jid = s.submit(tok, job)
        why = wait_until("the wait reason", lambda: [e["reason"] for e in s.events(tok, jid)
                                                     if "no worker labelled site=s3" in e["reason"]], 30)[-1]
        assert "--labels site=s3" in why, why
        assert s.job(tok, jid)["state"] == "queued"
        s.start_worker(3, labels="site=s3")
        done = s.wait_state(tok, jid, "succeeded", timeout=240)
        assert done["result"]["metrics"]["sites"] == 4  # a searched packing (4 sites: one group of 4)
        # the default aggregation is FedAvg: one masked sum a round, so a site sends one sealed vector of the
        # MLP's 25,450 parameters (8 bytes each, 38 of header and tag) and no more
        points = [p for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"] if "round" in p]
        assert [p["bytes_sent"] for p in points] == [25450 * 8 + 38], points
        # FedAvg with its default threshold (3 of 4: the dropouts' mode), in the same job type: the same vector a
        # round plus its weight, the round's mask key with its shares, a close and the shares revealed (< 1 KB)
        jid = s.submit(tok, fed_job(4, rounds=2, name="fedavg", aggregation="fedavg"))
        done = s.wait_state(tok, jid, "succeeded", timeout=240)
        assert done["result"]["metrics"]["residual"] < 1e-6 and done["result"]["metrics"]["test_accuracy"] > 0.5
        points = [p for p in s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"] if "round" in p]
        assert all(25450 * 8 + 38 < p["bytes_sent"] < 25450 * 8 + 38 + 1024 and p["delivered"] == 4 for p in points), points


def test_labelled_sites_pin_and_the_others_run_anywhere():
    """two labelled sites keep their workers; two sites without a label take the unlabelled workers,
    never a labelled one while an unlabelled one is free, one site per worker"""
    with Stack(workers=0) as s:
        s.start_worker(0, labels="site=s0")
        s.start_worker(1, labels="site=s3")
        s.start_worker(2)
        s.start_worker(3)
        s.start_worker(4, labels="site=elsewhere")
        wait_until("workers registered", lambda: len(s.workers()) == 5, 15)
        _, tok = s.tenant("labs")
        jid = s.submit(tok, fed_job(4, rounds=1, local_steps=10, labels={0, 3}))
        done = s.wait_state(tok, jid, "succeeded", timeout=240)
        assert done["result"]["metrics"]["sites"] == 4
        claims = s.redis("HGETALL", f"gantry:fed:{jid}:0:sites").split()
        where = dict(zip(claims[0::2], claims[1::2]))
        assert where["0"] == "w_test0" and where["3"] == "w_test1", where
        assert {where["1"], where["2"]} == {"w_test2", "w_test3"}, where


def test_sites_read_their_own_files():
    """gantry-fed-split cuts Fashion-MNIST into per-site IDX files under the tenant's root; a
    federated job names them (paths confined to the tenant's roots: one outside is refused, naming
    the site's field) and each site trains on its own file"""
    import os
    import subprocess
    import tempfile
    from harness import ADMIN, BUILD
    root = tempfile.mkdtemp(prefix="gantry-fed-")
    out = subprocess.run([os.path.join(BUILD, "workers", "fed", "gantry-fed-split"), "--sites", "3", "--alpha", "1",
                          "--out", root], capture_output=True, text=True, check=True).stdout
    assert out.count("site ") == 3, out
    fm = "/usr/share/datasets/fashion-mnist"
    with Stack(workers=0) as s:
        for i in range(3):
            s.start_worker(i, labels=f"site=s{i}")
        tid, tok = s.tenant("clinics")
        assert s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"roots": [root, fm]}).status == 200
        job = fed_job(3, rounds=2)
        for i, site in enumerate(job["spec"]["sites"]):
            site["dataset"] = {"format": "idx", "train_images": f"{root}/site-{i}-images-idx3-ubyte",
                               "train_labels": f"{root}/site-{i}-labels-idx1-ubyte",
                               "test_images": f"{fm}/t10k-images-idx3-ubyte.gz", "test_labels": f"{fm}/t10k-labels-idx1-ubyte.gz"}
        outside = json_copy(job)
        outside["spec"]["sites"][1]["dataset"]["train_images"] = "/etc/passwd"
        r = s.post("/v1/jobs", tok, outside)
        assert r.status == 400 and r.json["error"]["field"] == "spec.sites[1].dataset.train_images", r.json
        done = s.wait_state(tok, s.submit(tok, job), "succeeded", timeout=240)
        assert done["result"]["metrics"]["test_accuracy"] > 0.5, done["result"]["metrics"]


def json_copy(x):
    import json
    return json.loads(json.dumps(x))
