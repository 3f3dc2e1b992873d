#!/usr/bin/env python3
"""Placement benchmark: m-TOPO, m-ETF and m-SCT on generated graphs.

For each graph kind (tests/data/gen_graph.py: layered, transformer,
inception, gnmt), size and device count, runs `gantry-place --algo all` and
reports per algorithm the placement time (the algorithm's own time, median
of --repeat runs), the simulated makespan and makespan / lower bound, where
the lower bound is max(critical path at the fastest speed, total work /
total speed).  Prints a markdown table.

  meson setup /tmp/gantry-release -Dbuildtype=release && ninja -C /tmp/gantry-release gantry-place
  tests/bench/bench_place.py --binary /tmp/gantry-release/gantry-place
  tests/bench/bench_place.py --sizes 1000,10000 --devices 4 --kinds layered --repeat 5

Standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEN = os.path.join(ROOT, "tests", "data", "gen_graph.py")
ALGOS = ["m-topo", "m-etf", "m-sct"]


def generate(kind, ops, devices, path):
    args = [sys.executable, GEN, kind, "--ops", str(ops), "--devices", str(devices)]
    if kind == "layered":  # Baechi-like widths: about sqrt(ops) per layer
        args += ["--width", str(max(20, int(ops ** 0.5)))]
    with open(path, "w") as f:
        subprocess.run(args, stdout=f, check=True)
    with open(path) as f:
        return len(json.load(f)["ops"])


def place(binary, path, extra):
    t0 = time.monotonic()
    out = subprocess.run([binary, path, "--algo", ",".join(ALGOS)] + extra, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout), wall


def bench_one(binary, kind, ops, devices, repeat, extra, tmp):
    path = os.path.join(tmp, "%s_%d_%d.json" % (kind, ops, devices))
    n = generate(kind, ops, devices, path)
    runs, walls = [], []
    for _ in range(repeat):
        r, wall = place(binary, path, extra)
        runs.append(r)
        walls.append(wall)
    rows = []
    for algo in ALGOS:
        cands = [next(c for c in r["candidates"] if c["algorithm"] == algo) for r in runs]
        c = cands[0]
        rows.append({
            "kind": kind, "ops": n, "devices": devices, "algorithm": algo, "feasible": c["feasible"],
            "placement_ms": statistics.median(x["placement_ms"] for x in cands),
            "makespan_ms": c.get("makespan_us", float("nan")) / 1000.0,
            "ratio": c.get("makespan_over_lower_bound", float("nan")),
            "note": "note" in c, "reason": c.get("reason", ""),
        })
    meta = {"lower_bound_ms": runs[0]["lower_bound_us"] / 1000.0, "best": runs[0]["best"],
            "wall_s": statistics.median(walls)}
    return rows, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "gantry-place"))
    ap.add_argument("--kinds", default="layered,transformer,inception,gnmt")
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--devices", default="4,8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fuse", action="store_true")
    ap.add_argument("--coplace", action="store_true")
    a = ap.parse_args()
    extra = (["--fuse"] if a.fuse else []) + (["--coplace"] if a.coplace else [])
    print("| graph | ops | devices | lower bound (ms) | m-TOPO: place ms / makespan ms / x bound"
          " | m-ETF | m-SCT | best | gantry-place wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in a.kinds.split(","):
            for ops in map(int, a.sizes.split(",")):
                for devices in map(int, a.devices.split(",")):
                    try:
                        rows, meta = bench_one(a.binary, kind, ops, devices, a.repeat, extra, tmp)
                    except RuntimeError as e:
                        print("| %s | %d | %d | failed: %s |" % (kind, ops, devices, e))
                        continue
                    cells = []
                    for r in rows:
                        if not r["feasible"]:
                            cells.append("infeasible")
                            continue
                        cells.append("%.1f / %.1f / %.2f%s" % (r["placement_ms"], r["makespan_ms"], r["ratio"],
                                                               "*" if r["note"] else ""))
                    print("| %s | %d | %d | %.1f | %s | %s | %s | %s | %.2f |" % (
                        kind, rows[0]["ops"], devices, meta["lower_bound_ms"], cells[0], cells[1], cells[2],
                        meta["best"], meta["wall_s"]))
                    sys.stdout.flush()
    print()
    print("place ms: the algorithm's own time (median of %d runs); makespan: simulated step time; "
          "x bound: makespan / lower bound; * the plan carries a note (greedy pass stuck, retried)." % a.repeat)


if __name__ == "__main__":
    main()
