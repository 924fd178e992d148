"""How large a stand-in's call may be: its arguments' sizes, bounded by those the reference item passes itself.

What the grader computes for a stand-in is bounded by what the reference item itself asks of its
helpers on the same inputs (:func:`recording` notes it): every argument of a stand-in's call (anything
that can stand for an integer, a NumPy int or the values of an integer tensor as well as an int; a
tensor's size, largest dimension and number of dimensions; in lists, tuples, sets and dicts) may be at
most a few times what the reference passed for that argument (:meth:`Size.within`), so nothing is
computed on sizes the student chose. A mask is bounded by what the contract allows it to be instead
(:func:`broadcasts`): anything broadcastable to the scores of its call, at any rank up to theirs, so a
valid call is never refused for a mask that the reference happened to pass smaller or not at all; the
scores are bounded by their own arguments.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from autograder.api.items import quoted_size
from autograder.sandbox import values

# How far a stand-in's call may go past the largest the reference item makes on the same inputs.
FACTOR, SLACK = 4, 16


@dataclass(frozen=True)
class Size:
    """How large an argument is: its largest int, number of elements, largest dimension, dimensions, and its
    largest real number that is not an int (rounded up)."""

    value: int = 0
    elements: int = 0
    dimension: int = 0
    dims: int = 0
    real: int = 0

    def __or__(self, other: Size) -> Size:
        return Size(*(max(a, b) for a, b in zip(self.astuple(), other.astuple())))

    def astuple(self) -> tuple[int, int, int, int, int]:
        return (self.value, self.elements, self.dimension, self.dims, self.real)

    def within(self, limit: Size) -> str | None:
        """None, or what of this argument goes past ``limit`` (stretched by FACTOR and SLACK). A real number
        counts as a length (``torch.arange`` takes one) unless the reference passes real numbers only there:
        such a parameter (a rotary base, a dropout probability) is no length, and any number may go there."""
        lengths = not (limit.real and not limit.value)
        checks = (
            ("is", max(self.value, self.real) if lengths else 0, limit.value * FACTOR + SLACK),
            ("has elements:", self.elements, limit.elements * FACTOR + SLACK * SLACK),
            ("has a dimension of", self.dimension, limit.dimension * FACTOR + SLACK),
            ("has dimensions:", self.dims, limit.dims + 2),
        )
        for what, got, most in checks:
            if got > most:  # one size of the student's choosing, quoted as a failed check quotes it
                return f"{what} {quoted_size(got, most)}, more than the {most} allowed"
        return None


def size_of(value, depth: int = 0) -> Size:
    """The :class:`Size` of a value: whatever can stand for an integer (Python's and NumPy's ints, and the
    values of integer tensors and arrays, a 0-d one included: torch takes each as a size), and a real number
    or 0-d tensor of one (``torch.arange`` takes each as a length), the shapes of tensors and arrays, and
    lists, tuples, sets and dicts of them."""
    if depth > values.MAX_DEPTH or isinstance(value, (bool, np.bool_)):
        return Size()
    if isinstance(value, (int, np.integer)):
        return Size(value=abs(int(value)))
    if isinstance(value, (float, np.floating)):  # torch.arange takes one as its length
        return Size(real=_magnitude(float(value)))
    if isinstance(value, (torch.Tensor, np.ndarray)):
        shape = tuple(value.shape)
        real = 0
        if isinstance(value, torch.Tensor) and not shape and (value.is_floating_point() or value.is_complex()):
            real = 0 if value.is_meta else _magnitude(float(value.real if value.is_complex() else value))
        return Size(_largest_integer(value), math.prod(shape), max(shape, default=0), len(shape), real)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        parts = [size_of(part, depth + 1) for part in value]
        return Size(
            value=max((p.value for p in parts), default=0),
            elements=sum(p.elements for p in parts),
            dimension=max((p.dimension for p in parts), default=0),
            dims=max((p.dims for p in parts), default=0),
            real=max((p.real for p in parts), default=0),
        )
    return Size()


def _magnitude(number: float) -> int:
    """How large a real number is as a length (0 for one that is not finite: no length takes it)."""
    return math.ceil(abs(number)) if math.isfinite(number) else 0


def _largest_integer(array) -> int:
    """The largest magnitude among the values of an integer tensor or array (0 for any other dtype, or no value)."""
    if isinstance(array, torch.Tensor):
        if array.dtype == torch.bool or array.is_floating_point() or array.is_complex() or array.is_meta:
            return 0
        array = array.detach().cpu().numpy()
    if not np.issubdtype(array.dtype, np.integer) or array.size == 0:
        return 0
    return max(abs(int(array.max())), abs(int(array.min())))


def _shape(value) -> tuple[int, ...]:
    if not isinstance(value, (torch.Tensor, np.ndarray)):
        raise TypeError("not a tensor")
    return tuple(value.shape)


def _heads(built: dict) -> int:
    heads = built["num_heads"]
    if isinstance(heads, bool) or not isinstance(heads, (int, np.integer)):
        raise TypeError("num_heads is not an int")
    return int(heads)


def _scores(query, key, built: dict) -> tuple[int, ...]:
    """(B, H, Lq, Lk): the scores of a multi-head attention of ``query`` (B, Lq, d) over ``key`` (B, Lk, d), with
    the heads its module was built with."""
    return (_shape(query)[0], _heads(built), _shape(query)[-2], _shape(key)[-2])


# The scores that a stand-in's mask broadcasts to, as the contract (../shared/COURSE_SPEC.md) says, from
# (the call's arguments, the arguments its module was built with): (name, call kind, parameter) -> shape.
MASKS: dict[tuple[str, str, str], Callable[[dict, dict], tuple[int, ...]]] = {
    ("masked_softmax", "call", "mask"): lambda a, built: _shape(a["scores"]),
    ("AdditiveAttention", "forward", "mask"): lambda a, built: _shape(a["keys"])[:2],
    ("MultiHeadAttention", "forward", "mask"): lambda a, built: _scores(a["query"], a["key"], built),
    ("EncoderLayer", "forward", "mask"): lambda a, built: _scores(a["x"], a["x"], built),
    ("DecoderLayer", "forward", "tgt_mask"): lambda a, built: _scores(a["x"], a["x"], built),
    ("DecoderLayer", "forward", "memory_mask"): lambda a, built: _scores(a["x"], a["memory"], built),
}


def broadcasts(key: tuple[str, str, str], value, arguments: dict, built: dict | None = None) -> bool:
    """Whether ``value``, the argument ``key`` (name, call kind, parameter) of a stand-in's call with these
    ``arguments`` (by parameter name; ``built``: those its module was built with), is a mask that the contract
    allows: a tensor or array broadcastable to the scores of the call (:data:`MASKS`), so no larger than they
    are, whatever its rank up to theirs."""
    scores = MASKS.get(key)
    if scores is None or not isinstance(value, (torch.Tensor, np.ndarray)):
        return False
    try:
        target = tuple(int(n) for n in scores(arguments, built or {}))
    except (KeyError, IndexError, TypeError, ValueError):
        return False
    shape = tuple(value.shape)
    return len(shape) <= len(target) and all(n in (1, m) for n, m in zip(reversed(shape), reversed(target)))


def bound_arguments(signature: inspect.Signature, args, kwargs) -> inspect.BoundArguments:
    """The arguments bound to their parameters, defaults included; a TypeError where they do not fit."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return bound


