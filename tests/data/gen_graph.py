#!/usr/bin/env python3
"""Generate operator graphs in gantry's graph format (DESIGN.md, "Graph format").

  gen_graph.py layered --ops 1000 --width 40 --devices 4 --seed 1 > g.json
  gen_graph.py transformer --blocks 4 --devices 3 [--job] > g.json

layered:     a random layered DAG like the ones Baechi is benchmarked on: each
             op reads 1-3 ops of the previous layer (sometimes one further
             back), with random compute times and memory.  Device memory is
             chosen so the graph needs about 60% of all devices' memory.
transformer: a small decoder-only model (forward pass) with per-block
             colocation groups for attention; sizes from real shapes
             (float32), compute from FLOPs at 10 TFLOP/s.  Device memory is
             chosen so the model does not fit one device.
--job wraps the graph in a placement job file.  Standard library only.
"""
import argparse
import json
import random
import sys


def layered(ops, width, devices, seed):
    rnd = random.Random(seed)
    nodes, edges, layers = [], [], []
    while len(nodes) < ops:
        layer = []
        for _ in range(min(width, ops - len(nodes))):
            name = "op%d" % len(nodes)
            out = rnd.randint(1, 64) * 16384
            nodes.append({"name": name, "compute_us": round(rnd.uniform(10, 500), 1),
                          "temp_bytes": rnd.randint(0, 8) * 16384,
                          "persistent_bytes": rnd.randint(0, 32) * 65536,
                          "output_bytes": [out]})
            layer.append(len(nodes) - 1)
        if layers:
            for v in layer:
                srcs = rnd.sample(layers[-1], min(len(layers[-1]), rnd.randint(1, 3)))
                if len(layers) > 1 and rnd.random() < 0.2:
                    srcs.append(rnd.choice(layers[-2]))
                for u in srcs:
                    edges.append({"src": nodes[u]["name"], "dst": nodes[v]["name"],
                                  "bytes": nodes[u]["output_bytes"][0]})
        layers.append(layer)
    total = sum(n["temp_bytes"] + n["persistent_bytes"] + n["output_bytes"][0] for n in nodes)
    mem = int(total / devices / 0.6) + 1
    return {"ops": nodes, "edges": edges,
            "devices": [{"name": "gpu%d" % d, "memory_bytes": mem, "speed": 1.0} for d in range(devices)],
            "comm": {"latency_us": 134, "bytes_per_us": 5701}}


def transformer(blocks, devices):
    tokens, hidden, ffn, vocab, f32 = 2048, 1024, 4096, 32000, 4
    act = tokens * hidden * f32
    tflops = 10e12 / 1e6  # FLOP per microsecond

    nodes, edges = [], []

    def op(name, flops, weights=0, out=act, temp=0, group=None, inputs=()):
        n = {"name": name, "compute_us": round(flops / tflops, 1), "temp_bytes": temp,
             "persistent_bytes": weights, "output_bytes": [out]}
        if group:
            n["group"] = group
        nodes.append(n)
        for src in inputs:
            edges.append({"src": src, "dst": name, "bytes": next(x for x in nodes if x["name"] == src)["output_bytes"][0]})
        return name

    x = op("embed", tokens * hidden, weights=vocab * hidden * f32)
    for b in range(blocks):
        p = "block%d." % b
        ln1 = op(p + "ln1", 5 * tokens * hidden, weights=2 * hidden * f32, inputs=[x])
        qkv = op(p + "qkv", 2 * tokens * hidden * 3 * hidden, weights=3 * hidden * hidden * f32,
                 out=3 * act, group=p + "attn", inputs=[ln1])
        att = op(p + "attention", 4 * tokens * tokens * hidden, temp=16 * tokens * tokens * f32,
                 group=p + "attn", inputs=[qkv])
        proj = op(p + "proj", 2 * tokens * hidden * hidden, weights=hidden * hidden * f32, inputs=[att])
        add1 = op(p + "add1", tokens * hidden, inputs=[x, proj])
        ln2 = op(p + "ln2", 5 * tokens * hidden, weights=2 * hidden * f32, inputs=[add1])
        up = op(p + "ffn_up", 2 * tokens * hidden * ffn, weights=hidden * ffn * f32, out=tokens * ffn * f32, inputs=[ln2])
        gelu = op(p + "gelu", 8 * tokens * ffn, out=tokens * ffn * f32, inputs=[up])
        down = op(p + "ffn_down", 2 * tokens * ffn * hidden, weights=ffn * hidden * f32, inputs=[gelu])
        x = op(p + "add2", tokens * hidden, inputs=[add1, down])
    lnf = op("ln_f", 5 * tokens * hidden, weights=2 * hidden * f32, inputs=[x])
    logits = op("logits", 2 * tokens * hidden * vocab, weights=vocab * hidden * f32,
                out=tokens * vocab * f32 // 8, inputs=[lnf])
    op("loss", tokens * vocab, out=f32, inputs=[logits])
    total = sum(n["temp_bytes"] + n["persistent_bytes"] + n["output_bytes"][0] for n in nodes)
    mem = int(total / devices / 0.8)
    mem -= mem % (1 << 20)
    return {"ops": nodes, "edges": edges,
            "devices": [{"name": "gpu%d" % d, "memory_bytes": mem, "speed": 1.0} for d in range(devices)],
            "comm": {"latency_us": 20, "bytes_per_us": 12000}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["layered", "transformer"])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--width", type=int, default=40)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--job", action="store_true", help="wrap in a placement job file")
    ap.add_argument("--name", default=None, help="job name (with --job)")
    a = ap.parse_args()
    if a.kind == "layered":
        g = layered(a.ops, a.width, a.devices, a.seed)
    else:
        g = transformer(a.blocks, a.devices)
    if a.job:
        name = a.name or ("%s-%d-ops" % (a.kind, len(g["ops"])))
        head = '{"type": "placement", "name": %s,\n "spec": {"algorithms": ["m-topo"],\n  "graph": ' % json.dumps(name)
        sys.stdout.write(head + readable(g, "  ") + "}}\n")
    elif len(g["ops"]) > 100:
        json.dump(g, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        sys.stdout.write(readable(g, "") + "\n")


def readable(g, pad):
    """The graph with one op, edge or device per line."""
    parts = []
    for key in ("ops", "edges", "devices"):
        rows = (",\n" + pad + "   ").join(json.dumps(x) for x in g[key])
        parts.append('%s "%s": [\n%s   %s]' % (pad, key, pad, rows))
    parts.append('%s "comm": %s' % (pad, json.dumps(g["comm"])))
    return "{\n" + ",\n".join(parts) + "\n" + pad + "}"


if __name__ == "__main__":
    main()
