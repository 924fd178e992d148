"""PyTorch's global random generator, used by the grader's threads under one lock.

`make grade` grades notebooks side by side in threads: every use of it in the grader goes through this
module, under one lock.

The lock is also what keeps the grader from hanging. ``torch.get_rng_state()`` holds the generator's own mutex
while it makes the tensor it returns; making it can start Python's garbage collector, which runs Python code and
so may hand the interpreter to another thread. Had that thread called into the generator directly, it would
wait for the mutex while holding the interpreter, which the first thread needs to finish: both wait for ever
(seen in the catalogue: two gradings stopped in ``get_rng_state`` for 20 minutes). A thread that waits for this
lock lets go of the interpreter, so the first thread finishes.

Work that a student's code asks of the grader (a stand-in's call: :mod:`autograder.calls.standins`) takes none of
this lock, however long it runs: it draws from a generator of its own instead (:func:`private`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

LOCK = threading.RLock()


@contextlib.contextmanager
def forked(seed: int | None = None, state: torch.Tensor | None = None) -> Iterator[None]:
    """The global generator for this block alone, seeded with ``seed`` or set to ``state`` (else left as it
    is), and as it was after the block; no other thread of the grader uses it meanwhile."""
    with LOCK, torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        if state is not None:
            torch.set_rng_state(state)
        yield


def state() -> torch.Tensor:
    """The global generator's state now."""
    with LOCK:
        return torch.get_rng_state()


@contextlib.contextmanager
def private(state: torch.Tensor | None = None) -> Iterator[torch.Generator]:
    """A generator of the block's own, set to ``state`` (a state of the global generator; else seeded as a new
    one is): every random operation of torch in this thread draws from it during the block, exactly what it
    would have drawn from the global generator in that state, and the global generator is neither used nor
    locked. The block gets the generator, whose state afterwards is the global one's had it drawn."""
    generator = torch.Generator()
    if state is not None:
        generator.set_state(state)
    with _OwnGenerator(generator):
        yield generator


class _OwnGenerator(TorchDispatchMode):
    """Gives every random operation ``generator`` where it names none (a dispatch mode holds for its own
    thread only); an operation that would draw from the global generator all the same is refused."""

    def __init__(self, generator: torch.Generator):
        super().__init__()
        self.generator = generator

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in _DRAWS:
            _DRAWS[func] = (_with_generator(func), torch.Tag.nondeterministic_seeded in func.tags)
        seeded, draws = _DRAWS[func]
        if kwargs.get("generator") is None:
            if seeded is not None:
                func, kwargs = seeded, {**kwargs, "generator": self.generator}
            elif draws:
                raise RuntimeError(f"{func} draws from the global random generator, which is not the grader's to use")
        return func(*args, **kwargs)


# Each operation met: (its overload that takes a generator, or None; whether it draws random numbers).
_DRAWS: dict = {}


def _takes_generator(func) -> bool:
    return any(argument.name == "generator" for argument in func._schema.arguments)


def _with_generator(func):
    """``func``, or its overload that takes a generator (``randn.default``: ``randn.generator``;
    ``randint.low``: ``randint.low_generator``); None if there is none."""
    if _takes_generator(func):
        return func
    name = func._overloadname
    overload = "generator" if name == "default" else f"{name}_generator"
    if overload in func.overloadpacket.overloads():
        seeded = getattr(func.overloadpacket, overload)
        if _takes_generator(seeded):
            return seeded
    return None
