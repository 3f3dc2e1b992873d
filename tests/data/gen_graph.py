#!/usr/bin/env python3
"""Generate operator graphs in gantry's graph format (docs/graph.schema.json).

  gen_graph.py layered --ops 1000 --width 40 --devices 4 --seed 1 > g.json
  gen_graph.py transformer --blocks 4 --devices 3 [--job] > g.json
  gen_graph.py transformer --ops 10000 --devices 8 > g.json
  gen_graph.py inception --ops 10000 --devices 4 > g.json
  gen_graph.py gnmt --ops 2500 --devices 4 > g.json

layered:     a random layered DAG like the ones Baechi is benchmarked on: each
             op reads 1-3 ops of the previous layer (sometimes one further
             back), with random compute times (10-500 us) and memory.  Device
             memory is chosen so the graph needs about 60% of all devices'
             memory.
transformer: a decoder-only model (forward pass) with per-block colocation
             groups for attention; sizes from real shapes (float32), compute
             from FLOPs at 10 TFLOP/s.  --ops picks the number of blocks
             (10 ops each, plus 4).  Device memory is chosen so the model
             does not fit one device.
inception:   Inception-v3-like modules: four parallel branches (1x1; 1x1 ->
             3x3; 1x1 -> 3x3 -> 3x3; pool -> 1x1) joined by a concat, with
             a reduction every few modules.  Wide and shallow.
gnmt:        a GNMT-like encoder-decoder unrolled over time: stacked LSTM
             cells (matmul, gates, state) whose weights are shared across
             time steps (one colocation group per layer), residual
             connections, attention at every decoder step, a softmax
             projection per step.  Many small ops on long chains.
--job wraps the graph in a placement job file.  Standard library only.
"""
import argparse
import json
import random
import sys

F32 = 4
TFLOPS = 10e12 / 1e6  # FLOP per microsecond at 10 TFLOP/s


