"""TorchScript models through the real stack: a member uploads a file torch.jit.save wrote (multipart,
SHA-256 recorded, immutable versions), an inference job serves it by name, name@N or name@alias on
libtorch replicas, and the answers equal torch's own (max abs diff <= 1e-5, ResNet-18 included);
moving an alias rolls the replicas to the new version under load without a failed request; bad
uploads are refused and leave nothing stored; one tenant never sees another's models.

The models and torch's reference outputs come from Debian's /usr/bin/python3
(tests/integration/torch_models.py)."""

import concurrent.futures
import hashlib
import io
import json
import os
import random
import struct
import subprocess
import tempfile
import threading
import time
import zipfile

from harness import ADMIN, ROOT, Stack, alone, timeout, wait_until

TORCH_PY = "/usr/bin/python3"
MODELS = os.path.join(ROOT, "tests", "integration", "torch_models.py")

MLP_META = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
            "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, 3]}],
            "description": "a 4-8-3 MLP", "metrics": {"accuracy": 0.5}}
TWO_META = {"inputs": [{"name": "ids", "datatype": "INT64", "shape": [-1, 5]},
                       {"name": "scale", "datatype": "FP32", "shape": [-1, 1]}],
            "outputs": [{"name": "emb", "datatype": "FP32", "shape": [-1, 5, 2]},
                        {"name": "total", "datatype": "INT64", "shape": [-1]}]}
RESNET_META = {"inputs": [{"name": "image", "datatype": "FP32", "shape": [-1, 3, 224, 224]}],
               "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, 1000]}]}

_made = {}


def models(resnet=False):
    """a directory with the test models (made once per run)"""
    key = "resnet" if resnet else "small"
    if key not in _made:
        d = tempfile.mkdtemp(prefix="gantry-ts-")
        subprocess.run([TORCH_PY, MODELS, "make", d] + (["--resnet"] if resnet else []), check=True, timeout=300)
        _made[key] = d
    return _made[key]


def multipart(parts, boundary="gantryTestBoundary7MA4YWxkTrZu0gW"):
    """parts: [(name, filename or None, bytes)] -> (content type, body)"""
    out = b""
    for name, filename, data in parts:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        ctype = "application/octet-stream" if filename else "application/json"
        out += f"--{boundary}\r\nContent-Disposition: {disp}\r\nContent-Type: {ctype}\r\n\r\n".encode() + data + b"\r\n"
    return f"multipart/form-data; boundary={boundary}", out + f"--{boundary}--\r\n".encode()


def upload(s, tok, name, path=None, meta=None, data=None, parts=None):
    if parts is None:
        if data is None:
            with open(path, "rb") as f:
                data = f.read()
        parts = [("metadata", None, json.dumps(meta).encode()), ("file", "model.pt", data)]
    ctype, body = multipart(parts)
    return s.request("POST", f"/v1/models/{name}/versions", tok, raw=body, headers={"Content-Type": ctype}, timeout=120)


def serve(s, tok, model, **spec):
    sp = {"model": model, "slo": {"latency_ms": 500, "percentile": 99}, "replicas": 1}
    sp.update(spec)
    jid = s.submit(tok, {"type": "inference", "name": "serve-" + model.replace("@", "-"), "spec": sp})
    s.wait_state(tok, jid, "running", timeout=60)
    return jid


def infer(s, tok, name, inputs, **kw):
    return s.post(f"/v2/models/{name}/infer", tok, {"id": "t", "inputs": inputs}, **kw)


def torch_ref(model_path, inputs):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"inputs": inputs}, f)
    try:
        out = subprocess.run([TORCH_PY, MODELS, "ref", model_path, f.name], check=True, capture_output=True, text=True,
                             timeout=120)
    finally:
        os.unlink(f.name)
    return json.loads(out.stdout)


def assert_same(outputs, ref, names):
    assert [o["name"] for o in outputs] == names, outputs
    for o, r in zip(outputs, ref):
        assert o["shape"] == r["shape"], (o["shape"], r["shape"])
        diff = max((abs(a - b) for a, b in zip(o["data"], r["data"])), default=0.0)
        assert len(o["data"]) == len(r["data"]) and diff <= 1e-5, (o["name"], diff)


def store_files(s):
    root = os.path.join(s.dir, "state", "models")
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)


