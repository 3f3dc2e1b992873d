#!/usr/bin/env python3
"""docs/graph.schema.json: a valid JSON Schema 2020-12 that accepts every
graph in tests/data/graphs and every generated kind, and rejects malformed
graphs.  Skipped where the jsonschema package is not installed.

  python3 -m unittest discover -s tests/data -p 'test_*.py' -v
"""
import json
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import jsonschema
except ImportError:
    jsonschema = None


@unittest.skipIf(jsonschema is None, "jsonschema is not installed")
class GraphSchema(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(ROOT, "docs", "graph.schema.json")) as f:
            cls.schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(cls.schema)
        cls.v = jsonschema.Draft202012Validator(cls.schema)

    def assertValid(self, g, what):
        errors = [e.message for e in self.v.iter_errors(g)]
        self.assertEqual(errors, [], what)

    def test_data_graphs(self):
        d = os.path.join(ROOT, "tests", "data", "graphs")
        for name in sorted(os.listdir(d)):
            with open(os.path.join(d, name)) as f:
                self.assertValid(json.load(f), name)
        with open(os.path.join(ROOT, "deploy", "examples", "placement.json")) as f:
            self.assertValid(json.load(f)["spec"]["graph"], "deploy/examples/placement.json")

    def test_generated_graphs(self):
        gen = os.path.join(ROOT, "tests", "data", "gen_graph.py")
        for kind in ("layered", "transformer", "inception", "gnmt"):
            out = subprocess.run([sys.executable, gen, kind, "--ops", "300"], capture_output=True, text=True, check=True)
            self.assertValid(json.loads(out.stdout), kind)

    def test_rejects_malformed(self):
        dev = [{"name": "d", "memory_bytes": 100}]
        bad = [
            {"devices": dev},
            {"ops": [{"name": "a"}], "devices": dev},
            {"ops": [{"name": "", "compute_us": 1}], "devices": dev},
            {"ops": [{"name": "a", "compute_us": -1}], "devices": dev},
            {"ops": [{"name": "a", "compute_us": 1, "temp_bytes": 1.5}], "devices": dev},
            {"ops": [{"name": "a", "compute_us": 1, "output_bytes": [1, -2]}], "devices": dev},
            {"ops": [{"name": "a", "compute_us": 1}], "devices": []},
            {"ops": [{"name": "a", "compute_us": 1}], "devices": [{"name": "d", "memory_bytes": 1, "speed": 0}]},
            {"ops": [{"name": "a", "compute_us": 1}], "edges": [{"dst": "a"}], "devices": dev},
            {"ops": [{"name": "a", "compute_us": 1}], "devices": dev, "comm": {"bytes_per_us": 0}},
        ]
        for g in bad:
            self.assertFalse(self.v.is_valid(g), json.dumps(g))


if __name__ == "__main__":
    unittest.main()