class Builder:
    """Accumulates ops and edges; edges carry the producer's output size."""

    def __init__(self):
        self.nodes, self.edges, self.out = [], [], {}

    def op(self, name, flops, weights=0, out=0, temp=0, group=None, inputs=(), compute_us=None):
        us = compute_us if compute_us is not None else round(max(flops / TFLOPS, 0.1), 1)
        n = {"name": name, "compute_us": us, "temp_bytes": int(temp),
             "persistent_bytes": int(weights), "output_bytes": [int(out)]}
        if group:
            n["group"] = group
        self.nodes.append(n)
        self.out[name] = int(out)
        for src in inputs:
            self.edges.append({"src": src, "dst": name, "bytes": self.out[src]})
        return name

    def graph(self, devices, mem, comm):
        return {"ops": self.nodes, "edges": self.edges,
                "devices": [{"name": "gpu%d" % d, "memory_bytes": int(mem), "speed": 1.0} for d in range(devices)],
                "comm": comm}

    def total_memory(self):
        return sum(n["temp_bytes"] + n["persistent_bytes"] + n["output_bytes"][0] for n in self.nodes)


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
    tokens, hidden, ffn, vocab = 2048, 1024, 4096, 32000
    act = tokens * hidden * F32
    b = Builder()
    x = b.op("embed", tokens * hidden, weights=vocab * hidden * F32, out=act)
    for i in range(blocks):
        p = "block%d." % i
        ln1 = b.op(p + "ln1", 5 * tokens * hidden, weights=2 * hidden * F32, out=act, inputs=[x])
        qkv = b.op(p + "qkv", 2 * tokens * hidden * 3 * hidden, weights=3 * hidden * hidden * F32,
                   out=3 * act, group=p + "attn", inputs=[ln1])
        att = b.op(p + "attention", 4 * tokens * tokens * hidden, out=act, temp=16 * tokens * tokens * F32,
                   group=p + "attn", inputs=[qkv])
        proj = b.op(p + "proj", 2 * tokens * hidden * hidden, weights=hidden * hidden * F32, out=act, inputs=[att])
        add1 = b.op(p + "add1", tokens * hidden, out=act, inputs=[x, proj])
        ln2 = b.op(p + "ln2", 5 * tokens * hidden, weights=2 * hidden * F32, out=act, inputs=[add1])
        up = b.op(p + "ffn_up", 2 * tokens * hidden * ffn, weights=hidden * ffn * F32, out=tokens * ffn * F32, inputs=[ln2])
        gelu = b.op(p + "gelu", 8 * tokens * ffn, out=tokens * ffn * F32, inputs=[up])
        down = b.op(p + "ffn_down", 2 * tokens * ffn * hidden, weights=ffn * hidden * F32, out=act, inputs=[gelu])
        x = b.op(p + "add2", tokens * hidden, out=act, inputs=[add1, down])
    lnf = b.op("ln_f", 5 * tokens * hidden, weights=2 * hidden * F32, out=act, inputs=[x])
    logits = b.op("logits", 2 * tokens * hidden * vocab, weights=vocab * hidden * F32,
                  out=tokens * vocab * F32 // 8, inputs=[lnf])
    b.op("loss", tokens * vocab, out=F32, inputs=[logits])
    mem = int(b.total_memory() / devices / 0.8)
    mem -= mem % (1 << 20)
    return b.graph(devices, mem, {"latency_us": 20, "bytes_per_us": 12000})


def inception(ops, devices):
    """Modules of 4 branches (10 ops each with the concat); every 4th
    module halves the spatial size and doubles the channels."""
    batch, hw, ch = 32, 35, 256
    b = Builder()

    def conv(name, cin, cout, k, hw, inputs, group=None):
        flops = 2 * batch * hw * hw * cin * cout * k * k
        return b.op(name, flops, weights=cin * cout * k * k * F32, out=batch * hw * hw * cout * F32,
                    temp=batch * hw * hw * cin * k * k * F32 // 8, inputs=inputs, group=group)

    x = conv("stem", 3, ch, 3, hw, [])
    m = 0
    while len(b.nodes) + 10 <= ops:
        p = "mixed%d." % m
        c4 = ch // 4
        b1 = conv(p + "b1_1x1", ch, c4, 1, hw, [x])
        b2 = conv(p + "b2_3x3", c4, c4, 3, hw, [conv(p + "b2_1x1", ch, c4, 1, hw, [x])])
        b3a = conv(p + "b3_1x1", ch, c4, 1, hw, [x])
        b3 = conv(p + "b3_3x3b", c4, c4, 3, hw, [conv(p + "b3_3x3a", c4, c4, 3, hw, [b3a])])
        pool = b.op(p + "b4_pool", 9 * batch * hw * hw * ch, out=batch * hw * hw * ch * F32, inputs=[x])
        b4 = conv(p + "b4_1x1", ch, c4, 1, hw, [pool])
        x = b.op(p + "concat", batch * hw * hw * ch, out=batch * hw * hw * ch * F32, inputs=[b1, b2, b3, b4])
        m += 1
        if m % 4 == 0 and hw > 4:
            hw, ch = (hw + 1) // 2, min(ch * 2, 2048)
            x = conv(p + "reduce", ch // 2 if ch < 2048 else ch, ch, 3, hw, [x])
    while len(b.nodes) < ops:
        x = b.op("head%d" % len(b.nodes), batch * ch, out=batch * ch * F32, inputs=[x])
    mem = int(b.total_memory() / devices / 0.6)
    return b.graph(devices, mem, {"latency_us": 134, "bytes_per_us": 5701})


def gnmt(ops, devices, layers=4, hidden=1024, batch=128, vocab=32000):
    """Encoder and decoder of `layers` LSTM layers, T steps each; 5 ops per
    cell.  T is chosen to reach about `ops` ops."""
    per_step = layers * 5 * 2 + 4  # cells of encoder and decoder, plus embeddings, attention, projection
    steps = max(2, ops // per_step)
    state = batch * hidden * F32
    cell_flops = 2 * batch * (2 * hidden) * (4 * hidden)
    b = Builder()

    def cell(p, group, x, h_prev, first):
        w = 2 * hidden * 4 * hidden * F32 if first else 0  # weights shared over time, stored once
        ins = [x] + ([h_prev] if h_prev else [])
        mm = b.op(p + "matmul", cell_flops, weights=w, out=4 * state, group=group, inputs=ins)
        gates = b.op(p + "gates", 8 * batch * 4 * hidden, out=4 * state, group=group, inputs=[mm])
        c = b.op(p + "cell", 6 * batch * hidden, out=state, group=group, inputs=[gates])
        h = b.op(p + "hidden", 4 * batch * hidden, out=state, group=group, inputs=[c, gates])
        return b.op(p + "out", 2 * batch * hidden, out=state, group=group, inputs=[h, x] if not first else [h])

    enc_top = []
    prev = [None] * layers
    for t in range(steps):
        x = b.op("enc_embed%d" % t, batch * hidden, weights=vocab * hidden * F32 if t == 0 else 0, out=state,
                 group="enc_embed")
        for l in range(layers):
            x = cell("enc%d.t%d." % (l, t), "enc%d" % l, x, prev[l], t == 0)
            prev[l] = x
        enc_top.append(x)
    memory = b.op("enc_memory", batch * hidden * steps, out=state * steps, inputs=enc_top)
    prev = [None] * layers
    for t in range(steps):
        x = b.op("dec_embed%d" % t, batch * hidden, weights=vocab * hidden * F32 if t == 0 else 0, out=state,
                 group="dec_embed")
        for l in range(layers):
            if l == 1:
                x = b.op("attention%d" % t, 4 * batch * hidden * steps, weights=hidden * hidden * F32 if t == 0 else 0,
                         out=state, temp=batch * steps * F32, group="attention", inputs=[x, memory])
            x = cell("dec%d.t%d." % (l, t), "dec%d" % l, x, prev[l], t == 0)
            prev[l] = x
        b.op("softmax%d" % t, 2 * batch * hidden * vocab // 8, weights=hidden * vocab * F32 if t == 0 else 0,
             out=batch * vocab * F32 // 16, group="softmax", inputs=[x])
    mem = max(int(b.total_memory() / devices / 0.6), 8 << 30)
    return b.graph(devices, mem, {"latency_us": 134, "bytes_per_us": 5701})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["layered", "transformer", "inception", "gnmt"])
    ap.add_argument("--ops", type=int, default=None, help="about this many ops (default 1000; transformer: --blocks)")
    ap.add_argument("--width", type=int, default=40)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--memory", type=int, default=None, help="bytes per device (default: sized for the kind, see above)")
    ap.add_argument("--job", action="store_true", help="wrap in a placement job file")
    ap.add_argument("--name", default=None, help="job name (with --job)")
    a = ap.parse_args()
    ops = a.ops or 1000
    if a.kind == "layered":
        g = layered(ops, a.width, a.devices, a.seed)
    elif a.kind == "transformer":
        g = transformer(max(1, (a.ops - 4) // 10) if a.ops else a.blocks, a.devices)
    elif a.kind == "inception":
        g = inception(ops, a.devices)
    else:
        g = gnmt(ops, a.devices)
    if a.memory:
        for d in g["devices"]:
            d["memory_bytes"] = a.memory
    if a.job:
        name = a.name or ("%s-%d-ops" % (a.kind, len(g["ops"])))
        head = ('{"type": "placement", "name": %s,\n "spec": {"algorithms": ["m-topo", "m-etf", "m-sct"], "coplace": true, '
                '"fuse": true,\n  "graph": ' % json.dumps(name))
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
