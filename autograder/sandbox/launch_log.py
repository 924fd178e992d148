"""The Triton kernels a call launches, recorded where the student's code runs, for the grader to replay.

While :func:`recording` is active, every launch of a kernel in Triton's interpreter is noted before it runs: the
kernel's name, its grid (as the launch resolved it), and each argument by name: a number, or a tensor as its storage
(a small number per storage of this call), its offset, shape, strides and what it holds before the launch. With the
launches come the source of each kernel launched and of the kernels it calls, and the numbers it reads from its
module (:func:`program_of`): what the grader needs to run them again in a sandbox of its own
(:mod:`autograder.sandbox.replay`). A source longer than :data:`MAX_SOURCE`, or past :data:`MAX_SOURCES` in all, is
not recorded: the record says ``too_long``, and the grader refuses it unread, as it refuses a record that carries
more (a forged one).

Nothing recorded here is trusted: the student's code runs in this process and can change any of it. The grader
checks the record, runs the kernels' source only once it has read it as Triton code, and compares what they write
with what the student's function returned (:mod:`autograder.calls.launches`): a forged record gains nothing.
A launch past :data:`MAX_LAUNCHES` is counted, not recorded. Standard library and torch only; triton is imported
only once a call is recorded (the student's setup has imported it by then).
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
import textwrap
import types
from collections.abc import Iterator

import torch

MAX_LAUNCHES = 16  # launches recorded for one call; the grader refuses a call that makes more
MAX_SOURCE = 20_000  # characters of one kernel's source (the grader reads no more: autograder.calls.kernel_source)
MAX_SOURCES = 40_000  # characters of the sources of one call's kernels together (the reference's are about 7,000)
MAX_RECORDED = 2**20  # elements of one tensor whose contents are recorded (a larger one is recorded without them)


class Log:
    """The launches of one call, as they are recorded."""

    def __init__(self):
        self.launches: list[dict] = []
        self.dropped = 0  # launches past MAX_LAUNCHES
        self.storages: dict[int, int] = {}  # a storage's address -> its number in this call
        self.kernels: dict[str, types.FunctionType] = {}  # the Python functions of the kernels launched, by name

    def note(self, function, args: tuple, kwargs: dict) -> dict | None:
        """Note one launch of the kernel ``function`` with these arguments; None once the log is full."""
        if len(self.launches) >= MAX_LAUNCHES:
            self.dropped += 1
            return None
        names = [p.name for p in inspect.signature(function).parameters.values()]
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        launch = {
            "kernel": str(function.__name__)[:80],
            "grid": [],
            "args": [self._argument(name, value) for name, value in bound.items()],
        }
        self.launches.append(launch)
        self.kernels.setdefault(launch["kernel"], function)
        return launch

    def _argument(self, name: str, value) -> dict:
        value = getattr(value, "base", value) if type(value).__name__ == "TensorWrapper" else value
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage().data_ptr()
            number = self.storages.setdefault(storage, len(self.storages))
            recorded = value.numel() <= MAX_RECORDED
            return {
                "name": name,
                "tensor": {
                    "storage": number,
                    "offset": int(value.storage_offset()),
                    "shape": list(value.shape),
                    "stride": list(value.stride()),
                    "dtype": str(value.dtype).removeprefix("torch."),
                    "data": value.detach().clone() if recorded else None,
                },
            }
        inner = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
        if isinstance(inner, (bool, type(None), str)):
            return {"name": name, "value": inner}
        if isinstance(inner, numbers.Number):
            return {"name": name, "value": _number(inner)}
        return {"name": name, "unsupported": type(value).__name__[:80]}

    def as_data(self) -> dict:
        """The record as plain data (what crosses to the grader)."""
        functions, constants = program_of(list(self.kernels.values()))
        data = {"launches": self.launches, "dropped": self.dropped, "functions": functions, "constants": constants}
        total = 0
        for name, source in functions.items():
            total += len(source or "")
            if source is not None and (len(source) > MAX_SOURCE or total > MAX_SOURCES):
                functions[name] = None  # what the grader would not read is not sent
                data["too_long"] = True
        return data


def _number(value):
    """A number as a plain int or float (a bool stays a bool; NumPy's and torch's scalars are converted)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)[:80]


@contextlib.contextmanager
def recording() -> Iterator[Log]:
    """Record every kernel that Triton's interpreter launches in this block (``log.launches``)."""
    from triton.runtime import interpreter

    log = Log()
    run, set_grid_dim = interpreter.InterpretedFunction.run, interpreter.interpreter_builder.set_grid_dim
    current: list[dict | None] = [None]

    def noted_run(self, *args, grid, warmup, **kwargs):
        if warmup:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        current[0] = log.note(self.fn, args, kwargs)
        try:
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            current[0] = None

    def noted_grid(*grid):
        if current[0] is not None:
            current[0]["grid"] = [int(n) for n in grid]
        return set_grid_dim(*grid)

    interpreter.InterpretedFunction.run = noted_run
    interpreter.interpreter_builder.set_grid_dim = noted_grid
    try:
        yield log
    finally:
        interpreter.InterpretedFunction.run = run
        del interpreter.interpreter_builder.set_grid_dim  # the instance's own attribute: the class's method again


def _kernel_function(value):
    """The Python function under a Triton kernel (``@triton.jit``, and any autotuner or heuristics around it)."""
    from triton.runtime import KernelInterface

    if not isinstance(value, KernelInterface):
        return None
    while isinstance(value, KernelInterface):
        value = value.fn
    return value if inspect.isfunction(value) else None


def _names(code: types.CodeType) -> list[str]:
    names = list(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names += _names(constant)
    return list(dict.fromkeys(names))


def _source(function) -> str | None:
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return None
    return source


def program_of(kernels: list) -> tuple[dict[str, str | None], dict[str, object]]:
    """The source of each of ``kernels`` (Python functions) and of the kernels they call by name (None where it
    cannot be read), and the numbers they read from their modules by name (ints, floats, bools, ``tl.constexpr`` of
    one): ``(functions, constants)``."""
    functions: dict[str, str | None] = {}
    constants: dict[str, object] = {}
    todo = list(kernels)
    while todo and len(functions) < 32:
        function = todo.pop(0)
        if function.__name__ in functions:
            continue
        functions[function.__name__] = _source(function)
        scope = function.__globals__
        for name in _names(function.__code__):
            if name in functions or name in constants or name not in scope:
                continue
            value = scope[name]
            kernel = _kernel_function(value)
            if kernel is not None:
                todo.append(kernel)
                continue
            inner = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
            if isinstance(inner, (bool, int, float)) and len(constants) < 64:
                constants[name] = _number(inner)
    return functions, constants
