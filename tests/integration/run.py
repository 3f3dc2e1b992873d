#!/usr/bin/env python3
"""Runs the integration tests: every test_* function of every tests/integration/test_*.py
module (or those named on the command line: module or module::function), each
against its own real stack.  Prints one line per test, the ten slowest tests, and a
final summary line 'integration: N passed, M failed' (always the last line).  Exit
status 1 when any test failed.

Every test has a time limit: DEFAULT_TIMEOUT seconds, or its own, set with
harness.timeout(seconds) as a decorator (the long chaos and elastic tests).
Each test runs in a forked child process.  At the limit the child dumps the stacks of
all its threads and raises TestTimeout (a BaseException, so no `except Exception` in a
test swallows it) in the test's main thread: the stacks the test started (harness.Stack,
test_up's Up) are torn down by their own __exit__, and the test fails with its stack
and its daemons' logs.  Should that cleanup itself hang for CLEANUP_GRACE seconds, the
child is killed.  Either way, the runner then kills every process still below it: it is
the subreaper of everything its tests start (deploy/up's own session included), so no
redis-server, gantry-server, scheduler or worker outlives its test, whatever it left
running and however it renamed itself."""

import ctypes
import faulthandler
import importlib
import os
import select
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

DEFAULT_TIMEOUT = 300  # seconds a test may run unless it says otherwise (harness.timeout)
CLEANUP_GRACE = 60  # seconds a timed-out test gets to stop its stacks before it is killed
PASSED, FAILED = 0, 3  # a child's exit status once it printed its verdict
# each failure's traceback, also written here so tests/run can repeat them after everything else (CI shows
# only the head and the tail of a run's output)
FAILURES = os.path.join(HERE, "..", "out", "integration-failures.txt")


class TestTimeout(BaseException):
    """raised in a test's main thread when its time is up"""


class TailTee:
    """sys.stdout of a test's child: writes through to the real stdout and keeps the last TAIL_LINES lines, so
    that a failure's record carries what the test printed before it failed (a browser script's checks, a
    daemon's log) and not only its traceback"""
    TAIL_LINES = 40

    def __init__(self, out):
        self.out, self.lines, self.partial = out, [], ""

    def write(self, s):
        self.out.write(s)
        parts = (self.partial + s).split("\n")
        self.partial = parts.pop()
        self.lines = (self.lines + parts)[-self.TAIL_LINES:]
        return len(s)

    def flush(self):
        self.out.flush()

    def fileno(self):
        return self.out.fileno()

    def tail(self):
        return "\n".join(line for line in self.lines + [self.partial] if line.strip())


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


def run_child(full, fn, limit):
    """the forked child: runs one test under its time limit and prints its verdict; returns its exit status,
    PASSED or FAILED (anything else, such as faulthandler's 1 after a cleanup that hung, has no verdict printed)"""
    def on_alarm(signum, frame):
        print(f"TIMEOUT {full}: still running after {limit}s; the stacks of its threads:", flush=True)
        faulthandler.dump_traceback(file=sys.stdout, all_threads=True)
        # a cleanup that hangs too ends here: its stacks are dumped and the child exits
        faulthandler.dump_traceback_later(CLEANUP_GRACE, exit=True, file=sys.stdout)
        raise TestTimeout(f"{full} timed out after {limit}s (harness.timeout(seconds) sets a test's limit)")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    tee = sys.stdout = TailTee(sys.stdout)
    t0 = time.monotonic()
    try:
        fn()
        signal.setitimer(signal.ITIMER_REAL, 0)
        print(f"PASS {full} ({time.monotonic() - t0:.1f}s)", flush=True)
        return PASSED
    except BaseException:  # noqa: BLE001 - a failure of any kind (a timeout too) is this test's verdict
        signal.setitimer(signal.ITIMER_REAL, 0)
        verdict = f"FAIL {full} ({time.monotonic() - t0:.1f}s)\n{traceback.format_exc()}"
        printed = tee.tail()
        print(verdict, end="", flush=True)
        record_failure(verdict, printed)
        return FAILED
    finally:
        faulthandler.cancel_dump_traceback_later()


