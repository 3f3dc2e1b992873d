"""gantry.job - helpers for a program that runs as a gantry job (docs/programs.md, docs/sdk.md).

gantry starts each rank of a program job with ``RANK``, ``WORLD_SIZE``, ``GANTRY_CHECKPOINT_DIR``,
``GANTRY_OUTPUT_DIR`` and ``GANTRY_METRICS`` set, and stops it with SIGTERM and, ``grace_s`` later,
SIGKILL (cancel, preemption, an elastic resize).  These helpers read that environment, fall back to
something sensible outside gantry (rank 0 of 1, ``./checkpoint``, ``./output``, no metrics file),
write metrics lines the job's curves draw, and tell a training loop when to checkpoint and stop.

    from gantry import job
    for step in range(start, steps):
        ...
        job.report(step=step, loss=loss, epoch=epoch, epochs=epochs)   # a point of the job's curves
        if job.should_stop():                                            # SIGTERM: checkpoint, then exit 0
            save(job.checkpoint_dir()); break

Inside a job the SIGTERM handler is installed when this module is imported (from the main thread),
so a SIGTERM that comes before the first ``should_stop()`` is not lost; outside a job, at the first
``should_stop()``."""

import json
import math
import os
import signal
import threading

_lock = threading.Lock()
_metrics = None  # the open metrics file
_stop = threading.Event()
_installed = False


def in_job():
    """True when this process runs as a gantry job's rank (``GANTRY_JOB_ID`` is set)."""
    return bool(os.environ.get("GANTRY_JOB_ID"))


def job_id():
    """The job's id (``GANTRY_JOB_ID``), or None outside gantry."""
    return os.environ.get("GANTRY_JOB_ID") or None


def generation():
    """The generation (``GANTRY_GENERATION``): 0, then 1 after a restart, preemption or resize; 0 outside gantry."""
    return int(os.environ.get("GANTRY_GENERATION", "0") or 0)


def rank():
    """This process's rank (``RANK``), 0 outside a gang."""
    return int(os.environ.get("RANK", "0") or 0)


def world_size():
    """The number of ranks (``WORLD_SIZE``), 1 outside a gang; it changes when an elastic job is resized."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def local_rank():
    """The rank among those on this host (``LOCAL_RANK``), 0 outside a gang."""
    return int(os.environ.get("LOCAL_RANK", "0") or 0)


def _dir(var, default):
    path = os.environ.get(var) or default
    os.makedirs(path, exist_ok=True)
    return path


def checkpoint_dir():
    """Where to checkpoint (``GANTRY_CHECKPOINT_DIR``, kept across restarts: resume from what is there);
    ``./checkpoint`` outside gantry.  Made if missing."""
    return _dir("GANTRY_CHECKPOINT_DIR", "checkpoint")


def output_dir():
    """Where to put the job's outputs (``GANTRY_OUTPUT_DIR``: listed and downloadable when the job ends;
    ``register_model`` names a file here); ``./output`` outside gantry.  Made if missing."""
    return _dir("GANTRY_OUTPUT_DIR", "output")


def _number(k, v):
    if hasattr(v, "item") and callable(v.item):  # a one-element tensor or numpy scalar
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        if isinstance(v, str):
            return v
        raise TypeError(f"metric {k}: {type(v).__name__} is not a number")
    if isinstance(v, float) and not math.isfinite(v):
        return None  # NaN and infinities are not JSON: the point goes without them
    return v


def report(step=None, **metrics):
    """Writes one metrics point (a JSON line) to ``GANTRY_METRICS`` and returns it as a dict.

    ``step`` is the curves' x axis (the dashboard draws training points by step); ``epoch`` with ``epochs``
    also sets the job's progress (``epoch / epochs``).  Values are numbers (a one-element tensor or numpy
    scalar is read with ``.item()``; NaN and infinities are left out) or strings.  Every rank may report:
    rank 0's points are the job's curves, another rank's are read with ``?rank=R``
    (:meth:`gantry.Client.metrics`).  ``rank`` is gantry's and may not be a metric.  The line is flushed at
    once; the worker forwards at most 20 points a second (one with ``test_accuracy`` always).  Outside
    gantry (no ``GANTRY_METRICS``) nothing is written."""
    global _metrics
    if "rank" in metrics:
        raise ValueError("'rank' is set by gantry: name the metric otherwise")
    point = {}
    if step is not None:
        point["step"] = _number("step", step)
    for k, v in metrics.items():
        v = _number(k, v)
        if v is not None:
            point[k] = v
    path = os.environ.get("GANTRY_METRICS")
    if path:
        line = json.dumps(point, separators=(",", ":")) + "\n"
        with _lock:
            if _metrics is None:
                _metrics = open(path, "a", encoding="utf-8")
            _metrics.write(line)
            _metrics.flush()
    return point


def _on_sigterm(signum, frame, previous=None):
    _stop.set()
    if callable(previous) and previous not in (signal.SIG_IGN, signal.SIG_DFL):
        previous(signum, frame)


def install_handler():
    """Installs the SIGTERM handler behind :func:`should_stop` (once; from the main thread).  Returns True
    when it is installed.  A handler the program installed before is still called after it."""
    global _installed
    with _lock:
        if _installed:
            return True
        try:
            previous = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, lambda s, f: _on_sigterm(s, f, previous))
        except ValueError:  # not the main thread: the next call from the main thread installs it
            return False
        _installed = True
        return True


def should_stop():
    """True once the process got SIGTERM: gantry asks the job to stop (cancel, preemption, a resize) and
    sends SIGKILL ``grace_s`` seconds later.  Checkpoint (:func:`checkpoint_dir`) and exit 0: the next
    generation resumes from the checkpoint.  In a gang, agree first (an all-reduce of the flag) so that every
    rank stops at the same step."""
    install_handler()
    return _stop.is_set()


if in_job():
    install_handler()
