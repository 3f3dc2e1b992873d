"""Several hosts for real, on this machine: three network namespaces joined by veth pairs on a
bridge (h0: Redis, server, scheduler; h1 and h2: one worker each, each with its own state directory,
no shared filesystem).  A placement job runs; a 2-host elastic training gang forms its ring across
hosts; then h2's link is cut: the survivor's all-reduce times out, the job goes back as its next
generation (one failure counted) and continues on h1 from the survivor's state, and finishes;
when the link returns, h2's worker (declared dead meanwhile) comes back idle.  Needs root (netns);
without it the test says so and passes."""

import contextlib
import json
import os
import subprocess
import time

from harness import ADMIN, BUILD, ROOT, Stack, placement_job, sandbox_uid, timeout, wait_until

ALONE = True  # run.py runs these tests with nothing beside them: network namespaces and veth pairs of the machine

MLP = {"input": [1, 28, 28], "layers": [{"type": "flatten"}, {"type": "dense", "units": 32}, {"type": "relu"},
                                        {"type": "dense", "units": 10}]}


def sh(*args):
    subprocess.run(args, check=True, capture_output=True)


class Hosts(Stack):
    """a Stack whose daemons live in network namespaces: h0 runs Redis, server and scheduler"""

    def __init__(self, tag):
        super().__init__(workers=2)
        self.tag = tag
        self.ns = [f"{tag}h{i}" for i in range(3)]
        self.ip = [f"10.77.0.{10 + i}" for i in range(3)]

    def net_up(self):
        br = f"{self.tag}br"
        sh("ip", "link", "add", br, "type", "bridge")
        sh("ip", "addr", "add", "10.77.0.1/24", "dev", br)
        sh("ip", "link", "set", br, "up")
        for i, ns in enumerate(self.ns):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", f"{self.tag}v{i}", "type", "veth", "peer", "name", f"{self.tag}p{i}")
            sh("ip", "link", "set", f"{self.tag}p{i}", "netns", ns)
            sh("ip", "link", "set", f"{self.tag}v{i}", "master", br, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.ip[i]}/24", "dev", f"{self.tag}p{i}")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", f"{self.tag}p{i}", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

    def net_down(self):
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{self.tag}br"], capture_output=True)

    def link(self, host, up):
        sh("ip", "link", "set", f"{self.tag}v{host}", "up" if up else "down")

    def _in(self, host, name, argv):
        return self._spawn(name, ["ip", "netns", "exec", self.ns[host], *argv])

    def start_redis(self):
        self._in(0, "redis", ["redis-server", "--port", str(self.rport), "--bind", self.ip[0], "--dir", self.dir, "--save", "",
                              "--appendonly", "no", "--protected-mode", "no", "--aclfile", os.path.join(self.secrets, "redis.acl")])
        wait_until("redis", lambda: self.redis("PING") == "PONG", 10)

    def redis(self, *args):
        out = subprocess.run(["redis-cli", "-h", self.ip[0], "-p", str(self.rport), *self.redis_cli_args(), *map(str, args)], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip()

    def _redis_args(self, user):  # each daemon its own ACL user, as the harness's
        return ["--redis", f"{self.ip[0]}:{self.rport}", "--redis-user", f"gantry-{user}",
                "--redis-password-file", os.path.join(self.secrets, f"redis-{user}.password")]

    def start_server(self):
        self._in(0, "server", [os.path.join(BUILD, "gantry-server"), "--listen", f"{self.ip[0]}:{self.port}", *self._redis_args("server"),
                               "--state", os.path.join(self.dir, "state"), "--admin-token", ADMIN, "--web",
                               os.path.join(ROOT, "web"), "--migrations", os.path.join(ROOT, "migrations")])
        wait_until("server /healthz", lambda: self.get("/healthz").status == 200, 15)

    def start_scheduler(self, name="scheduler"):
        self._in(0, name, [os.path.join(BUILD, "gantry-scheduler"), *self._redis_args("scheduler"), "--name", name])

    def start_worker(self, i, labels=""):
        host = i + 1
        self._in(host, f"worker{i}", [os.path.join(BUILD, "gantry-worker"), *self._redis_args("worker"), "--id", f"w_test{i}",
                                      "--advertise-host", self.ip[host], "--state", os.path.join(self.dir, f"host{host}"),
                                      "--sandbox-uid", str(sandbox_uid(i))])

    def connection(self, timeout=30):
        import http.client
        return http.client.HTTPConnection(self.ip[0], self.port, timeout=timeout)


@contextlib.contextmanager
def hosts(tag):
    """the three hosts with their daemons running (a Hosts stack), or None where this machine cannot
    build them (not root, no CAP_NET_ADMIN / CAP_SYS_ADMIN in a container): the test then says SKIP
    and passes"""
    if os.geteuid() != 0 or subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        print("SKIP: network namespaces need root")
        yield None
        return
    h = Hosts(tag)
    try:
        try:
            h.net_up()
        except subprocess.CalledProcessError as e:
            print(f"SKIP: cannot build the hosts: {e.cmd}: {e.stderr.decode(errors='replace').strip()}")
            yield None
            return
        with h as s:
            yield s
    finally:
        h.net_down()


@timeout(600)
def test_two_hosts_placement_training_and_a_cut_link():
    with hosts(f"g{os.getpid() % 10000}") as s:
        if s is None:
            return
        _, tok = s.tenant("multihost")
        done = s.wait_state(tok, s.submit(tok, placement_job()), "succeeded", timeout=60)
        assert done["worker"] in ("w_test0", "w_test1"), done
        job = {"type": "training", "name": "two-hosts",
               "spec": {"model": MLP, "dataset": {"name": "fashion-mnist"}, "optimizer": {"type": "adam", "lr": 0.001},
                        "batch_size": 64, "steps": 2500, "seed": 1, "workers": {"min": 1, "max": 2},
                        "progress_every_steps": 20, "collective_timeout_s": 4}}
        jid = s.submit(tok, job)

        def points():
            return s.get(f"/v1/jobs/{jid}/metrics", tok).json["points"]
        wait_until("the gang on both hosts", lambda: [p for p in points() if p.get("workers") == 2 and p["step"] >= 100], 120)
        cut = time.time()
        s.link(2, False)  # h2 vanishes: no reset, no FIN; only timeouts tell
        resumed = wait_until("the job on h1 alone", lambda: [p for p in points() if p.get("event") == "resize"
                                                               and p["ts"] > cut * 1000 and p["workers"] == 1], 60)
        assert resumed[0]["state_from"] == "survivor", resumed[0]
        assert resumed[0]["ts"] / 1000 - cut < 30, resumed[0]
        done = s.wait_state(tok, jid, "succeeded", timeout=240)
        assert done["result"]["metrics"]["steps"] == 2500 and done["result"]["metrics"]["test_accuracy"] > 0.7
        reasons = [e["reason"] for e in s.events(tok, jid)]
        assert any("lost a peer" in r and "failure 1 of 3" in r for r in reasons), reasons
        s.link(2, True)  # h2 returns: its worker was declared dead, re-registers, and is idle again
        wait_until("h2's worker back", lambda: {w["id"]: w["state"] for w in s.workers()}.get("w_test1") == "idle", 60)


# a program gang across the hosts: rank 0 listens on MASTER_ADDR:MASTER_PORT (h1's address), rank 1 (h2) says
# hello; rank 1 also tries Redis on h0 (not a peer of the job: refused by its host's fence) and a root listener on
# each worker host (a service of a peer host, as its worker's ring or sshd: not answered)
GANG = """import os, socket, sys, time
rank = int(os.environ["RANK"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if rank == 0:
    srv = socket.create_server((addr, port))
    c, peer = srv.accept()
    print("HEARD", c.recv(100).decode(), flush=True)
else:
    for arg in sys.argv[2:]:  # name:host:port
        name, phost, pport = arg.split(":")
        try:
            socket.create_connection((phost, int(pport)), timeout=2).close()
            print("PROBE", name, "CONNECTED", flush=True)
        except OSError as e:
            print("PROBE", name, type(e).__name__, flush=True)
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection((addr, port), timeout=5).sendall(b"hello from 1")
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
"""


@timeout(300)
def test_program_gang_across_hosts_is_fenced_to_its_peers():
    """a 2-rank program job on h1 and h2: rank 1 reaches rank 0 at h1's address (each host's nftables let the
    job's peer hosts through), and not Redis on h0"""
    from test_program_jobs import program_job, program_root
    with hosts(f"p{os.getpid() % 10000}") as s:
        if s is None:
            return
        tid, tok = s.tenant("multihost-prog")
        program_root(s, tid, {"gang.py": GANG})
        # a root listener on h1 and on h2, each recording what it accepts
        port = 40000 + os.getpid() % 20000
        accepted = os.path.join(s.dir, "root-accepted")
        for host in (1, 2):
            s._in(host, f"rootsrv{host}", ["python3", "-c", "import socket, sys\n"
                                           f"srv = socket.create_server(('{s.ip[host]}', {port}))\n"
                                           "while True:\n    c, peer = srv.accept()\n"
                                           f"    open('{accepted}', 'a').write(str(peer) + '\\n')\n"])
        probes = [f"redis:{s.ip[0]}:{s.rport}", f"root1:{s.ip[1]}:{port}", f"root2:{s.ip[2]}:{port}"]
        wait_until("the root listeners", lambda: all(
            subprocess.run(["ip", "netns", "exec", s.ns[h], "python3", "-c",
                            f"import socket; socket.create_connection(('{s.ip[h]}', {port}), timeout=1)"]).returncode == 0
            for h in (1, 2)), 20)
        os.unlink(accepted)
        jid = s.submit(tok, program_job(["python3", "gang.py", "mark-mhgang", *probes], workers=2))
        job = s.wait_state(tok, jid, "succeeded", timeout=120)
        assert job["result"]["exit_codes"] == [0, 0], job
        out = subprocess.run(["redis-cli", "-h", s.ip[0], "-p", str(s.rport), *s.redis_cli_args(), "--json", "-2", "XRANGE", f"gantry:logs:{jid}",
                              "-", "+"], capture_output=True, text=True, timeout=10).stdout
        assert "HEARD hello from 1" in out, out
        assert "PROBE redis ConnectionRefusedError" in out, out  # not a peer: refused on its own host
        assert "PROBE root1 TimeoutError" in out and "PROBE root2 TimeoutError" in out, out  # peers' services: no answer
        assert not os.path.exists(accepted), open(accepted).read()


@timeout(300)
def test_inference_across_hosts_takes_the_direct_path():
    """a model served by one replica on h1 and one on h2: the server on h0 sends each request over TCP to a
    replica's worker (the endpoints are the workers' advertised addresses), both replicas answer, and no
    request passes through Redis"""
    from test_infer_direct import endpoints
    from test_inference import fmnist_samples, infer_body
    with hosts(f"i{os.getpid() % 10000}") as s:
        if s is None:
            return
        _, tok = s.tenant("multihost-serve")
        job = {"type": "training", "name": "mh-model",
               "spec": {"model": MLP, "dataset": {"name": "fashion-mnist"}, "optimizer": {"type": "adam", "lr": 0.001},
                        "batch_size": 64, "steps": 60, "seed": 1}}
        s.wait_state(tok, s.submit(tok, job), "succeeded", timeout=120)
        jid = s.submit(tok, {"type": "inference", "name": "mh-serve",
                             "spec": {"model": "mh-model", "replicas": 2, "slo": {"latency_ms": 2000}, "timeout_ms": 5000}})
        s.wait_state(tok, jid, "running", timeout=60)

        eps = wait_until("an endpoint on each host", lambda: (e := endpoints(s, jid)) and len(e) == 2 and e, 60)
        eps = {w: v.split()[0] for w, v in eps.items()}  # the hosts the endpoints are on
        assert sorted(eps.values()) == [s.ip[1], s.ip[2]], eps
        wait_until("ready", lambda: s.get("/v2/models/mh-model/ready", tok).status == 200, 60)
        data, _ = fmnist_samples(1)
        wait_until("the gateway connected", lambda: s.post("/v2/models/mh-model/infer", tok, infer_body(data, 1)).status == 200 and
                   s.redis("EXISTS", f"gantry:infer:q:{jid}") == "0", 15)
        time.sleep(1.5)  # the first requests may have gone through Redis: let their counters settle
        served = {}

        def counters():
            lines = s.redis("HGETALL", f"gantry:infer:stats:{jid}").splitlines()
            return {w: json.loads(v)["served"] for w, v in zip(lines[::2], lines[1::2]) if w.startswith("w_")}
        before = counters()
        for _ in range(40):
            assert s.post("/v2/models/mh-model/infer", tok, infer_body(data, 1)).status == 200
        assert s.redis("EXISTS", f"gantry:infer:q:{jid}") == "0", "a request went through the Redis queue"
        served = wait_until("both replicas served", lambda: (c := counters()) and all(
            c.get(w, 0) > before.get(w, 0) for w in ("w_test0", "w_test1")) and c, 10)
        assert sum(served.values()) - sum(before.values()) >= 40, (before, served)
