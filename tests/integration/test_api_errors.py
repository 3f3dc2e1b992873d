"""Every status code the API promises, JSON errors naming the field, and no 5xx for a client's mistake."""

import re

from harness import ADMIN, Stack, placement_job


def err(r, status, field=None):
    assert r.status == status, r
    assert set(r.json["error"]) == {"code", "message", "field"}, r.json
    assert r.json["error"]["message"], r.json
    if field is not None:
        assert r.json["error"]["field"] == field, r.json


def test_status_codes():
    with Stack(workers=1) as s:
        tid, member = s.tenant("codes")
        viewer = s.token(tid, "viewer")
        # 401
        err(s.get("/v1/jobs"), 401)
        err(s.get("/v1/jobs", "gty_not-a-real-token"), 401)
        err(s.get("/v1/jobs", headers={"Authorization": "Basic abc"}), 401)
        # 403: a viewer may not submit, a member may not administer
        err(s.post("/v1/jobs", viewer, placement_job()), 403)
        err(s.post("/v1/tenants", member, {"name": "x"}), 403)
        assert s.get("/v1/jobs", viewer).status == 200
        # 404
        err(s.get("/v1/jobs/j_doesnotexist", member), 404, "id")
        err(s.get("/v1/nothing-here", member), 404)
        err(s.post("/v1/tenants/t_nope/tokens", ADMIN, {"role": "member"}), 404)
        # 405 with Allow
        r = s.request("DELETE", "/v1/jobs", member)
        err(r, 405)
        assert "GET" in r.headers["allow"] and "POST" in r.headers["allow"], r.headers
        err(s.request("PUT", "/v1/jobs/j_x", member), 405)
        # 400 naming the field
        err(s.post("/v1/jobs", member, {"spec": {}}), 400, "type")
        err(s.post("/v1/jobs", member, {"type": "placement", "spec": {}}), 400)
        err(s.post("/v1/jobs", member, {"type": "placement", "priority": "urgent", "spec": {}}), 400, "priority")
        err(s.post("/v1/jobs", member, {"type": "nope", "spec": {}}), 400, "type")
        err(s.post("/v1/jobs", member, {"type": "placement", "spec": {}, "colour": 1}), 400, "colour")
        bad = placement_job()
        bad["spec"]["graph"]["ops"][1]["compute_us"] = "fast"
        r = s.post("/v1/jobs", member, bad)
        err(r, 400)
        assert r.json["error"]["field"].startswith("spec.graph.ops[1]"), r.json
        bad = placement_job()
        bad["spec"]["graph"]["edges"][0]["dst"] = "ghost"
        r = s.post("/v1/jobs", member, bad)
        assert r.status == 400 and r.json["error"]["field"].startswith("spec.graph.edges[0]"), r
        err(s.request("POST", "/v1/jobs", member, raw=b"{not json", headers={"Content-Type": "application/json"}), 400)
        err(s.request("POST", "/v1/jobs", member, raw=b"[1,2]", headers={"Content-Type": "application/json"}), 400)
        err(s.get("/v1/jobs?state=bogus", member), 400, "state")
        err(s.get("/v1/jobs?limit=0", member), 400, "limit")
        err(s.get("/v1/jobs?cursor=abc", member), 400, "cursor")
        deep = "[" * 200 + "]" * 200
        err(s.request("POST", "/v1/jobs", member, raw=('{"type":"placement","spec":{"x":%s}}' % deep).encode(),
                      headers={"Content-Type": "application/json"}), 400)
        # 413: 1 MiB default, a larger limit for placement submissions
        big = {"name": "x" * (1 << 20)}
        err(s.post("/v1/tenants", ADMIN, big), 413)
        err(s.request("POST", "/v1/jobs", member, raw=b" " * (33 << 20),
                      headers={"Content-Type": "application/json"}), 413)
        # 415
        err(s.request("POST", "/v1/jobs", member, raw=b"type=placement",
                      headers={"Content-Type": "application/x-www-form-urlencoded"}), 415)
        # 409: tenant name taken
        err(s.post("/v1/tenants", ADMIN, {"name": "codes"}), 409, "name")
        err(s.post("/v1/tenants", ADMIN, {"name": "bad name!"}), 400, "name")
        err(s.post(f"/v1/tenants/{tid}/tokens", ADMIN, {"role": "root"}), 400, "role")
        # the dashboard comes with a strict CSP and no inline script
        page = s.get("/")
        assert page.status == 200 and "script-src 'self'" in page.headers["content-security-policy"], page.headers
        assert page.headers["x-content-type-options"] == "nosniff"
        assert "<script>" not in page.raw and "onclick=" not in page.raw
        # probes need no token
        assert s.get("/healthz").status == 200 and s.get("/readyz").status == 200
        metrics = s.get("/metrics")
        assert metrics.status == 200 and "text/plain" in metrics.headers["content-type"]
        assert 'gantry_http_requests_total{method="POST",route="/v1/jobs",code="4xx"}' in metrics.raw
        # none of the above was a 5xx
        assert not re.search(r'code="5xx"', metrics.raw), metrics.raw


def test_idempotency_and_pagination():
    with Stack(workers=1) as s:
        _, tok = s.tenant("pages")
        h = {"Idempotency-Key": "submit-42"}
        first = s.post("/v1/jobs", tok, placement_job("idem"), headers=h)
        again = s.post("/v1/jobs", tok, placement_job("idem"), headers=h)
        assert first.status == 201 and again.status == 200, (first, again)
        assert first.json["id"] == again.json["id"] and first.headers["location"] == f"/v1/jobs/{first.json['id']}"
        ids = [first.json["id"]] + [s.submit(tok, placement_job(f"p{i}")) for i in range(6)]
        seen, cursor = [], None
        while True:
            r = s.get("/v1/jobs?limit=3" + (f"&cursor={cursor}" if cursor else ""), tok)
            assert r.status == 200 and len(r.json["jobs"]) <= 3
            seen += [j["id"] for j in r.json["jobs"]]
            cursor = r.json["next_cursor"]
            if not cursor:
                break
        assert seen == list(reversed(ids)), (seen, ids)  # newest first, each once
        only = s.get("/v1/jobs?type=placement&limit=500", tok).json["jobs"]
        assert len(only) == 7