@timeout(400)
def test_upload_serve_and_match_torch():
    d = models(resnet=True)
    with Stack(workers=2) as s:
        _, tok = s.tenant("ts")
        r = upload(s, tok, "mlp", os.path.join(d, "mlp_v1.pt"), MLP_META)
        assert r.status == 201, r
        with open(os.path.join(d, "mlp_v1.pt"), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        assert r.json["version"] == 1 and r.json["format"] == "torchscript" and r.json["sha256"] == digest, r.json
        assert r.json["signature"]["inputs"] == MLP_META["inputs"] and r.json["job_id"] is None, r.json
        assert r.json["description"] == "a 4-8-3 MLP" and r.json["metrics"] == {"accuracy": 0.5}, r.json
        assert "/" not in r.json["artifact"], r.json  # never a server path
        assert upload(s, tok, "mlp", os.path.join(d, "mlp_v2.pt"), MLP_META).json["version"] == 2  # immutable: a new one
        got = s.get("/v1/models/mlp", tok).json
        assert [v["version"] for v in got["versions"]] == [2, 1] and got["aliases"] == {}, got
        assert upload(s, tok, "two", os.path.join(d, "two_in.pt"), TWO_META).status == 201
        assert upload(s, tok, "resnet", os.path.join(d, "resnet18.pt"), RESNET_META).status == 201

        # served by name@N: version 1 although 2 is the latest
        mlp = serve(s, tok, "mlp@1", replicas=2, max_batch=16)
        wait_until("mlp ready", lambda: s.get("/v2/models/mlp/ready", tok).status == 200, 30)
        meta = s.get("/v2/models/mlp", tok).json
        assert meta["platform"] == "pytorch_torchscript" and meta["version"] == "1", meta
        assert meta["inputs"] == MLP_META["inputs"] and meta["outputs"] == MLP_META["outputs"], meta
        rng = random.Random(3)
        x = [{"name": "x", "datatype": "FP32", "shape": [6, 4], "data": [rng.uniform(-3, 3) for _ in range(24)]}]
        r = infer(s, tok, "mlp", x)
        assert r.status == 200 and r.json["model_version"] == "1" and r.json["id"] == "t", r
        assert_same(r.json["outputs"], torch_ref(os.path.join(d, "mlp_v1.pt"), x), ["logits"])

        # the same tensor as binary data after the JSON (the OIP binary extension): the same answer
        raw = struct.pack("<24f", *x[0]["data"])
        head = json.dumps({"id": "t", "inputs": [{"name": "x", "datatype": "FP32", "shape": [6, 4],
                                                  "parameters": {"binary_data_size": len(raw)}}]}).encode()
        hb = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(head))}
        rb = s.request("POST", "/v2/models/mlp/infer", tok, raw=head + raw, headers=hb)
        assert rb.status == 200, rb
        assert_same(rb.json["outputs"], torch_ref(os.path.join(d, "mlp_v1.pt"), x), ["logits"])
        rb = s.request("POST", "/v2/models/mlp/infer", tok, raw=head + raw[:-4], headers=hb)
        assert rb.status == 400 and rb.json["error"]["field"] == "inputs[0].parameters.binary_data_size", rb
        rb = s.request("POST", "/v2/models/mlp/infer", tok, raw=head + raw, headers=dict(hb, **{
            "Inference-Header-Content-Length": str(len(head) + len(raw) + 1)}))
        assert rb.status == 400 and rb.json["error"]["field"] == "Inference-Header-Content-Length", rb

        # concurrent single-sample requests are batched, each gets its own answer
        xs = [[{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [rng.uniform(-3, 3) for _ in range(4)]}]
              for _ in range(32)]
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            answers = list(ex.map(lambda v: infer(s, tok, "mlp", v), xs))
        assert all(a.status == 200 for a in answers), [a for a in answers if a.status != 200][:2]
        batch = [{"name": "x", "datatype": "FP32", "shape": [32, 4], "data": sum((v[0]["data"] for v in xs), [])}]
        ref = torch_ref(os.path.join(d, "mlp_v1.pt"), batch)[0]["data"]
        for i, a in enumerate(answers):
            assert max(abs(p - q) for p, q in zip(a.json["outputs"][0]["data"], ref[3 * i:3 * i + 3])) <= 1e-5

        assert s.post(f"/v1/jobs/{mlp}/cancel", tok).status == 200  # its two workers for the next

        # two inputs, INT64 exact, a tuple of outputs; inputs matched by name in any order
        two_job = serve(s, tok, "two")
        wait_until("two ready", lambda: s.get("/v2/models/two/ready", tok).status == 200, 30)
        ids = [[rng.randrange(100) for _ in range(5)] for _ in range(3)]
        two = [{"name": "scale", "datatype": "FP32", "shape": [3, 1], "data": [0.5, -2.0, 3.25]},
               {"name": "ids", "datatype": "INT64", "shape": [3, 5], "data": ids}]
        r = infer(s, tok, "two", two)
        assert r.status == 200, r
        flat = [two[1], two[0]]
        flat = [dict(t, data=sum(t["data"], []) if t["name"] == "ids" else t["data"]) for t in flat]
        assert_same(r.json["outputs"], torch_ref(os.path.join(d, "two_in.pt"), flat), ["emb", "total"])
        assert r.json["outputs"][1]["datatype"] == "INT64", r.json
        # mistakes are 400s naming the input, and the replica keeps serving
        bad = [(dict(two[1], datatype="FP32"), "inputs[1].datatype"),
               (dict(two[1], shape=[3, 4]), "inputs[1].shape"),
               (dict(two[1], name="idz"), "inputs[1].name")]
        for t, field in bad:
            r = infer(s, tok, "two", [two[0], t])
            assert r.status == 400 and r.json["error"]["field"].startswith(field), (field, r)
        r = infer(s, tok, "two", [two[0]])
        assert r.status == 400 and "ids" in r.json["error"]["message"], r
        assert infer(s, tok, "two", two).status == 200

        assert s.post(f"/v1/jobs/{two_job}/cancel", tok).status == 200

        # ResNet-18 at batch 2: the same numbers as torch's
        serve(s, tok, "resnet")
        wait_until("resnet ready", lambda: s.get("/v2/models/resnet/ready", tok).status == 200, 60)
        img = [{"name": "image", "datatype": "FP32", "shape": [2, 3, 224, 224],
                "data": [round(rng.gauss(0, 1), 4) for _ in range(2 * 3 * 224 * 224)]}]
        r = infer(s, tok, "resnet", img, timeout=60)
        assert r.status == 200, r
        assert_same(r.json["outputs"], torch_ref(os.path.join(d, "resnet18.pt"), img), ["logits"])


