#!/usr/bin/env python3
"""Export a PyTorch model to gantry's graph format (docs/graph.schema.json).

Run it on your own machine, where the model and torch are installed; the
output is what `gantry-place` and placement jobs read.

  python3 tools/torch_export.py mypkg.models:build_model --input 8,3,224,224 \\
      --devices 4 --memory 16e9 > graph.json
  python3 tools/torch_export.py torchvision.models:resnet50 --input 32,3,224,224 --timing flops
  python3 tools/torch_export.py torchvision.models:inception_v3 --input 8,3,299,299 \\
      --kwargs '{"aux_logits": false, "init_weights": false}' --scale 0.05
  python3 tools/torch_export.py --preset all --out tests/data/graphs   # the shipped graphs


MODEL is "module:callable"; the callable is called with --kwargs (a JSON
object, default none) and must return an nn.Module.  torch_export:transformer
is nn.Transformer made traceable (see transformer() below).  --preset NAME
exports one of the PRESETS (resnet50, inception_v3, transformer, or all) with
its own input and devices, to --out DIR/torch_<name>.json.  --input gives
the shape of each positional input (repeat the flag for several; --dtype
sets their type, default float32; the values are random).

How the graph is made:
  - torch.fx traces the ops (one per fx node, except the output node),
    named after the model's modules; see Tracer for which modules stay one
    op; ShapeProp runs the example input through them to learn the
    shape and dtype of every result;
  - output_bytes: the bytes of each tensor an op returns (several for tuple
    outputs); edges carry the producer's total output bytes;
  - persistent_bytes: parameters and buffers, counted once: a tensor used by
    several ops is charged to the first, and all ops using it (and a
    get_attr node with the ops reading it) form one colocation group
    ("shared:<name>") so they land on the device holding the tensor;
  - compute_us: --timing flops (the default of export()) estimates FLOPs
    (matmul, linear, convolution, attention-free elementwise and
    normalisation ops) at --tflops; --timing measure (the command's
    default) runs the model once per --repeat under
    torch.fx.Interpreter and times every node on --device (CUDA is
    synchronised around each node); the first run is a warm-up and each
    node's time is the median of the --repeat runs after it;
  - --scale R multiplies every compute_us: R is (time on the target GPU) /
    (time where this runs).  Measure it once: time the same model on both
    (e.g. the sum of compute_us of a graph exported with --device cuda on the
    target over the one exported here), or state it from peak FLOP/s (a
    1 TFLOP/s CPU and a 20 TFLOP/s GPU give 0.05).  The default 1.0 keeps
    this machine's times;
  - temp_bytes: scratch memory an op needs while it runs.  On CUDA it is
    measured: the allocator's peak during the node less what was live before
    it and the node's outputs.  On CPU fx cannot see it, so it is estimated
    for convolutions as the im2col buffer a GEMM convolution builds for one
    image (input channels per group x kernel size x output positions;
    0 for 1x1 stride-1 convolutions) and 0 for other ops;
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
import os
import statistics
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
        self.times, self.temp, self.cuda = {}, {}, device.type == "cuda"

    def run_node(self, n):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        result = super().run_node(n)
        if self.cuda:
            torch.cuda.synchronize()
            scratch = torch.cuda.max_memory_allocated() - torch.cuda.memory_allocated()
            self.temp[n.name] = max(self.temp.get(n.name, 0), scratch)
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
    times = {k: statistics.median(v[1:]) for k, v in timer.times.items()}
    return times, timer.temp if timer.cuda else None


def conv_temp_bytes(gm, node):
    """CPU estimate of a convolution's scratch memory: the im2col buffer of
    one image (GEMM convolutions unfold one sample of the batch at a time)."""
    if node.op != "call_module":
        return 0
    mod = gm.get_submodule(node.target)
    if not isinstance(mod, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)):
        return 0
    kernel = _numel(mod.kernel_size)
    stride = _numel(mod.stride) if isinstance(mod.stride, tuple) else mod.stride
    if kernel == 1 and stride == 1:
        return 0
    out = _tensors(node.meta.get("tensor_meta"))[0]
    positions = _numel(out.shape[2:])  # one image's output positions
    return (mod.in_channels // mod.groups) * kernel * positions * _element_size(out.dtype)


def export(model, example_inputs, devices=1, memory=16e9, timing="flops", tflops=10.0, device="cpu", repeat=5,
           scale=1.0):
    """The graph dict of `model` traced with `example_inputs` (a tuple).
    compute_us is multiplied by `scale` (see --scale)."""
    if torch is None:
        raise RuntimeError("torch is not installed")
    gm = trace(model)
    with torch.no_grad():
        ShapeProp(gm).propagate(*example_inputs)
        if hasattr(model, "reference"):  # a traceable stand-in: it must compute what the model does
            got, want = gm(*example_inputs), model.reference(*example_inputs)
            if not torch.allclose(got, want, atol=1e-5):
                raise RuntimeError("torch_export: the traced model differs from %s" % type(model).__name__)
    nodes = [n for n in gm.graph.nodes if n.op != "output"]
    persistent, group = _weights(gm, nodes)
    measured, temp = {}, None
    if timing == "measure":
        measured, temp = _measure(gm, example_inputs, torch.device(device), repeat)
    ops, edges = [], []
    for node in nodes:
        us = measured.get(node.name) if timing == "measure" else flops(gm, node) / (tflops * 1e6)
        # a get_attr result aliases a parameter (counted as persistent), no new memory
        outs = [] if node.op == "get_attr" else _outputs(node)
        scratch = temp.get(node.name, 0) if temp is not None else conv_temp_bytes(gm, node)
        op = {"name": node.name, "compute_us": round((us or 0.0) * scale, 3), "temp_bytes": int(scratch),
              "persistent_bytes": persistent[node.name], "output_bytes": outs}
        if node.name in group:
            op["group"] = group[node.name]
        ops.append(op)
        for src in node.all_input_nodes:
            edges.append({"src": src.name, "dst": node.name, "bytes": 0 if src.op == "get_attr" else sum(_outputs(src))})
    return {"ops": ops, "edges": edges,
            "devices": [{"name": "gpu%d" % d, "memory_bytes": int(memory), "speed": 1.0} for d in range(devices)],
            "comm": {"latency_us": 134, "bytes_per_us": 5701}}


class TracedTransformer(torch.nn.Module if torch else object):
    """nn.Transformer (post-norm, eval) as fx can trace it.

    nn.Transformer.forward and TransformerEncoderLayer.forward test tensor
    shapes in Python (src.dim() == 3, the fast path), which symbolic tracing
    cannot do.  This drives the model's own submodules layer by layer instead:
    each encoder layer's _sa_block and _ff_block with its norms, then the
    encoder's norm and the decoder (whose forward traces as is).  Node names
    are the model's (transformer_encoder_layers_0_self_attn, ...), and
    MultiheadAttention stays one op (see Tracer below).  export() checks
    that the result equals nn.Transformer's own."""

    def __init__(self, transformer):
        super().__init__()
        if transformer.encoder.layers[0].norm_first:
            raise ValueError("TracedTransformer: norm_first=True is not supported")
        self.transformer = transformer

    def forward(self, src, tgt):
        x = src
        for layer in self.transformer.encoder.layers:
            x = layer.norm1(x + layer._sa_block(x, None, None))
            x = layer.norm2(x + layer._ff_block(x))
        if self.transformer.encoder.norm is not None:
            x = self.transformer.encoder.norm(x)
        return self.transformer.decoder(tgt, x)

    def reference(self, src, tgt):
        return self.transformer(src, tgt)


