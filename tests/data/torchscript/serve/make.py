#!/usr/bin/python3
"""Writes the TorchScript fixtures of tests/unit/test_ts_serve.c (commit what it writes):

    /usr/bin/python3 tests/data/torchscript/serve/make.py

- seq.pt: forward(x: FP32 [B,L,4], ids: INT64 [B,L]) returns (mean: FP32 [B,3] = linear(x) averaged
  over L, next: INT64 [B,L] = ids + 1): two inputs with a free dimension L, two output datatypes;
- picky.pt: forward(x: FP32 [B,2]) raises when a value is negative, else returns log(x) (-inf at 0);
- nonbatched.pt: forward(x: FP32 [B,3]) returns x.sum(0, keepdim=True), [1,3] whatever B is;
- expected.json: {"seq": {"metadata", "cases": [{"request", "outputs"}]}, "picky": {"metadata"},
  "nonbatched": {"metadata"}}: each case's outputs are torch's own, from the saved file run on that
  request alone.

Deterministic (seeded); the files are a few KB.  Saved as tests/data/torchscript/make.py saves."""

import importlib.util
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("fixtures", os.path.join(HERE, "..", "make.py"))
fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixtures)


class Seq(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, ids):
        return self.lin(x).mean(1), ids + 1


class Picky(torch.nn.Module):
    def forward(self, x):
        if bool((x < 0).any()):
            raise ValueError("picky: a negative value")
        return torch.log(x)


class NonBatched(torch.nn.Module):
    def forward(self, x):
        return x.sum(0, keepdim=True)


def tensor(name, t):
    return {"name": name, "datatype": fixtures.NAMES[t.dtype], "shape": list(t.shape), "data": t.flatten().tolist()}


def seq_case(model, rid, x, ids):
    with torch.no_grad():
        mean, nxt = model(x, ids)
    return {"request": {"id": rid, "inputs": [tensor("x", x), tensor("ids", ids)]},
            "outputs": [tensor("mean", mean), tensor("next", nxt)]}


def main():
    torch.manual_seed(0)
    fixtures.save_script(Seq().eval(), "serve/seq.pt")
    fixtures.save_script(Picky(), "serve/picky.pt")
    fixtures.save_script(NonBatched(), "serve/nonbatched.pt")
    seq = torch.jit.load(os.path.join(HERE, "seq.pt"))
    big = torch.tensor([[9007199254740992, 9007199254740993]], dtype=torch.int64)  # 2^53, 2^53 + 1: not doubles
    cases = [
        seq_case(seq, "big", torch.randn(1, 2, 4), big),
        seq_case(seq, "two", torch.randn(2, 2, 4), torch.randint(-1000, 1000, (2, 2))),
        seq_case(seq, "long", torch.randn(1, 3, 4), torch.tensor([[-9223372036854775808, 0, 41]])),
        seq_case(seq, "one", torch.randn(1, 2, 4), torch.randint(-1000, 1000, (1, 2))),
    ]
    meta = lambda ins, outs: {"inputs": ins, "outputs": outs}
    spec = lambda name, dt, shape: {"name": name, "datatype": dt, "shape": shape}
    out = {
        "seq": {"metadata": meta([spec("x", "FP32", [-1, -1, 4]), spec("ids", "INT64", [-1, -1])],
                                 [spec("mean", "FP32", [-1, 3]), spec("next", "INT64", [-1, -1])]),
                "cases": cases},
        "picky": {"metadata": meta([spec("x", "FP32", [-1, 2])], [spec("y", "FP32", [-1, 2])])},
        "nonbatched": {"metadata": meta([spec("x", "FP32", [-1, 3])], [])},
    }
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
