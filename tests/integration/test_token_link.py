"""The dashboard opened from a link with the token in its fragment (#token=...&to=/jobs/ID), in real
headless Chromium: tests/browser/token_link.mjs (what it checks is at its top)."""

import os
import subprocess

from harness import ADMIN, ROOT, Stack


def test_dashboard_from_a_token_link_in_chromium():
    out = os.path.join(ROOT, "tests", "out", "browser")
    os.makedirs(out, exist_ok=True)
    with Stack(workers=1) as s:
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_ADMIN_TOKEN=ADMIN, GANTRY_TEST_OUT=out)
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "token_link.mjs")], env=env, capture_output=True,
                           text=True, timeout=180)
        print(r.stdout[-3000:], r.stderr[-3000:])
        assert r.returncode == 0, "token_link.mjs failed"
        assert os.path.exists(os.path.join(out, "token_link.png"))
