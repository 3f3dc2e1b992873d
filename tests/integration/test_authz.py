"""Every route x every role x own/other tenant: the exact status code of each.
Routes come from /v1/openapi.json (generated from the route table), so a route
added without an expectation here fails this test."""

import http.client

from harness import ADMIN, Stack, placement_job, wait_until

# the status of a permitted call, per route; None: the route needs no token
SUCCESS = {
    ("GET", "/healthz"): None, ("GET", "/readyz"): None, ("GET", "/metrics"): None,
    ("GET", "/v1/openapi.json"): None,
    ("GET", "/v1/whoami"): 200,
    ("POST", "/v1/tenants"): 201, ("GET", "/v1/tenants"): 200,
    ("PATCH", "/v1/tenants/{id}"): 200, ("POST", "/v1/tenants/{id}/tokens"): 201,
    ("POST", "/v1/tokens/{id}/revoke"): 200, ("GET", "/v1/audit"): 200,
    ("POST", "/v1/jobs"): 201, ("GET", "/v1/jobs"): 200, ("GET", "/v1/jobs/{id}"): 200,
    ("POST", "/v1/jobs/{id}/cancel"): 200, ("GET", "/v1/jobs/{id}/events"): 200,
    ("GET", "/v1/jobs/{id}/metrics"): 200,
    # placement jobs: no logs, no outputs (a program job's: test_program_logs.py, tenants included)
    ("GET", "/v1/jobs/{id}/logs"): 404, ("GET", "/v1/jobs/{id}/trials"): 404,  # not a search (test_search.py)
    ("GET", "/v1/jobs/{id}/outputs"): 404, ("GET", "/v1/jobs/{id}/outputs/{path}"): 404,
    ("GET", "/v1/events"): 200, ("GET", "/v1/workers"): 200, ("GET", "/v1/models"): 200, ("GET", "/v1/models/{name}"): 404,
    # a JSON body where an upload is multipart: 415; "{alias}" is not an alias: 400 (tested for real, tenants
    # included: test_torchscript.py)
    ("POST", "/v1/models/{name}/versions"): 415, ("PUT", "/v1/models/{name}/aliases/{alias}"): 400,
    ("DELETE", "/v1/models/{name}/aliases/{alias}"): 400,
    ("GET", "/v2/models/{name}"): 404, ("GET", "/v2/models/{name}/ready"): 404,
    ("POST", "/v2/models/{name}/infer"): 404,
    ("GET", "/v1/cluster"): 200, ("GET", "/v1/cluster/timeline"): 200,
}
RANK = {"viewer": 1, "member": 2, "admin": 3}


