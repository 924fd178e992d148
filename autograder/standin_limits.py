"""How large a stand-in's call may be: its arguments' sizes, bounded by those the reference item passes itself.

What the grader computes for a stand-in is bounded by what the reference item itself asks of its
helpers on the same inputs (:func:`recording` notes it): every argument of a stand-in's call (anything
that can stand for an integer, a NumPy int or the values of an integer tensor as well as an int; a
tensor's size, largest dimension and number of dimensions; in lists, tuples, sets and dicts) may be at
most a few times what the reference passed for that argument (:meth:`Size.within`), so nothing is
computed on sizes the student chose.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from dataclasses import dataclass

import numpy as np
import torch

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
            if got > most:
                return f"{what} {got}, more than the {most} allowed"
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


def recording(name: str, helper, records: dict):
    """``helper``, noting the size of every argument it gets into ``records``."""

    def note(kind: str, signature: inspect.Signature, args, kwargs) -> None:
        with contextlib.suppress(TypeError):
            for parameter, value in bound_arguments(signature, args, kwargs).arguments.items():
                key = (name, kind, parameter)
                records[key] = records.get(key, Size()) | size_of(value)

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
