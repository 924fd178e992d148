"""Each graded item graded on its own code: the grader's stand-ins for the graded items it uses.

``MultiHeadAttention`` calls ``split_heads``; ``EncoderLayer`` builds a ``FeedForward``. Were
the student's own helpers used while such an item is graded, a mistake in one would cost points in
two places, and the student, who controls the helpers, could steer the item's verdict (a helper
that misbehaves only when the item calls it). So while an item that declares ``uses`` is graded in
the sandbox, every name it uses stands for a *stand-in*: an object that computes nothing in the
sandbox and asks the grader, which answers with the reference solution. The item is then graded
on exactly its own code, whatever its helpers do, and a helper's mistake costs points in the
helper's own tests only. No reference code ever enters the sandbox: only the reference's *values*
on the arguments the student's code passed.

- A function stand-in sends its arguments; the grader returns the reference function's value.
- A module stand-in (an ``nn.Module`` class) is built by the student's code as the real class
  would be: the grader builds the reference module with the same arguments and sends back its
  parameters and buffers, which the stand-in holds as real ones (so that ``load_state_dict``,
  ``.double()`` and ``train()`` work on it). Every ``forward`` sends the stand-in's state, its
  train/eval mode and the random generator's state; the grader runs the reference module with
  them, and the generator's state comes back advanced, as if the module had run in the sandbox,
  so that dropout draws the same masks as the reference layer drawing in the same order. A module
  built with the wrong arguments, or one module shared where the contract has two, is therefore
  the item's own mistake, as it should be.

What the grader computes for a stand-in is bounded by what the reference item itself asks of its
helpers on the same inputs (:meth:`Scope.limits`, with :mod:`autograder.calls.standin_limits`): every argument
of a stand-in's call may be at most a few times what the reference passed for that argument (a mask:
anything broadcastable to the scores of its call, as the contract allows), so nothing is computed on
sizes the student chose; a call past that, or of a name the item does not use, raises an error in the
student's code that says so.

A fixture whose state its test checks (:mod:`autograder.api.scripted`'s call-limited translator, which counts
its calls) is held the same way: the student's code gets a proxy, and each call of its methods is answered
here with the fixture the grader holds for the check (:meth:`Scope.answer`, kind ``fixture``), bounded by
the reference's own calls of it, so the code can call it but never read or change its count.
The stand-ins of an item answer only while that item's checks run (:func:`grading`); which helpers
they replace, and so whose fault a failure is, :mod:`autograder.calls.attribution` decides.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from autograder.api import scripted
from autograder.calls import global_rng
from autograder.calls.standin_limits import (
    Size,
    bound_arguments,
    broadcasts,
    fixture_recording,
    is_module,
    recording,
    signature_of,
    size_of,
)
from autograder.release import reference
from autograder.sandbox import values, wire

_LIMITS: dict[tuple, dict] = {}  # limits_key -> limits, for this process (the reference does not change)


class Refused(Exception):
    """A stand-in's call that the grader does not answer: the student's code gets this as an error."""


@dataclass
class Scope:
    """The stand-ins of one check of one item: the names it uses, how large their calls may be, and
    the seed of the next call of the student's code."""

    assignment: str
    uses: tuple[str, ...]
    seed: int | None = None
    memory_mb: int | None = None  # the address space the next call may add, in MiB, where it can be enforced
    # Whether the next call records the Triton kernels it launches (autograder.calls.launches), and what came back:
    # the record as plain data (None: none came), and the session's replay of kernels in a sandbox of its own.
    trace: bool = False
    traced: object = None
    replayer: Callable[[str, dict], dict] | None = None
    source: str | None = None  # the submission's program, where the call ran in the sandbox
    # Runs the item's reference on the check's inputs with {name: helper} in place of its helpers.
    run_reference: Callable[[dict], object] | None = None
    # The largest sizes among the check's own inputs: the limit where the reference made no such call.
    inputs_size: Callable[[], Size] | None = None
    # What makes the limits: the check's inputs as plain data. Checks alike (in every notebook graded) share them.
    limits_key: tuple | None = None
    # The arguments that the student's object last built each used module with, in order (by parameter name).
    chosen: dict = field(default_factory=dict)
    _limits: dict | None = None
    _fallback: Size | None = None
    _built: dict = field(default_factory=dict)
    _helpers: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ what stands in

    def helper(self, name: str):
        """The reference of the used item ``name``."""
        if name not in self._helpers:
            self._helpers[name] = reference.defining(self.assignment, name)
        return self._helpers[name]

    def kinds(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(function names, module names) of the stand-ins."""
        return (
            tuple(name for name in self.uses if not is_module(self.helper(name))),
            tuple(name for name in self.uses if is_module(self.helper(name))),
        )

    # ------------------------------------------------------------------ how large a call may be

    def limits(self) -> dict[tuple[str, str, str], Size]:
        """(name, call kind, parameter) -> the largest argument the reference item passes there on
        the check's inputs (recorded once, the first time a stand-in is called)."""
        if self._limits is None and self.limits_key is not None:
            self._limits = _LIMITS.get(self.limits_key)
        if self._limits is None:
            records: dict[tuple[str, str, str], Size] = {}
            helpers = {name: recording(name, self.helper(name), records) for name in self.uses}
            if self.run_reference is not None:
                # it may raise on purpose (a check that wants an error)
                with contextlib.suppress(Exception), scripted.noting(fixture_recording(records)):
                    self.run_reference(helpers)
            self._limits = records
            if self.limits_key is not None:
                _LIMITS[self.limits_key] = records
        return self._limits

    def fallback(self) -> Size:
        if self._fallback is None:
            self._fallback = self.inputs_size() if self.inputs_size is not None else Size()
        return self._fallback

    def _checked(
        self,
        name: str,
        kind: str,
        signature: inspect.Signature,
        args,
        kwargs,
        built: dict | None = None,
        held: bool = False,
    ) -> inspect.BoundArguments:
        """The arguments of a call, bound; :class:`Refused` where one is larger than :meth:`limits` allows (a
        mask: than its contract allows, :func:`~autograder.calls.standin_limits.broadcasts`; ``built``: the
        arguments that a module's stand-in was built with; ``held``: a call of a fixture's method)."""
        try:
            arguments = bound_arguments(signature, args, kwargs)
        except TypeError as exc:
            raise Refused(f"{name}: {exc}") from None
        limits = self.limits()
        for parameter, value in arguments.arguments.items():
            if broadcasts((name, kind, parameter), value, arguments.arguments, built):
                continue
            too_large = size_of(value).within(limits.get((name, kind, parameter)) or self.fallback())
            if too_large:
                what = f"{name}, which the grader holds," if held else f"the grader's {name}, which stands in for yours"
                raise Refused(
                    f"{what} while this item is graded, takes "
                    f"arguments as large as those the assignment's own solution passes on these inputs; "
                    f"here {parameter} {too_large}"
                )
        return arguments

    # ------------------------------------------------------------------ answers

    def answer(self, callback: dict) -> dict:
        """The grader's answer to a stand-in's call (both as plain data)."""
        try:
            name, kind = callback.get("name"), callback.get("kind")
            if kind == "fixture":
                return self._fixture(callback)
            if not isinstance(name, str) or name not in self.uses:
                raise Refused(f"{str(name)[:80]!r} is not one of the items this item is graded with")
            helper = self.helper(name)
            args, kwargs = _arguments(name, callback)
            if kind == "call" and not is_module(helper):
                arguments = self._checked(name, kind, signature_of(helper), args, kwargs)
                with global_rng.private():
                    value = _run(lambda: helper(*arguments.args, **arguments.kwargs))
                return {"ok": True, "value": values.encode(value)}
            if kind == "construct" and is_module(helper):
                return self._construct(name, helper, args, kwargs, _rng_state(callback.get("rng")))
            if kind == "forward" and is_module(helper):
                return self._forward(name, helper, callback, args, kwargs)
            raise Refused(f"{name}: a call of the wrong kind")
        except Refused as exc:
            return {"ok": False, "error_type": "RuntimeError", "error": str(exc)}
        except _ReferenceRaised as exc:  # the arguments the student's code passed made the reference raise
            return {"ok": False, "error_type": exc.type_name, "error": exc.message}
        except wire.WireError as exc:
            return {"ok": False, "error_type": "RuntimeError", "error": f"the grader's answer cannot cross: {exc}"}
        except Exception as exc:  # what a forged call's contents make of the grader's steps: still refused
            return {
                "ok": False,
                "error_type": "RuntimeError",
                "error": f"the call could not be answered ({exc})"[:2000],
            }

    def _fixture(self, callback: dict) -> dict:
        """A call of a method of a fixture that the grader holds for this check (:mod:`autograder.api.scripted`),
        made on that fixture here: its state, a count of calls, stays in the grader."""
        fixture = scripted.held(callback.get("held"))
        if fixture is None:
            raise Refused("no such fixture is in use now")
        name, method = fixture.__wire_fixture__[0], callback.get("name")
        if method not in type(fixture).__wire_held__.methods:
            raise Refused(f"{name} has no method {str(method)[:80]!r} to call")
        args, kwargs = _arguments(f"{name}.{method}", callback)
        signature = signature_of(type(fixture), method)
        arguments = self._checked(f"{name}.{method}", "call", signature, args, kwargs, held=True)
        with torch.no_grad():  # a scripted fixture draws nothing at random
            value = _run(lambda: getattr(fixture, method)(*arguments.args, **arguments.kwargs))
        return {"ok": True, "value": values.encode(value)}

    def _built_module(self, name: str, helper, args, kwargs, rng: torch.Tensor | None):
        """The reference module built with these (checked) arguments, and the generator state after."""
        arguments = self._checked(name, "construct", signature_of(helper, "__init__"), args, kwargs)
        with global_rng.private(rng) as generator:
            module = _run(lambda: helper(*arguments.args, **arguments.kwargs))
        return module, generator.get_state()

    def _construct(self, name: str, helper, args, kwargs, rng: torch.Tensor) -> dict:
        module, after = self._built_module(name, helper, args, kwargs, rng)
        arguments = bound_arguments(signature_of(helper, "__init__"), args, kwargs).arguments
        self.chosen.setdefault(name, []).append(dict(arguments))
        parameters = [key for key, _ in module.named_parameters(remove_duplicate=False)]
        attributes = {
            key: value
            for key, value in vars(module).items()
            if not key.startswith("_") and key != "training" and isinstance(value, (bool, int, float, str))
        }
        return {
            "ok": True,
            "init": values.encode([args, kwargs]),
            "state": values.encode(dict(module.state_dict())),
            "parameters": values.encode(parameters),
            "attributes": values.encode(attributes),
            "rng": values.encode(after),
        }

    def _forward(self, name: str, helper, callback: dict, args, kwargs) -> dict:
        try:
            init_args, init_kwargs = values.decode(callback.get("init"))
            state = values.decode(callback.get("state"))
        except Exception:
            raise Refused(f"{name}: the stand-in's state could not be read") from None
        if not isinstance(init_args, list) or not isinstance(init_kwargs, dict) or not isinstance(state, dict):
            raise Refused(f"{name}: the stand-in's state could not be read")
        key = (name, repr(values.encode([init_args, init_kwargs])))
        if key not in self._built:
            self._built[key] = self._built_module(name, helper, init_args, init_kwargs, None)[0]
        module = self._built[key]
        expected = module.state_dict()
        if set(state) != set(expected) or any(
            not isinstance(state[k], torch.Tensor) or state[k].shape != v.shape for k, v in expected.items()
        ):
            raise Refused(f"{name}: the stand-in's parameters and buffers are not those it was built with")
        floating = [t.dtype for t in state.values() if t.is_floating_point()]
        if floating:
            module.to(floating[0])
        _run(lambda: module.load_state_dict(state))
        module.train(bool(callback.get("training")))
        built = bound_arguments(signature_of(helper, "__init__"), init_args, init_kwargs).arguments
        arguments = self._checked(name, "forward", signature_of(helper, "forward"), args, kwargs, built)
        rng = _rng_state(callback.get("rng"))
        with global_rng.private(rng) as generator, torch.no_grad():
            value = _run(lambda: module(*arguments.args, **arguments.kwargs))
        return {"ok": True, "value": values.encode(value), "rng": values.encode(generator.get_state())}


class _ReferenceRaised(Exception):
    def __init__(self, exc: Exception):
        super().__init__(str(exc))
        self.type_name, self.message = type(exc).__name__, str(exc)[:2000]


def _arguments(name: str, callback: dict) -> tuple[list, dict]:
    """The positional and keyword arguments of a stand-in's call of ``name``, decoded; refused where they
    cannot be read as a list and a dict."""
    try:
        args, kwargs = values.decode(callback.get("args")), values.decode(callback.get("kwargs"))
    except Exception:
        raise Refused(f"{name}: its arguments could not be read") from None
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise Refused(f"{name}: its arguments could not be read")
    return args, kwargs


def _run(function):
    """``function()``; an exception of the reference (on the student's arguments) becomes _ReferenceRaised."""
    try:
        return function()
    except Exception as exc:
        raise _ReferenceRaised(exc) from None


def _rng_state(encoded) -> torch.Tensor:
    try:
        state = values.decode(encoded)
    except Exception:
        raise Refused("the random generator's state could not be read") from None
    expected = torch.Generator().get_state()
    if not isinstance(state, torch.Tensor) or state.dtype != expected.dtype or state.shape != expected.shape:
        raise Refused("the random generator's state could not be read")
    return state


def rebound(obj, helpers: dict):
    """The reference ``obj`` (a function or a class) calling ``helpers`` (name -> object) in place of the
    objects of those names that its code looks up."""
    if not helpers:
        return obj

    def rebind(function):
        return types.FunctionType(
            function.__code__,
            {**function.__globals__, **helpers},
            function.__name__,
            function.__defaults__,
            function.__closure__,
        )

    if isinstance(obj, types.FunctionType):
        return rebind(obj)
    methods = {name: rebind(value) for name, value in vars(obj).items() if isinstance(value, types.FunctionType)}
    return type(obj.__name__, (obj,), methods)


def as_chosen(obj, free: dict):
    """The reference ``obj``, building each used module named in ``free`` with the student's own choice of
    the arguments listed there (``{"EncoderLayer": ("norm_first",)}``), as the student's object last built
    them, in the same order: the grader compares with what the reference gives for the same choice. Every
    other argument stays the reference's, so a module built with wrong arguments stays a mistake."""
    scope = current()
    if not free or scope is None:
        return obj
    helpers = {}
    for name, parameters in free.items():
        records = scope.chosen.get(name)
        if records:
            helpers[name] = _choosing(reference.defining(scope.assignment, name), tuple(parameters), records)
    return rebound(obj, helpers)


def _choosing(helper, parameters: tuple[str, ...], records: list[dict]):
    signature, built = signature_of(helper, "__init__"), [0]

    class Chosen(helper):
        def __init__(self, *args, **kwargs):
            arguments = bound_arguments(signature, args, kwargs)
            if built[0] < len(records):
                for parameter in parameters:
                    if parameter in records[built[0]]:
                        arguments.arguments[parameter] = records[built[0]][parameter]
            built[0] += 1
            super().__init__(*arguments.args, **arguments.kwargs)

    Chosen.__name__ = Chosen.__qualname__ = helper.__name__
    return Chosen


# ---------------------------------------------------------------------- the check being run

_CURRENT: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("stand_ins", default=None)


@contextlib.contextmanager
def grading(assignment: str, uses: tuple[str, ...]) -> Iterator[Scope]:
    """The stand-ins of one check of an item that uses ``uses``, for every call of the student's code
    that the check makes (the grader's session reads :func:`current`)."""
    scope = Scope(assignment, tuple(uses))
    token = _CURRENT.set(scope)
    try:
        with scripted.holding():  # the fixtures that cross while the check runs, which its stand-ins answer for
            yield scope
    finally:
        _CURRENT.reset(token)


def current() -> Scope | None:
    """The stand-ins of the check being run in this thread, if any."""
    return _CURRENT.get()
