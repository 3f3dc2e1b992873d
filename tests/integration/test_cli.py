"""The gantry CLI (libcurl) against a real stack: login writes a 0600 config (one readable by others
is refused), submit from a file and from stdin, list as a table and as JSON, get, follow over SSE
until the job ends, cancel, workers, models, admin commands; API errors print their message and
field, with exit status 1."""

import json
import os
import subprocess
import tempfile

from harness import ADMIN, BUILD, Stack, placement_job

CLI = os.path.join(BUILD, "server", "gantry")


def run(args, env, stdin=None, check=True):
    r = subprocess.run([CLI, *args], env=env, input=stdin, capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
    return r


def test_cli_end_to_end():
    home = tempfile.mkdtemp(prefix="gantry-cli-")
    with Stack(workers=1) as s:
        tid, tok = s.tenant("cli-team")
        env = {"HOME": home, "PATH": os.environ.get("PATH", "")}
        out = run(["login", "--url", f"http://127.0.0.1:{s.port}/"], env, stdin=tok + "\n").stdout
        assert "as member of tenant cli-team" in out, out
        cfg = os.path.join(home, ".config", "gantry", "config")
        assert os.stat(cfg).st_mode & 0o777 == 0o600
        # submit from a file and from stdin
        path = os.path.join(home, "job.json")
        with open(path, "w") as f:
            json.dump(placement_job(), f)
        jid = run(["submit", path], env).stdout.strip()
        assert jid.startswith("j_"), jid
        second = json.loads(run(["--json", "submit", "-"], env, stdin=json.dumps(placement_job())).stdout)["id"]
        # follow: live events until it ends
        follow = run(["follow", jid], env).stdout
        assert "succeeded" in follow.splitlines()[-1], follow
        s.wait_state(tok, second, "succeeded", timeout=60)
        table = run(["list"], env).stdout.splitlines()
        assert table[0].split()[:4] == ["ID", "NAME", "TYPE", "STATE"], table
        assert any(line.startswith(jid) and "succeeded" in line for line in table), table
        listed = json.loads(run(["list", "--json", "--state", "succeeded", "--limit", "5"], env).stdout)
        assert {jid, second} <= {j["id"] for j in listed["jobs"]}, listed
        got = run(["get", jid], env).stdout
        assert f"id        {jid}" in got and "state     succeeded" in got, got
        assert json.loads(run(["get", jid, "--json"], env).stdout)["result"], "no result"
        assert "w_test0" in run(["workers"], env).stdout
        assert run(["models"], env).stdout.startswith("NAME")
        # errors: the API's message and field, exit status 1
        bad = run(["submit", "-"], env, stdin=json.dumps({"type": "training", "spec": {}}), check=False)
        assert bad.returncode == 1 and "(field spec.model)" in bad.stderr, bad.stderr
        missing = run(["get", "j_nope"], env, check=False)
        assert missing.returncode == 1 and "HTTP 404" in missing.stderr, missing.stderr
        assert run(["cancel", jid], env, check=False).returncode == 1  # already finished: 409
        assert run(["tenants"], env, check=False).returncode == 1     # a member is not an admin
        # admin commands with the token from the environment (overrides the config)
        admin = dict(env, GANTRY_TOKEN=ADMIN)
        assert "cli-team" in run(["tenants"], admin).stdout
        created = run(["tokens", "create", tid, "--role", "viewer", "--name", "ro"], admin).stdout
        assert created.startswith("gnt_") or len(created.split()[0]) > 20, created
        # a config others can read is refused
        os.chmod(cfg, 0o644)
        refused = run(["list"], env, check=False)
        assert refused.returncode == 1 and "chmod 600" in refused.stderr, refused.stderr
        assert run(["nonsense"], env, check=False).returncode in (1, 2)
