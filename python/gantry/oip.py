"""gantry.oip - tensors to and from the Open Inference Protocol v2 (docs/inference.md).

numpy arrays and torch tensors are recognised without importing either (an object with ``dtype``,
``shape`` and ``tobytes``, or torch's ``numpy()``); numpy is imported only to encode binary data
and to give outputs as arrays, torch never.  Lists are flattened here in pure Python."""

import json
import struct

# OIP datatype -> (numpy dtype name, struct code)
DATATYPES = {"BOOL": ("bool", "?"), "UINT8": ("uint8", "B"), "INT8": ("int8", "b"), "INT16": ("int16", "h"),
             "INT32": ("int32", "i"), "INT64": ("int64", "q"), "FP16": ("float16", "e"), "FP32": ("float32", "f"),
             "FP64": ("float64", "d"), "UINT16": ("uint16", "H"), "UINT32": ("uint32", "I"), "UINT64": ("uint64", "Q")}
_BY_NUMPY = {v[0]: k for k, v in DATATYPES.items()}


def _numpy():
    try:
        import numpy
        return numpy
    except ImportError:
        return None


def is_array(x):
    """a numpy array or a torch tensor (by its attributes: neither library is imported)"""
    return hasattr(x, "shape") and hasattr(x, "dtype") and (hasattr(x, "tobytes") or hasattr(x, "numpy"))


def _as_numpy(x):
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # a torch tensor
        return x.detach().cpu().contiguous().numpy()
    return x


def _flatten(x, shape, depth=0):
    if isinstance(x, (list, tuple)):
        if len(shape) <= depth:
            shape.append(len(x))
        elif shape[depth] != len(x):
            raise ValueError("ragged nested lists: every row of an input must have the same length")
        out = []
        for v in x:
            out.extend(_flatten(v, shape, depth + 1))
        return out
    if len(shape) != depth and depth > 0:
        raise ValueError("ragged nested lists: every row of an input must have the same length")
    return [x]


def normalize(inputs, sig):
    """[{"name", "value", "datatype"?}] from what predict() takes and the model's metadata (``sig``)"""
    declared = {i["name"]: i for i in sig.get("inputs") or []}
    if isinstance(inputs, dict) and not ("name" in inputs and "data" in inputs):
        items = list(inputs.items())
    elif isinstance(inputs, (list, tuple)) and inputs and all(isinstance(t, dict) and "name" in t for t in inputs):
        return [{"name": t["name"], "oip": t} for t in inputs]  # already OIP tensors
    else:
        if len(declared) != 1:
            raise ValueError(f"the model has {len(declared)} inputs ({', '.join(declared)}): pass {{name: array}}")
        items = [(next(iter(declared)), inputs)]
    out = []
    for name, value in items:
        d = declared.get(name, {})
        out.append({"name": name, "value": value, "datatype": d.get("datatype")})
    return out


def _array_parts(t):
    a = _as_numpy(t["value"])
    np = _numpy()
    dt = _BY_NUMPY.get(str(a.dtype))
    if dt is None:
        raise ValueError(f"input {t['name']}: dtype {a.dtype} has no OIP datatype")
    if np is not None:
        a = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False)
    return a, dt


def encode_json(tensors, parameters=None):
    """the JSON request body (a dict)"""
    ins = []
    for t in tensors:
        if "oip" in t:
            ins.append(t["oip"])
            continue
        if is_array(t["value"]):
            a, dt = _array_parts(t)
            ins.append({"name": t["name"], "datatype": dt, "shape": list(a.shape), "data": a.reshape(-1).tolist()})
        else:
            shape = []
            data = _flatten(t["value"], shape)
            if not isinstance(t["value"], (list, tuple)):
                shape = []
            ins.append({"name": t["name"], "datatype": t.get("datatype") or "FP32", "shape": shape, "data": data})
    body = {"inputs": ins}
    if parameters:
        body["parameters"] = parameters
    return body


def encode_binary(tensors, parameters=None):
    """(JSON head, binary tail) of a request in the OIP binary extension: each array's bytes, little-endian,
    in the order of the inputs"""
    ins, tail = [], []
    for t in tensors:
        if "oip" in t:
            ins.append(t["oip"])
            continue
        if is_array(t["value"]):
            a, dt = _array_parts(t)
            raw = a.tobytes()
        else:  # lists in a binary request: packed with struct
            shape = []
            data = _flatten(t["value"], shape)
            dt = t.get("datatype") or "FP32"
            raw = struct.pack("<%d%s" % (len(data), DATATYPES[dt][1]), *data)
            a = None
        ins.append({"name": t["name"], "datatype": dt, "shape": list(a.shape) if a is not None else shape,
                    "parameters": {"binary_data_size": len(raw)}})
        tail.append(raw)
    body = {"inputs": ins}
    if parameters:
        body["parameters"] = parameters
    return json.dumps(body).encode(), b"".join(tail)


def _reshape(flat, shape):
    if not shape:
        return flat[0] if len(flat) == 1 else flat
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0] if shape[0] else 0
    return [_reshape(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def decode_outputs(answer):
    """{name: array} from an OIP answer: numpy arrays when numpy imports, else nested lists"""
    np = _numpy()
    out = {}
    for o in answer.get("outputs", []):
        shape = o.get("shape") or []
        data = o.get("data", [])
        if np is not None:
            dt = DATATYPES.get(o.get("datatype"), ("float64",))[0]
            out[o["name"]] = np.asarray(data, dtype=dt).reshape(shape) if shape else np.asarray(data, dtype=dt)
        else:
            out[o["name"]] = _reshape(data, shape)
    return out
