"""TorchScript models for test_torchscript.py and tests/bench/bench_torchserve.py, and torch's own
outputs to compare gantry's answers with.  Run with Debian's /usr/bin/python3 (python3-torch,
python3-torchvision); standard library + torch only.

  /usr/bin/python3 tests/integration/torch_models.py make DIR [--resnet]
      DIR/mlp_v1.pt, DIR/mlp_v2.pt  x FP32 [-1, 4] -> logits FP32 [-1, 3] (different weights)
      DIR/two_in.pt                 ids INT64 [-1, 5], scale FP32 [-1, 1] -> (emb FP32 [-1, 5, 2], total INT64 [-1])
      DIR/snoop.pt, DIR/leak.pt     x FP32 [-1, 1]: an attacker's models (torch.from_file, torch.empty)
      DIR/resnet18.pt               (--resnet) torchvision ResNet-18, random weights (seed 0), traced:
                                    x FP32 [-1, 3, 224, 224] -> FP32 [-1, 1000]
  /usr/bin/python3 tests/integration/torch_models.py ref MODEL.pt REQUEST.json
      prints torch's outputs for an OIP v2 request body's inputs (in the model's argument order) as
      JSON [{"shape", "data"}] (floats as float64 of the float32 values)."""

import json
import sys

import torch


class Mlp(torch.nn.Module):
    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.a = torch.nn.Linear(4, 8)
        self.b = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class TwoIn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.emb = torch.nn.Embedding(100, 2)

    def forward(self, ids, scale):
        e = self.emb(ids) * scale.unsqueeze(-1)
        return e, ids.sum(dim=1) * 3


class Snoop(torch.nn.Module):
    """an attacker's model: returns the first bytes of a file on the worker's machine"""

    def forward(self, x):
        t = torch.from_file("/etc/passwd", shared=False, size=4, dtype=torch.uint8)
        return t.to(torch.float32).unsqueeze(0).repeat(x.shape[0], 1)


class Leak(torch.nn.Module):
    """an attacker's model: returns uninitialised memory (what an earlier job left in the heap)"""

    def forward(self, x):
        return torch.empty(x.shape[0], 4096) + x.sum()


def make(out, resnet):
    torch.jit.script(Snoop()).save(f"{out}/snoop.pt")
    torch.jit.script(Leak()).save(f"{out}/leak.pt")
    torch.jit.script(Mlp(1).eval()).save(f"{out}/mlp_v1.pt")
    torch.jit.script(Mlp(2).eval()).save(f"{out}/mlp_v2.pt")
    torch.jit.script(TwoIn().eval()).save(f"{out}/two_in.pt")
    if resnet:
        import torchvision
        torch.manual_seed(0)
        m = torchvision.models.resnet18(weights=None).eval()
        with torch.no_grad():
            torch.jit.trace(m, torch.zeros(1, 3, 224, 224)).save(f"{out}/resnet18.pt")


DTYPES = {"FP32": torch.float32, "FP64": torch.float64, "INT32": torch.int32, "INT64": torch.int64}


def ref(model, request):
    m = torch.jit.load(model).eval()
    with open(request) as f:
        body = json.load(f)
    args = [torch.tensor(i["data"], dtype=DTYPES[i["datatype"]]).reshape(i["shape"]) for i in body["inputs"]]
    with torch.no_grad():
        out = m(*args)
    outs = out if isinstance(out, (tuple, list)) else [out]
    print(json.dumps([{"shape": list(o.shape), "data": o.reshape(-1).tolist()} for o in outs]))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], "--resnet" in sys.argv)
    elif sys.argv[1] == "ref":
        ref(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
