"""Hardening: rate limits, token revocation and expiry, the audit log, idempotency
bound to the body."""

import time

from harness import ADMIN, Stack, placement_job, wait_until


def test_rate_limit_per_token():
    with Stack(workers=0, server_args=["--rate-limit", "5", "--rate-burst", "5"]) as s:
        tid, tok = s.tenant("limited")
        other = s.token(tid, "viewer")
        codes = [s.get("/v1/jobs", tok).status for _ in range(8)]
        assert codes[:4] == [200] * 4 and 429 in codes, codes  # tenant() itself used none of tok's budget
        r = s.get("/v1/jobs", tok)
        assert r.status == 429 and int(r.headers["retry-after"]) >= 1, r
        assert r.json["error"]["code"] == "rate_limited"
        assert s.get("/v1/jobs", other).status == 200  # buckets are per token
        assert s.get("/healthz").status == 200  # probes are not limited
        wait_until("the bucket refills", lambda: s.get("/v1/jobs", tok).status == 200, 5, 0.25)


def test_revocation_expiry_and_audit():
    with Stack(workers=0) as s:
        tid, tok = s.tenant("tokens")
        victim = s.post(f"/v1/tenants/{tid}/tokens", ADMIN, {"role": "member", "name": "ci"}).json
        assert s.get("/v1/whoami", victim["token"]).status == 200
        r = s.post(f"/v1/tokens/{victim['id']}/revoke", ADMIN)
        assert r.status == 200 and r.json["revoked"], r
        assert s.get("/v1/whoami", victim["token"]).status == 401
        assert s.post(f"/v1/tokens/{victim['id']}/revoke", ADMIN).status == 404  # already revoked
        short = s.post(f"/v1/tenants/{tid}/tokens", ADMIN, {"role": "viewer", "expires_in_s": 1}).json
        assert short["expires_at"], short
        assert s.get("/v1/whoami", short["token"]).status == 200
        wait_until("the token expires", lambda: s.get("/v1/whoami", short["token"]).status == 401, 5, 0.2)
        assert s.post(f"/v1/tenants/{tid}/tokens", ADMIN, {"expires_in_s": 0}).status == 400
        jid = s.submit(tok)
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 200
        entries = s.get("/v1/audit?limit=50", ADMIN).json["entries"]
        actions = [e["action"] for e in entries]
        for a in ("tenant.create", "token.create", "token.revoke", "job.cancel"):
            assert a in actions, (a, actions)
        assert entries[0]["seq"] > entries[-1]["seq"]  # newest first
        assert s.get("/v1/audit", tok).status == 403


def test_idempotency_key_bound_to_body():
    with Stack(workers=0) as s:
        _, tok = s.tenant("idem")
        h = {"Idempotency-Key": "k-1"}
        first = s.post("/v1/jobs", tok, placement_job("one"), headers=h)
        same = s.post("/v1/jobs", tok, placement_job("one"), headers=h)
        other = s.post("/v1/jobs", tok, placement_job("two"), headers=h)
        assert first.status == 201 and same.status == 200 and same.json["id"] == first.json["id"]
        assert other.status == 422 and other.json["error"]["field"] == "Idempotency-Key", other
        assert len(s.get("/v1/jobs", tok).json["jobs"]) == 1


def test_https_and_redis_auth():
    import os
    import ssl
    import subprocess
    import tempfile
    d = tempfile.mkdtemp(prefix="gantry-tls-")
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    with Stack(workers=1, tls_ca=cert, server_args=["--tls-cert", cert, "--tls-key", key],
               redis_password="s3cret-redis-pass") as s:
        _, tok = s.tenant("tls-team")
        s.wait_state(tok, s.submit(tok))  # the whole path over HTTPS, every process through Redis AUTH
        plain = http_plain_status(s.port)
        assert plain is None or plain >= 400, "plain HTTP must not be served on the TLS port"
        assert s.redis("PING") == "PONG"
        unauth = subprocess.run(["redis-cli", "-p", str(s.rport), "PING"], capture_output=True, text=True).stdout
        assert "NOAUTH" in unauth, unauth


def http_plain_status(port):
    import http.client
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/healthz")
        return c.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
