"""Checks that tests call, one line per property.

Every check takes an :class:`Item` (the student's object and its name in the
course contract), inputs described as plain data (see :mod:`autograder.specs`),
and keyword options that are plain data too. It makes the inputs, calls the
student's code, and raises :class:`CheckFailed` with a message that names

* the item,
* the property that failed,
* the shapes of the inputs,
* and a hint,

and never prints an expected value. Because everything but the student's
object is plain data, a check call can be recorded and replayed by a grader
that runs the student's code in another process.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import importlib
import inspect
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from autograder import reference, specs


class CheckFailed(AssertionError):
    """A graded property does not hold. The message is written for the student: what was called,
    the property, the inputs, the problem and a hint."""

    def __init__(self, what: str, prop: str, inputs: str, problem: str, hint: str):
        self.what, self.prop, self.inputs, self.problem, self.hint = what, prop, inputs, problem, hint
        super().__init__(f"{what}: {prop} failed\n  inputs: {inputs}\n  problem: {problem}\n  hint: {hint}")

    def with_hint(self, hint: str) -> CheckFailed:
        return CheckFailed(self.what, self.prop, self.inputs, self.problem, hint)


@dataclass(frozen=True)
class Item:
    """A graded item: the student's function or class under its contract name.

    ``outputs`` names the values the item returns, in order, when it returns a
    tuple (``("output", "weights")``); leave it empty for a single value.
    ``returns`` is the library of the result (``"torch"`` or ``"numpy"``) where no input says it.

    An item may be built on other graded items. Its checks grade its own code only: where a check
    fails, the grader compares it with the reference solution built on the student's own helpers
    (a *hybrid*), and an item that computes exactly what that gives keeps its points; the helper
    loses them in its own tests. ``uses`` maps the names that the reference looks up to the
    student's helpers (``{"split_heads": split_heads}``); ``parts`` names submodules of a class item
    that are graded items of their own (``("ff", "self_attn")``): the hybrid calls the student's; a
    ``hybrid(student_object, reference_object)`` function builds anything else.
    """

    assignment: str
    name: str
    obj: Any = field(compare=False, repr=False)
    outputs: tuple[str, ...] = ()
    returns: str | None = None
    uses: dict = field(default_factory=dict, compare=False, repr=False)
    parts: tuple[str, ...] = ()
    hybrid: Callable | None = field(default=None, compare=False, repr=False)

    @property
    def depends(self) -> bool:
        return bool(self.uses or self.parts or self.hybrid)


class Mistake:
    """A realistic wrong answer to an item, as changes to the reference solution's code, and its
    cause in words: a check that fails with the values this gives names the cause in its hint.

    ``Mistake("the scores are divided by the square root of d_model, not of one head's size",
    ("math.sqrt(q.size(-1))", "math.sqrt(query.size(-1))"))``
    """

    def __init__(self, cause: str, *replacements: tuple[str, str]):
        if not replacements:
            raise ValueError("a Mistake needs at least one (old, new) replacement")
        self.cause, self.replacements = cause, tuple(tuple(r) for r in replacements)


_MISTAKES: dict[tuple[str, str], tuple[Mistake, ...]] = {}


def mistakes(item: Item, *known: Mistake) -> None:
    """Register the known mistakes of ``item`` (in a hidden test: the grader's knowledge only)."""
    for mistake in known:
        reference.variant(item.assignment, item.name, mistake.replacements)  # each must apply to the reference
    _MISTAKES[(item.assignment, item.name)] = tuple(known)


def excused_where_helpers_fail(item: Item) -> Item:
    """``item`` graded on its own code where it fails only because the helpers it uses fail.

    Where calling the student's object raises, the reference solution built on the student's
    helpers (``item.uses``) runs on copies of the same inputs. If that raises too, the helpers are
    to blame: they lose their points in their own tests, and the call returns what the reference
    solution gives, so that this item is graded as if they were right. An unfilled stub of the item
    itself (a ``NotImplementedError`` without a message, raised in the student's own frame: the
    function's, or ``__init__`` of a class) is never excused, and neither is a failure of the sandbox.
    """
    from autograder.sandbox.process import SandboxError  # the grader's side only

    student = item.obj
    solution = reference.get(item.assignment, item.name)
    on_students_helpers = _with_helpers(solution, item.uses)
    raised_in = "__init__" if isinstance(solution, type) else item.name

    def copy(value):
        return value.clone() if isinstance(value, torch.Tensor) else value

    def graded(*args, **kwargs):
        try:
            return student(*args, **kwargs)
        except SandboxError:
            raise
        except Exception as exc:
            stub = isinstance(exc, NotImplementedError) and not str(exc)
            if stub and getattr(exc, "raised_in", "") == raised_in:
                raise
            try:
                on_students_helpers(*map(copy, args), **{key: copy(value) for key, value in kwargs.items()})
            except SandboxError:
                raise
            except Exception:
                return solution(*args, **kwargs)
            raise

    return dataclasses.replace(item, obj=graded)


# --------------------------------------------------------------------------- helpers


# Seeding and building a module use PyTorch's global generator, which `make grade` shares
# between the threads that grade notebooks side by side.
_TORCH_RNG = threading.Lock()


class _Call:
    """One call of the student's code: its inputs (as plain data) and what it returned."""

    def __init__(
        self,
        item: Item,
        prop: str,
        args,
        kwargs,
        seed: int,
        hint: str,
        init=None,
        method: str | None = None,
        mode: str | None = None,
    ):
        if mode not in (None, "train", "eval"):
            raise ValueError(f"mode must be 'train' or 'eval', got {mode!r}")
        self.item, self.prop, self.hint, self.seed, self.mode = item, prop, hint, seed, mode
        self.args = [specs.as_spec(a) for a in args]
        self.kwargs = {k: specs.as_spec(v) for k, v in (kwargs or {}).items()}
        self.inputs, self.keywords = specs.materialize(self.args, self.kwargs, seed)
        # A class item is built with ``init`` (plain data), then ``method`` is called (default: the object).
        self.init = None if init is None else tuple(init)
        self.method = method
        self.weights = None  # a state_dict to load into the student's object before the call

    def use_reference_weights(self) -> None:
        """Build the reference object (seeded) and keep its parameters for the student's object.

        Only parameters cross, never buffers: a buffer can hold the answer (the table of a
        positional encoding), which the student's object must compute itself.
        """
        with _TORCH_RNG:
            torch.manual_seed(self.seed)
            built = reference.get(self.item.assignment, self.item.name)(*self.init)
        self.weights = _randomised(dict(built.named_parameters()), self.seed)

    def build(self, cls):
        """The object the call goes to: an instance of ``cls`` with the weights, and its ``method``."""
        return self.bound(self.instance(cls))

    def instance(self, cls):
        """An instance of ``cls`` built with ``init``, holding the weights, in ``mode``."""
        name = self.item.name
        try:
            with _TORCH_RNG:
                torch.manual_seed(self.seed)
                instance = cls(*self.init)
        except NotImplementedError:
            self.fail(
                f"{name}({', '.join(map(repr, self.init))}) raised NotImplementedError",
                f"write your implementation of {name}",
            )
        except Exception as exc:
            self.fail(f"{name}({', '.join(map(repr, self.init))}) raised {type(exc).__name__}: {exc}")
        if self.weights is not None:
            # The reference object gets them too: it computes with exactly what the student's got.
            # Parameters and buffers that the object has besides the contract's keep their own values.
            try:
                missing, unexpected = instance.load_state_dict(self.weights, strict=False)
                unexpected = [str(key) for key in unexpected]
            except Exception as exc:
                self.fail(
                    f"loading the weights into it with load_state_dict failed: {exc}",
                    "give the submodules the shapes the assignment says",
                )
            if unexpected:
                self.fail(
                    f"it has no parameter {', '.join(unexpected[:4])}"
                    f"{' and others' if len(unexpected) > 4 else ''}, which the assignment names",
                    "the grader loads weights by name: give the submodules the names the assignment says",
                )
        if self.mode is not None:
            try:
                instance.train(self.mode == "train")
            except Exception as exc:
                self.fail(
                    f"{name}.train() raised {type(exc).__name__}: {exc}",
                    f"{name} must be an nn.Module (class {name}(nn.Module)) that calls super().__init__()",
                )
        return instance

    def bound(self, instance):
        """``instance``, or its ``method`` where the call goes to a method."""
        if self.method is None:
            return instance
        try:
            return getattr(instance, self.method)
        except AttributeError:
            self.fail(
                f"{self.item.name} has no method {self.method}",
                f"define {self.item.name}.{self.method} as the assignment says",
            )

    def fail(self, problem: str, hint: str | None = None):
        what = (
            self.item.name
            if self.init is None
            else f"{self.item.name}({', '.join(map(repr, self.init))}){'.' + self.method if self.method else ''}"
        )
        prop = self.prop if self.mode is None else f"{self.prop} (in {self.mode} mode)"
        raise CheckFailed(what, prop, self.describe_inputs(), problem, hint or self.hint)

    def describe_inputs(self) -> str:
        names = _parameter_names(self.item.obj)
        if self.init is not None:
            names = self._method_parameters()
        parts = []
        for i, spec in enumerate(self.args):
            name = names[i] if i < len(names) else f"argument {i + 1}"
            parts.append(f"{name}={spec.describe()}")
        parts += [f"{k}={spec.describe()}" for k, spec in self.kwargs.items()]
        return ", ".join(parts) or "(none)"

    def run(self, obj=None, inputs=None):
        """Call the student's object (or ``obj``) on ``inputs`` (args, kwargs), by default fresh copies."""
        inputs, keywords = inputs or specs.materialize(self.args, self.kwargs, self.seed)
        target = self.item.obj if obj is None else obj
        if self.init is not None:
            target = self.build(target)
        return self.invoke(target, inputs, keywords)

    def invoke(self, target, inputs, keywords):
        """Call ``target`` (the student's function, or a method of an object built for this call)."""
        if not callable(target):
            self.fail(
                f"{self.item.name} is {type(target).__name__}, not a function or class",
                f"define {self.item.name} as the assignment describes",
            )
        try:
            return target(*inputs, **keywords)
        except NotImplementedError:
            self.fail("it raised NotImplementedError", f"write your implementation of {self.item.name}")
        except CheckFailed:
            raise
        except Exception as exc:  # the student's error, reported as a failed property
            self.fail(f"it raised {type(exc).__name__}: {exc}")

    def _method_parameters(self) -> list[str]:
        try:
            cls = reference.get(self.item.assignment, self.item.name)
        except reference.ReferenceUnavailable:  # a student's machine: the student's own class names them
            cls = self.item.obj if inspect.isclass(self.item.obj) else None
            if cls is None:
                return []
        names = _parameter_names(getattr(cls, self.method or "forward", cls))
        return names[1:] if names[:1] == ["self"] else names

    def outputs(self, returned) -> dict[str, Any]:
        """The returned values by name, after checking the return structure. A returned value that is
        itself a tuple of arrays (a cache of keys and values) becomes ``name[0]``, ``name[1]``, ..."""
        names = self.item.outputs
        if not names:
            return {"result": returned}
        if not isinstance(returned, (tuple, list)) or len(returned) != len(names):
            got = f"a {type(returned).__name__}"
            if isinstance(returned, (tuple, list)):
                got += f" of {len(returned)} values"
            self.fail(
                f"it returned {got}; expected a tuple of {len(names)}: ({', '.join(names)})",
                f"end {self.item.name} with `return {', '.join(names)}`",
            )
        values = {}
        for name, value in zip(names, returned):
            if (
                isinstance(value, (tuple, list))
                and value
                and all(isinstance(part, (torch.Tensor, np.ndarray)) for part in value)
            ):
                values.update({f"{name}[{i}]": part for i, part in enumerate(value)})
            else:
                values[name] = value
        return values

    def expected_library(self) -> str | None:
        for spec in [*self.args, *self.kwargs.values()]:
            if getattr(spec, "library", "python") in specs.LIBRARIES:
                return spec.library
        return self.item.returns

    def as_numpy(self, value, name: str) -> np.ndarray:
        """A returned tensor or array as a NumPy array (float64, or bool), checking its kind."""
        library = self.expected_library()
        if isinstance(value, torch.Tensor):
            if library == "numpy":
                self.fail(
                    f"{name} is a torch tensor; this function works in NumPy",
                    "use NumPy operations only, and return a NumPy array",
                )
            value = value.detach().cpu()
            return value.numpy() if value.dtype == torch.bool else value.double().numpy()
        if isinstance(value, (np.ndarray, np.generic)):
            if library == "torch":
                self.fail(
                    f"{name} is a NumPy array; this function works in torch",
                    "use torch operations, and return a torch.Tensor",
                )
            value = np.asarray(value)
            return value if value.dtype == bool else value.astype(np.float64)
        self.fail(
            f"{name} is a {type(value).__name__}, not a {'NumPy array' if library == 'numpy' else 'torch tensor'}"
        )

    def select(self, returned, output: str | None) -> tuple[str, np.ndarray]:
        values = self.outputs(returned)
        if output is None:
            output = next(iter(values))
        if output not in values:
            raise ValueError(f"output must be one of {list(values)}, got {output!r}")
        return output, self.as_numpy(values[output], output)

    def input_value(self, which: int | str):
        """One of the made inputs, by position or keyword."""
        return self.keywords[which] if isinstance(which, str) else self.inputs[which]


def _randomised(parameters: dict, seed: int) -> dict:
    """The parameters, as plain tensors; those that start out constant (a layer norm's weight 1 and
    bias 0) are drawn at random around their value, so that a norm used in the wrong place shows."""
    generator = torch.Generator().manual_seed(seed + 7919)
    weights = {}
    for key, value in parameters.items():
        value = value.detach().clone()
        if value.numel() > 1 and bool((value == value.reshape(-1)[0]).all()):
            value = value + 0.5 * torch.randn(value.shape, generator=generator).to(value.dtype)
        weights[key] = value
    return weights


def _parameter_names(obj) -> list[str]:
    try:
        return [
            p.name
            for p in inspect.signature(obj).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return []


def _compare(
    call: _Call,
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    rtol: float,
    atol: float,
    against: str = "the reference solution",
):
    if got.shape != want.shape:
        call.fail(f"{name} has shape {got.shape}, but {against} gives shape {want.shape}")
    if want.dtype == bool:
        if got.dtype != bool:
            call.fail(
                f"{name} has a numeric dtype; expected a boolean mask (torch.bool, True = may attend)",
                "a mask is boolean from start to end: True where a query may attend, never 0/1 numbers",
            )
        extra, missing = int((got & ~want).sum()), int((~got & want).sum())
        if extra or missing:
            call.fail(
                f"{name} differs from {against}: {extra} entries are True where they should be False "
                f"and {missing} are False where they should be True, of {want.size}"
            )
        return
    got_bad, want_bad = ~np.isfinite(got), ~np.isfinite(want)
    if (got_bad & ~want_bad).any():
        call.fail(
            f"{name} contains NaN or inf where {against} is finite",
            "NaN and inf come from exponentials of large numbers, or from a row whose entries are all masked",
        )
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        if want.size == 1:  # one number: its distance from the answer would give the answer away
            call.fail(f"{name} differs from {against} (allowed: {atol:g} + {rtol:g} x |value|)")
        diff = np.abs(np.where(want_bad | got_bad, 0.0, got - want))
        wrong = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        call.fail(
            f"{name} differs from {against}: the largest difference is {diff.max():.3g} "
            f"(allowed: {atol:g} + {rtol:g} x |value|), and {wrong.mean():.0%} of its entries are off"
        )


# --------------------------------------------------------------------------- each item's own code


class _StudentPart(torch.nn.Module):
    """A submodule of a hybrid reference that calls the student's own submodule (in the sandbox)."""

    def __init__(self, part):
        super().__init__()
        self.__dict__["part"] = part  # an object of the student's, not a submodule of this one

    def forward(self, *args, **kwargs):
        return self.part(*args, **kwargs)


def _with_helpers(obj, uses: dict):
    """The reference ``obj`` (a function or a class) calling ``uses`` in place of its own helpers."""
    if not uses:
        return obj

    def rebind(function):
        return types.FunctionType(
            function.__code__,
            {**function.__globals__, **uses},
            function.__name__,
            function.__defaults__,
            function.__closure__,
        )

    if isinstance(obj, types.FunctionType):
        return rebind(obj)
    methods = {name: rebind(value) for name, value in vars(obj).items() if isinstance(value, types.FunctionType)}
    return type(obj.__name__, (obj,), methods)


def _reference_outputs(call: _Call, obj, student) -> dict:
    """What ``obj`` (the reference, or a known mistake of it), built on the student's helpers, returns
    on the call's inputs; ``student`` is the student's object for a class item."""
    obj = _with_helpers(obj, call.item.uses)
    inputs, keywords = specs.materialize(call.args, call.kwargs, call.seed)
    if call.init is None:
        return call.outputs(call.invoke(obj, inputs, keywords))
    instance = call.instance(obj)
    for part in call.item.parts:
        instance._modules[part] = _StudentPart(getattr(student, part))
    if call.item.hybrid is not None:
        instance = call.item.hybrid(student, instance)
    return call.outputs(call.invoke(call.bound(instance), inputs, keywords))


def _same(call: _Call, got: dict, want: dict) -> bool:
    if set(got) != set(want):
        return False
    for name in want:
        a, b = call.as_numpy(got[name], name), call.as_numpy(want[name], name)
        if a.shape != b.shape or (a.dtype == bool) != (b.dtype == bool):
            return False
        if not (np.array_equal(a, b) if b.dtype == bool else np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)):
            return False
    return True


def _replay(item: Item, arguments: dict):
    """A call that replays a failed check's call of the item with the reference's weights: (call,
    the student's object or None, the student's outputs); None where that cannot be done here."""
    try:
        reference.get(item.assignment, item.name)
    except reference.ReferenceUnavailable:  # a student's machine: the visible tests only
        return None
    call = _Call(
        item,
        "replay",
        arguments.get("args", ()),
        arguments.get("kwargs"),
        arguments.get("seed", 0),
        "",
        init=arguments.get("init"),
        method=arguments.get("method"),
        mode=arguments.get("mode"),
    )
    try:
        student = None
        if call.init is not None:
            call.use_reference_weights()
            student = call.instance(item.obj)
            inputs, keywords = specs.materialize(call.args, call.kwargs, call.seed)
            got = call.outputs(call.invoke(call.bound(student), inputs, keywords))
        else:
            got = call.outputs(call.run())
    except Exception:  # the student's code cannot even be replayed: nothing to compare
        return None
    return call, student, got


def _own_code_is_right(item: Item, arguments: dict) -> bool:
    """Whether the item computes, on the failed check's inputs, exactly what the reference computes
    when it is built on the student's own helpers: then the helpers, not the item, are wrong."""
    replay = _replay(item, arguments)
    if replay is None:
        return False
    call, student, got = replay
    try:
        return _same(call, got, _reference_outputs(call, reference.get(item.assignment, item.name), student))
    except Exception:
        return False


def _diagnosis(item: Item, arguments: dict) -> str | None:
    """The cause of a failure: the first known mistake of the item whose values the student's match."""
    known = _MISTAKES.get((item.assignment, item.name))
    replay = _replay(item, arguments) if known else None
    if replay is None:
        return None
    call, student, got = replay
    for mistake in known:
        try:
            wrong = _reference_outputs(
                call, reference.variant(item.assignment, item.name, mistake.replacements), student
            )
            if _same(call, got, wrong):
                return mistake.cause
        except Exception:
            continue
    return None


def _grades_own_code(check):
    """A check that grades the item's own code: a failure caused only by the student's helpers is
    not the item's (see :class:`Item`), and a failure that matches a known mistake names its cause."""
    signature = inspect.signature(check)

    @functools.wraps(check)
    def graded(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except CheckFailed as failure:
            arguments = signature.bind(*args, **kwargs)
            arguments.apply_defaults()
            arguments = dict(arguments.arguments)
            item = arguments["item"]
            if item.depends and _own_code_is_right(item, arguments):
                return None
            cause = _diagnosis(item, arguments)
            if cause:
                raise failure.with_hint(cause) from None
            raise

    return graded


# --------------------------------------------------------------------------- checks


@_grades_own_code
def check_output_shapes(
    item: Item,
    args,
    kwargs=None,
    *,
    shapes,
    seed: int = 0,
    hint: str = "check the shape of each returned value against the assignment",
    init=None,
    method: str | None = None,
    mode: str | None = None,
):
    """The item returns the right structure (a value, or a tuple of ``item.outputs``) with these shapes."""
    call = _Call(item, "output shapes", args, kwargs, seed, hint, init=init, method=method, mode=mode)
    values = call.outputs(call.run())
    shapes = [tuple(s) for s in shapes]
    if len(shapes) != len(values):
        raise ValueError(f"shapes lists {len(shapes)} shapes for {len(values)} outputs")
    for (name, value), shape in zip(values.items(), shapes):
        got = call.as_numpy(value, name).shape
        if got != shape:
            call.fail(f"{name} has shape {got}; expected {shape}")


@_grades_own_code
def check_matches_reference(
    item: Item,
    args,
    kwargs=None,
    *,
    seed: int = 0,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    outputs: tuple[str, ...] | None = None,
    hint: str = "compare your steps with the formula in the assignment",
    init=None,
    method: str | None = None,
    mode: str | None = None,
):
    """Every returned value (or those named in ``outputs``) equals the reference solution's."""
    call = _Call(
        item, "agreement with the reference solution", args, kwargs, seed, hint, init=init, method=method, mode=mode
    )
    if init is not None:
        call.use_reference_weights()
    got = call.outputs(call.run())
    want = call.outputs(call.run(reference.get(item.assignment, item.name)))
    for name in outputs or got:
        _compare(call, name, call.as_numpy(got[name], name), call.as_numpy(want[name], name), rtol, atol)


@_grades_own_code
def check_matches(
    item: Item,
    other: str,
    args,
    kwargs=None,
    *,
    output: str | None = None,
    rename: dict | None = None,
    seed: int = 0,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    hint: str = "compare your steps with the formula in the assignment",
):
    """One returned value equals what another function (a dotted path, e.g. a torch built-in) returns.

    ``rename`` maps the item's keyword names to the other function's
    (``{"mask": "attn_mask"}``).
    """
    module_name, _, attr = other.rpartition(".")
    builtin = getattr(importlib.import_module(module_name), attr)
    call = _Call(item, f"agreement with {other}", args, kwargs, seed, hint)
    name, got = call.select(call.run(), output)
    inputs, keywords = specs.materialize(call.args, call.kwargs, seed)
    keywords = {(rename or {}).get(k, k): v for k, v in keywords.items()}
    want = call.as_numpy(builtin(*inputs, **keywords), name)
    _compare(call, name, got, want, rtol, atol, against=other)


@_grades_own_code
def check_matches_torch(
    item: Item,
    builtin: str,
    args,
    kwargs=None,
    *,
    init,
    seed: int = 0,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    outputs: tuple[str, ...] | None = None,
    hint: str = "name the submodules as the assignment says and follow its formula",
    method: str | None = None,
    mode: str | None = None,
):
    """A class item returns what the ``torch.nn`` built-in returns, both holding the same weights.

    ``builtin`` names a converter in :mod:`autograder.torch_builtins` (e.g.
    ``"multihead_attention"``). It makes random weights (seeded) under the
    names the contract gives the submodules, which are loaded into the student's
    object, builds the built-in from them and calls it on the same inputs. The
    reference solution is not needed, so visible tests can use this check.
    """
    from autograder import torch_builtins

    converter = torch_builtins.CONVERTERS[builtin]
    call = _Call(
        item, f"agreement with {converter.label}", args, kwargs, seed, hint, init=init, method=method, mode=mode
    )
    call.weights = converter.weights(tuple(init), seed)
    got = call.outputs(call.run())
    inputs, keywords = specs.materialize(call.args, call.kwargs, seed)
    want = converter(call.weights, call.init, inputs, keywords)
    for name in outputs or want:
        _compare(
            call,
            name,
            call.as_numpy(got[name], name),
            call.as_numpy(want[name], name),
            rtol,
            atol,
            against=converter.label,
        )


def _changed(value: torch.Tensor, where: torch.Tensor, seed: int) -> torch.Tensor:
    """``value`` with the entries where ``where`` is True replaced by different ones of the same kind."""
    generator = torch.Generator().manual_seed(seed)
    if value.dtype in (torch.int64, torch.int32):
        high = max(int(value.max()) + 1, 2)
        offset = torch.randint(1, high, value.shape, generator=generator).to(value.dtype)
        other = (value + offset) % high
    else:
        other = value + torch.randn(value.shape, generator=generator).to(value.dtype)
    return torch.where(where, other, value)


def _name_of(call: _Call, which: int | str) -> str:
    if isinstance(which, str):
        return which
    names = call._method_parameters() if call.init is not None else _parameter_names(call.item.obj)
    return names[which] if which < len(names) else f"argument {which + 1}"


def _perturbation(call: _Call, change: int | str, output: str | None, where_fn, seed: int):
    """The student's output (as NumPy) before and after changing input ``change`` where ``where_fn`` says."""
    target = call.item.obj if call.init is None else call.build(call.item.obj)
    inputs, keywords = specs.materialize(call.args, call.kwargs, call.seed)
    original = call.input_value(change)
    if not isinstance(original, torch.Tensor):
        raise ValueError(f"input {change!r} must be a tensor to be changed")
    name, before = call.select(call.invoke(target, inputs, keywords), output)
    results = []
    for label, where in where_fn(original):
        changed_inputs, changed_keywords = list(inputs), dict(keywords)
        new = _changed(original, where, seed)
        if isinstance(change, str):
            changed_keywords[change] = new
        else:
            changed_inputs[change] = new
        _, after = call.select(call.invoke(target, changed_inputs, changed_keywords), output)
        if after.shape != before.shape:
            call.fail(f"{name} has shape {after.shape} after the change, and {before.shape} before")
        results.append((label, after))
    return name, before, results


@_grades_own_code
def check_causal(
    item: Item,
    args,
    kwargs=None,
    *,
    change: int | str,
    init=None,
    method: str | None = None,
    mode: str | None = None,
    output: str | None = None,
    seed: int = 0,
    atol: float = 1e-5,
    hint: str = "the output at position t must not depend on later inputs: the look-ahead mask "
    "has to reach every attention over these positions",
):
    """Output position t (dim 1) does not change when input ``change`` changes after position t.

    The output must also depend on that input at all, so that ignoring it does not pass.
    """
    call = _Call(item, "causality", args, kwargs, seed, hint, init=init, method=method, mode=mode)
    length = call.input_value(change).size(1)
    cuts = sorted({0, length // 2, max(0, length - 2)})

    def later_than(value):
        for t in cuts:
            where = torch.zeros_like(value, dtype=torch.bool)
            where[:, t + 1 :] = True
            yield t, where

    name, before, results = _perturbation(call, change, output, later_than, seed + 1)
    changed = _name_of(call, change)
    depends = False
    for t, after in results:
        diff = np.abs(after[:, : t + 1] - before[:, : t + 1]).max()
        if diff > atol:
            call.fail(
                f"changing {changed}[:, {t + 1}:] (later positions) changed {name}[:, :{t + 1}] "
                f"(earlier positions) by up to {diff:.3g}"
            )
        depends = depends or np.abs(after - before).max() > atol
    if not depends:
        call.fail(
            f"{name} does not change at all when {changed} changes",
            f"the output at position t must be computed from {changed}[:, :t+1]",
        )


@_grades_own_code
def check_ignores_masked(
    item: Item,
    args,
    kwargs=None,
    *,
    change: int | str,
    mask: int | str,
    init=None,
    method: str | None = None,
    mode: str | None = None,
    output: str | None = None,
    seed: int = 0,
    atol: float = 1e-5,
    hint: str = "masked (padding) positions must have no influence: the padding mask has "
    "to reach every attention over these positions",
):
    """The output does not change when input ``change`` changes where ``mask`` is False (padding),
    and does change when it changes where ``mask`` is True."""
    call = _Call(
        item, "masked positions have no influence", args, kwargs, seed, hint, init=init, method=method, mode=mode
    )
    keep = call.input_value(mask)

    def masked_then_visible(value):
        hidden = ~torch.as_tensor(keep).bool().expand_as(value)
        yield "masked", hidden
        yield "visible", ~hidden

    name, before, results = _perturbation(call, change, output, masked_then_visible, seed + 1)
    changed, mask_name = _name_of(call, change), _name_of(call, mask)
    (_, after_masked), (_, after_visible) = results
    diff = np.abs(after_masked - before).max()
    if diff > atol:
        call.fail(f"changing {changed} where {mask_name} is False changed {name} by up to {diff:.3g}")
    if np.abs(after_visible - before).max() <= atol:
        call.fail(
            f"{name} does not change when {changed} changes where {mask_name} is True",
            f"the output must be computed from the visible positions of {changed}",
        )


@_grades_own_code
def check_equals(
    item: Item,
    args,
    expected,
    kwargs=None,
    *,
    output: str | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-8,
    hint: str = "work the example by hand and compare each step",
    init=None,
    method: str | None = None,
    mode: str | None = None,
):
    """One returned value equals ``expected`` (plain nested lists), e.g. a published worked example.

    A class item is built with ``init`` and keeps its own weights and buffers.
    """
    call = _Call(item, "the worked example", args, kwargs, 0, hint, init=init, method=method, mode=mode)
    name, got = call.select(call.run(), output)
    want = np.asarray(expected)
    want = want if want.dtype == bool else want.astype(np.float64)
    _compare(call, name, got, want, rtol, atol, against="the known answer")


@_grades_own_code
def check_rows_sum_to_one(
    item: Item,
    args,
    kwargs=None,
    *,
    output: str | None = None,
    dim: int = -1,
    seed: int = 0,
    atol: float = 1e-5,
    hint: str = "each query's weights over the keys (the last axis) must be non-negative and sum to one",
    init=None,
    method: str | None = None,
    mode: str | None = None,
):
    """The chosen output is non-negative and sums to one along ``dim``."""
    call = _Call(
        item,
        f"{output or 'result'} sum to one along dim {dim}",
        args,
        kwargs,
        seed,
        hint,
        init=init,
        method=method,
        mode=mode,
    )
    name, got = call.select(call.run(), output)
    if got.ndim == 0 or not -got.ndim <= dim < got.ndim:
        call.fail(f"{name} has shape {got.shape}, which has no dimension {dim}")
    if not np.isfinite(got).all():
        call.fail(f"{name} contains NaN or inf", "the weights must stay finite for large scores, such as [1000, 1001]")
    if (got < -atol).any():
        call.fail(f"{name} has negative entries; weights from a softmax are never negative")
    sums = got.sum(axis=dim)
    if not np.allclose(sums, 1.0, atol=atol):
        call.fail(f"{name} sums to values between {sums.min():.4g} and {sums.max():.4g} along dim {dim}")


@_grades_own_code
def check_masked_get_zero_weight(
    item: Item,
    args,
    kwargs=None,
    *,
    mask: int | str = "mask",
    output: str = "weights",
    seed: int = 0,
    atol: float = 1e-7,
    hint: str = "keys where the mask is False must get exactly zero weight "
    "(True in the mask means 'may attend'); a masked score set to "
    "zero still gets a share",
    init=None,
    method: str | None = None,
    mode: str | None = None,
):
    """Where the mask is False the weight is zero, and every row still sums to one."""
    call = _Call(item, "masked keys get zero weight", args, kwargs, seed, hint, init=init, method=method, mode=mode)
    name, got = call.select(call.run(), output)
    keep = np.asarray(call.input_value(mask))
    try:
        keep = np.broadcast_to(keep, got.shape)
    except ValueError:
        call.fail(f"{name} has shape {got.shape}, which the mask {keep.shape} does not broadcast to")
    if not np.isfinite(got).all():
        call.fail(f"{name} contains NaN or inf")
    leaked = np.abs(np.where(keep, 0.0, got))
    if leaked.max() > atol:
        call.fail(
            f"masked keys get weight up to {leaked.max():.3g}, "
            f"in {(leaked > atol).mean() / max(1e-12, (~keep).mean()):.0%} of the masked positions"
        )
    sums = got.sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=1e-5):
        call.fail(
            f"with the mask applied, rows of {name} sum to values between {sums.min():.4g} and {sums.max():.4g}",
            "the visible keys must share all of the weight: a masked key takes none of it",
        )


@_grades_own_code
def check_finite(
    item: Item,
    args,
    kwargs=None,
    *,
    seed: int = 0,
    hint: str = "every returned value must be finite: look for an exponential of a large number "
    "that overflows, or a 0/0 in a row with nothing left to weigh",
    init=None,
    method: str | None = None,
    mode: str | None = None,
):
    """No returned value contains NaN or inf."""
    call = _Call(item, "finite outputs", args, kwargs, seed, hint, init=init, method=method, mode=mode)
    for name, value in call.outputs(call.run()).items():
        got = call.as_numpy(value, name)
        if not np.isfinite(got).all():
            call.fail(f"{name} contains NaN or inf")


@_grades_own_code
def check_inputs_unchanged(
    item: Item,
    args,
    kwargs=None,
    *,
    seed: int = 0,
    hint: str = "the arguments must be the same after the call: compute new arrays or "
    "tensors instead of writing into an argument in place",
):
    """The item does not modify its arguments."""
    call = _Call(item, "inputs left unchanged", args, kwargs, seed, hint)
    inputs, keywords = specs.materialize(call.args, call.kwargs, seed)
    call.run(inputs=(inputs, keywords))
    fresh, fresh_kw = specs.materialize(call.args, call.kwargs, seed)
    names = _parameter_names(item.obj)
    pairs = [(names[i] if i < len(names) else f"argument {i + 1}", a, b) for i, (a, b) in enumerate(zip(inputs, fresh))]
    pairs += [(k, keywords[k], fresh_kw[k]) for k in keywords]
    for name, used, original in pairs:
        if isinstance(original, (np.ndarray, torch.Tensor)) and not np.array_equal(
            np.asarray(used), np.asarray(original), equal_nan=True
        ):
            call.fail(f"argument {name} was modified")


@_grades_own_code
def check_dtype_follows_input(
    item: Item,
    args,
    kwargs=None,
    *,
    seed: int = 0,
    hint: str = "the outputs must have the dtype of the inputs: a tensor made with a "
    "fixed dtype, or with the default one, changes it",
    init=None,
    method: str | None = None,
    mode: str | None = None,
):
    """Every floating-point output has the dtype of the first floating-point input."""
    call = _Call(item, "output dtype follows the inputs", args, kwargs, seed, hint, init=init, method=method, mode=mode)
    want = next(
        (
            v.dtype
            for v in [*call.inputs, *call.keywords.values()]
            if isinstance(v, (np.ndarray, torch.Tensor)) and v.dtype not in (torch.bool, np.bool_)
        ),
        None,
    )
    if want is None:
        raise ValueError("check_dtype_follows_input needs a floating-point input")
    for name, value in call.outputs(call.run()).items():
        call.as_numpy(value, name)  # checks the kind of value
        if value.dtype != want:
            call.fail(f"{name} has dtype {value.dtype}; the inputs have dtype {want}")


def _causal_block(start: int, length: int) -> torch.Tensor:
    """The look-ahead mask of ``length`` new positions after ``start`` cached ones: (length, start + length)."""
    queries = torch.arange(start, start + length)[:, None]
    return torch.arange(start + length)[None, :] <= queries


@_grades_own_code
def check_incremental(
    item: Item,
    x,
    *,
    init,
    chunks=(1,),
    seed: int = 0,
    atol: float = 1e-5,
    hint: str = "with the cache, each new position must attend to every earlier position and "
    "to itself, and the cache must grow by the new positions",
    mode: str | None = None,
):
    """A self-attention module with a key/value cache, ``forward(x, mask=None, cache=None) ->
    (output, cache)``, gives the same outputs fed ``chunks`` positions at a time, its cache carried from
    call to call, as fed the whole sequence at once with a look-ahead mask; and its cache holds every
    position. Needs no reference: the module is compared with itself."""
    call = _Call(item, "incremental decoding with the cache", [x], None, seed, hint, init=init, mode=mode)
    instance = call.instance(item.obj)
    (whole,), _ = specs.materialize(call.args, call.kwargs, seed)
    length = whole.size(1)
    full = call.outputs(call.invoke(instance, [whole], {"mask": _causal_block(0, length)}))
    want = call.as_numpy(full["output"], "output")
    for size in chunks:
        cache, pieces = None, []
        for start in range(0, length, size):
            piece = whole[:, start : start + size]
            mask = None if piece.size(1) == 1 else _causal_block(start, piece.size(1))
            got = call.outputs(call.invoke(instance, [piece], {"mask": mask, "cache": cache}))
            pieces.append(call.as_numpy(got["output"], "output"))
            cache = tuple(got[f"cache[{i}]"] for i in range(2)) if "cache[1]" in got else got.get("cache")
            if not isinstance(cache, tuple) or len(cache) != 2:
                call.fail("the returned cache is not a pair (keys, values)")
            for name, part in zip(("keys", "values"), cache):
                held = call.as_numpy(part, f"cache {name}").shape
                if len(held) != 4 or held[2] != start + piece.size(1):
                    call.fail(
                        f"after {start + piece.size(1)} positions the cached {name} have shape {held}; "
                        f"expected (B, num_kv_heads, {start + piece.size(1)}, d_head)"
                    )
        got = np.concatenate(pieces, axis=1)
        if got.shape != want.shape or not np.allclose(got, want, atol=atol, rtol=1e-5):
            diff = np.abs(got - want).max() if got.shape == want.shape else float("nan")
            call.fail(
                f"fed {size} position(s) at a time with the cache, the outputs differ from the whole "
                f"sequence with a look-ahead mask by up to {diff:.3g}"
            )


@_grades_own_code
def check_output_device(
    item: Item,
    args,
    kwargs=None,
    *,
    device: str = "meta",
    seed: int = 0,
    hint: str = "make the result on the device you are given, not on the default one",
    init=None,
    method: str | None = None,
    mode: str | None = None,
):
    """Every returned tensor lies on ``device`` (``"meta"``: a device with no data, so the check runs on
    any machine, with or without a GPU)."""
    call = _Call(
        item, f"result on the device {device!r}", args, kwargs, seed, hint, init=init, method=method, mode=mode
    )
    for name, value in call.outputs(call.run()).items():
        if not isinstance(value, torch.Tensor):
            call.fail(f"{name} is a {type(value).__name__}, not a torch tensor")
        if value.device.type != torch.device(device).type:
            call.fail(f"{name} is on the device {value.device.type!r}")


def check_buffer(
    item: Item,
    name: str,
    *,
    init,
    shape=None,
    hint: str = "keep it as a buffer of the module: saved and moved with it, but not trained",
):
    """A class item's object holds ``name`` as a buffer (in its state, not among its parameters), of
    ``shape`` where given."""
    call = _Call(item, f"{name} is a buffer", [], None, 0, hint, init=init)
    instance = call.instance(item.obj)
    try:
        value = instance.get_buffer(name)
    except Exception:
        try:
            instance.get_parameter(name)
            call.fail(f"{name} is a parameter, which the optimiser would train")
        except CheckFailed:
            raise
        except Exception:
            call.fail(f"{item.name} has no buffer {name!r}")
    if not isinstance(value, torch.Tensor):
        call.fail(f"{name} is a {type(value).__name__}, not a tensor")
    if shape is not None and tuple(value.shape) != tuple(shape):
        call.fail(f"{name} has shape {tuple(value.shape)}; expected {tuple(shape)}")


def check_raises(
    item: Item,
    args,
    kwargs=None,
    *,
    exception: str = "ValueError",
    mentions: tuple[str, ...] = (),
    seed: int = 0,
    hint: str = "check the arguments first and raise an error that names the wrong one",
    init=None,
    method: str | None = None,
    mode: str | None = None,
):
    """Calling the item raises ``exception`` (a builtin's name) whose message mentions each of ``mentions``.

    Without ``init`` the item itself is called (for a class: its constructor, with ``args``);
    with ``init`` an object is built first and its ``method`` (default: forward) gets ``args``.
    """
    expected = getattr(builtins, exception)
    call = _Call(item, f"{exception} for bad arguments", args, kwargs, seed, hint, init=init, method=method, mode=mode)
    inputs, keywords = specs.materialize(call.args, call.kwargs, seed)
    target = item.obj if init is None else call.build(item.obj)
    try:
        target(*inputs, **keywords)
    except expected as exc:
        missing = [word for word in mentions if word not in str(exc)]
        if missing:
            call.fail(f"the {exception} message {str(exc)!r} does not mention {', '.join(missing)}")
        return
    except Exception as exc:
        call.fail(f"it raised {type(exc).__name__}: {exc}; expected {exception}")
    call.fail(f"it raised no error; expected {exception}")
