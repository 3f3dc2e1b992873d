"""gantry.federated - a federated job's site program: the rounds of a normal training loop (docs/federated.md,
"Your own PyTorch model").

A federated job whose spec names a program runs it once on every site.  Each round the site hands the program
the global model, the program trains it on the site's own data and hands back its model and how many samples it
trained on; gantry averages the sites' models by masked sums (no site, and not Redis, sees another's model).
The loop changes by a few lines::

    from gantry import federated
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for rnd in federated.rounds(model):          # loads the global model into model, each round
        train_one_epoch(model, opt, loader)      # your code
        rnd.submit(model, num_samples=len(train_set))
    # here model holds the final global model: evaluate it, save it

The exchange is files in ``GANTRY_FED_DIR`` (gantry sets it, with ``GANTRY_FED_SITE``, ``GANTRY_FED_SITES``,
``GANTRY_FED_ROUNDS``, ``GANTRY_FED_SITE_NAME``): the program writes ``round_0.out`` (its initial model: site 0's
is every site's start), then for each round K reads ``round_K.in`` and writes ``round_K.out``;
``round_{rounds+1}.in`` is the final model.  After a restart (a lost site: the job is requeued) the
sites continue after the last round checkpointed: the first file is then ``round_K.in`` with K > 1 (its metadata
``resumed_from`` K - 1), and :func:`rounds` yields rounds K to ``rounds`` only (``rnd.number`` and
``rnd.resumed_from`` say so); the program starts again from its start, so its own state (an optimizer's) is new.  Each file appears whole (written aside, then renamed).  The format is
safetensors' (an 8-byte little-endian header length, a JSON header, little-endian FP32 values; no pickle):
:func:`read` and :func:`write` here, the ``safetensors`` package and workers/fed/tensorfile.c read the same
bytes.  A model is a torch ``nn.Module`` (its floating-point state: parameters and buffers such as batch norm's
running means), a ``state_dict``, or a dict of numpy arrays; values go as FP32 and come back in each tensor's
own dtype.

Outside gantry (no ``GANTRY_FED_DIR``) :func:`rounds` runs the rounds alone (``GANTRY_FED_ROUNDS``, else its
``rounds`` argument, else 1): the script runs as a plain training script.

Standard library only; numpy and torch are used when the model is theirs."""

import array
import json
import os
import re
import struct
import sys
import time

__all__ = ["rounds", "Round", "site", "sites", "site_name", "read", "write"]

_POLL_S = 0.02


def site():
    """This site's index (``GANTRY_FED_SITE``), 0 outside gantry."""
    return int(os.environ.get("GANTRY_FED_SITE", "0") or 0)


def sites():
    """The number of sites (``GANTRY_FED_SITES``), 1 outside gantry."""
    return int(os.environ.get("GANTRY_FED_SITES", "1") or 1)


def site_name():
    """This site's name in the spec (``GANTRY_FED_SITE_NAME``), ``"local"`` outside gantry."""
    return os.environ.get("GANTRY_FED_SITE_NAME") or "local"


# ---- the file format ----

