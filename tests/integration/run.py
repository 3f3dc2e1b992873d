#!/usr/bin/env python3
"""Runs the integration tests: every test_* function of every tests/integration/test_*.py
module (or those named on the command line: module or module::function), each
against its own real stack.  Prints one line per test and a final summary line
'N passed, N failed'.  Exit status 1 when any test failed."""

import importlib
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def collect(selectors):
    tests = []
    for fname in sorted(os.listdir(HERE)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        mod_name = fname[:-3]
        mod = importlib.import_module(mod_name)
        for name in dir(mod):
            if name.startswith("test_") and callable(getattr(mod, name)):
                full = f"{mod_name}::{name}"
                if not selectors or any(full == s or mod_name == s or name == s for s in selectors):
                    tests.append((full, getattr(mod, name)))
    return tests


def main():
    tests = collect(sys.argv[1:])
    passed = failed = 0
    for full, fn in tests:
        t0 = time.monotonic()
        try:
            fn()
            passed += 1
            print(f"PASS {full} ({time.monotonic() - t0:.1f}s)", flush=True)
        except Exception:  # noqa: BLE001 - a test failure of any kind is reported, the run goes on
            failed += 1
            print(f"FAIL {full} ({time.monotonic() - t0:.1f}s)", flush=True)
            traceback.print_exc(file=sys.stdout)
    print(f"integration: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
