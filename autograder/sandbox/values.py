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

What ``decode`` makes is bounded by what it is given, whoever chose it: at most
:data:`MAX_NODES` values, nested at most :data:`MAX_DEPTH` deep, and an array only
of the bytes its data holds (exactly what its shape and dtype take; an empty one,
whose other dimensions could be anything, describes at most :data:`EMPTY_ARRAY_BYTES`).
Its errors quote nothing of what it was given.
"""

from __future__ import annotations

import base64
import math

import numpy as np
import torch

from autograder.api import scripted
from autograder.sandbox import wire
from autograder.sandbox.wire import WireError

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
MAX_DEPTH = 32  # of nested values, and of an array's dimensions
MAX_NODES = wire.MAX_VALUES  # values that one decode makes: no more than one message holds
# An empty array (a dimension 0) holds no data, and its other dimensions could be anything: an operation over its
# empty dimension (a sum) would make an array of their product. Together they may describe at most as many bytes as
# the largest message the grader takes by default (Limits.message_kb) could hold.
EMPTY_ARRAY_BYTES = 8 * 2**20
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
        scripted.sending(str(fixture[0]), fixture[1])
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
        order = _memory_order(value)
        data = value.detach().cpu().permute(order).contiguous()
        dtype = str(data.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise WireError(f"tensors of dtype {data.dtype} cannot be returned")
        raw = data.view(torch.int16) if dtype == "bfloat16" else data
        body = {"dtype": dtype, "shape": list(data.shape), "data": base64.b64encode(raw.numpy().tobytes()).decode()}
        if order != list(range(value.dim())):
            body["memory"] = order
        return {"tensor": body}
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


def decode(data, depth: int = 0, resolve=None, held=None, left: list[int] | None = None):
    """The value that ``data`` (plain data, as :func:`encode` makes it) stands for; :class:`WireError` for what does
    not stand for one, or for more than this module decodes. ``left``: how many more values may be made (a list of
    one number, shared by the whole decoding; :data:`MAX_NODES` to start with)."""
    if depth > MAX_DEPTH:
        raise WireError("the value is nested too deeply")
    left = [MAX_NODES] if left is None else left
    left[0] -= 1
    if left[0] < 0:
        raise WireError(f"the value holds more than {MAX_NODES:,} values")
    if data is None or isinstance(data, (bool, str)):
        return data
    if not isinstance(data, dict) or len(data) != 1:
        raise WireError("malformed value")
    ((kind, body),) = data.items()
    if kind in ("int", "float", "device", "dtype") and not isinstance(body, str):
        raise WireError(f"malformed {kind}")
    if kind == "int":
        try:
            return int(body[:400])
        except ValueError:
            raise WireError("malformed int") from None
    if kind == "device":
        name = body[:16]
        kind, _, index = name.partition(":")
        if kind not in DEVICE_TYPES or not (index == "" or index.isdigit()):
            raise WireError("an unknown device")
        return torch.device(name)
    if kind == "dtype":
        if body not in DTYPES:
            raise WireError("an unknown dtype")
        return getattr(torch, body)
    if kind == "float":
        try:
            return float(body[:64])
        except ValueError:
            raise WireError("malformed float") from None
    if kind in ("tensor", "ndarray"):
        return _array(kind, body)
    if kind in ("list", "tuple", "set", "frozenset") and not isinstance(body, list):
        raise WireError(f"malformed {kind}")
    if kind in ("list", "tuple"):
        items = [decode(v, depth + 1, resolve, held, left) for v in body]
        return items if kind == "list" else tuple(items)
    if kind in ("set", "frozenset"):
        items = [decode(v, depth + 1, resolve, held, left) for v in body]
        try:
            return set(items) if kind == "set" else frozenset(items)
        except TypeError:
            raise WireError("a set can only hold what can be hashed") from None
    if kind in ("dict", "fixture", "held", "handle") and not isinstance(body, dict):
        raise WireError(f"malformed {kind}")
    if kind == "dict":
        return {str(k): decode(v, depth + 1, resolve, held, left) for k, v in body.items()}
    if kind == "fixture":  # rebuilt from autograder.api.scripted, never from the sender's code
        name, args = str(body.get("name"))[:80], decode(body.get("args"), depth + 1, left=left)
        if not isinstance(args, list) or not scripted.may_build(name, args):
            raise WireError("a fixture that the check did not hand over")
        return scripted.build(name, args)
    if kind == "held":  # a fixture the grader holds: the proxy that calls it
        if held is None:
            raise WireError("a fixture that the grader holds cannot be used here")
        attributes = decode(body["attributes"], depth + 1, left=left)
        if not isinstance(attributes, dict):
            raise WireError("malformed fixture")
        return held(int(body["id"]), str(body["name"])[:80], [str(m)[:80] for m in body["methods"]], attributes)
    if kind == "handle":
        if resolve is None:
            raise WireError("an object handle cannot be used here")
        return resolve(int(body["id"]), str(body.get("type", ""))[:80])
    raise WireError("an unknown kind of value")


def _memory_order(value: torch.Tensor) -> list[int]:
    """The order in which ``value``'s dimensions lie in memory, outermost first, where they lie as a permutation of a
    contiguous tensor (a transposed view crosses as one: chapter 11's kernels read strided inputs); the dimensions in
    order otherwise (it crosses contiguous)."""
    order = sorted(range(value.dim()), key=lambda i: -value.stride(i))
    if value.is_contiguous() or not value.permute(order).is_contiguous():
        return list(range(value.dim()))
    return order


def _array(kind: str, body) -> np.ndarray | torch.Tensor:
    """A tensor or array of plain data: its dtype, its shape, and its data (base64), which must hold exactly the
    bytes its shape and dtype take; a "meta" tensor has no data. Built anew, never the sender's object."""
    if not isinstance(body, dict) or body.get("dtype") not in DTYPES or not isinstance(body.get("shape"), list):
        raise WireError(f"malformed {kind}")
    dtype, shape = body["dtype"], body["shape"]
    if len(shape) > MAX_DEPTH or not all(type(n) is int and 0 <= n < 2**63 for n in shape):
        raise WireError(f"malformed {kind}: its shape is not one of at most {MAX_DEPTH} sizes")
    if kind == "tensor" and body.get("device") == "meta":  # no data: its shape, dtype and place
        try:
            return torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
        except RuntimeError:
            raise WireError(f"malformed {kind}: its shape has too many elements") from None
    storage = np.dtype("int16" if dtype == "bfloat16" else dtype)
    count = math.prod(shape)
    if not count and math.prod(max(n, 1) for n in shape) * storage.itemsize > EMPTY_ARRAY_BYTES:
        raise WireError(f"an empty {kind} whose other dimensions describe more than {EMPTY_ARRAY_BYTES // 2**20} MiB")
    data = body.get("data")
    size = count * storage.itemsize
    if not isinstance(data, str) or len(data) != 4 * -(-size // 3):  # base64: 4 characters for every 3 bytes
        raise WireError(f"malformed {kind}: its data does not hold what its shape and dtype take")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise WireError(f"malformed {kind}: its data is not base64") from None
    if len(raw) != size:
        raise WireError(f"malformed {kind}: its data does not hold what its shape and dtype take")
    array = np.frombuffer(raw, dtype=storage.newbyteorder("<")).astype(storage).reshape(shape)
    if kind == "ndarray":
        array = np.array(array)
        return array[()] if body.get("scalar") else array
    tensor = torch.from_numpy(np.array(array))
    tensor = tensor.view(torch.bfloat16) if dtype == "bfloat16" else tensor
    memory = body.get("memory")
    if memory is None:
        return tensor
    if not isinstance(memory, list) or sorted(memory) != list(range(len(shape))):
        raise WireError(f"malformed {kind}: its memory order is not a permutation of its dimensions")
    return tensor.permute([memory.index(i) for i in range(len(memory))])
