"""Operations documents checked by real tools against a running stack: the OpenAPI document by an
OpenAPI 3.1 validator from npm, and /metrics by Prometheus's promtool (naming and types)."""

import os
import subprocess
import urllib.request

from harness import ROOT, Stack, placement_job


def test_openapi_document_is_valid_openapi_3_1():
    with Stack(workers=1) as s:
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}")
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "openapi.test.mjs")], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "paths valid" in r.stdout, r.stdout


def test_metrics_pass_promtool():
    with Stack(workers=1) as s:
        _, tok = s.tenant("ops")
        s.wait_state(tok, s.submit(tok, placement_job()), "succeeded", timeout=60)
        s.get("/v1/jobs", tok)  # some traffic in the histograms
        text = urllib.request.urlopen(f"http://127.0.0.1:{s.port}/metrics", timeout=10).read()
        assert b"gantry_http_requests_total" in text
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60)
        problems = (r.stdout + r.stderr).decode()
        assert r.returncode == 0 and not problems.strip(), problems


def test_online_backup_and_restore():
    """sqlite3's .backup (SQLite's online backup API) copies the database while the server runs and
    writes; the copy passes integrity_check, and a server started on the restored copy has every job
    the copy had"""
    import shutil
    import tempfile
    with Stack(workers=1) as s:
        _, tok = s.tenant("ops-backup")
        ids = [s.submit(tok, placement_job()) for _ in range(20)]
        for j in ids:
            s.wait_state(tok, j, "succeeded", timeout=60)
        db = os.path.join(s.dir, "state", "gantry.db")
        copy = os.path.join(tempfile.mkdtemp(prefix="gantry-backup-"), "gantry.db")
        more = [s.submit(tok, placement_job()) for _ in range(5)]  # writes go on during the backup
        r = subprocess.run(["sqlite3", db, f".backup '{copy}'"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        check = subprocess.run(["sqlite3", copy, "PRAGMA integrity_check;"], capture_output=True, text=True).stdout.strip()
        assert check == "ok", check
        n = int(subprocess.run(["sqlite3", copy, "SELECT count(*) FROM jobs;"], capture_output=True, text=True).stdout)
        assert n >= 20, n
        for j in more:
            s.wait_state(tok, j, "succeeded", timeout=60)
        # restore: stop the server, put the copy in place, start it again
        s.kill("server")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
        shutil.copy(copy, db)
        s.start_server()
        for j in ids:
            assert s.job(tok, j)["state"] == "succeeded", j


def test_grafana_dashboard_uses_real_metrics():
    """deploy/grafana/gantry.json: every metric its queries name is one /metrics exposes (by name and type)"""
    import json
    import re
    with open(os.path.join(ROOT, "deploy", "grafana", "gantry.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 9 and all(p["datasource"]["type"] == "prometheus" for p in dash["panels"])
    names = {re.sub(r"_(bucket|sum|count)$", "", m) for e in exprs for m in re.findall(r"gantry_[a-z_]+", e)}
    with open(os.path.join(ROOT, "server", "metrics.c")) as f:
        src = f.read()
    for extra in ("infer.c", "bus.c", "store.c", "api_ops.c"):
        path = os.path.join(ROOT, "server", extra)
        if os.path.exists(path):
            with open(path) as f:
                src += f.read()
    declared = set(re.findall(r"# TYPE (gantry_[a-z_]+) ", src))
    assert names <= declared, names - declared
    with Stack(workers=1) as s:
        text = urllib.request.urlopen(f"http://127.0.0.1:{s.port}/metrics", timeout=10).read().decode()
        exposed = set(re.findall(r"^# TYPE (gantry_[a-z_]+) ", text, re.M))
        # the inference families appear once an inference job runs; every other one is there now
        assert {n for n in names if "inference" not in n} <= exposed, names - exposed
