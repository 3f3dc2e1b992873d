"""Real PyTorch models placed end to end (issue 21): tools/torch_export.py on
torchvision's ResNet-18 gives a graph that validates against
docs/graph.schema.json and places through the API on devices smaller than
one device's need, with the model's own op names in the plan; the shipped
graphs (tests/data/graphs/torch_*.json, made by
`tools/torch_export.py --preset all --out tests/data/graphs`) place with
gantry-place and through the API on 2 and 4 such devices.

The exporter runs under TORCH_PYTHON (default /usr/bin/python3, where
Debian's python3-torch and python3-torchvision live), and so does the schema
check (Debian's python3-jsonschema, from deploy/install-deps --test): the
Python running the tests may be another one."""

import json
import os
import subprocess

from harness import BUILD, ROOT, Stack

TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "/usr/bin/python3")
EXPORTER = os.path.join(ROOT, "tools", "torch_export.py")
PLACE = os.path.join(BUILD, "gantry-place")
SHIPPED = ("resnet50", "inception_v3", "transformer")
# (devices, memory per device as a fraction of one device's peak need)
PRESSURE = ((2, 0.75), (4, 0.5))


CHECK = ("import json, sys, jsonschema\n"
         "schema = json.load(open(sys.argv[1]))\n"
         "print(json.dumps([e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(json.load(sys.stdin))]))")


def validate(graph):
    """docs/graph.schema.json's errors for graph, by jsonschema in TORCH_PYTHON: none expected"""
    out = subprocess.run([TORCH_PYTHON, "-c", CHECK, os.path.join(ROOT, "docs", "graph.schema.json")],
                         input=json.dumps(graph), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    errors = json.loads(out.stdout)
    assert errors == [], errors


def place(graph, *args):
    """gantry-place's JSON result for `graph` (a dict) and the extra arguments."""
    out = subprocess.run([PLACE, "-", *args], input=json.dumps(graph), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def single_peak(graph):
    """Bytes one device needs at its peak to run the whole graph."""
    result = place(graph, "--algo", "single", "--devices", "1", "--memory", str(2**40))
    return result["candidates"][0]["peak_bytes"][0]


def with_devices(graph, n, memory):
    g = dict(graph)
    g["devices"] = [{"name": "gpu%d" % d, "memory_bytes": int(memory)} for d in range(n)]
    return g


def place_job(s, token, name, graph):
    """Submits `graph` as a placement job and returns its plan's placement."""
    job = {"type": "placement", "name": name, "spec": {"graph": graph, "algorithms": ["m-topo", "m-etf", "m-sct"]}}
    done = s.wait_state(token, s.submit(token, job), "succeeded", timeout=30)
    result = done["result"]
    assert result["best"] != "single", result["best"]  # one device is too small
    assert result["metrics"]["devices_used"] >= 2, result["metrics"]
    return result["plan"]["placement"]


def export_resnet18():
    probe = subprocess.run([TORCH_PYTHON, "-c", "import torch, torchvision"], capture_output=True, text=True)
    assert probe.returncode == 0, f"{TORCH_PYTHON} needs torch and torchvision (python3-torch): {probe.stderr}"
    out = subprocess.run([TORCH_PYTHON, EXPORTER, "torchvision.models:resnet18", "--input", "2,3,64,64",
                          "--repeat", "3", "--scale", "0.5"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_exported_model_places_through_api():
    graph = export_resnet18()
    validate(graph)
    names = [op["name"] for op in graph["ops"]]
    # fx names after the model's own modules, measured times, weights counted
    for own in ("x", "conv1", "layer1_0_conv1", "layer4_1_bn2", "fc"):
        assert own in names, own
    assert sum(op["compute_us"] for op in graph["ops"]) > 0
    assert sum(op["persistent_bytes"] for op in graph["ops"]) > 11e6 * 4  # ResNet-18 has 11.7M parameters
    peak = single_peak(graph)
    with Stack(workers=1) as s:
        _, token = s.tenant("torch-export")
        placement = place_job(s, token, "resnet18", with_devices(graph, 2, peak * 0.75))
    assert set(placement) == set(names)
    assert len(set(placement.values())) == 2


def test_shipped_graphs_place_under_memory_pressure():
    graphs = {}
    for model in SHIPPED:
        with open(os.path.join(ROOT, "tests", "data", "graphs", f"torch_{model}.json")) as f:
            graphs[model] = json.load(f)
        validate(graphs[model])
    peaks = {model: single_peak(g) for model, g in graphs.items()}
    for model, graph in graphs.items():
        for n, fraction in PRESSURE:
            memory = int(peaks[model] * fraction)
            result = place(graph, "--algo", "all", "--devices", str(n), "--memory", str(memory))
            assert result["best"] != "single", (model, n)
            best = next(c for c in result["candidates"] if c["algorithm"] == result["best"])
            assert max(best["peak_bytes"]) <= memory, (model, n, best["peak_bytes"])
            assert result["metrics"]["makespan_us"] >= result["lower_bound_us"] > 0
    with Stack(workers=1) as s:
        _, token = s.tenant("torch-shipped")
        for model, graph in graphs.items():
            placement = place_job(s, token, model, with_devices(graph, 4, peaks[model] * 0.5))
            assert set(placement) == {op["name"] for op in graph["ops"]}, model