def record_failure(text, printed=""):
    """appends a failure's verdict (the last 40 lines of it) to FAILURES, after the last lines the test printed"""
    lines = text.splitlines()
    if len(lines) > 40:
        lines = lines[:1] + ["  [...]"] + lines[-39:]
    if printed:
        lines[1:1] = ["  what it printed last:"] + ["  | " + line for line in printed.splitlines()]
    with open(FAILURES, "a") as f:
        f.write("\n".join(lines) + "\n")


def become_subreaper():
    """makes this runner the parent of every orphan its tests leave (prctl PR_SET_CHILD_SUBREAPER): whatever
    a test started, even in its own session and whatever it calls itself, stays below the runner"""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def descendants():
    """{pid: program} of the live processes below this runner"""
    parent, name = {}, {}
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":  # a zombie is dead already: reaped below
            parent[pid], name[pid] = int(fields[1]), stat[stat.index("(") + 1:stat.rindex(")")]
    found, todo = {}, [os.getpid()]
    while todo:
        p = todo.pop()
        for child in (c for c, pp in parent.items() if pp == p and c not in found):
            found[child] = name[child]
            todo.append(child)
    return found


def reap_orphans(child=None):
    """collects exited processes below the runner; the wait status of `child` if it was among them"""
    status = None
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == child:
            status = st


def kill_leftovers():
    """kills what the last test left running (its child process is gone by now); a description of each"""
    killed = []
    for _ in range(5):  # a supervisor may start one more process while we kill: look again
        procs = descendants()
        if not procs:
            break
        for pid, name in procs.items():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(f"{pid} ({name})")
            except OSError:
                pass
        time.sleep(0.1)  # let them die before looking again
        reap_orphans()
    return killed


def wait_child(pid, deadline):
    """waits for the test's child process until the deadline, collecting orphans meanwhile (as init would);
    its wait status, or None if it is still running"""
    fd = os.pidfd_open(pid)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            select.select([fd], [], [], min(left, 0.2))
            status = reap_orphans(pid)
            if status is not None:
                return status
    finally:
        os.close(fd)


def run_one(full, fn):
    """runs one test in a child process; (passed, seconds)"""
    limit = getattr(fn, "timeout", DEFAULT_TIMEOUT)
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        rc = 2
        try:
            rc = run_child(full, fn, limit)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
    status = None
    try:
        status = wait_child(pid, t0 + limit + CLEANUP_GRACE + 10)
    except KeyboardInterrupt:  # the child got the same SIGINT: let it stop its stacks, then stop
        status = wait_child(pid, time.monotonic() + CLEANUP_GRACE)
        raise
    finally:
        if status is None:
            why = f"FAIL {full}: the test process did not end after its {limit}s limit and {CLEANUP_GRACE}s of cleanup; killed"
            print(why, flush=True)
            record_failure(why)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        killed = kill_leftovers()
        if killed:
            print(f"note: killed what {full} left running: {', '.join(killed)}", flush=True)
    seconds = time.monotonic() - t0
    code = None if status is None else os.waitstatus_to_exitcode(status)
    if code is not None and code not in (PASSED, FAILED):
        why = (f"died of signal {-code}" if code < 0 else f"hung in its cleanup after the timeout ({CLEANUP_GRACE}s; "
               "its stacks above)" if code == 1 else f"exited with status {code} before its verdict")
        print(f"FAIL {full} ({seconds:.1f}s): the test process {why}", flush=True)
        record_failure(f"FAIL {full} ({seconds:.1f}s): the test process {why}")
    return code == PASSED, seconds


def main():
    tests = collect(sys.argv[1:])
    os.makedirs(os.path.dirname(FAILURES), exist_ok=True)
    open(FAILURES, "w").close()
    passed = failed = 0
    times = []
    become_subreaper()
    for full, fn in tests:
        ok, seconds = run_one(full, fn)
        times.append((seconds, full))
        passed += ok
        failed += not ok
    if times:
        print("slowest tests:")
        for seconds, full in sorted(times, reverse=True)[:10]:
            print(f"  {seconds:6.1f}s {full}")
    print(f"integration: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
