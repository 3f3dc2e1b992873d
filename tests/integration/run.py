#!/usr/bin/env python3
"""Runs the integration tests: every test_* function of every tests/integration/test_*.py
module (or those named on the command line: module or module::function), each
against its own real stack.  Prints one line per test, the ten slowest tests, and a
final summary line 'integration: N passed, M failed' (always the last line).  Exit
status 1 when any test failed.

GANTRY_INTEGRATION_JOBS tests run at once (default 2): the tests wait on their stacks
far more than they compute, and each stack has its own ports, directories and sandbox
uids.  A test that measures time or load, or holds something every test would share,
runs with nothing beside it (harness.alone, or ALONE = True in its module).  With more
than one at a time, each test's output goes to tests/out/integration/<test>.log and is
printed whole when the test ends; with one, it streams.

Every test has a time limit: DEFAULT_TIMEOUT seconds, or its own, set with
harness.timeout(seconds) as a decorator (the long chaos and elastic tests).
Each test runs in a forked child process.  At the limit the child dumps the stacks of
all its threads and raises TestTimeout (a BaseException, so no `except Exception` in a
test swallows it) in the test's main thread: the stacks the test started (harness.Stack,
test_up's Up) are torn down by their own __exit__, and the test fails with its stack
and its daemons' logs.  Should that cleanup itself hang for CLEANUP_GRACE seconds, the
child is killed.  Each child is the subreaper of everything its test starts (deploy/up's
own session included) and kills whatever is still below it when the test ends, so no
redis-server, gantry-server, scheduler or worker outlives its test, whatever it left
running and however it renamed itself; the runner, subreaper of the children, kills
what a killed child leaves."""

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
LOGS = os.path.join(HERE, "..", "out", "integration")  # each test's output when tests run side by side
JOBS = max(1, int(os.environ.get("GANTRY_INTEGRATION_JOBS", "2")))


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
    """[(name, function, alone)] of the tests to run"""
    tests = []
    for fname in sorted(os.listdir(HERE)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        mod_name = fname[:-3]
        mod = importlib.import_module(mod_name)
        for name in dir(mod):
            fn = getattr(mod, name)
            if name.startswith("test_") and callable(fn) and getattr(fn, "__module__", None) == mod_name:
                full = f"{mod_name}::{name}"
                if not selectors or any(full == s or mod_name == s or name == s for s in selectors):
                    tests.append((full, fn, bool(getattr(mod, "ALONE", False) or getattr(fn, "alone", False))))
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
    """appends a failure's verdict (the last 40 lines of it) to FAILURES, after the last lines the test printed
    (one write: two tests' children may append at once)"""
    lines = text.splitlines()
    if len(lines) > 40:
        lines = lines[:1] + ["  [...]"] + lines[-39:]
    if printed:
        lines[1:1] = ["  what it printed last:"] + ["  | " + line for line in printed.splitlines()]
    with open(FAILURES, "a") as f:
        f.write("\n".join(lines) + "\n")


def become_subreaper():
    """makes this process the parent of every orphan below it (prctl PR_SET_CHILD_SUBREAPER): whatever a test
    started, even in its own session and whatever it calls itself, stays below it"""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def descendants(keep=()):
    """{pid: program} of the live processes below this process, leaving out the pids in keep and everything
    below them (the other tests' children, for the runner)"""
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
        for child in (c for c, pp in parent.items() if pp == p and c not in found and c not in keep):
            found[child] = name[child]
            todo.append(child)
    return found


def reap(statuses):
    """collects exited processes below this one; a test child's wait status goes into statuses[pid]"""
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in statuses:
            statuses[pid] = st


def kill_leftovers(keep=(), statuses=None):
    """kills what is still running below this process but outside keep; a description of each"""
    killed = []
    for _ in range(5):  # a supervisor may start one more process while we kill: look again
        procs = descendants(keep)
        if not procs:
            break
        for pid, name in procs.items():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(f"{pid} ({name})")
            except OSError:
                pass
        time.sleep(0.1)  # let them die before looking again
        reap({} if statuses is None else statuses)
    return killed


class Running:
    """one test in its child process"""

    started = 0  # tests started so far: each gets its own block of ports (harness.free_port)

    def __init__(self, full, fn, alone):
        self.full, self.alone = full, alone
        self.number = Running.started
        Running.started += 1
        self.limit = getattr(fn, "timeout", DEFAULT_TIMEOUT)
        self.log = os.path.join(LOGS, full.replace("::", "__") + ".log") if JOBS > 1 else None
        sys.stdout.flush()
        sys.stderr.flush()
        self.t0 = time.monotonic()
        self.deadline = self.t0 + self.limit + CLEANUP_GRACE + 10
        self.pid = os.fork()
        if self.pid == 0:
            self.child(fn)
        self.fd = os.pidfd_open(self.pid)

    def child(self, fn):
        rc = 2
        try:
            if self.log:
                out = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(out, 1)
                os.dup2(out, 2)
                os.close(out)
            become_subreaper()
            os.environ["GANTRY_TEST_PORT_BLOCK"] = str(self.number)
            rc = run_child(self.full, fn, self.limit)
            sys.stdout.flush()
            killed = kill_leftovers()
            if killed:
                print(f"note: killed what {self.full} left running: {', '.join(killed)}", flush=True)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)

    def finish(self, status, others, statuses):
        """prints the test's output and verdict once its child is gone (status None: it was killed at its
        deadline); whether it passed.  others: the pids of the tests still running, whose exits reaped meanwhile
        go into statuses"""
        os.close(self.fd)
        seconds = time.monotonic() - self.t0
        if self.log:
            with open(self.log, errors="replace") as f:
                sys.stdout.write(f.read())
        if status is None:
            why = f"FAIL {self.full}: the test process did not end after its {self.limit}s limit and {CLEANUP_GRACE}s of cleanup; killed"
            print(why, flush=True)
            record_failure(why)
        # what a killed child left is the runner's now
        killed = kill_leftovers(others, statuses)
        if killed:
            print(f"note: killed what {self.full} left running: {', '.join(killed)}", flush=True)
        code = None if status is None else os.waitstatus_to_exitcode(status)
        if code is not None and code not in (PASSED, FAILED):
            why = (f"died of signal {-code}" if code < 0 else f"hung in its cleanup after the timeout ({CLEANUP_GRACE}s; "
                   "its stacks above)" if code == 1 else f"exited with status {code} before its verdict")
            print(f"FAIL {self.full} ({seconds:.1f}s): the test process {why}", flush=True)
            record_failure(f"FAIL {self.full} ({seconds:.1f}s): the test process {why}")
        sys.stdout.flush()
        return code == PASSED, seconds


