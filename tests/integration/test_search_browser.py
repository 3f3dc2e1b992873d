"""A hyper-parameter search's page in real headless Chromium (tests/browser/search.mjs): an ASHA search over
test_search.py's fake program (no torch), its trials' table and curves against the API's numbers, live while
it runs and at its end; and the view's pure helpers in node (tests/browser/search.test.mjs)."""

import json
import os
import subprocess

from harness import ADMIN, ROOT, Stack, timeout, wait_until
from test_program_jobs import marker_pids, program_root
from test_search import FAKE, search_job


@timeout(300)
def test_search_page_in_chromium():
    """the search's page: a row per trial with the API's state, parameters, last value and resource, rung
    decisions, the best marked, sorted best first and by any column; one curve per trial that reported, the
    stopped ones faded, the best widest, marks at the rungs; live while it runs"""
    out = os.path.join(ROOT, "tests", "out", "browser")
    os.makedirs(out, exist_ok=True)
    with Stack(workers=2) as s:
        name = "search-dash"
        tid, tok = s.tenant(name)
        program_root(s, tid, {"fake.py": FAKE})
        # 8 trials, 2 at a time, rungs at epoch 1 and 3 of 9: 0.3 s an epoch leaves the page time to follow it
        job = search_job("mark-sdash", epoch_s="0.3")
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_ADMIN_TOKEN=ADMIN, GANTRY_TEST_OUT=out,
                   GANTRY_TOKEN=tok, GANTRY_TENANT=name, GANTRY_SEARCH_JOB=json.dumps(job))
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "search.mjs")], env=env, capture_output=True,
                           text=True, timeout=290)
        print(r.stdout[-4000:], r.stderr[-3000:])
        assert r.returncode == 0, "search.mjs failed"
        assert os.path.exists(os.path.join(out, "search.png"))
        # a trial stopped by the last decision may still be in its SIGTERM when the search ends
        wait_until("no trial's process left", lambda: not marker_pids("mark-sdash"), timeout=30)


def test_search_view_node_units():
    """the search view's curves, alignment, rung text, sort and series looks (web/search.js), in node, no server"""
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "search.test.mjs")], capture_output=True,
                       text=True, timeout=60)
    print(r.stdout[-2000:], r.stderr[-2000:])
    assert r.returncode == 0 and "ok" in r.stdout
