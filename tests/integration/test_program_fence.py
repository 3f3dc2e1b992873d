"""A program job's rank is fenced (docs/programs.md "The sandbox"): real bubblewrap, real nftables in this
machine's network namespace, real processes.  Job A holds its MASTER_PORT open; job B's script tries
Redis, the API server, a listener of the host (root's, as sshd or the worker's ring would be), the
worker's own listening ports, job A's MASTER_PORT, and a listener of its own; it reports what it saw in
/proc.  A rank spinning on two threads stays near its resources.cpus.  Each rank runs as its worker
slot's uid."""

import glob
import os
import socket
import subprocess
import threading
import time

from harness import BUILD, Stack, sandbox_uid, wait_until
from test_program_jobs import job_dir, log_entries, marker_pids, program_job, program_root

ALONE = True  # run.py runs these tests with nothing beside them: a CPU quota measured, and the machine's nftables

# job A: listens on its MASTER_PORT, records every connection it accepts, until a file "stop-<marker>"
# appears in its (read-only) workdir
HOLD = """import os, socket, sys, time
marker = sys.argv[1]
srv = socket.create_server((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])))
srv.settimeout(0.1)
out = os.environ["GANTRY_OUTPUT_DIR"]
open(os.path.join(out, "listening"), "w").write(os.environ["MASTER_PORT"])
deadline = time.time() + 120
while not os.path.exists("stop-" + marker) and time.time() < deadline:
    try:
        c, peer = srv.accept()
        open(os.path.join(out, "accepted"), "a").write(str(peer) + "\\n")
        c.close()
    except socket.timeout:
        pass
"""

# probe(host, port): what a connection attempt gets (a program's function; test_fed_program's hostile site too)
PROBE_FN = """def probe(host, port):
    try:
        socket.create_connection((host, int(port)), timeout=1.5).close()
        return "CONNECTED"
    except ConnectionRefusedError:
        return "REFUSED"
    except (socket.timeout, TimeoutError):
        return "TIMEOUT"
    except OSError as e:
        return "ERROR-" + str(e.errno)
"""

# job B: "PROBE name OUTCOME" for each host:port given; then what /proc shows
PROBE = """import os, socket, sys, threading
""" + PROBE_FN + """for arg in sys.argv[2:]:
    name, host, port = arg.split(":")
    print("PROBE", name, probe(host, port), flush=True)
# its own listener: a rank reaches its own job
own = socket.create_server(("127.0.0.1", 0))
threading.Thread(target=lambda: own.accept(), daemon=True).start()
print("PROBE own", probe("127.0.0.1", own.getsockname()[1]), flush=True)
print("UID", os.getuid(), os.getgid(), flush=True)
print("CMDLINE1", open("/proc/1/cmdline", "rb").read().replace(b"\\0", b" ").decode(), flush=True)
try:
    print("ENVIRON1", open("/proc/1/environ", "rb").read().replace(b"\\0", b" ").decode(), flush=True)
except OSError as e:
    print("ENVIRON1 DENIED", e.errno, flush=True)
for line in open("/proc/self/mountinfo"):
    print("MOUNT", line.rstrip(), flush=True)
"""


