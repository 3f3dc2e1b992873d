"""The deployment recipes, validated with what this machine has: systemd-analyze verify on the
units (their ExecStart pointed at the built binaries), the Kubernetes manifests parsed as YAML and
checked for what the cluster needs, and every setting in the sample configurations and the
ConfigMap accepted by the daemon it is for (so the documents cannot drift from the flags); ./deploy/up
tells where the CLI is and how to put it on PATH; gantry-server links no BLAS, CUDA, NCCL or libtorch library."""

import json
import os
import re
import shutil
import subprocess
import tempfile

import yaml

from harness import BUILD, ROOT

DEPLOY = os.path.join(ROOT, "deploy")
DAEMONS = {"server": "gantry-server", "scheduler": "gantry-scheduler", "worker": "gantry-worker"}


def options(daemon):
    """the option names a daemon's --help lists"""
    out = subprocess.run([os.path.join(BUILD, daemon), "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"^  --([a-z-]+)", out, re.M)) - {"config"}


def conf_keys(text):
    return [line.split("=", 1)[0].strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_systemd_units_verify():
    tmp = tempfile.mkdtemp(prefix="gantry-units-")
    for name in sorted(os.listdir(os.path.join(DEPLOY, "systemd"))):
        with open(os.path.join(DEPLOY, "systemd", name)) as f:
            unit = f.read()
        # the installed paths -> this build, so that verify can check the executables
        for daemon in DAEMONS.values():
            unit = unit.replace(f"/usr/local/bin/{daemon}", os.path.join(BUILD, daemon))
        unit = unit.replace("After=network-online.target redis-server.service", "After=network-online.target")
        dest = os.path.join(tmp, name.replace("@.service", "@0.service") if "@" in name else name)
        with open(dest, "w") as f:
            f.write(unit)
    units = sorted(os.path.join(tmp, n) for n in os.listdir(tmp))
    assert len(units) == 3
    r = subprocess.run(["systemd-analyze", "verify", *units], capture_output=True, text=True, timeout=60)
    # only complaints about the environment (no running systemd, no `gantry` user here) are acceptable
    problems = [line for line in (r.stdout + r.stderr).splitlines()
                if line.strip() and not re.search(r"System has not been booted|Unit \S+ not found|"
                                                   r"Cannot add dependency|Failed to resolve user", line)]
    assert not problems, "\n".join(problems)
    # the check bites: a misspelt setting is reported
    with open(units[0]) as f:
        broken = f.read().replace("ProtectSystem=strict", "ProtectSystem=bogus")
    with open(os.path.join(tmp, "broken.service"), "w") as f:
        f.write(broken)
    r = subprocess.run(["systemd-analyze", "verify", os.path.join(tmp, "broken.service")], capture_output=True, text=True)
    assert "bogus" in r.stdout + r.stderr
    shutil.rmtree(tmp)
    for name in os.listdir(os.path.join(DEPLOY, "systemd")):
        with open(os.path.join(DEPLOY, "systemd", name)) as f:
            unit = f.read()
        for hardening in ("NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet="):
            assert hardening in unit, (name, hardening)
        # its own Redis password, handed over by systemd (never on the command line)
        user = name.split("-")[1].split("@")[0].split(".")[0]
        assert f"LoadCredential=redis.password:/etc/gantry/secrets/redis-{user}.password" in unit, name
        assert "--redis-password-file ${CREDENTIALS_DIRECTORY}/redis.password" in unit and "--redis-password " not in unit, name


def test_sample_configs_name_real_settings():
    for conf, daemon in (("server.conf", "gantry-server"), ("scheduler.conf", "gantry-scheduler"),
                         ("worker.conf", "gantry-worker")):
        with open(os.path.join(DEPLOY, "etc", conf)) as f:
            keys = conf_keys(f.read())
        known = options(daemon)
        assert keys and set(keys) <= known, (conf, set(keys) - known)
        # and the daemon reads the file as it is (only its own settings; --help after it)
        r = subprocess.run([os.path.join(BUILD, daemon), "--config", os.path.join(DEPLOY, "etc", conf), "--help"],
                           capture_output=True, text=True)
        assert r.returncode in (0, 1) and "error" not in r.stderr.lower(), r.stderr


def test_kubernetes_manifests():
    with open(os.path.join(DEPLOY, "k8s", "gantry.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = {}
    for d in docs:
        assert d.get("apiVersion") and d.get("kind") and d["metadata"].get("name"), d
        kinds.setdefault(d["kind"], []).append(d)
    assert {"Namespace", "Secret", "ConfigMap", "StatefulSet", "Deployment", "DaemonSet", "Service"} <= set(kinds), kinds.keys()
    for d in kinds["Deployment"] + kinds["DaemonSet"] + kinds["StatefulSet"]:
        spec = d["spec"]
        assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items(), d["metadata"]
        for c in spec["template"]["spec"]["containers"]:
            assert c["image"], c
    server = next(d for d in kinds["Deployment"] if d["metadata"]["name"] == "gantry-server")
    assert server["spec"]["replicas"] == 1 and server["spec"]["strategy"]["type"] == "Recreate"  # one writer of SQLite
    worker = kinds["DaemonSet"][0]["spec"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    cm = kinds["ConfigMap"][0]["data"]
    for conf, daemon in (("server.conf", "gantry-server"), ("scheduler.conf", "gantry-scheduler"),
                         ("worker.conf", "gantry-worker")):
        assert set(conf_keys(cm[conf])) <= options(daemon), conf
    # Redis: the ACL file from the credentials secret; each daemon its own user and password file, no password in
    # an environment variable or on a command line
    redis = kinds["StatefulSet"][0]["spec"]["template"]["spec"]
    assert "--aclfile" in redis["containers"][0]["args"] and "--requirepass" not in redis["containers"][0]["args"]
    for conf, user in (("server.conf", "server"), ("scheduler.conf", "scheduler"), ("worker.conf", "worker")):
        assert f"redis-user = gantry-{user}" in cm[conf], conf
    for d in kinds["Deployment"] + kinds["DaemonSet"]:
        pod = d["spec"]["template"]["spec"]
        cmd = pod["containers"][0]["command"]
        assert "--redis-password-file" in cmd and "--redis-password" not in cmd, cmd
        user = cmd[0].split("-")[1]
        items = [i for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "gantry-credentials"
                 for i in v["secret"]["items"]]
        assert {"key": f"redis-{user}.password", "path": "redis.password"} in items, (cmd[0], items)
    # every flag a container passes is one its daemon knows
    for d in kinds["Deployment"] + kinds["DaemonSet"]:
        cmd = d["spec"]["template"]["spec"]["containers"][0]["command"]
        flags = {a[2:] for a in cmd[1:] if a.startswith("--")} - {"config"}
        assert flags <= options(cmd[0]), (cmd[0], flags - options(cmd[0]))


def test_up_says_where_the_cli_is():
    """./deploy/up's closing message names the CLI and the line that puts it on PATH (rendered here with the
    script's own heredoc, not a running stack); the README's CLI section has that line; meson installs it."""
    with open(os.path.join(DEPLOY, "up")) as f:
        up = f.read()
    message = re.search(r"^cat <<MSG\n.*?^MSG\n", up, re.M | re.S)
    assert message, "deploy/up has no closing message"
    env = dict(os.environ, bin="/opt/gantry/build", probe="127.0.0.1", port="8080", token="t", state="/var/gantry",
               workers="2 CPU workers")
    out = subprocess.run(["bash", "-c", message.group(0)], env=env, capture_output=True, text=True, timeout=10).stdout
    assert re.search(r"^\s*CLI:\s+/opt/gantry/build/cli/gantry$", out, re.M), out
    assert 'ln -sf "/opt/gantry/build/cli/gantry" /usr/local/bin/gantry' in out, out
    assert "gantry login --url http://127.0.0.1:8080" in out, out
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    cli = readme[readme.index("## The command-line client"):readme.index("## Using it with curl")]
    assert 'ln -sf "$PWD/build/cli/gantry" /usr/local/bin/gantry' in cli, cli
    installed = subprocess.run(["meson", "introspect", BUILD, "--installed"], capture_output=True, text=True, timeout=60)
    assert installed.returncode == 0, installed.stderr
    targets = json.loads(installed.stdout)
    assert os.path.join(BUILD, "cli", "gantry") in targets and targets[os.path.join(BUILD, "cli", "gantry")].endswith(
        "/bin/gantry"), targets


def test_server_links_no_blas_cuda_or_nccl():
    """gantry-server checks every job type's spec through the jansson-only spec modules the job type
    table names (common/jobtypes.h), not through the code that runs the jobs: it links no BLAS, CUDA,
    NCCL or libtorch (torch, torch_cpu, c10) library, not even through another library (ldd); zlib it
    links for its own use (a model upload's archive check: server/tsarchive.c), not through training's
    data reader.  The worker, which trains, does link BLAS: the check sees libraries when they are there."""

    def ldd(daemon):
        r = subprocess.run(["ldd", os.path.join(BUILD, daemon)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]

    heavy = re.compile(r"blas|lapack|gfortran|cuda|cublas|nccl|torch|c10", re.I)
    assert [lib for lib in ldd("gantry-server") if heavy.search(lib)] == []
    assert any("blas" in lib for lib in ldd("gantry-worker"))
    elf = subprocess.run(["readelf", "-d", os.path.join(BUILD, "gantry-server")], capture_output=True, text=True, timeout=60)
    assert elf.returncode == 0, elf.stderr
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", elf.stdout)
    assert needed and "libjansson.so.4" in needed, needed