def write(path, tensors, metadata=None):
    """Writes ``tensors`` ({name: (shape, values)} with values any buffer of little-endian FP32, a numpy array
    or a torch tensor) and ``metadata`` ({str: str}) to ``path`` in the safetensors layout, atomically: to
    ``path`` + ``.tmp`` first, then renamed."""
    header, blobs, at = {}, [], 0
    for name, value in tensors.items():
        shape, data = _as_f32(value)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read(path):
    """The tensors of a file: ``({name: (shape, memoryview of its FP32 bytes)}, metadata)``, in the order of their
    bytes.  :func:`to_numpy` and :func:`load_into` turn the values into arrays or a model's tensors."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"{path}: the header length {n} is past the file's end")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if e["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name}: dtype {e['dtype']}, only F32")
        b, end = e["data_offsets"]
        out[name] = (tuple(e["shape"]), data[b:end])
    return out, meta


def to_numpy(tensors):
    """{name: numpy array (float32)} from what :func:`read` returns."""
    import numpy as np
    return {k: np.frombuffer(v, dtype="<f4").reshape(shape).copy() for k, (shape, v) in tensors.items()}


def _as_f32(value):
    """(shape, bytes of little-endian FP32) from a (shape, buffer) pair, a numpy array or a torch tensor"""
    if isinstance(value, tuple) and len(value) == 2:
        shape, buf = value
        return tuple(shape), bytes(buf)
    if hasattr(value, "detach"):  # torch
        t = value.detach().to("cpu").float().contiguous()
        try:
            return tuple(t.shape), t.numpy().astype("<f4", copy=False).tobytes()
        except (RuntimeError, ImportError):  # torch without numpy
            a = array.array("f", t.flatten().tolist())
            if sys.byteorder != "little":
                a.byteswap()
            return tuple(t.shape), a.tobytes()
    import numpy as np
    a = np.asarray(value, dtype="<f4")
    return a.shape, a.tobytes()


# ---- models ----

def _state(model):
    """the floating-point tensors of a model (an nn.Module's state_dict, a state_dict, or a dict of arrays),
    in order"""
    sd = model.state_dict() if hasattr(model, "state_dict") else model
    return {k: v for k, v in sd.items() if _is_float(v)}


def _is_float(v):
    if hasattr(v, "is_floating_point"):
        return v.is_floating_point()
    kind = getattr(getattr(v, "dtype", None), "kind", None)
    return kind == "f" if kind is not None else True


def load_into(model, tensors):
    """Copies what :func:`read` returned into ``model`` (an nn.Module, a state_dict or a dict of numpy arrays),
    each tensor in its own dtype and device."""
    state = _state(model)
    missing = [k for k in state if k not in tensors]
    if missing:
        raise ValueError(f"the global model lacks {missing[:3]}: the program's model changed?")
    for k, dst in state.items():
        shape, buf = tensors[k]
        if hasattr(dst, "copy_"):  # torch
            import torch
            src = torch.frombuffer(bytearray(buf), dtype=torch.float32) if len(buf) else torch.zeros(0)
            with torch.no_grad():
                dst.copy_(src.reshape(shape).to(dtype=dst.dtype, device=dst.device))
        else:
            import numpy as np
            dst[...] = np.frombuffer(buf, dtype="<f4").reshape(shape)


class Round:
    """One round: ``number`` (1 to ``total``), ``site``, ``sites``; :meth:`submit` hands back the model."""

    def __init__(self, number, total, fed_dir, resumed_from=0):
        self.number, self.total, self._dir = number, total, fed_dir
        self.resumed_from = resumed_from  # the checkpoint's round, on the first round after a restart; else 0
        self.site, self.sites = site(), sites()
        self.submitted = False

    def submit(self, model, num_samples):
        """Hands back this round's model (trained from the global one) and the number of samples it trained on
        (the site's weight in the average).  Once per round."""
        if self.submitted:
            raise RuntimeError(f"round {self.number}: submitted twice")
        if not (isinstance(num_samples, (int, float)) and num_samples >= 0):
            raise ValueError("num_samples must be a non-negative number")
        if self._dir:
            write(os.path.join(self._dir, f"round_{self.number}.out"), _state(model),
                  {"round": self.number, "num_samples": int(num_samples) if float(num_samples).is_integer() else num_samples})
        self.submitted = True

    def __repr__(self):
        return f"Round({self.number} of {self.total}, site {self.site} of {self.sites})"


def _wait(path, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        job = sys.modules.get("gantry.job")  # its SIGTERM handler keeps the process alive: stop as asked
        if job is not None and job.should_stop():
            sys.exit(0)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not come within {timeout} s")
        time.sleep(_POLL_S)


_ROUND_IN = re.compile(r"round_([0-9]+)\.in$")


def _first_round(fed_dir, timeout):
    """the first round gantry hands out: 1, or after a restart the round after the checkpoint's (the first
    round_K.in to appear; gantry writes one at a time)"""
    deadline = time.monotonic() + timeout
    while True:
        found = [int(m.group(1)) for m in map(_ROUND_IN.match, os.listdir(fed_dir)) if m]
        if found:
            return min(found)
        job = sys.modules.get("gantry.job")
        if job is not None and job.should_stop():
            sys.exit(0)
        if time.monotonic() > deadline:
            raise TimeoutError(f"no round_K.in came to {fed_dir} within {timeout} s")
        time.sleep(_POLL_S)


def rounds(model, rounds=None, timeout=86400):
    """Yields a :class:`Round` per round, with the global model loaded into ``model`` first; after the last one
    ``model`` holds the final global model.  Inside a federated job gantry says how many rounds
    (``GANTRY_FED_ROUNDS``); ``rounds`` is for runs outside gantry (default 1).  ``timeout``: seconds to wait for a
    round's global model."""
    fed_dir = os.environ.get("GANTRY_FED_DIR")
    total = int(os.environ.get("GANTRY_FED_ROUNDS") or rounds or 1)
    first, resumed_from = 1, 0
    if fed_dir:
        write(os.path.join(fed_dir, "round_0.out"), _state(model), {"round": 0})
        first = _first_round(fed_dir, timeout)
    for k in range(first, total + 2):
        if fed_dir:
            path = os.path.join(fed_dir, f"round_{k}.in")
            _wait(path, timeout)
            tensors, meta = read(path)
            load_into(model, tensors)
            resumed_from = int(meta.get("resumed_from", "0") or 0)
            if meta.get("final") == "1" or k > total:
                return
        elif k > total:
            return
        rnd = Round(k, total, fed_dir, resumed_from)
        yield rnd
        if not rnd.submitted:
            raise RuntimeError(f"round {k}: call rnd.submit(model, num_samples) before the next round")
