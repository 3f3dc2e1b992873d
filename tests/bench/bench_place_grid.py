#!/usr/bin/env python3
"""Placement under memory pressure: the default search over a grid of graphs,
device counts and memory sizes (docs/placement.md "Memory-pressure grid").

For each graph kind (tests/data/gen_graph.py: layered, inception,
transformer), size and device count, the device memory goes from 1.1x
(single-device peak / devices) up to the single-device peak in --levels
geometric steps.  The single-device peak is the peak of the plan that runs
every op on one device (gantry-place --algo single on one huge device).  At
every point it runs

  gantry-place G --algo all --devices D --memory M          (the default search)
  gantry-place G --algo all ... --plain | --coplace | --fuse | --fuse --coplace
                                                            (each variant forced)

and once more without --algo (the spec's default algorithms: m-TOPO and
single over every variant), and reports, per (kind, ops, devices) over the memory levels: the default
plan's median and worst makespan / lower bound, the best ratio any algorithm
reached with any forced variant, how many points the default misses the
target (over 1.5x where some forced run is within 1.5x), the stuck count
(m-ETF/m-SCT runs that end with no plan of their own on a variant where
m-TOPO found one),
the recovered count (their greedy pass got stuck and their own rules, the
memory reserve and pinning, finished it), the fallback count (plans that
are another algorithm's), points with no
feasible plan at all, and the whole default search's time (metrics.search_ms:
views, every algorithm on every variant, every replay).

  meson setup build-release -Dbuildtype=release && ninja -C build-release gantry-place
  tests/bench/bench_place_grid.py --binary build-release/gantry-place
  tests/bench/bench_place_grid.py --kinds layered --sizes 1000 --devices 4 --levels 3 --json grid.json

Standard library only.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEN = os.path.join(ROOT, "tests", "data", "gen_graph.py")
FORCED = {"plain": ["--plain"], "coplace": ["--coplace"], "fuse": ["--fuse"], "coplace+fuse": ["--fuse", "--coplace"]}
TARGET = 1.5
# A plan that is not the algorithm's own: the solver's fallback field, or a note saying another algorithm's plan was used.
FALLBACK = re.compile(r"fell back|fallback|m-TOPO's (plan|placement)", re.I)
STUCK = re.compile(r"stuck", re.I)
LIST_SCHEDULERS = ("m-etf", "m-sct")


def generate(kind, ops, path):
    args = [sys.executable, GEN, kind, "--ops", str(ops), "--devices", "1"]
    if kind == "layered":  # Baechi-like widths: about sqrt(ops) per layer (as bench_place.py)
        args += ["--width", str(max(20, int(ops ** 0.5)))]
    with open(path, "w") as f:
        subprocess.run(args, stdout=f, check=True)
    with open(path) as f:
        return len(json.load(f)["ops"])


def place(binary, path, args):
    out = subprocess.run([binary, path] + args, capture_output=True, text=True)
    if out.returncode == 1 and "no feasible placement" in out.stderr:
        return None
    if out.returncode != 0:
        raise RuntimeError("gantry-place %s: %s" % (" ".join(args), out.stderr.strip()))
    return json.loads(out.stdout)


def single_peak(binary, path):
    r = place(binary, path, ["--algo", "single", "--plain", "--devices", "1", "--memory", str(2 ** 40)])
    return r["plan"]["devices"][0]["peak_bytes"]


def runs_of(result):
    """Every (algorithm, variant) run of a result: the candidates' variant lines, or the candidate itself."""
    for c in result["candidates"]:
        for v in c.get("variants", [c]):
            yield c["algorithm"], v


def counts(result):
    """(stuck, recovered, fallback) over a result's runs: m-ETF/m-SCT runs with no plan of their own on
    a variant where m-TOPO, the simple rule, found one; runs whose greedy pass got stuck and that
    their own rules (reserve, pins) finished; plans that are another algorithm's."""
    stuck = recovered = fallback = 0
    topo = {v["variant"] for algo, v in runs_of(result) if algo == "m-topo" and v["feasible"]}
    for algo, v in runs_of(result):
        note = v.get("note", "")
        stuck += algo in LIST_SCHEDULERS and not v["feasible"] and v["variant"] in topo
        recovered += v["feasible"] and bool(STUCK.search(note))
        fallback += bool(v.get("fallback")) or bool(FALLBACK.search(note))
    return stuck, recovered, fallback


def best_ratio(result):
    return min(v["makespan_over_lower_bound"] for _, v in runs_of(result) if v["feasible"])


def point(binary, path, devices, memory, forced):
    base = ["--algo", "all", "--devices", str(devices), "--memory", str(memory)]
    r = place(binary, path, base)
    p = {"devices": devices, "memory": memory, "feasible": r is not None}
    if r is None:
        return p
    m = r["metrics"]
    p.update(ratio=m["makespan_us"] / r["lower_bound_us"], best=r["best"], variant=r["variant"],
             search_ms=m["search_ms"], any=best_ratio(r))
    p["stuck"], p["recovered"], p["fallback"] = counts(r)
    d = place(binary, path, base[2:])  # the spec's default algorithms (m-topo, with single)
    p["topo_search_ms"] = d["metrics"]["search_ms"] if d else None
    if forced:
        for name, flags in FORCED.items():
            f = place(binary, path, base + flags)
            if f is not None:
                p["any"] = min(p["any"], best_ratio(f))
                for key, n in zip(("stuck", "recovered", "fallback"), counts(f)):
                    p[key] += n
    return p


