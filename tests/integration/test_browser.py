"""The dashboard in real headless Chromium (Debian's), driven by playwright-core:
tests/browser/dashboard.mjs logs in, watches a job turn succeeded live, and
saves screenshots under tests/out/browser."""

import os
import subprocess

from harness import ADMIN, ROOT, Stack


def test_dashboard_in_chromium():
    out = os.path.join(ROOT, "tests", "out", "browser")
    os.makedirs(out, exist_ok=True)
    with Stack(workers=1) as s:
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_ADMIN_TOKEN=ADMIN, GANTRY_TEST_OUT=out)
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "dashboard.mjs")], env=env,
                           capture_output=True, text=True, timeout=180)
        print(r.stdout[-3000:], r.stderr[-3000:])
        assert r.returncode == 0, "dashboard.mjs failed"
        assert os.path.exists(os.path.join(out, "jobs.png"))


def run_page_test(script, png, timeout=180):
    out = os.path.join(ROOT, "tests", "out", "browser")
    os.makedirs(out, exist_ok=True)
    with Stack(workers=2) as s:
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_ADMIN_TOKEN=ADMIN, GANTRY_TEST_OUT=out)
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", script)], env=env, capture_output=True,
                           text=True, timeout=timeout)
        print(r.stdout[-3000:], r.stderr[-3000:])
        assert r.returncode == 0, f"{script} failed"
        assert os.path.exists(os.path.join(out, png))


def test_cluster_page_in_chromium():
    """the utilization view renders the live state of a running cluster"""
    run_page_test("cluster.mjs", "cluster.png")


def test_plan_view_in_chromium():
    """the plan page: Gantt per device, memory over time, the comparison table (2,000 ops)"""
    run_page_test("plan.mjs", "plan.png")


def test_training_curves_in_chromium():
    """a running training job's page: loss, accuracy and throughput charts fill live; test accuracy"""
    run_page_test("training.mjs", "training.png", timeout=300)


def test_selection_and_adaptation_in_chromium():
    """an adaptive job's page lists its adaptations; a grid search's page shows a row per configuration"""
    run_page_test("selection.mjs", "selection.png", timeout=420)


def test_federated_page_in_chromium():
    """a federated job's page: accuracy, residual and bytes per round; the design's groups"""
    out = os.path.join(ROOT, "tests", "out", "browser")
    os.makedirs(out, exist_ok=True)
    with Stack(workers=0) as s:
        for i in range(3):
            s.start_worker(i, labels=f"site=s{i}")
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_ADMIN_TOKEN=ADMIN, GANTRY_TEST_OUT=out)
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "federated.mjs")], env=env, capture_output=True,
                           text=True, timeout=300)
        print(r.stdout[-3000:], r.stderr[-3000:])
        assert r.returncode == 0, "federated.mjs failed"
        assert os.path.exists(os.path.join(out, "federated.png"))


def test_inference_curves_in_chromium():
    """a served model's page: request rate, p99 against the SLO and replicas, live"""
    run_page_test("inference.mjs", "inference.png", timeout=300)


def test_dashboard_node_units():
    """the dashboard's chart helpers, in node, no server"""
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "charts.test.mjs")], capture_output=True,
                       text=True, timeout=60)
    print(r.stdout[-2000:], r.stderr[-2000:])
    assert r.returncode == 0


def test_dashboard_sse_parser():
    """The dashboard's event-stream parser and reconnect logic (web/live.js), in node, no server."""
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "sse-parser.test.mjs")], capture_output=True,
                       text=True, timeout=60)
    print(r.stdout[-2000:], r.stderr[-2000:])
    assert r.returncode == 0 and "ok" in r.stdout


def test_program_logs_pane_in_chromium():
    """a program job's page: the log pane's tail and live lines, the rank selector, auto-scroll, the output download"""
    out = os.path.join(ROOT, "tests", "out", "browser")
    os.makedirs(out, exist_ok=True)
    with Stack(workers=0) as s:  # the test writes the job's log entries and its result itself
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_ADMIN_TOKEN=ADMIN, GANTRY_TEST_OUT=out,
                   GANTRY_REDIS_PORT=str(s.rport), GANTRY_REDIS_USER="gantry-admin",
                   GANTRY_REDIS_PASSWORD=s.redis_user_password("admin"))
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "logs.mjs")], env=env, capture_output=True,
                           text=True, timeout=180)
        print(r.stdout[-3000:], r.stderr[-3000:])
        assert r.returncode == 0, "logs.mjs failed"
        assert os.path.exists(os.path.join(out, "logs.png"))


