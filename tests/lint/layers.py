#!/usr/bin/env python3
"""layers.py - the layering check of `tests/run lint`: the folders are layers, and this fails when a
source file includes across a forbidden boundary, when two modules include each other through any
path (a cycle), or when a source file does not open with a comment saying what it owns.

The layers (README "Source layout" describes them; docs/adding-a-job-type.md the spec modules):

    common/           pure helpers                    may include: common
    spec/             jansson-only job specs          may include: common, spec
    wire/             what crosses Redis              may include: common, wire
    workers/<lib>/    algorithm libraries (pure)      may include: common, spec, and the libraries
                                                      LIBS[lib] names (no cycle among them)
    scheduler/autoscale/  the autoscaling policy (pure)   may include: common, spec
    server/           the HTTP server                 may include: common, spec, wire, UPLOAD_LIBS
    scheduler/        the scheduler daemon            may include: common, spec, wire, scheduler/autoscale
    workers/*.c       the worker daemon's executors   may include: anything but server/ and scheduler/
    cli/              the user's command-line client  may include: common

A module is a .c file with the .h of the same name in the same folder; its includes are the union
of both files'.  Tests, benchmarks and fuzz targets are not checked (they may reach anything).

    tests/lint/layers.py          check the tree; prints each finding, exit status 1 when any
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SOURCES = (".c", ".h", ".cpp", ".cu")
CHECKED = ("common", "spec", "wire", "server", "scheduler", "workers", "cli")

# the algorithm libraries under workers/ and the others each may include (a DAG: the check below
# also finds a cycle among folders)
LIBS = {
    "comm": [],
    "place": [],
    "train": [],
    "serve": ["train"],
    "fed": ["train"],
    "program": [],
}
# the worker libraries the server may link: the upload route's bound on TorchScript code
UPLOAD_LIBS = ["workers/serve/tscode.h"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer(path):
    """the layer a repository path belongs to"""
    parts = path.split("/")
    if parts[0] == "workers":
        return "workers/" + parts[1] if len(parts) > 2 else "workers"
    if parts[0] == "scheduler" and len(parts) > 2:
        return "scheduler/" + parts[1]
    return parts[0]


def allowed(src, dst):
    """whether a file of layer src may include the repository header dst"""
    to = layer(dst)
    if to == src or to in ("common",):
        return True
    if src == "common":
        return False
    if src in ("spec", "wire"):
        return False
    if src.startswith("workers/"):
        lib = src.split("/")[1]
        return to == "spec" or (to.startswith("workers/") and to.split("/")[1] in LIBS.get(lib, []))
    if src == "scheduler/autoscale":
        return to == "spec"
    if src == "server":
        return to in ("spec", "wire") or dst in UPLOAD_LIBS
    if src == "scheduler":
        return to in ("spec", "wire", "scheduler/autoscale")
    if src == "workers":
        return to not in ("server", "scheduler", "cli") and not to.startswith("scheduler/")
    if src == "cli":
        return False
    return True


def sources():
    for top in CHECKED:
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if not x.startswith(".")]
            for f in files:
                if f.endswith(SOURCES):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def main():
    findings = []
    files = sorted(sources())
    includes = {}
    for f in files:
        text = open(os.path.join(ROOT, f), encoding="utf-8", errors="replace").read()
        if not re.match(r"\s*(/\*|//)", text):
            findings.append(f"{f}:1: opens without a comment saying what it owns")
        includes[f] = []
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            if "/" not in inc:
                continue  # a generated or same-folder header written without its folder
            if not os.path.exists(os.path.join(ROOT, inc)):
                continue  # generated (wire/lua_scripts.h) or not ours
            includes[f].append(inc)
            if not allowed(layer(f), inc):
                findings.append(f"{f}:{line}: {layer(f)}/ may not include {inc} (layer {layer(inc)}/)")

    # modules: a .c and its .h in one node; an edge per include
    def module(path):
        return os.path.splitext(path)[0]

    graph = {}
    for f, incs in includes.items():
        node = graph.setdefault(module(f), set())
        for inc in incs:
            if module(inc) != module(f):
                node.add(module(inc))
    for n in list(graph.values()):
        for m in n:
            graph.setdefault(m, set())
    for scc in strongly_connected(graph):
        if len(scc) > 1:
            findings.append("include cycle between modules: " + " <-> ".join(sorted(scc)))

    # folders: a cycle among layers
    lgraph = {}
    for f, incs in includes.items():
        for inc in incs:
            if layer(inc) != layer(f):
                lgraph.setdefault(layer(f), set()).add(layer(inc))
                lgraph.setdefault(layer(inc), set())
    for scc in strongly_connected(lgraph):
        if len(scc) > 1:
            findings.append("include cycle between folders: " + " <-> ".join(sorted(scc)))

    for f in findings:
        print(f)
    print(f"layers: {len(findings)} findings ({len(files)} sources checked)")
    return 1 if findings else 0


def strongly_connected(graph):
    """Tarjan's algorithm, iterative: the strongly connected components of graph (node -> set)"""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(comp)
    return out


if __name__ == "__main__":
    sys.exit(main())
