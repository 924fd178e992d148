"""The Triton kernels a call of a student's function launched, laid out to be run again where the student cannot reach.

Chapter 11 teaches a *how*: the forward and backward passes of attention written as Triton kernels that never hold
the whole matrix of scores, and causal kernels that skip the blocks the mask hides. Comparing outputs cannot tell a
kernel from ``F.scaled_dot_product_attention``; a count kept in the sandbox is the student's to forge. So the
grader, given the launches that a call of the student's function recorded (:func:`traced`, through
:mod:`autograder.sandbox.launch_log`: untrusted), runs them again in a sandbox of its own, where nothing of the
student's runs but their kernels' source read as Triton code alone (:mod:`autograder.calls.kernel_source`,
:mod:`autograder.sandbox.replay`), and reads what they did (:mod:`autograder.calls.replayed`). Here:

- :func:`read` bounds the record (launches, arguments, sizes, the kernels' source) before anything is computed on
  it or parsed, and names what it refuses without quoting the record (:func:`kernel_name`);
- :func:`plan` lays the launches out for the replay, each tensor filled with what the grader trusts, recognised by
  its values (:mod:`autograder.sandbox.layouts`): a tensor that holds one of the check's inputs (reshaped,
  transposed, scaled or cast: ``q * scale`` is still ``q``), or Δ, which the grader computes itself from the
  backward's inputs, gets the grader's own copy; zeros (or any one number everywhere) stay as they are; what a
  kernel wrote stays what the replayed kernel wrote; everything else, whatever the launcher computed, is NaN. A
  tensor of as many numbers as the whole matrix of scores is refused.

A forged record gains nothing: the replay computes from the grader's inputs with code that can only compute, and
the grader compares what the replayed kernels stored with its own reference (:mod:`autograder.calls.replayed`).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from attention_course.kernels import plain
from attention_course.tooling import syntax
from autograder.calls import global_rng, kernel_source, standins
from autograder.calls.call import is_remote
from autograder.calls.kernel_source import TOO_LONG, KernelRefused, Names, bounded
from autograder.sandbox.layouts import canonical, laid_out
from autograder.sandbox.replay import MAX_PROGRAMS

MAX_LAUNCHES = 16
MAX_ARGUMENTS = 32  # of one launch
MAX_NUMBERS = 24  # arguments of one launch that are numbers (a forged launch could carry an output in them)
MAX_TENSORS = 16  # of one launch
MAX_RANK = 5
DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int16", "int8", "uint8", "bool")


class Refused(Exception):
    """What the grader does not replay: the message says why, for the student."""


@dataclass
class View:
    """One tensor argument of one launch, as recorded."""

    launch: int
    name: str
    storage: int
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str
    data: torch.Tensor | None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def end(self) -> int:
        """One past the last element of its storage that it covers."""
        if not self.numel:
            return self.offset
        return self.offset + sum((n - 1) * s for n, s in zip(self.shape, self.stride)) + 1


@dataclass
class Launch:
    kernel: str
    grid: tuple[int, ...]
    numbers: dict[str, object]
    views: list[View]


@dataclass
class Record:
    launches: list[Launch]
    functions: dict
    constants: dict
    names: Names = field(default_factory=Names)  # what a message may quote of it


def kernel_name(record: Record, index: int) -> str:
    """The kernel of launch ``index`` as a message names it: by its name where the submission's source defines a
    function of that name, "the kernel of launch N" otherwise (:class:`Names`: never a string the student's process
    wrote at run time)."""
    if not 0 <= index < len(record.launches):
        return "a kernel"
    return record.names.kernel(record.launches[index].kernel, index)


@dataclass
class Sizes:
    """The check's sizes: leading positions (batch and heads, flattened), queries, keys."""

    heads: int
    queries: int
    keys: int

    @property
    def scores(self) -> int:
        return self.heads * self.queries * self.keys