def levels(devices, n):
    lo = 1.1 / devices
    if n == 1 or lo >= 1:
        return [min(lo, 1.0)]
    return [lo * (1 / lo) ** (i / (n - 1)) for i in range(n)]


def by_level(points, kinds, n):
    """Second table: the default's median / worst ratio per memory level (1 = 1.1x peak/devices, n = the peak)."""
    print("| memory level | " + " | ".join("%s: median / worst x bound (no plan)" % k for k in kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    for i in range(n):
        cells = []
        for k in kinds:
            at = [p for p in points if p["kind"] == k and p["step"] == i]
            ok = [p["ratio"] for p in at if p["feasible"]]
            cells.append("%.2f / %.2f (%d)" % (statistics.median(ok), max(ok), len(at) - len(ok)) if ok else
                         "no plan (%d)" % len(at))
        label = "1.1x peak/D" if i == 0 else "peak" if i == n - 1 else "step %d" % i
        print("| %s | %s |" % (label, " | ".join(cells)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "gantry-place"))
    ap.add_argument("--kinds", default="layered,inception,transformer")
    ap.add_argument("--sizes", default="1000,3000,10000")
    ap.add_argument("--devices", default="2,4,8")
    ap.add_argument("--levels", type=int, default=4, help="memory sizes per device count (geometric, 1.1x peak/D .. peak)")
    ap.add_argument("--no-forced", action="store_true", help="skip the forced-variant runs (the 'any' column then "
                    "comes from the default search's own variant lines)")
    ap.add_argument("--json", help="also write every point here")
    a = ap.parse_args()
    points = []
    print("| graph | ops | devices | points | default: median / worst x bound | best any variant at the worst "
          "| misses (>%.1fx, some run <=%.1fx) | stuck | recovered | fallback | no plan | search ms: median / max "
          "| default algorithms: search ms max |" % (TARGET, TARGET))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in a.kinds.split(","):
            for ops in map(int, a.sizes.split(",")):
                path = os.path.join(tmp, "%s_%d.json" % (kind, ops))
                n = generate(kind, ops, path)
                peak = single_peak(a.binary, path)
                for devices in map(int, a.devices.split(",")):
                    row = []
                    for i, f in enumerate(levels(devices, a.levels)):
                        p = point(a.binary, path, devices, int(peak * f), not a.no_forced)
                        p.update(kind=kind, ops=n, peak=peak, level=f * devices, step=i)
                        row.append(p)
                        points.append(p)
                    ok = [p for p in row if p["feasible"]]
                    if not ok:
                        print("| %s | %d | %d | %d | no plan | | | | | | %d | | |" % (kind, n, devices, len(row), len(row)))
                        continue
                    worst = max(ok, key=lambda p: p["ratio"])
                    misses = sum(p["ratio"] > TARGET and p["any"] <= TARGET for p in ok)
                    ms = [p["search_ms"] for p in ok]
                    topo_ms = [p["topo_search_ms"] for p in ok if p["topo_search_ms"] is not None]
                    print("| %s | %d | %d | %d | %.2f / %.2f | %.2f | %d | %d | %d | %d | %d | %.1f / %.1f | %s |" % (
                        kind, n, devices, len(row), statistics.median(p["ratio"] for p in ok), worst["ratio"],
                        worst["any"], misses, sum(p["stuck"] for p in ok), sum(p["recovered"] for p in ok),
                        sum(p["fallback"] for p in ok),
                        len(row) - len(ok), statistics.median(ms), max(ms),
                        "%.1f" % max(topo_ms) if topo_ms else "-"))
                    sys.stdout.flush()
    ok = [p for p in points if p["feasible"]]
    print()
    by_level(points, a.kinds.split(","), a.levels)
    print()
    if ok:
        print("All %d points: default median %.2fx, worst %.2fx; %d misses; stuck %d; recovered %d; fallback %d; no plan %d; "
              "search ms at the largest size: median %.1f, max %.1f." % (
                  len(points), statistics.median(p["ratio"] for p in ok), max(p["ratio"] for p in ok),
                  sum(p["ratio"] > TARGET and p["any"] <= TARGET for p in ok), sum(p["stuck"] for p in ok),
                  sum(p["recovered"] for p in ok),
                  sum(p["fallback"] for p in ok), len(points) - len(ok),
                  statistics.median(p["search_ms"] for p in ok if p["ops"] == max(q["ops"] for q in ok)),
                  max(p["search_ms"] for p in ok if p["ops"] == max(q["ops"] for q in ok))))
    print("Memory per device from 1.1x (single-device peak / devices) to the peak in %d geometric steps; "
          "x bound: makespan / lower bound (max(critical path, total work / devices)); stuck, recovered and "
          "fallback count (algorithm, variant) runs of the default search%s: stuck = m-ETF/m-SCT found no plan of "
          "their own where m-TOPO found one on that variant, recovered = their greedy pass got stuck and their own rules finished it, fallback = a plan "
          "that is another algorithm's; search ms: metrics.search_ms of --algo all, "
          "and of the spec's default algorithms (m-topo, single) in the last column." % (
              a.levels, "" if a.no_forced else " and of the four forced variants"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(points, f, indent=1)


if __name__ == "__main__":
    main()
