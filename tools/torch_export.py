#!/usr/bin/env python3
"""Export a PyTorch model to gantry's graph format (docs/graph.schema.json).

Run it on your own machine, where the model and torch are installed; the
output is what `gantry-place` and placement jobs read.

  python3 tools/torch_export.py mypkg.models:build_model --input 8,3,224,224 \\
      --devices 4 --memory 16e9 > graph.json
  python3 tools/torch_export.py torchvision.models:resnet50 --input 32,3,224,224 --timing measure

MODEL is "module:callable"; the callable is called with no arguments and must
return an nn.Module.  --input gives the shape of each positional input
(repeat the flag for several; --dtype sets their type, default float32).

How the graph is made:
  - torch.fx.symbolic_trace gives the ops (one per fx node, except the
    output node); ShapeProp runs the example input through them to learn the
    shape and dtype of every result;
  - output_bytes: the bytes of each tensor an op returns (several for tuple
    outputs); edges carry the producer's total output bytes;
  - persistent_bytes: parameters and buffers, counted once: a tensor used by
    several ops is charged to the first, and all ops using it (and a
    get_attr node with the ops reading it) form one colocation group
    ("shared:<name>") so they land on the device holding the tensor;
  - compute_us: --timing flops (default) estimates FLOPs (matmul, linear,
    convolution, attention-free elementwise and normalisation ops) at
    --tflops; --timing measure runs the model once per --repeat under
    torch.fx.Interpreter and times every node on --device (CUDA is
    synchronised around each node);
  - temp_bytes: 0 (scratch memory is not visible to fx);
  - views and shape queries (view, reshape, permute, getitem, size, ...)
    cost no time; their output bytes are kept, which over-counts memory
    slightly (they alias their input).
As a library: export(model, example_inputs, ...) returns the graph dict.
"""
import argparse
import importlib
import json
import math
import operator
import sys
import time

try:
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp
except ImportError:  # the module stays importable (for --help and tests) without torch
    torch = None

VIEW_OPS = {"view", "reshape", "permute", "transpose", "contiguous", "flatten", "unsqueeze", "squeeze", "expand",
            "size", "dim", "getitem", "chunk", "split", "narrow", "t", "type_as", "to", "float", "half", "detach"}
MATMUL_OPS = {"matmul", "mm", "bmm", "baddbmm", "addmm", "matmul_", "einsum"}
NORM_FLOPS = 5  # per output element: mean, variance, normalise, scale, shift


def _name(target):
    """A call target as a short lower-case name: torch.nn.functional.relu -> relu."""
    if isinstance(target, str):
        return target.split(".")[-1].lower()
    if target is operator.matmul:
        return "matmul"
    if target is operator.getitem:
        return "getitem"
    return getattr(target, "__name__", str(target)).lower()


def _tensors(meta):
    """Every TensorMetadata in a (possibly nested) tensor_meta entry."""
    if meta is None:
        return []
    if hasattr(meta, "shape") and hasattr(meta, "dtype"):
        return [meta]
    if isinstance(meta, dict):
        meta = list(meta.values())
    if isinstance(meta, (list, tuple)):
        out = []
        for m in meta:
            out.extend(_tensors(m))
        return out
    return []


def _element_size(dtype):
    return torch.empty((), dtype=dtype).element_size()


def _numel(shape):
    return int(math.prod(shape)) if len(shape) else 1


def _outputs(node):
    return [_numel(t.shape) * _element_size(t.dtype) for t in _tensors(node.meta.get("tensor_meta"))]


def _out_numel(node):
    return sum(_numel(t.shape) for t in _tensors(node.meta.get("tensor_meta")))


def _in_shape(node, i=0):
    args = [a for a in node.args if isinstance(a, torch.fx.Node)]
    if len(args) <= i:
        return None
    ts = _tensors(args[i].meta.get("tensor_meta"))
    return tuple(ts[0].shape) if ts else None


def _module_flops(node, mod):
    out = _out_numel(node)
    nn = torch.nn
    if isinstance(mod, nn.Linear):
        return 2 * out * mod.in_features
    if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
        return 2 * out * (mod.in_channels // mod.groups) * _numel(mod.kernel_size)
    if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm)):
        return NORM_FLOPS * out
    if isinstance(mod, (nn.LSTM, nn.GRU, nn.RNN)):
        gates = {nn.LSTM: 4, nn.GRU: 3, nn.RNN: 1}[type(mod)]
        shape = _in_shape(node) or (1, 1, mod.input_size)
        steps = _numel(shape[:-1])
        per_layer = 2 * gates * mod.hidden_size * (mod.input_size + mod.hidden_size)
        return steps * per_layer * mod.num_layers * (2 if mod.bidirectional else 1)
    if isinstance(mod, nn.Embedding):
        return out
    if isinstance(mod, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)):
        k = mod.kernel_size if isinstance(mod.kernel_size, tuple) else (mod.kernel_size,)
        return out * _numel(k)
    return out  # activations, dropout, identity: one op per element


def _function_flops(node):
    name = _name(node.target)
    if name in VIEW_OPS:
        return 0
    out = _out_numel(node)
    if name in MATMUL_OPS:
        shape = _in_shape(node)
        return 2 * out * (shape[-1] if shape else 1)
    if name == "linear":
        shape = _in_shape(node)
        return 2 * out * (shape[-1] if shape else 1)
    if name.startswith("conv"):
        w = _in_shape(node, 1)
        return 2 * out * (_numel(w[1:]) if w else 1)
    if name in ("softmax", "log_softmax", "layer_norm", "batch_norm", "group_norm"):
        return NORM_FLOPS * out
    if name in ("sum", "mean", "max", "min", "amax", "norm"):
        shape = _in_shape(node)
        return _numel(shape) if shape else out
    return out


