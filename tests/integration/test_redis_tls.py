"""Workers on other hosts reach Redis over TLS (docs/operations.md, "Workers on other hosts: Redis over
TLS"), as documented: Redis 7 serves a TLS port that wants a client certificate, and a worker's host
runs a stunnel4 client on loopback; the worker speaks plain RESP to the tunnel (hiredis 0.14 has no
TLS).  The control host's daemons use Redis's plain port on 127.0.0.1.  Checked: a job runs on the
worker through the tunnel; the TLS port refuses plain RESP and a TLS client without a certificate of
the cluster's CA."""

import os
import shutil
import subprocess

from harness import Stack, free_port, placement_job, timeout, wait_until


def sh(*args, cwd=None):
    subprocess.run(args, check=True, capture_output=True, cwd=cwd, timeout=60)


def make_certs(d):
    """a CA, Redis's certificate (localhost) and a worker host's client certificate"""
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=gantry test CA",
       "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    for name, ext in (("redis", "subjectAltName=DNS:localhost,IP:127.0.0.1"), ("worker", "extendedKeyUsage=clientAuth")):
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
           "-out", f"{name}.csr", cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext + "\n")
        sh("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
           "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)


class TlsStack(Stack):
    """one worker, which reaches Redis only through a stunnel4 client to Redis's TLS port"""

    def __init__(self):
        super().__init__(workers=1)
        self.tls_port, self.tunnel_port = free_port(), free_port()
        self.certs = os.path.join(self.dir, "tls")
        os.mkdir(self.certs, 0o700)
        make_certs(self.certs)

    def start_redis(self):
        c = self.certs
        self.redis_extra = ["--tls-port", str(self.tls_port), "--tls-cert-file", f"{c}/redis.crt", "--tls-key-file",
                            f"{c}/redis.key", "--tls-ca-cert-file", f"{c}/ca.crt", "--tls-auth-clients", "yes"]
        super().start_redis()

    def start_worker(self, i, labels=""):
        conf = os.path.join(self.dir, "stunnel.conf")
        c = self.certs
        with open(conf, "w") as f:
            f.write(f"foreground = yes\npid =\n[gantry-redis]\nclient = yes\naccept = 127.0.0.1:{self.tunnel_port}\n"
                    f"connect = 127.0.0.1:{self.tls_port}\ncert = {c}/worker.crt\nkey = {c}/worker.key\n"
                    f"CAfile = {c}/ca.crt\nverifyChain = yes\ncheckHost = localhost\n")
        self._spawn("stunnel", [shutil.which("stunnel4") or "stunnel4", conf])
        plain = self.rport
        self.rport = self.tunnel_port  # the worker's --redis: the tunnel
        try:
            super().start_worker(i, labels)
        finally:
            self.rport = plain


@timeout(120)
def test_worker_reaches_redis_through_a_tls_tunnel():
    with TlsStack() as s:
        assert s.workers(), "the worker registered through the tunnel"
        _, tok = s.tenant("remote")
        jid = s.submit(tok, placement_job("over-tls"))
        job = s.wait_state(tok, jid, "succeeded", timeout=60)
        assert job["state"] == "succeeded"
        # the TLS port speaks no plain RESP
        plain = subprocess.run(["redis-cli", "-p", str(s.tls_port), "PING"], capture_output=True, text=True, timeout=10)
        assert "PONG" not in plain.stdout, plain
        # and wants a certificate of the cluster's CA
        nocert = subprocess.run(["redis-cli", "--tls", "--cacert", f"{s.certs}/ca.crt", "-p", str(s.tls_port), "PING"],
                                capture_output=True, text=True, timeout=10)
        assert "PONG" not in nocert.stdout, nocert
        withcert = subprocess.run(["redis-cli", "--tls", "--cacert", f"{s.certs}/ca.crt", "--cert", f"{s.certs}/worker.crt",
                                   "--key", f"{s.certs}/worker.key", "-p", str(s.tls_port), "PING"],
                                  capture_output=True, text=True, timeout=10)
        assert "NOAUTH" in withcert.stdout + withcert.stderr, withcert  # TLS up to Redis, which still wants credentials
        wait_until("the worker stays registered", lambda: len(s.workers()) == 1, 5)