def transformer(d_model=256, nhead=8, layers=3, dim_feedforward=1024):
    """A small nn.Transformer (encoder and decoder of `layers` layers each)."""
    return TracedTransformer(torch.nn.Transformer(d_model, nhead, layers, layers, dim_feedforward))


class Tracer(torch.fx.Tracer if torch else object):
    """fx's tracer, with other leaves: torch.nn modules that hold no
    submodules (Linear, Conv2d, LayerNorm, ReLU, ...) and
    nn.MultiheadAttention, whose forward branches on shapes and flags and is
    one fused kernel on GPUs anyway.  fx's own rule makes every torch.nn
    module a leaf, so nn.TransformerDecoder would be one op."""

    def is_leaf_module(self, m, qualname):
        if isinstance(m, torch.nn.MultiheadAttention):
            return True
        return m.__module__.startswith("torch.nn") and not any(True for _ in m.children())


def trace(model):
    """A GraphModule of `model` (eval mode), named after its modules."""
    model.eval()
    graph = Tracer().trace(model)
    return torch.fx.GraphModule(model, graph, model.__class__.__name__)


# The shipped graphs (tests/data/graphs/torch_<name>.json): model, kwargs,
# inputs, devices and per-device memory (below one device's peak need, so a
# plan must split the model; see docs/placement.md, Real PyTorch models).
PRESETS = {
    "resnet50": {"model": "torchvision.models:resnet50", "kwargs": {}, "inputs": [[8, 3, 224, 224]],
                 "devices": 4, "memory": 120e6},
    "inception_v3": {"model": "torchvision.models:inception_v3",
                     "kwargs": {"aux_logits": False, "init_weights": False}, "inputs": [[8, 3, 299, 299]],
                     "devices": 4, "memory": 120e6},
    "transformer": {"model": "torch_export:transformer", "kwargs": {}, "inputs": [[32, 8, 256], [32, 8, 256]],
                    "devices": 4, "memory": 12e6},
}