def status_only(s, method, path, token, body):
    """the status line only (GET /v1/events streams forever)"""
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    h = {"Authorization": f"Bearer {token}"} if token else {}
    if body is not None:
        h["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    status = r.status
    conn.close()
    return status


def test_every_route_role_and_tenant():
    import json
    with Stack(workers=0) as s:  # no worker: jobs stay queued, so cancel succeeds
        spec = s.get("/v1/openapi.json").json
        routes = [(m.upper(), p, op["x-gantry-role"]) for p, item in spec["paths"].items() for m, op in item.items()]
        missing = [r[:2] for r in routes if r[:2] not in SUCCESS]
        assert not missing, f"routes without an expected status in this test: {missing}"

        own_tid, _ = s.tenant("authz-own")
        other_tid, other_member = s.tenant("authz-other")
        tokens = {"admin": ADMIN, "member": s.token(own_tid, "member"), "viewer": s.token(own_tid, "viewer")}
        other_job = s.submit(other_member)
        checked = 0

        def fill(pattern, role, own):
            """a concrete path and body for one call; fresh objects where the call consumes them"""
            if "/v1/jobs/{id}" in pattern:
                jid = s.submit(tokens["member"] if own else other_member)
                return pattern.replace("{id}", jid)
            if "/v1/tokens/{id}" in pattern:
                victim = s.post(f"/v1/tenants/{own_tid if own else other_tid}/tokens", ADMIN, {"role": "viewer"})
                return pattern.replace("{id}", victim.json["id"])
            if "/v1/tenants/{id}" in pattern:
                return pattern.replace("{id}", own_tid if own else other_tid)
            return pattern

        for method, pattern, need in routes:
            ok = SUCCESS[(method, pattern)]
            body_for = {"POST /v1/jobs": placement_job(),
                        "PATCH /v1/tenants/{id}": {"weight": 2}, "POST /v1/tenants/{id}/tokens": {"role": "viewer"}}
            for who in ("none", "bad", "viewer", "member", "admin"):
                for own in ((True, False) if "{id}" in pattern else (True,)):
                    path = fill(pattern, who, own)
                    body = body_for.get(f"{method} {pattern}", {} if method in ("POST", "PATCH") else None)
                    if (method, pattern) == ("POST", "/v1/tenants"):
                        body = {"name": f"t{checked}"}
                    raw = json.dumps(body).encode() if body is not None else None
                    token = {"none": None, "bad": "gty_bad"}.get(who, tokens.get(who))
                    got = status_only(s, method, path, token, raw)
                    if ok is None:  # (/metrics: a token it does not know is a 401, docs/operations.md "Metrics")
                        want = 401 if who == "bad" and pattern == "/metrics" else 200
                    elif who in ("none", "bad"):
                        want = 401
                    elif RANK[who] < RANK[need]:
                        want = 403
                    elif not own and "/v1/jobs/{id}" in pattern and who != "admin":
                        want = 404  # another tenant's job does not exist for you
                    else:
                        want = ok
                    assert got == want, f"{method} {path} as {who} ({'own' if own else 'other'} tenant): {got}, want {want}"
                    checked += 1
        # and a member never sees another tenant's job in a list
        listed = s.get("/v1/jobs?limit=500", tokens["member"]).json["jobs"]
        assert other_job not in {j["id"] for j in listed}
        print(f"authz: {checked} route x role x tenant calls checked")


MLP = {"input": [1, 28, 28], "layers": [{"type": "flatten"}, {"type": "dense", "units": 32}, {"type": "relu"},
                                        {"type": "dense", "units": 10}]}


def training_job(name, steps):
    return {"type": "training", "name": name,
            "spec": {"model": MLP, "dataset": {"name": "fashion-mnist"}, "optimizer": {"type": "sgd", "lr": 0.01},
                     "batch_size": 32, "steps": steps, "seed": 1}}


def sse_text(s, token, seconds):
    """everything GET /v1/events sends a token within `seconds` (headers and chunk sizes included)"""
    import socket
    import time
    got = b""
    with socket.create_connection(("127.0.0.1", s.port), timeout=1) as sock:
        sock.sendall(f"GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (socket.timeout, TimeoutError):
                continue
            if not chunk:
                break
            got += chunk
    text = got.decode("utf-8", "replace")
    assert text.startswith("HTTP/1.1 200"), text[:200]
    return text


def test_no_cross_tenant_leak_of_running_work():
    """a member of tenant B sees that a worker is busy with another tenant's work, never its job id, name or type,
    in /v1/workers, /v1/cluster, /v1/cluster/timeline or its event stream; an admin sees everything"""
    import threading
    with Stack(workers=1) as s:
        _, tok_a = s.tenant("leak-a")
        _, tok_b = s.tenant("leak-b")
        viewer_b = s.token(s.get("/v1/whoami", tok_b).json["tenant"]["id"], "viewer")
        # B listens to its event stream while A's job runs
        streamed = {}
        listener = threading.Thread(target=lambda: streamed.update(text=sse_text(s, tok_b, 6)))
        listener.start()
        name = "secret-project-zebra"
        jid = s.submit(tok_a, training_job(name, 2_000_000))
        s.wait_state(tok_a, jid, "running", timeout=60)
        wait_until("the worker reports the job", lambda: any(w.get("running") == jid for w in s.workers()))
        for tok in (tok_b, viewer_b):
            r = s.get("/v1/workers", tok)
            assert r.status == 200, r
            text = r.raw
            for secret in (jid, name, "training"):
                assert secret not in text, f"/v1/workers shows another tenant's {secret!r} to B: {text}"
            (w,) = r.json["workers"]
            assert w["state"] == "busy (other tenant)" and w["running"] is None, w
            for path in ("/v1/cluster", "/v1/cluster/timeline?minutes=5"):
                text = s.get(path, tok).raw
                assert jid not in text and name not in text, f"{path} shows A's job to B: {text}"
        mine = s.get("/v1/workers", tok_a).json["workers"][0]
        assert mine["running"] == jid and mine["state"] == "busy", mine
        admin = s.get("/v1/workers", ADMIN).json["workers"][0]
        assert admin["running"] == jid and admin["state"] == "busy", admin
        listener.join()
        assert jid not in streamed["text"] and name not in streamed["text"], streamed["text"]
        assert s.post(f"/v1/jobs/{jid}/cancel", tok_a).status == 200
        s.wait_state(tok_a, jid, "cancelled", timeout=60)
        wait_until("the worker idle for B", lambda: s.get("/v1/workers", tok_b).json["workers"][0]["state"] == "idle", 30)


def test_dataset_paths_outside_the_roots_are_no_oracle():
    """every path outside a tenant's roots gets the same answer, whether or not it exists, and a symlink in a root
    that points out of it gets that answer too, without telling whether its target exists"""
    import os
    import tempfile
    with Stack(workers=0) as s:
        tid, tok = s.tenant("oracle")
        root = tempfile.mkdtemp(prefix="gantry-roots-")
        state = os.path.join(s.dir, "state")
        token_file = os.path.join(state, "admin.token")
        if not os.path.exists(token_file):  # the harness presets the token; a stack from ./deploy/up has this file
            with open(token_file, "w") as f:
                f.write(ADMIN + "\n")
            os.chmod(token_file, 0o600)
        os.mkdir(os.path.join(root, "sub"))
        os.symlink(token_file, os.path.join(root, "to-token"))
        os.symlink("/etc/nonexistent-file", os.path.join(root, "to-nothing"))
        os.symlink(state, os.path.join(root, "to-state"))
        os.symlink("../../../../../../../../etc/passwd", os.path.join(root, "sub", "up-and-out"))
        with open(os.path.join(root, "train.idx"), "wb") as f:
            f.write(b"x")
        os.symlink("train.idx", os.path.join(root, "to-train"))  # an in-root symlink is fine
        os.symlink("../train.idx", os.path.join(root, "sub", "up-to-train"))
        assert s.request("PATCH", f"/v1/tenants/{tid}", ADMIN, {"roots": [root]}).status == 200

        def answer(path):
            ds = {"format": "idx", "train_images": path, "train_labels": os.path.join(root, "train.idx"),
                  "test_images": os.path.join(root, "train.idx"), "test_labels": os.path.join(root, "train.idx")}
            r = s.post("/v1/jobs", tok, dict(training_job("oracle", 10), spec=dict(training_job("oracle", 10)["spec"],
                                                                                    dataset=ds)))
            return r.status, r.raw

        outside = {p: answer(p) for p in ("/etc/nonexistent-file", token_file, os.path.join(state, "gantry.db"),
                                          "/etc/passwd", state, os.path.join(root, "to-token"),
                                          os.path.join(root, "to-nothing"), "to-token", "to-nothing",
                                          os.path.join(root, "to-state", "admin.token"),
                                          os.path.join(root, "to-state", "nonexistent"), "sub/up-and-out",
                                          os.path.join(root + "-sibling", "x"))}
        first = outside["/etc/nonexistent-file"]
        assert first[0] == 400, first
        for p, got in outside.items():
            assert got == first, f"{p}: {got} differs from /etc/nonexistent-file's {first}"
        assert "nonexistent" not in first[1] and "exist" not in first[1], first
        for inside in (os.path.join(root, "train.idx"), "train.idx", "to-train", os.path.join(root, "sub", "up-to-train")):
            assert answer(inside)[0] == 201, (inside, answer(inside))
        missing = answer(os.path.join(root, "missing.idx"))
        assert missing[0] == 400 and missing != first, missing  # inside the roots, saying so is fine


def test_model_artifacts_name_no_server_path():
    """a tenant sees a model's artifact relative to the model store, never the server's state directory; an
    inference replica still loads the model"""
    import json
    with Stack(workers=1) as s:
        _, tok = s.tenant("artifacts")
        jid = s.submit(tok, training_job("art-mlp", 50))
        job = s.wait_state(tok, jid, "succeeded", timeout=240)

        def no_server_path(what, artifact):
            assert isinstance(artifact, str) and artifact, (what, artifact)
            assert not artifact.startswith("/") and s.dir not in artifact and ".." not in artifact, (what, artifact)

        no_server_path("job result", job["result"]["model"]["artifact"])
        versions = s.get("/v1/models/art-mlp", tok).json["versions"]
        no_server_path("model version", versions[0]["artifact"])
        assert versions[0]["artifact"] == job["result"]["model"]["artifact"], (versions, job["result"])
        for path in ("/v1/models", "/v1/models/art-mlp", f"/v1/jobs/{jid}", "/v1/jobs?limit=50"):
            text = s.get(path, tok).raw
            assert s.dir not in text, f"{path} names a server path: {text}"
        serve = {"type": "inference", "name": "serve-art",
                 "spec": {"model": "art-mlp", "slo": {"latency_ms": 250, "percentile": 99}, "replicas": 1}}
        r = s.post("/v1/jobs", tok, serve)
        assert r.status == 201 and s.dir not in r.raw, r
        no_server_path("inference spec", r.json["spec"]["resolved"]["artifact"])
        sid = r.json["id"]
        assert s.dir not in json.dumps(s.job(tok, sid))
        wait_until("the replica serves", lambda: s.get("/v2/models/art-mlp/ready", tok).status == 200, 60)
        assert s.post(f"/v1/jobs/{sid}/cancel", tok).status == 200
