#!/usr/bin/python3
"""Writes the TorchScript fixtures of tests/unit/test_torch_model.c (commit what it writes):

    /usr/bin/python3 tests/data/torchscript/make.py

- two_inputs.pt: forward(x: FP32 [B,3], idx: INT64 [B,2]) returns a tuple of four tensors, one of
  each served datatype: FP32 [B,2], FP64 [B,2], INT32 [B,2], INT64 [B,1];
- bool_output.pt: forward(x) returns x > 0, a datatype gantry does not serve;
- state_dict.pt: two_inputs' torch.save'd state_dict, a zip archive that is not TorchScript;
- expected.json: the inputs the test feeds two_inputs.pt and torch's own outputs for them
  ({"inputs": [{"datatype","shape","data"}], "outputs": [...]}, data flattened row-major).

Deterministic (seeded); the files are a few KB."""

import io
import json
import os
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = {torch.float32: "FP32", torch.float64: "FP64", torch.int32: "INT32", torch.int64: "INT64"}


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.table = torch.nn.Parameter(torch.randn(10, 2))  # an embedding table, without F.embedding's bulk

    def forward(self, x, idx):
        y = self.lin(x) + self.table[idx].sum(1)
        return y, y.double() * 0.5, (idx * 2 + 1).to(torch.int32), idx.sum(1, keepdim=True)


class BoolOutput(torch.nn.Module):
    def forward(self, x):
        return x > 0


def save_script(module, name):
    """torch.jit.save without the *.debug_pkl entries (the source ranges of make.py, with this
    checkout's absolute path in them): smaller, and the same everywhere it is generated"""
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buf)
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(os.path.join(HERE, name), "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            if not info.filename.endswith(".debug_pkl"):
                info.date_time = (1980, 1, 1, 0, 0, 0)
                dst.writestr(info, src.read(info.filename))


def tensor_json(t):
    return {"datatype": NAMES[t.dtype], "shape": list(t.shape), "data": t.flatten().tolist()}


def main():
    torch.manual_seed(0)
    model = TwoInputs().eval()
    save_script(model, "two_inputs.pt")
    save_script(BoolOutput(), "bool_output.pt")
    torch.save(model.state_dict(), os.path.join(HERE, "state_dict.pt"))

    x = torch.randn(2, 3)
    idx = torch.tensor([[1, 9], [0, 4]], dtype=torch.int64)
    with torch.no_grad():
        # torch's own answer from the saved file, as the C side will load it
        outs = torch.jit.load(os.path.join(HERE, "two_inputs.pt"))(x, idx)
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump({"inputs": [tensor_json(x), tensor_json(idx)], "outputs": [tensor_json(o) for o in outs]}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
