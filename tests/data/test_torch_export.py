#!/usr/bin/env python3
"""tools/torch_export.py on a small model: ops, shapes, weights counted once,
shared weights in one colocation group, FLOP estimates, and a graph that
gantry-place accepts.  Skipped where torch is not installed.

  python3 -m unittest discover -s tests/data -p 'test_*.py' -v
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

try:
    import torch
    import torch.nn as nn
except ImportError:
    torch = None


def tiny_model():
    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.fc = nn.Linear(8 * 4 * 4, 16)
            self.scale = nn.Parameter(torch.ones(16, 16))

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            y = y + self.conv(x)  # the conv's weights are read twice
            h = self.fc(y.flatten(1))
            return torch.matmul(h, self.scale)

    return Tiny()


@unittest.skipIf(torch is None, "torch is not installed")
class TorchExport(unittest.TestCase):
    def setUp(self):
        import torch_export
        self.graph = torch_export.export(tiny_model(), (torch.zeros(2, 3, 4, 4),), devices=2, memory=1e9, tflops=1.0)
        self.ops = {o["name"]: o for o in self.graph["ops"]}

    def test_ops_and_shapes(self):
        self.assertIn("x", self.ops)
        self.assertEqual(self.ops["x"]["output_bytes"], [2 * 3 * 4 * 4 * 4])
        fc = self.ops["fc"]
        self.assertEqual(fc["output_bytes"], [2 * 16 * 4])
        # 2 FLOPs per multiply-add: 2 * (2 x 16 outputs) * 128 inputs at 1 TFLOP/s = 1e6 FLOP/us
        self.assertAlmostEqual(fc["compute_us"], 2 * 32 * 128 / 1e6, places=3)
        self.assertEqual(len(self.graph["devices"]), 2)

    def test_weights_counted_once_and_grouped(self):
        convs = [o for o in self.graph["ops"] if o["name"].startswith("conv")]
        self.assertEqual(len(convs), 2)
        weights = (8 * 3 * 3 * 3 + 8) * 4
        self.assertEqual(sorted(o["persistent_bytes"] for o in convs), [0, weights])
        self.assertEqual(convs[0].get("group"), convs[1].get("group"))
        self.assertTrue(convs[0]["group"].startswith("shared:"))
        scale = [o for o in self.graph["ops"] if o["name"] == "scale"][0]
        matmul = [o for o in self.graph["ops"] if o["name"].startswith("matmul")][0]
        self.assertEqual(scale["persistent_bytes"], 16 * 16 * 4)
        self.assertEqual(scale["output_bytes"], [])
        self.assertEqual(scale["group"], matmul["group"])

    def test_edges(self):
        pairs = {(e["src"], e["dst"]) for e in self.graph["edges"]}
        self.assertIn(("x", "conv"), pairs)
        self.assertIn(("bn", "relu"), pairs)
        for e in self.graph["edges"]:
            self.assertIn(e["src"], self.ops)
            self.assertIn(e["dst"], self.ops)

    def test_schema_and_gantry_place(self):
        try:
            import jsonschema
            with open(os.path.join(ROOT, "docs", "graph.schema.json")) as f:
                jsonschema.validate(self.graph, json.load(f))
        except ImportError:
            pass
        binary = os.path.join(ROOT, "build", "gantry-place")
        if not os.path.exists(binary):
            self.skipTest("build/gantry-place not built")
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(self.graph, f)
            f.flush()
            out = subprocess.run([binary, f.name, "--algo", "all"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(len(json.loads(out.stdout)["plan"]["placement"]), len(self.graph["ops"]))


if __name__ == "__main__":
    unittest.main()