def signature_of(obj, method: str | None = None) -> inspect.Signature:
    function = getattr(obj, method) if method else obj
    signature = inspect.signature(function)
    if method:  # an unbound method: leave out self
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return signature


def is_module(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, torch.nn.Module)


def _note(records: dict, name: str, kind: str, signature: inspect.Signature, args, kwargs) -> None:
    """The size of every argument of a call of ``name`` (its ``kind``), noted into ``records``."""
    with contextlib.suppress(TypeError):
        for parameter, value in bound_arguments(signature, args, kwargs).arguments.items():
            key = (name, kind, parameter)
            records[key] = records.get(key, Size()) | size_of(value)


def fixture_recording(records: dict):
    """A note for :func:`autograder.api.scripted.noting`: the size of every argument of a call of a held fixture's
    method into ``records``, under ("<fixture>.<method>", "call", parameter)."""

    def note_fixture(fixture, method: str, args, kwargs) -> None:
        name = f"{fixture.__wire_fixture__[0]}.{method}"
        _note(records, name, "call", signature_of(type(fixture), method), args, kwargs)

    return note_fixture


def recording(name: str, helper, records: dict):
    """``helper``, noting the size of every argument it gets into ``records``."""

    def note(kind: str, signature: inspect.Signature, args, kwargs) -> None:
        _note(records, name, kind, signature, args, kwargs)

    if not is_module(helper):
        signature = signature_of(helper)

        def recorded(*args, **kwargs):
            note("call", signature, args, kwargs)
            return helper(*args, **kwargs)

        return recorded

    init, forward = signature_of(helper, "__init__"), signature_of(helper, "forward")

    class Recorded(helper):
        def __init__(self, *args, **kwargs):
            note("construct", init, args, kwargs)
            super().__init__(*args, **kwargs)

        def forward(self, *args, **kwargs):
            note("forward", forward, args, kwargs)
            return super().forward(*args, **kwargs)

    Recorded.__name__ = Recorded.__qualname__ = helper.__name__
    return Recorded
