#!/usr/bin/env python3
"""fastapi_peer.py - the server a team writes when it has no serving system: FastAPI + uvicorn
(Debian's python3-fastapi, python3-uvicorn) around torch.jit.load, answering Open Inference
Protocol v2 requests (JSON numbers, or the binary extension: Inference-Header-Content-Length) with
JSON outputs, as gantry does.  One executor thread runs the forward passes with --threads torch
threads (the replica's budget).  tests/bench/bench_peer.py measures gantry against it.

    /usr/bin/python3 tests/bench/fastapi_peer.py --model FILE.pt --port P [--threads 2]
"""
import argparse
import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import torch
import uvicorn
from fastapi import FastAPI, Request, Response

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--threads", type=int, default=2)
args = ap.parse_args()

torch.set_num_threads(args.threads)
model = torch.jit.load(args.model).eval()
pool = ThreadPoolExecutor(1)
app = FastAPI()


def forward(x):
    with torch.inference_mode():
        return model(x)


@app.post("/v2/models/{name}/infer")
async def infer(name: str, request: Request):
    body = await request.body()
    head_len = request.headers.get("inference-header-content-length")
    head = json.loads(body[:int(head_len)] if head_len else body)
    inp = head["inputs"][0]
    if head_len:
        x = torch.frombuffer(bytearray(body[int(head_len):]), dtype=torch.float32).reshape(inp["shape"])
    else:
        x = torch.tensor(inp["data"], dtype=torch.float32).reshape(inp["shape"])
    y = await asyncio.get_running_loop().run_in_executor(pool, forward, x)
    out = {"model_name": name, "outputs": [{"name": "output", "datatype": "FP32", "shape": list(y.shape),
                                            "data": y.flatten().tolist()}]}
    return Response(json.dumps(out), media_type="application/json")


@app.get("/v2/health/ready")
async def ready():
    return {}


uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
