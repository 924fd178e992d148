"""Values that cross the sandbox boundary, as plain data, inside the messages of :mod:`autograder.sandbox.wire`.

Only these cross: None, bools, ints, floats, strings, lists, tuples, sets and frozensets
(of what else crosses and can be hashed), dicts with string keys, NumPy arrays and torch
tensors of numeric or boolean dtypes, and torch devices and dtypes (by name: ``cpu``,
``meta``, ``cuda[:n]``; one of :data:`DTYPES`). Arrays travel as dtype, shape and raw
bytes; the receiving side builds a new, plain ``np.ndarray`` or ``torch.Tensor`` from
them, never an object of the sender's choosing (no pickle, no subclasses, no code).

A fixture of :mod:`autograder.api.scripted` (a scripted model that a test hands to
the student's function) crosses as its name and arguments and is rebuilt there;
one that the grader holds (its state is what its test checks) crosses as its
number, name, methods and public attributes, ``{"held": ...}``, and ``decode``
asks ``held(number, name, methods, attributes)`` for the proxy that stands for it.

Any other object (a student's ``nn.Module``, a bound method) stays where it was
made and crosses as a *handle*, ``{"handle": n, "type": name}``: ``encode`` asks
``make_handle(obj)`` for its number, and ``decode`` asks ``resolve(n, name)``
for what stands for it on the receiving side.
"""

from __future__ import annotations

import base64
import math

import numpy as np
import torch

from autograder.api import scripted
from autograder.sandbox.wire import WireError

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
MAX_DEPTH = 32
DEVICE_TYPES = ("cpu", "meta", "cuda")