def _integer(value, low: int = 0, high: int = 2**40) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        raise Refused("the record of its launches could not be read")
    return value


def read(data, sizes: Sizes, source: str | None = None) -> Record:
    """The record of a call's launches, each part bounded (the kernels' source too, before it is parsed: a parse
    costs the grader's process far more than the text); :class:`Refused` where it cannot be replayed. ``source``: the
    submission's program, where the call ran in the sandbox; a message quotes only the names it holds (:class:`Names`),
    no other string or number of the record."""
    if not isinstance(data, dict) or not isinstance(data.get("launches"), list):
        raise Refused("the record of its launches could not be read")
    if data.get("too_long"):
        raise Refused(TOO_LONG)
    try:
        bounded(data.get("functions"), data.get("constants"))
    except KernelRefused as exc:
        raise Refused(str(exc)) from None
    if data.get("dropped") or len(data["launches"]) > MAX_LAUNCHES:
        raise Refused(f"it launched more than {MAX_LAUNCHES} kernels for one call")
    names = Names.of(source)
    launches = []
    for index, entry in enumerate(data["launches"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("args"), list):
            raise Refused("the record of its launches could not be read")
        kernel = entry.get("kernel")
        if not isinstance(kernel, str) or len(kernel) > 80 or not kernel.isidentifier():
            raise Refused("the record of its launches could not be read")
        said = names.kernel(kernel, index)
        grid = entry.get("grid") or []
        if not isinstance(grid, list) or len(grid) > 3:
            raise Refused("the record of its launches could not be read")
        grid = tuple(_integer(n, 0, 2**31) for n in grid)
        if math.prod(grid) > MAX_PROGRAMS:
            raise Refused(
                f"{said} is launched on more than {MAX_PROGRAMS} programs at once, which the grader does not replay"
            )
        if len(entry["args"]) > MAX_ARGUMENTS:
            raise Refused(f"{said} takes more than {MAX_ARGUMENTS} arguments")
        numbers, views = {}, []
        for argument in entry["args"]:
            if not isinstance(argument, dict):
                raise Refused("the record of its launches could not be read")
            name = str(argument.get("name", ""))
            if not name.isidentifier():
                raise Refused("the record of its launches could not be read")
            if "tensor" in argument:
                views.append(_view(index, name, argument["tensor"], sizes, f"{said}'s {names.word(name)}"))
            elif "unsupported" in argument:  # its type's name is the student's process's to write: not quoted
                raise Refused(
                    f"{said} takes {names.word(name)}, neither a tensor nor a number, which the grader cannot pass "
                    "to it again: pass tensors and numbers"
                )
            else:
                value = argument.get("value")
                if not (
                    value is None
                    or isinstance(value, (bool, int, float))
                    or (isinstance(value, str) and len(value) < 40)
                ):
                    raise Refused("the record of its launches could not be read")
                if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
                    raise Refused("the record of its launches could not be read")
                numbers[name] = value
        if len(numbers) > MAX_NUMBERS or len(views) > MAX_TENSORS:
            raise Refused(f"{said} takes more than {MAX_NUMBERS} numbers or {MAX_TENSORS} tensors")
        launches.append(Launch(kernel, grid, numbers, views))
    return Record(launches, data["functions"], data["constants"], names)


def _view(launch: int, name: str, tensor, sizes: Sizes, said: str) -> View:
    """One tensor argument, bounded (``said``: the argument as a message names it)."""
    if not isinstance(tensor, dict):
        raise Refused("the record of its launches could not be read")
    shape = tensor.get("shape") or []
    stride = tensor.get("stride") or []
    if (
        not isinstance(shape, list)
        or not isinstance(stride, list)
        or len(shape) != len(stride)
        or len(shape) > MAX_RANK
    ):
        raise Refused("the record of its launches could not be read")
    dtype = tensor.get("dtype")
    if dtype not in DTYPES:  # its name is the student's process's to write: not quoted
        raise Refused(f"{said} is a tensor of a dtype the grader does not replay (it replays {', '.join(DTYPES)})")
    view = View(
        launch,
        name,
        _integer(tensor.get("storage"), 0, 4 * MAX_TENSORS * MAX_LAUNCHES),
        _integer(tensor.get("offset")),
        tuple(_integer(n) for n in shape),
        tuple(_integer(s) for s in stride),
        dtype,
        None,
    )
    if view.end >= sizes.scores or view.numel >= sizes.scores:
        raise Refused(
            f"it passes the kernel a tensor ({said}) as large as the whole matrix of scores "
            f"({sizes.heads} x {sizes.queries} x {sizes.keys}) or larger: a kernel holds one block of scores at a "
            "time, never all of them"
        )
    data = tensor.get("data")
    if isinstance(data, torch.Tensor) and tuple(data.shape) == view.shape and str(data.dtype) == f"torch.{dtype}":
        view.data = data
    return view


# ---------------------------------------------------------------------------- laying out the replay


@dataclass
class Plan:
    """The replay's request, and what the grader knows of each view it lays out."""

    request: dict
    record: Record
    sizes: Sizes
    views: list[View] = field(default_factory=list)
    storage_sizes: dict[int, int] = field(default_factory=dict)


SIDES = {"q": "query", "grad_output": "query", "output": "query", "k": "key", "v": "key"}
SIDES |= {"k_repeated": "key", "v_repeated": "key"}


def derived(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors the grader recognises in a launch, by name: the check's inputs, and where the backward's output
    and grad_output are among them, Δ (``delta``: the sum of grad_output * output over the features of each query),
    computed here in float64; with grouped-query heads, k and v repeated for each query head (``k_repeated``,
    ``v_repeated``: a launcher's copy that the replay runs as the student's kernels read it, and
    :func:`autograder.calls.replayed.repeated` names)."""
    known = {name: tensor for name, tensor in inputs.items() if isinstance(tensor, torch.Tensor)}
    if "output" in known and "grad_output" in known:
        known["delta"] = (known["output"].double() * known["grad_output"].double()).sum(-1)
    q = known.get("q")
    for name in ("k", "v"):
        kv = known.get(name)
        if q is not None and kv is not None and q.dim() >= 3 and kv.dim() == q.dim() and kv.shape[-3] != q.shape[-3]:
            with contextlib.suppress(ValueError):  # heads that do not divide: no such copy
                known[f"{name}_repeated"] = plain.grouped(q, kv)
    return known


def plan(record: Record, inputs: dict[str, torch.Tensor], sizes: Sizes) -> Plan:
    """The replay's request: every view filled with what the grader trusts (see the module's docstring)."""
    if not record.launches:
        raise Refused(
            "it launched no Triton kernel: the computation must run in kernels it launches (kernel[grid](...)), "
            "not in PyTorch"
        )
    canons = {name: canonical(tensor) for name, tensor in derived(inputs).items()}
    views = [view for launch in record.launches for view in launch.views]
    storages: dict[int, tuple[str, int]] = {}
    for view in views:
        dtype, end = storages.get(view.storage, (view.dtype, 0))
        if dtype != view.dtype:
            raise Refused("it passes views of one storage with different dtypes, which the grader does not replay")
        storages[view.storage] = (dtype, max(end, view.end))
    if sum(end for _, end in storages.values()) >= 8 * sizes.scores:
        raise Refused("its kernels are given more memory than the whole matrix of scores several times over")
    numbering = {number: i for i, number in enumerate(sorted(storages))}
    first = {}
    for view in views:
        first.setdefault(view.storage, view.launch)
    # what each view is, as far as the grader trusts it: its own tensors, recognised by value, and one number
    fills, rows = {}, []
    for i, view in enumerate(views):
        role = None
        for name, canon in canons.items():
            laid = laid_out(view.data, canon)
            if laid is not None:
                role = (name, *laid)
                break
        if role is not None:
            name, values, numbers = role
            fills[i] = values.reshape(view.shape).to(getattr(torch, view.dtype))
            if name in SIDES and canons[name].dim() == 3:
                elements = torch.as_strided(torch.arange(view.end), view.shape, view.stride, view.offset).reshape(-1)
                entry = {"storage": numbering[view.storage], "side": SIDES[name], "elements": elements, "rows": numbers}
                rows.append(entry)
        elif view.data is not None and view.data.numel() and _constant(view.data):
            fills[i] = view.data.clone()
        else:
            fills[i] = None
    launches = []
    position = 0
    for index, launch in enumerate(record.launches):
        arguments = {name: {"value": value} for name, value in launch.numbers.items()}
        for view in launch.views:
            spec = {
                "storage": numbering[view.storage],
                "offset": view.offset,
                "shape": list(view.shape),
                "stride": list(view.stride),
                "fill": fills[position],
                "logged": view.data if first[view.storage] < index else None,
            }
            arguments[view.name] = {"view": spec}
            position += 1
        launches.append({"kernel": launch.kernel, "grid": list(launch.grid), "args": arguments})
    sides = [
        {"side": SIDES[name], "values": canons[name].float()}
        for name in canons
        if name in SIDES and canons[name].dim() == 3
    ]
    request = {
        "storages": [{"dtype": storages[n][0], "size": storages[n][1]} for n in sorted(storages)],
        "launches": launches,
        "rows": rows,
        "sides": sides,  # to recognise the queries and keys in what the kernels write (a scratch copy)
    }
    return Plan(request, record, sizes, views, {numbering[n]: storages[n][1] for n in storages})


def _constant(data: torch.Tensor) -> bool:
    """Whether ``data`` holds one number everywhere (zeros, -inf, ones: what a launcher fills a buffer with)."""
    flat = data.detach().reshape(-1)
    return bool((flat == flat[0]).all())


# ---------------------------------------------------------------------------- a call's launches


@dataclass
class Trace:
    """What a call's launches left: the record (plain data, untrusted), where its kernels are run again, and, where
    the call ran in the sandbox, the source of the submission's program (what the student wrote before any input
    was made: :func:`scrubbed` quotes no other name)."""

    data: object = None
    replayer: object = None
    source: str | None = None

    def replay(self, program: str, request: dict) -> dict:
        if self.replayer is None:
            return {"error": "the kernels could not be run again here"}
        return self.replayer(program, request)


@contextlib.contextmanager
def traced(obj) -> Iterator[Trace]:
    """Record the Triton kernels that the calls of ``obj`` in this block launch: in the sandbox, where ``obj`` runs
    there (the grader's session brings the record back, and replays in a sandbox of its own); here otherwise (a
    notebook's own process, where the student's code runs anyway, replays here too)."""
    trace = Trace()
    if is_remote(obj):
        scope = standins.current()
        if scope is None:
            raise RuntimeError("a call in the sandbox is traced only while a check runs")
        scope.trace, scope.traced, scope.replayer = True, None, None
        try:
            yield trace
        finally:
            scope.trace = False
            trace.data, trace.replayer, trace.source = scope.traced, scope.replayer, scope.source
        return
    from autograder.sandbox import launch_log, replay

    # one at a time in this process (the grader's threads run kernels too): the launches recorded are this call's
    with global_rng.LOCK, syntax.held(), launch_log.recording() as log:
        yield trace
    trace.data, trace.replayer = log.as_data(), functools.partial(_here, replay.replay)


def scrubbed(text: str, trace: Trace) -> str:
    """``text`` (a failure's message) without a name that only the record holds (:func:`kernel_source.scrubbed`)."""
    return kernel_source.scrubbed(text, trace.source, trace.data)


def _here(replay, program: str, request: dict) -> dict:
    with global_rng.LOCK:  # Triton's interpreter keeps one program's state for the whole process
        return replay(program, request)
