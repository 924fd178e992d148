"""Calls that the checks of one notebook share.

The same student function on the same inputs and seed is called once while the notebook is graded
(:func:`shared_calls`), and each check is given its own copy of what it returned."""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np
import torch

# The calls that the checks of the notebook being graded share (key -> what the call returned), or None: each
# check calls for itself (a notebook's own kernel, a test).
_SHARED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("shared_calls", default=None)


@contextlib.contextmanager
def shared_calls():
    """The checks run inside share their calls (:func:`shared`), for the grading of one notebook."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def shared(key: tuple | None, make, copied=None):
    """What ``make()`` returned, made once per ``key`` while :func:`shared_calls` holds, each caller given its own
    copy (``copied``, by default :func:`copy_of`: a check may change what it reads); a call that raised is made again
    by the next check (its error is that check's). Without a store, or with a key of None, ``make()`` every time."""
    store = _SHARED.get()
    if store is None or key is None:
        return make()
    if key not in store:
        store[key] = make()
    return (copied or copy_of)(store[key])


def copy_of(value):
    """A copy of a returned value made of tensors, arrays, numbers and containers of them."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return value.copy() if isinstance(value, np.ndarray) else value.clone()
    if isinstance(value, (tuple, list)):
        return type(value)(copy_of(part) for part in value)
    if isinstance(value, dict):
        return {name: copy_of(part) for name, part in value.items()}
    return value


def shareable(value) -> bool:
    """Whether a returned value may be shared between checks: tensors, arrays, numbers, strings and None, in tuples,
    lists and dicts (an object that stays in the sandbox, a student's own class, is called again by each check)."""
    if isinstance(value, (torch.Tensor, np.ndarray, bool, int, float, complex, str, np.generic)) or value is None:
        return True
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        return all(shareable(part) for part in value)
    if isinstance(value, dict) and type(value) is dict:
        return all(isinstance(name, str) and shareable(part) for name, part in value.items())
    return False


class Identity:
    """An object as part of a key: equal to itself alone, and kept alive while the key is (so that its id is not
    another's), whatever its own ``==`` and hash."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return isinstance(other, Identity) and other.obj is self.obj


class NotShared(Exception):
    """A returned value that checks do not share (:func:`shareable`): the check that made the call reads it."""

    def __init__(self, returned):
        super().__init__("not shared")
        self.returned = returned