def encode(value, depth: int = 0, make_handle=None):
    if depth > MAX_DEPTH:
        raise WireError("the value is nested too deeply")
    handle = getattr(type(value), "__wire_handle__", None)
    if handle is not None:
        return {"handle": {"id": int(handle.__get__(value)), "type": ""}}
    fixture = getattr(value, "__wire_fixture__", None) if not isinstance(value, (torch.Tensor, np.ndarray)) else None
    if isinstance(fixture, tuple) and len(fixture) == 2 and scripted.held_by_grader(value):
        kept = type(value).__wire_held__
        return {
            "held": {
                "id": scripted.hold(value),
                "name": str(fixture[0]),
                "methods": list(kept.methods),
                "attributes": encode({name: getattr(value, name) for name in kept.attributes}, depth + 1),
            }
        }
    if isinstance(fixture, tuple) and len(fixture) == 2:
        return {"fixture": {"name": str(fixture[0]), "args": encode(list(fixture[1]), depth + 1)}}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.dtype):
        name = str(value).removeprefix("torch.")
        if name not in DTYPES:
            raise WireError(f"the dtype {value} cannot cross")
        return {"dtype": name}
    if isinstance(value, int):
        return {"int": str(int(value))}
    if isinstance(value, float):
        return {"float": repr(float(value))}
    if isinstance(value, torch.Tensor) and value.device.type == "meta":  # no data: its shape, dtype and place
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise WireError(f"tensors of dtype {value.dtype} cannot be returned")
        return {"tensor": {"dtype": dtype, "shape": list(value.shape), "device": "meta", "data": ""}}
    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous()
        dtype = str(data.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise WireError(f"tensors of dtype {data.dtype} cannot be returned")
        raw = data.view(torch.int16) if dtype == "bfloat16" else data
        return {
            "tensor": {
                "dtype": dtype,
                "shape": list(data.shape),
                "data": base64.b64encode(raw.numpy().tobytes()).decode(),
            }
        }
    if isinstance(value, (np.ndarray, np.generic)):
        data = np.asarray(value)
        data = np.ascontiguousarray(data) if data.ndim else data
        if str(data.dtype) not in DTYPES:
            raise WireError(f"arrays of dtype {data.dtype} cannot be returned")
        return {
            "ndarray": {
                "dtype": str(data.dtype),
                "shape": list(data.shape),
                "scalar": isinstance(value, np.generic),
                "data": base64.b64encode(data.astype(data.dtype.newbyteorder("<")).tobytes()).decode(),
            }
        }
    if isinstance(value, (list, tuple)):
        return {"list" if isinstance(value, list) else "tuple": [encode(v, depth + 1, make_handle) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"set" if isinstance(value, set) else "frozenset": [encode(v, depth + 1, make_handle) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: encode(v, depth + 1, make_handle) for k, v in value.items()}}
    if make_handle is not None:
        return {"handle": {"id": int(make_handle(value)), "type": type(value).__name__[:80]}}
    if isinstance(value, dict):
        raise WireError("only dicts with string keys can be returned")
    raise WireError(f"a {type(value).__name__} cannot be returned; return tensors, arrays, numbers or tuples of them")


def decode(data, depth: int = 0, resolve=None, held=None):
    if depth > MAX_DEPTH:
        raise WireError("the value is nested too deeply")
    if data is None or isinstance(data, (bool, str)):
        return data
    if not isinstance(data, dict) or len(data) != 1:
        raise WireError("malformed value")
    ((kind, body),) = data.items()
    if kind == "int":
        return int(str(body)[:400])
    if kind == "device":
        name = str(body)[:16]
        kind, _, index = name.partition(":")
        if kind not in DEVICE_TYPES or not (index == "" or index.isdigit()):
            raise WireError(f"unknown device {name!r}")
        return torch.device(name)
    if kind == "dtype":
        if str(body) not in DTYPES:
            raise WireError(f"unknown dtype {str(body)[:20]!r}")
        return getattr(torch, str(body))
    if kind == "float":
        return float(str(body)[:64]) if str(body) not in ("nan", "inf", "-inf") else float(body)
    if kind in ("tensor", "ndarray"):
        dtype, shape = str(body["dtype"]), [int(n) for n in body["shape"]]
        if dtype not in DTYPES or any(n < 0 for n in shape) or len(shape) > MAX_DEPTH:
            raise WireError(f"malformed array of dtype {dtype!r}")
        if kind == "tensor" and body.get("device") == "meta":
            return torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
        raw = base64.b64decode(str(body["data"]), validate=True)
        storage = "int16" if dtype == "bfloat16" else dtype
        count = math.prod(shape)
        array = (
            np.frombuffer(raw, dtype=np.dtype(storage).newbyteorder("<"), count=count).astype(storage).reshape(shape)
        )
        if kind == "ndarray":
            array = np.array(array)
            return array[()] if body.get("scalar") else array
        tensor = torch.from_numpy(np.array(array))
        return tensor.view(torch.bfloat16) if dtype == "bfloat16" else tensor
    if kind in ("list", "tuple"):
        items = [decode(v, depth + 1, resolve, held) for v in body]
        return items if kind == "list" else tuple(items)
    if kind in ("set", "frozenset"):
        items = [decode(v, depth + 1, resolve, held) for v in body]
        try:
            return set(items) if kind == "set" else frozenset(items)
        except TypeError:
            raise WireError("a set can only hold what can be hashed") from None
    if kind == "dict":
        return {str(k): decode(v, depth + 1, resolve, held) for k, v in body.items()}
    if kind == "fixture":  # rebuilt from autograder.api.scripted, never from the sender's code
        return scripted.build(str(body["name"]), decode(body["args"], depth + 1))
    if kind == "held":  # a fixture the grader holds: the proxy that calls it
        if held is None:
            raise WireError("a fixture that the grader holds cannot be used here")
        attributes = decode(body["attributes"], depth + 1)
        if not isinstance(attributes, dict):
            raise WireError("malformed fixture")
        return held(int(body["id"]), str(body["name"])[:80], [str(m)[:80] for m in body["methods"]], attributes)
    if kind == "handle":
        if resolve is None:
            raise WireError("an object handle cannot be used here")
        return resolve(int(body["id"]), str(body.get("type", ""))[:80])
    raise WireError(f"unknown value kind {kind!r}")