def test_models_that_read_files_or_leak_memory_are_refused():
    """an uploaded model runs in the worker process, which can read the worker's state (other tenants'
    models, the cluster's secrets): a model calling torch.from_file or torch.empty fails to load, the
    job fails naming the op, and no answer carries a byte of the file"""
    d = models()
    with Stack(workers=1) as s:
        _, tok = s.tenant("attacker")
        meta = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 1]}]}
        for name, op in (("snoop", "aten::from_file"), ("leak", "aten::empty")):
            assert upload(s, tok, name, os.path.join(d, f"{name}.pt"), meta).status == 201
            jid = s.submit(tok, {"type": "inference", "name": name, "spec": {"model": name}})
            job = s.wait_state(tok, jid, "failed", timeout=60)
            reason = [e["reason"] for e in s.events(tok, jid) if e["state"] == "failed"][-1]
            assert f"the model calls {op} in" in reason, reason
            r = infer(s, tok, name, [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [0]}])
            assert r.status == 404, r  # nothing serves it
            assert job["state"] == "failed"


@alone  # 8 clients of load, no request may fail
@timeout(300)
def test_alias_rolls_replicas_under_load():
    """8 clients (JSON and binary bodies) for 10 s or more; the alias moves in the middle: no request
    fails, every answer is one version's whole"""
    d = models()
    with Stack(workers=3) as s:
        _, tok = s.tenant("roll")
        for v in (1, 2):
            assert upload(s, tok, "clf", os.path.join(d, f"mlp_v{v}.pt"), MLP_META).json["version"] == v
        r = s.post("/v1/jobs", tok, {"type": "inference", "name": "x", "spec": {"model": "clf@prod"}})
        assert r.status == 400 and r.json["error"]["field"] == "spec.model" and "alias" in r.json["error"]["message"], r
        r = s.request("PUT", "/v1/models/clf/aliases/prod", tok, {"version": 3})
        assert r.status == 400 and r.json["error"]["field"] == "version", r
        r = s.request("PUT", "/v1/models/clf/aliases/1bad", tok, {"version": 1})
        assert r.status == 400 and r.json["error"]["field"] == "alias", r
        r = s.request("PUT", "/v1/models/clf/aliases/prod", tok, {"version": 1})
        assert r.status == 200 and r.json["previous"] is None and r.json["rolled"] == [], r
        jid = serve(s, tok, "clf@prod", replicas=2, max_batch=8)
        assert s.job(tok, jid)["spec"]["resolved"]["version"] == 1
        wait_until("clf ready", lambda: s.get("/v2/models/clf/ready", tok).status == 200, 30)
        x = [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0.1, -0.2, 0.3, 0.4]}]
        want = {v: torch_ref(os.path.join(d, f"mlp_v{v}.pt"), x)[0]["data"] for v in (1, 2)}
        assert max(abs(a - b) for a, b in zip(want[1], want[2])) > 1e-3  # the versions answer differently

        results, stop = [], threading.Event()
        raw = struct.pack("<4f", *x[0]["data"])
        head = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4],
                                       "parameters": {"binary_data_size": len(raw)}}]}).encode()
        hb = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(head))}

        def load(binary):  # JSON or binary bodies (the latter run in place: from_blob on the request region)
            while not stop.is_set():
                r = (s.request("POST", "/v2/models/clf/infer", tok, raw=head + raw, headers=hb) if binary
                     else infer(s, tok, "clf", x))
                results.append((time.monotonic(), r.status, r.json and r.json.get("model_version"),
                                r.json and r.json.get("outputs", [{}])[0].get("data")))

        # 8 clients for 10 s or more, the alias moved in the middle
        threads = [threading.Thread(target=load, args=(i % 2 == 1,)) for i in range(8)]
        started = time.monotonic()
        for t in threads:
            t.start()
        wait_until("load on version 1", lambda: len(results) > 50 and time.monotonic() - started > 5, 30)
        moved = time.monotonic()
        r = s.request("PUT", "/v1/models/clf/aliases/prod", tok, {"version": 2})
        assert r.status == 200 and r.json["previous"] == 1 and r.json["rolled"] == [jid], r
        wait_until("both replicas report the switch",
                   lambda: sum("replica switched" in e["reason"] and "1 -> 2" in e["reason"] for e in s.events(tok, jid)) >= 2,
                   30)
        switched = time.monotonic()
        wait_until("answers after the switch", lambda: sum(1 for t, _, _, _ in results if t > switched + 0.2) >= 30 and
                   time.monotonic() - started > 10, 30)
        stop.set()
        for t in threads:
            t.join()
        assert all(st == 200 for _, st, _, _ in results), [r for r in results if r[1] != 200][:3]
        for _, _, v, data in results:  # every answer is one version's, whole
            assert max(abs(a - b) for a, b in zip(data, want[int(v)])) <= 1e-5, (v, data)
        assert any(v == "1" for t, _, v, _ in results if t < moved) and any(v == "2" for _, _, v, _ in results)
        after = [v for t, _, v, _ in results if t > switched + 0.2]  # (a request sent just before may be answered by v1)
        assert after == ["2"] * len(after), after  # both replicas switched
        assert s.job(tok, jid)["spec"]["resolved"]["version"] == 2
        reasons = [e["reason"] for e in s.events(tok, jid)]
        assert any("clf@prod moved from version 1 to 2" in e for e in reasons), reasons
        assert s.get("/v1/models/clf", tok).json["aliases"] == {"prod": 2}
        assert s.get("/v2/models/clf", tok).json["version"] == "2"
        r = s.request("DELETE", "/v1/models/clf/aliases/prod", tok)
        assert r.status == 409 and jid in r.json["error"]["message"], r
        assert s.post(f"/v1/jobs/{jid}/cancel", tok).status == 200
        assert s.request("DELETE", "/v1/models/clf/aliases/prod", tok).status == 200
        assert s.request("DELETE", "/v1/models/clf/aliases/prod", tok).status == 404


