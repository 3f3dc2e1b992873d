"""Every route x every role x own/other tenant: the exact status code of each.
Routes come from /v1/openapi.json (generated from the route table), so a route
added without an expectation here fails this test."""

import http.client

from harness import ADMIN, Stack, placement_job

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
    ("GET", "/v1/events"): 200, ("GET", "/v1/workers"): 200, ("GET", "/v1/models"): 200, ("GET", "/v1/models/{name}"): 404,
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
                    if ok is None:
                        want = 200
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
