#!/usr/bin/env python3
"""Writes het_cluster.json: the setting of AMP's heterogeneous-cluster case
study (Li et al., NeurIPS'22, section 5) as a strategy search input for
gantry-place --strategy (docs/placement.md, "Strategy search (AMP)").

Model: GPT-2 with 24 layers, hidden 1024, sequence 1024, vocabulary 52256,
16 heads, global batch 32, fp16 with Adam, as AMP's het_cluster run.  Its 30
"layers" are AMP's: embed2h, noop, 24 transformer layers, noop, noop, embed2v,
noop.  forward_ms is AMP's published V100 profile at micro-batch 1 (its
known_cost/gpt2_P3_1); the T4's speed is the ratio of AMP's mean transformer
layer times on V100 and T4 (gpt2_P3_1 / gpt2_G4_1).

Cluster: 4 nodes x 4 GPUs.  Nodes 0-2 are AWS p3.8xlarge (4 V100 16 GB,
170 Gbit/s inside, 10 Gbit/s network), node 3 is a g4dn.12xlarge (4 T4
16 GB, 50 Gbit/s inside and network); a link between two nodes runs at the
slower of their networks, as AMP's cost model takes it.

Memory: 16 bytes per parameter (fp16 weights and gradients, fp32 master
weights and Adam's moments); what one sample keeps for the backward pass of a
transformer layer without recomputation is s*h*(34 + 5*a*s/h) bytes
(Korthikanti et al., 2022); embed2v keeps its fp16 logits and fp32 softmax.

Run: python3 tests/data/amp/make_het_cluster.py > tests/data/amp/het_cluster.json
"""
import json

H, S, V, HEADS, N = 1024, 1024, 52256, 16, 24
GIB = 1 << 30

# AMP's V100 forward times (ms, micro-batch 1): embed2h, noop, 24 layers, noop, noop, embed2v, noop
V100_MS = [0.366, 0.175, 4.278, 3.979, 3.875, 3.941, 3.929, 3.898, 3.941, 3.868, 3.907, 3.924, 3.983, 3.894, 3.883, 3.92,
           3.879, 3.864, 3.864, 3.93, 3.857, 3.933, 3.865, 3.88, 3.889, 3.879, 0.077, 0.107, 2.458, 0.868]
# AMP's T4 times of the 24 transformer layers
T4_LAYER_MS = [4.904, 4.896, 4.925, 4.93, 4.903, 4.904, 5.294, 5.284, 5.293, 5.405, 5.698, 5.699, 5.712, 5.759, 5.815, 5.781,
               5.81, 5.791, 5.828, 5.797, 5.719, 5.727, 5.693, 5.71]


def layers():
    act = S * H * 2  # fp16 hidden states of one sample
    out = [{"name": "embed2h", "params": V * H + S * H, "activation_bytes": act, "stash_bytes": 2 * act}]
    out.append({"name": "noop0", "params": 0, "activation_bytes": act})
    for i in range(N):
        out.append({"name": f"layer{i}", "params": 12 * H * H + 13 * H, "activation_bytes": act,
                    "stash_bytes": S * H * (34 + 5 * HEADS * S // H)})
    out.append({"name": "noop1", "params": 0, "activation_bytes": act})
    out.append({"name": "noop2", "params": 2 * H, "activation_bytes": act, "stash_bytes": 2 * act})  # final layer norm
    out.append({"name": "embed2v", "params": V * H, "activation_bytes": S * V * 2, "stash_bytes": S * V * (2 + 4)})
    out.append({"name": "noop3", "params": 0, "activation_bytes": 4})  # the loss
    for layer, ms in zip(out, V100_MS):
        layer["forward_ms"] = ms
    return out


def cluster():
    t4 = round(sum(V100_MS[2:26]) / sum(T4_LAYER_MS), 3)
    intra, network = [170, 170, 170, 50], [10, 10, 10, 50]
    bw = [[intra[a] if a == b else min(network[a], network[b]) for b in range(4)] for a in range(4)]
    return {"nodes": 4, "gpus_per_node": 4, "bandwidth_gbps": bw, "gpu_speed": [1.0] * 12 + [t4] * 4,
            "gpu_memory_bytes": 16 * GIB}


if __name__ == "__main__":
    print(json.dumps({"layers": layers(), "cluster": cluster(), "global_batch": 32, "top_k": 100, "bytes_per_param": 2,
                      "state_bytes_per_param": 16}, indent=1))