def listening_ports(pid):
    """TCP ports pid listens on (from /proc/net/tcp and the process's socket descriptors)"""
    inodes = set()
    for fd in glob.glob(f"/proc/{pid}/fd/*"):
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    ports.append(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def output_lines(s, jid):
    return "\n".join(t for r, g, f, t in log_entries(s, jid) if f == "t").split("\n")


def test_rank_reaches_only_its_own_job():
    # what a worker killed for good left (its chain, its element): the first worker that starts removes it
    stale = sandbox_uid(7)
    subprocess.run(["nft", "-f", "-"], check=True, input=(
        "add table inet gantry\nadd map inet gantry slots { typeof meta skuid : verdict; }\n"
        f"add chain inet gantry slot_{stale}\nadd rule inet gantry slot_{stale} accept\n"
        f"add element inet gantry slots {{ {stale} : jump slot_{stale} }}\n").encode())
    with Stack(workers=2) as s:
        table = subprocess.run(["nft", "list", "table", "inet", "gantry"], capture_output=True, text=True).stdout
        assert f"slot_{stale}" not in table and f"slot_{sandbox_uid(0)}" in table and f"slot_{sandbox_uid(1)}" in table, table
        tid, tok = s.tenant("prog-fence")
        root = program_root(s, tid, {"hold.py": HOLD, "probe.py": PROBE})
        a = s.submit(tok, program_job(["python3", "hold.py", "mark-hold"], name="holder"))
        listening = os.path.join(job_dir(s, a), "output", "listening")
        wait_until("job A listening", lambda: os.path.exists(listening) and open(listening).read(), 60)
        a_port = int(open(listening).read())
        # a service of the host: root's listener, as sshd or the worker's ring all-reduce would be (the ring listens
        # only while a built-in gang forms: the same rule, a non-rank socket, covers both)
        host_srv = socket.create_server(("127.0.0.1", 0))
        host_accepted = []
        threading.Thread(target=lambda: host_accepted.append(host_srv.accept()), daemon=True).start()
        targets = [f"redis:127.0.0.1:{s.rport}", f"api:127.0.0.1:{s.port}", f"host:127.0.0.1:{host_srv.getsockname()[1]}",
                   f"jobA:127.0.0.1:{a_port}"]
        for w in ("worker0", "worker1"):
            targets += [f"{w}-{p}:127.0.0.1:{p}" for p in listening_ports(s.procs[w].pid)]
        b = s.submit(tok, program_job(["python3", "probe.py", "mark-probe", *targets], name="prober"))
        job = s.wait_state(tok, b, "succeeded", timeout=90)
        lines = output_lines(s, b)
        seen = {ln.split()[1]: ln.split()[2] for ln in lines if ln.startswith("PROBE ")}
        assert seen.pop("own") == "CONNECTED", seen
        assert seen and all(v in ("TIMEOUT", "REFUSED") for v in seen.values()), seen
        assert {"redis", "api", "host", "jobA"} <= set(seen), seen
        assert not host_accepted, "the host's listener accepted a rank's connection"
        assert not os.path.exists(os.path.join(job_dir(s, a), "output", "accepted")), "job A accepted job B"
        # B ran as its slot's uid and its job's gid, never 65534
        uid = next(ln.split() for ln in lines if ln.startswith("UID "))
        assert int(uid[1]) in (sandbox_uid(0), sandbox_uid(1)) and int(uid[2]) != 65534, uid
        # /proc: no path of the host's gantry build or state in pid 1's command line or in the mounts' sources
        cmdline = next(ln for ln in lines if ln.startswith("CMDLINE1"))
        assert cmdline.startswith("CMDLINE1 bwrap --args 4 -- /.gantry-init "), cmdline
        assert BUILD not in cmdline and s.dir not in cmdline, cmdline
        assert next(ln for ln in lines if ln.startswith("ENVIRON1")).startswith("ENVIRON1 DENIED"), lines
        mounts = "\n".join(ln for ln in lines if ln.startswith("MOUNT "))
        if os.environ.get("GANTRY_SHOW_MOUNTS"):
            print(cmdline, mounts, sep="\n")
        assert "/.gantry-init" in mounts and BUILD not in mounts, mounts
        reasons = " ".join(e["reason"] for e in s.events(tok, b))
        assert "network fenced to the job's peers" in reasons, reasons
        open(os.path.join(root, "code", "stop-mark-hold"), "w").close()
        s.wait_state(tok, a, "succeeded", timeout=30)
        assert job["result"]["exit_codes"] == [0]
        assert not marker_pids("mark-hold") and not marker_pids("mark-probe")


SPIN = """#!/bin/sh
# two busy loops for the given seconds of wall clock (the test measures the group's CPU time meanwhile)
end=$(( $(date +%s) + $2 ))
spin() { while [ "$(date +%s)" -lt "$end" ]; do :; done; }
spin & spin & wait
"""


def cpuacct_usage_us(worker_pid):
    """CPU time of the worker's rank cgroup (cgroup v1 cpuacct or v2 cpu.stat), or None before it exists"""
    for path in glob.glob(f"/sys/fs/cgroup/cpuacct/**/gantry-rank-{worker_pid}-*/cpuacct.usage", recursive=True):
        with open(path) as f:
            return int(f.read()) / 1000
    for path in glob.glob(f"/sys/fs/cgroup/**/gantry-rank-{worker_pid}-*/cpu.stat", recursive=True):
        with open(path) as f:  # v2's; v1's cpu.stat (cpu hierarchy, made before the cpuacct group) has no usage
            usage = [int(v) for k, v in (ln.split() for ln in f) if k == "usage_usec"]
        if usage:
            return usage[0]
    return None


def test_cpu_limit_holds_a_spinning_rank_to_its_quota():
    """resources.cpus 0.5 on a rank spinning on two threads: its cgroup's CPU time grows at about half a
    core (well under the two it would take unfenced)"""
    with Stack(workers=1) as s:
        tid, tok = s.tenant("prog-cpu")
        program_root(s, tid, {"spin.sh": SPIN})
        jid = s.submit(tok, program_job(["/bin/sh", "spin.sh", "mark-spin", "8"], resources={"cpus": 0.5}))
        wpid = s.procs["worker0"].pid
        u0 = wait_until("the rank's cpu cgroup", lambda: cpuacct_usage_us(wpid), 30)
        t0 = time.monotonic()
        wait_until("3 s of wall clock", lambda: time.monotonic() - t0 >= 3.0, 10, interval=0.1)
        u1, t1 = cpuacct_usage_us(wpid), time.monotonic()
        cores = (u1 - u0) / 1e6 / (t1 - t0)
        assert 0.15 <= cores <= 0.75, f"{cores:.2f} cores used with a 0.5 quota"
        s.wait_state(tok, jid, "succeeded", timeout=30)