def flops(gm, node):
    """Estimated FLOPs of one fx node."""
    if node.op == "call_module":
        return _module_flops(node, gm.get_submodule(node.target))
    if node.op in ("call_function", "call_method"):
        return _function_flops(node)
    return 0


def _node_tensors(gm, node):
    """Parameters and buffers an fx node reads directly: (name, tensor)."""
    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        named = list(mod.named_parameters(recurse=True)) + list(mod.named_buffers(recurse=True))
        return [(node.target + "." + n, t) for n, t in named]
    if node.op == "get_attr":
        obj = gm
        for part in node.target.split("."):
            obj = getattr(obj, part)
        return [(node.target, obj)] if isinstance(obj, torch.Tensor) else []
    return []


def _weights(gm, nodes):
    """persistent bytes per node (each tensor charged once, to its first
    user) and colocation groups: nodes that share a tensor, and a get_attr
    node with the nodes that read it, go to one device."""
    first, users, persistent, parent = {}, {}, {}, {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a, b):
        parent[find(b)] = find(a)

    for node in nodes:
        persistent[node.name] = 0
        for name, t in _node_tensors(gm, node):
            key = id(t)
            users.setdefault(key, []).append(node.name)
            if key not in first:
                first[key] = name
                persistent[node.name] += t.numel() * t.element_size()
        if node.op == "get_attr":
            for user in node.users:
                if user.op != "output":
                    union(node.name, user.name)
    for names in users.values():
        for n in names[1:]:
            union(names[0], n)
    label, group = {}, {}
    for key, names in users.items():
        label.setdefault(find(names[0]), "shared:" + first[key])
    members = {}
    for node in nodes:
        members.setdefault(find(node.name), []).append(node.name)
    for root, names in members.items():
        if len(names) > 1:
            for n in names:
                group[n] = label.get(root, "shared:" + names[0])
    return persistent, group


class _Timer(torch.fx.Interpreter if torch else object):
    """Runs the graph and records each node's wall time in microseconds."""

    def __init__(self, gm, device):
        super().__init__(gm)
        self.times, self.cuda = {}, device.type == "cuda"

    def run_node(self, n):
        if self.cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        result = super().run_node(n)
        if self.cuda:
            torch.cuda.synchronize()
        self.times.setdefault(n.name, []).append((time.perf_counter() - t0) * 1e6)
        return result


def _measure(gm, inputs, device, repeat):
    gm = gm.to(device)
    inputs = [x.to(device) for x in inputs]
    timer = _Timer(gm, device)
    with torch.no_grad():
        for _ in range(repeat + 1):
            timer.run(*inputs)
    # the first run warms caches and allocators: drop it, keep the median
    return {k: sorted(v[1:])[len(v[1:]) // 2] for k, v in timer.times.items()}


def export(model, example_inputs, devices=1, memory=16e9, timing="flops", tflops=10.0, device="cpu", repeat=3):
    """The graph dict of `model` traced with `example_inputs` (a tuple)."""
    if torch is None:
        raise RuntimeError("torch is not installed")
    model.eval()
    gm = torch.fx.symbolic_trace(model)
    with torch.no_grad():
        ShapeProp(gm).propagate(*example_inputs)
    nodes = [n for n in gm.graph.nodes if n.op != "output"]
    persistent, group = _weights(gm, nodes)
    measured = _measure(gm, example_inputs, torch.device(device), repeat) if timing == "measure" else {}
    ops, edges = [], []
    for node in nodes:
        us = measured.get(node.name) if timing == "measure" else flops(gm, node) / (tflops * 1e6)
        # a get_attr result aliases a parameter (counted as persistent), no new memory
        outs = [] if node.op == "get_attr" else _outputs(node)
        op = {"name": node.name, "compute_us": round(us or 0.0, 3), "persistent_bytes": persistent[node.name],
              "output_bytes": outs}
        if node.name in group:
            op["group"] = group[node.name]
        ops.append(op)
        for src in node.all_input_nodes:
            edges.append({"src": src.name, "dst": node.name, "bytes": 0 if src.op == "get_attr" else sum(_outputs(src))})
    return {"ops": ops, "edges": edges,
            "devices": [{"name": "gpu%d" % d, "memory_bytes": int(memory), "speed": 1.0} for d in range(devices)],
            "comm": {"latency_us": 134, "bytes_per_us": 5701}}


def _load_model(spec):
    module, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit("torch_export: MODEL must be module:callable, e.g. torchvision.models:resnet18")
    factory = importlib.import_module(module)
    for part in attr.split("."):
        factory = getattr(factory, part)
    return factory()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="module:callable returning an nn.Module")
    ap.add_argument("--input", action="append", required=True, help="shape of a positional input, e.g. 8,3,224,224")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--memory", type=float, default=16e9, help="bytes per device")
    ap.add_argument("--timing", choices=["flops", "measure"], default="flops")
    ap.add_argument("--tflops", type=float, default=10.0, help="device throughput for --timing flops")
    ap.add_argument("--device", default="cpu", help="where --timing measure runs (cpu, cuda)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if torch is None:
        raise SystemExit("torch_export: torch is not installed (pip install torch)")
    dtype = getattr(torch, a.dtype)
    inputs = tuple(torch.zeros([int(x) for x in s.split(",")], dtype=dtype) for s in a.input)
    graph = export(_load_model(a.model), inputs, a.devices, a.memory, a.timing, a.tflops, a.device, a.repeat)
    json.dump(graph, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