def test_models_page_in_chromium():
    """the Models page: each version's format, size, sha256 prefix, description and the aliases, as the API
    says; an inference job's page names the version it serves through its alias, and the alias move event"""
    from test_torchscript import models
    out = os.path.join(ROOT, "tests", "out", "browser")
    os.makedirs(out, exist_ok=True)
    with Stack(workers=0) as s:  # the serving job stays queued; its alias still rolls it
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_ADMIN_TOKEN=ADMIN, GANTRY_TEST_OUT=out,
                   GANTRY_MODEL_DIR=models())
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "models.mjs")], env=env, capture_output=True,
                           text=True, timeout=180)
        print(r.stdout[-3000:], r.stderr[-3000:])
        assert r.returncode == 0, "models.mjs failed"
        assert os.path.exists(os.path.join(out, "models.png"))


def test_torch_plan_view_in_chromium():
    """the plan view of a placement job on ResNet-50 as tools/torch_export.py exported it, on 4 devices with half
    the memory one device would need: the Gantt chart's tooltips name the model's own ops (layer1_0_conv1...)"""
    import json
    import tempfile
    from test_torch_export import single_peak, with_devices
    with open(os.path.join(ROOT, "tests", "data", "graphs", "torch_resnet50.json")) as f:
        graph = json.load(f)
    path = os.path.join(tempfile.mkdtemp(prefix="gantry-torch-plan-"), "resnet50.json")
    with open(path, "w") as f:
        json.dump(with_devices(graph, 4, single_peak(graph) * 0.5), f)
    out = os.path.join(ROOT, "tests", "out", "browser")
    os.makedirs(out, exist_ok=True)
    with Stack(workers=1) as s:
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_ADMIN_TOKEN=ADMIN, GANTRY_TEST_OUT=out,
                   GANTRY_PLAN_GRAPH=path)
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "torch_plan.mjs")], env=env, capture_output=True,
                           text=True, timeout=240)
        print(r.stdout[-3000:], r.stderr[-3000:])
        assert r.returncode == 0, "torch_plan.mjs failed"
        assert os.path.exists(os.path.join(out, "torch-plan.png"))


def pytorch_root(train=1200, test=500):
    """a tenant root holding deploy/examples/pytorch as 'pytorch' (readable by the sandbox's uid) with
    a small slice of Fashion-MNIST under pytorch/data (the first `train` and `test` images of Debian's
    files, idx format as the script reads them), so that the example's 3 epochs take seconds"""
    import gzip
    import shutil
    import tempfile
    src = "/usr/share/datasets/fashion-mnist"
    root = tempfile.mkdtemp(prefix="gantry-browser-pytorch-")
    code = os.path.join(root, "pytorch")
    shutil.copytree(os.path.join(ROOT, "deploy", "examples", "pytorch"), code)
    os.mkdir(os.path.join(code, "data"))
    for prefix, n in (("train", train), ("t10k", test)):
        for kind, item in (("images-idx3-ubyte", 28 * 28), ("labels-idx1-ubyte", 1)):
            with gzip.open(os.path.join(src, f"{prefix}-{kind}.gz"), "rb") as f:
                raw = f.read()
            dims = raw[3]
            head = bytearray(raw[:4 + 4 * dims])
            head[4:8] = n.to_bytes(4, "big")
            with gzip.open(os.path.join(code, "data", f"{prefix}-{kind}.gz"), "wb") as f:
                f.write(bytes(head) + raw[4 + 4 * dims:4 + 4 * dims + n * item])
    for d, _, files in os.walk(root):
        os.chmod(d, 0o755)
        for name in files:
            os.chmod(os.path.join(d, name), 0o644)
    return root


def test_program_job_and_cluster_truth_in_chromium():
    """the PyTorch example (2 ranks, on a slice of Fashion-MNIST) as its page and the Cluster page show
    it, each number against the API's: its curves draw the epoch points GET .../metrics returns, its
    progress is the API's or "—"; the timeline has its interval on both workers; Busy is the merged
    intervals' share (never above 100%); slots per tenant are the API's and add up to at most the
    cluster's"""
    root = pytorch_root()
    out = os.path.join(ROOT, "tests", "out", "browser")
    os.makedirs(out, exist_ok=True)
    with Stack(workers=2) as s:
        env = dict(os.environ, GANTRY_URL=f"http://127.0.0.1:{s.port}", GANTRY_ADMIN_TOKEN=ADMIN, GANTRY_TEST_OUT=out,
                   GANTRY_PYTORCH_ROOT=root)
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "browser", "program.mjs")], env=env, capture_output=True,
                           text=True, timeout=300)
        print(r.stdout[-3000:], r.stderr[-3000:])
        assert r.returncode == 0, "program.mjs failed"
        assert os.path.exists(os.path.join(out, "program.png"))


def test_plan_labels_never_overlap_in_chromium():
    """the transformer plan of deploy/examples/placement.json: no two of the Gantt chart's labels overlap (op
    names, markers, time axis), at full view, zoomed in and at a narrow width"""
    run_page_test("plan_labels.mjs", "plan-labels.png")