def test_bad_uploads_store_nothing_and_tenants_are_apart():
    d = models()
    with Stack(workers=1, server_args=["--model-upload-limit", "2000000"]) as s:
        a, tok_a = s.tenant("alpha")
        b, tok_b = s.tenant("beta")
        with open(os.path.join(d, "mlp_v1.pt"), "rb") as f:
            good = f.read()
        statedict = subprocess.run(
            [TORCH_PY, "-c", "import torch, io, sys; b = io.BytesIO(); torch.save({'w': torch.zeros(3)}, b); "
                             "sys.stdout.buffer.write(b.getvalue())"], check=True, capture_output=True).stdout
        flipped = bytearray(good)  # one byte of the weights changed (not of the alignment padding torch writes)
        with zipfile.ZipFile(io.BytesIO(good)) as z:
            w = max(z.infolist(), key=lambda i: i.file_size)
        name_len, extra_len = struct.unpack("<HH", good[w.header_offset + 26:w.header_offset + 30])
        flipped[w.header_offset + 30 + name_len + extra_len + w.compress_size // 2] ^= 0xFF
        meta = json.dumps(MLP_META).encode()
        cases = [
            ([("metadata", None, meta)], 400, "file"),
            ([("file", "m.pt", good)], 400, "metadata"),
            ([("metadata", None, b"{not json"), ("file", "m.pt", good)], 400, "metadata"),
            ([("metadata", None, json.dumps({"inputs": [{"name": "x", "datatype": "FP16", "shape": [-1, 4]}]}).encode()),
              ("file", "m.pt", good)], 400, "metadata.inputs[0].datatype"),
            ([("metadata", None, json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [4]}]}).encode()),
              ("file", "m.pt", good)], 400, "metadata.inputs[0].shape[0]"),
            ([("metadata", None, meta), ("file", "m.pt", statedict)], 400, "file"),
            ([("metadata", None, meta), ("file", "m.pt", good[:len(good) // 2])], 400, "file"),
            ([("metadata", None, meta), ("file", "m.pt", bytes(flipped))], 400, "file"),
            ([("metadata", None, meta), ("file", "m.pt", b"print('hello')\n")], 400, "file"),
            ([("metadata", None, meta), ("file", "m.pt", good), ("extra", None, b"1")], 400, "extra"),
        ]
        for parts, status, field in cases:
            r = upload(s, tok_a, "m", parts=parts)
            assert r.status == status and r.json["error"]["field"] == field, (field, r)
        r = upload(s, tok_a, "m", parts=[("metadata", None, meta), ("file", "m.pt", statedict)])
        assert "torch.jit.script" in r.json["error"]["message"], r
        r = s.request("POST", "/v1/models/m/versions", tok_a, {"file": "x"})
        assert r.status == 415, r
        r = upload(s, tok_a, "bad@name", os.path.join(d, "mlp_v1.pt"), MLP_META)
        assert r.status == 400 and r.json["error"]["field"] == "name", r
        r = upload(s, tok_a, "big", data=good + b"\0" * 2000000, meta=MLP_META)
        assert r.status == 413, r
        viewer = s.token(a, "viewer")
        assert upload(s, viewer, "m", os.path.join(d, "mlp_v1.pt"), MLP_META).status == 403
        assert upload(s, None, "m", os.path.join(d, "mlp_v1.pt"), MLP_META).status == 401
        assert s.get("/v1/models/m", tok_a).status == 404 and store_files(s) == []  # nothing stored

        # tenant beta's model is invisible to alpha
        assert upload(s, tok_b, "secret", os.path.join(d, "mlp_v1.pt"), MLP_META).status == 201
        assert len(store_files(s)) == 1
        assert s.get("/v1/models/secret", tok_a).status == 404
        assert "secret" not in json.dumps(s.get("/v1/models", tok_a).json)
        assert s.get("/v2/models/secret", tok_a).status == 404
        r = s.post("/v1/jobs", tok_a, {"type": "inference", "name": "steal", "spec": {"model": "secret"}})
        assert r.status == 400 and r.json["error"]["field"] == "spec.model", r
        r = s.request("PUT", "/v1/models/secret/aliases/prod", tok_a, {"version": 1})
        assert r.status == 400 and r.json["error"]["field"] == "version", r
        assert s.get("/v1/models/secret", tok_b).json["aliases"] == {}
        # alpha's own model of the same name is its own version 1
        assert upload(s, tok_a, "secret", os.path.join(d, "mlp_v2.pt"), MLP_META).json["version"] == 1
        audit = s.get("/v1/audit", ADMIN).json
        assert sum(1 for e in audit["entries"] if e["action"] == "model.upload") == 2, audit