def run_all(tests):
    """runs the tests, JOBS at a time in the order given, then the alone ones one by one; [(passed, seconds,
    name)]"""
    results, running, statuses = [], {}, {}
    # the ones that run alone last: the others never wait for a slot to drain before each of them; and side by
    # side, the long ones (those with a time limit of their own) first, so that no long test is left running
    # alone at the end of that phase
    if JOBS > 1:
        long_first = sorted((t for t in tests if not t[2]), key=lambda t: -getattr(t[1], "timeout", DEFAULT_TIMEOUT))
        pending = long_first + [t for t in tests if t[2]]
    else:
        pending = list(tests)
    try:
        while pending or running:
            while pending and len(running) < JOBS and not any(r.alone for r in running.values()) and \
                    (not pending[0][2] or not running):
                r = Running(*pending.pop(0))
                running[r.pid], statuses[r.pid] = r, None
            select.select([r.fd for r in running.values()], [], [],
                          max(0.0, min(0.2, *(r.deadline - time.monotonic() for r in running.values()))))
            reap(statuses)
            for pid, r in list(running.items()):
                status = statuses[pid]
                if status is None and time.monotonic() < r.deadline:
                    continue
                if status is None:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                del running[pid], statuses[pid]
                ok, seconds = r.finish(status, set(running), statuses)
                results.append((ok, seconds, r.full))
    except KeyboardInterrupt:  # the children got the same SIGINT: let them stop their stacks, then stop
        end = time.monotonic() + CLEANUP_GRACE
        while running and time.monotonic() < end:
            time.sleep(0.2)
            reap(statuses)
            running = {pid: r for pid, r in running.items() if statuses[pid] is None}
        for pid in running:
            os.kill(pid, signal.SIGKILL)
        kill_leftovers()
        raise
    return results


def main():
    global JOBS
    tests = collect(sys.argv[1:])
    JOBS = min(JOBS, max(1, len(tests)))  # one test alone streams its output
    os.makedirs(os.path.dirname(FAILURES), exist_ok=True)
    open(FAILURES, "w").close()
    if JOBS > 1:
        os.makedirs(LOGS, exist_ok=True)
    become_subreaper()
    t0 = time.monotonic()
    results = run_all(tests)
    passed = sum(ok for ok, _, _ in results)
    failed = len(results) - passed
    if results:
        print("slowest tests:")
        for _, seconds, full in sorted(results, key=lambda r: r[1], reverse=True)[:10]:
            print(f"  {seconds:6.1f}s {full}")
        print(f"({len(results)} tests in {time.monotonic() - t0:.0f} s, {JOBS} at a time but the ones that run alone)")
    print(f"integration: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