def _load_model(spec, kwargs=None):
    module, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit("torch_export: MODEL must be module:callable, e.g. torchvision.models:resnet18")
    factory = importlib.import_module(module)
    for part in attr.split("."):
        factory = getattr(factory, part)
    return factory(**(kwargs or {}))


def _dump(graph, out):
    json.dump(graph, out, separators=(",", ":"))
    out.write("\n")


def export_preset(name, out_dir, device="cpu", repeat=5, scale=1.0):
    """Writes PRESETS[name] to out_dir/torch_<name>.json; returns the path."""
    p = PRESETS[name]
    torch.manual_seed(0)
    inputs = tuple(torch.randn(shape) for shape in p["inputs"])
    graph = export(_load_model(p["model"], p["kwargs"]), inputs, p["devices"], p["memory"], "measure",
                   device=device, repeat=repeat, scale=scale)
    path = os.path.join(out_dir, "torch_%s.json" % name)
    with open(path, "w") as f:
        _dump(graph, f)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="module:callable returning an nn.Module")
    ap.add_argument("--kwargs", default="{}", help="JSON object of keyword arguments for the callable")
    ap.add_argument("--input", action="append", help="shape of a positional input, e.g. 8,3,224,224")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--memory", type=float, default=16e9, help="bytes per device")
    ap.add_argument("--timing", choices=["flops", "measure"], default="measure")
    ap.add_argument("--tflops", type=float, default=10.0, help="device throughput for --timing flops")
    ap.add_argument("--device", default="cpu", help="where --timing measure runs (cpu, cuda)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per node (median), after one warm-up")
    ap.add_argument("--scale", type=float, default=1.0, help="target GPU time / this machine's time")
    ap.add_argument("--preset", choices=sorted(PRESETS) + ["all"], help="export a shipped graph to --out")
    ap.add_argument("--out", default=".", help="directory for --preset")
    a = ap.parse_args()
    if torch is None:
        raise SystemExit("torch_export: torch is not installed (pip install torch)")
    if a.preset:
        for name in sorted(PRESETS) if a.preset == "all" else [a.preset]:
            print(export_preset(name, a.out, a.device, a.repeat, a.scale), file=sys.stderr)
        return
    if not a.model or not a.input:
        ap.error("MODEL and --input are needed (or --preset)")
    dtype = getattr(torch, a.dtype)
    inputs = tuple(torch.randn([int(x) for x in s.split(",")]).to(dtype) for s in a.input)
    graph = export(_load_model(a.model, json.loads(a.kwargs)), inputs, a.devices, a.memory, a.timing, a.tflops,
                   a.device, a.repeat, a.scale)
    _dump(graph, sys.stdout)


if __name__ == "__main__":
    main()
