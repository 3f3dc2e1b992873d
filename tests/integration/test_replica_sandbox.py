"""A tenant's model misbehaves inside its replica process (workers/replica_proc.h), through the real
stack with real libtorch: a forward that never ends is answered 504 at the job's timeout_ms, its
process is killed (the pid is gone, no CPU left burning) and started again with an event saying why,
while another tenant's job on the other worker answers 200 meanwhile; cancelling the job kills its
replica at once; a forward that allocates far beyond the tenant's memory limit is refused or killed
(400 or 503) and the replica serves the next request.  The workers stay registered throughout.

The models pass every load-time check on purpose (only allowed ops): what contains them is the
process boundary.  torch_models.py-style generation with Debian's /usr/bin/python3."""

import os
import subprocess
import tempfile
import threading

from harness import ADMIN, Stack, timeout, wait_until
from test_torchscript import MLP_META, infer, models, upload

TORCH_PY = "/usr/bin/python3"

MAKE = r'''
import sys, torch

class Loop(torch.nn.Module):
    """x[0, 0] > 0.5 never ends (the warm-up's zeros pass)"""
    def forward(self, x):
        y = x
        while bool(y[0, 0] > 0.5):
            y = y * 1.0
        return y

class Alloc(torch.nn.Module):
    """x[0, 0] > 0.5 asks for 64 GiB"""
    def forward(self, x):
        if bool(x[0, 0] > 0.5):
            big = torch.ones(1 << 34)
            return x + big[0]
        return x + 1.0

torch.jit.script(Loop()).save(sys.argv[1] + "/loop.pt")
torch.jit.script(Alloc()).save(sys.argv[1] + "/alloc.pt")
'''

META = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 1]}]}


def make():
    d = tempfile.mkdtemp(prefix="gantry-rs-")
    with open(os.path.join(d, "make.py"), "w") as f:  # torch.jit.script reads the class's source file
        f.write(MAKE)
    subprocess.run([TORCH_PY, os.path.join(d, "make.py"), d], check=True, timeout=300)
    return d


def replica_pids(model):
    """outer pids of the replica processes serving `model` (their argv: /.gantry-replica NAME ...)"""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 2 and argv[0] == b"/.gantry-replica" and argv[1] == model.encode():
            pids.append(int(p))
    return pids


def x(v):
    return [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [v]}]


def reasons(s, tok, jid):
    return [e["reason"] for e in s.events(tok, jid)]


@timeout(300)
def test_hung_and_greedy_models_are_contained():
    d, small = make(), models()
    with Stack(workers=2) as s:
        ta, a = s.tenant("attacker")
        _, b = s.tenant("bystander")
        assert s.request("PATCH", f"/v1/tenants/{ta}", ADMIN, {"max_memory_bytes": 1 << 30}).status == 200
        assert upload(s, a, "loop", os.path.join(d, "loop.pt"), META).status == 201
        assert upload(s, a, "alloc", os.path.join(d, "alloc.pt"), META).status == 201
        assert upload(s, b, "mlp", os.path.join(small, "mlp_v1.pt"), MLP_META).status == 201
        spec = {"slo": {"latency_ms": 500, "percentile": 99}, "replicas": 1, "timeout_ms": 2000}
        jb = s.submit(b, {"type": "inference", "name": "b", "spec": dict(spec, model="mlp")})
        ja = s.submit(a, {"type": "inference", "name": "loop", "spec": dict(spec, model="loop")})
        # (/ready says 200 once the job runs; the replica's own event says it has loaded)
        for tok, j in ((a, ja), (b, jb)):
            wait_until(f"{j}'s replica ready", lambda: any(r.startswith("replica ready") for r in reasons(s, tok, j)), 90)
        assert infer(s, a, "loop", x(0.0)).status == 200
        before = replica_pids("loop")
        assert len(before) == 1, before

        # a forward that never ends: 504 at timeout_ms; meanwhile the other tenant is served
        hung = {}
        t = threading.Thread(target=lambda: hung.update(r=infer(s, a, "loop", x(1.0), timeout=30)))
        t.start()
        served = infer(s, b, "mlp", [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}])
        assert served.status == 200, served
        t.join(30)
        assert hung["r"].status == 504, hung["r"]
        wait_until("the hung replica's process is gone", lambda: before[0] not in replica_pids("loop"), 10)
        wait_until("the restart's events", lambda: any("did not answer within 2000 ms" in r for r in reasons(s, a, ja))
                   and any("replica ready again" in r for r in reasons(s, a, ja)), 60)
        assert infer(s, a, "loop", x(0.0)).status == 200  # it serves again
        assert len(s.workers()) == 2 and all(w["alive"] for w in s.workers() if "alive" in w)

        # cancel: its replica processes end at once
        assert s.post(f"/v1/jobs/{ja}/cancel", a).status == 200
        wait_until("no replica left for a cancelled job", lambda: not replica_pids("loop"), 5)

        # an allocation far past the tenant's 1 GiB: refused (RLIMIT_AS) or killed (the cgroup), never the worker's
        jc = s.submit(a, {"type": "inference", "name": "alloc", "spec": dict(spec, model="alloc", timeout_ms=20000)})
        wait_until("alloc's replica ready", lambda: any(r.startswith("replica ready") for r in reasons(s, a, jc)), 90)
        r = infer(s, a, "alloc", x(1.0), timeout=60)
        assert r.status in (400, 503), r
        wait_until("alloc serves the next request",
                   lambda: infer(s, a, "alloc", x(0.0)).status == 200, 60, interval=0.5)
        assert len(s.workers()) == 2
        assert infer(s, b, "mlp", [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0, 0, 0, 0]}]).status == 200
        for j, tok in ((jc, a), (jb, b)):
            assert s.job(tok, j)["state"] == "running"
