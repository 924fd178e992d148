"""One call of a graded item, as a check makes it.

A :class:`Call` holds the inputs, made from plain-data
specs and a seed; the object, for a class item built with the reference's weights and put in train
or eval mode; the call itself, seeded, under the item's stand-ins; and what it returned, by name.

The student's object may be the real one (a notebook's kernel) or a proxy of one that runs in the
sandbox (the grader): both are called the same way. A call in the sandbox is seeded there; a call
here is seeded under a lock, on a generator forked for it, so that no other thread's draws and no
student's kernel state change what it draws.

The keyword options that the checks share (the seed; for a class item its constructor's arguments, the
method called and the train or eval mode) are declared once, :class:`CallOptions`; a check takes those it
needs as keyword arguments (:func:`takes_options`).

Checks that read only what a call returned (its values compared, their finiteness, the kernels it launched) share
a call: within one notebook's grading (``shared.shared_calls``), the same function called on the same inputs, seed and
stand-ins is called once (:meth:`Call.run_shared`, ``shared.shared``), and each check reads its own copy of what it
returned. A test cell that checks an item's output and its log-sum-exp on the same inputs pays for one call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import random
from dataclasses import dataclass

import numpy as np
import torch

from attention_course.tooling import syntax
from autograder.api import specs
from autograder.api.items import CheckFailed, Item, fewer_dimensions, quoted_error, quoted_size, type_name
from autograder.api.keywords import gathered
from autograder.calls import global_rng, parameter_roles, standins
from autograder.calls.shared import Identity, NotShared, shareable, shared
from autograder.release import reference
from autograder.text.unwritten import problem as unwritten_problem


def is_remote(obj) -> bool:
    """Whether ``obj`` runs in the sandbox (a proxy of the grader's session)."""
    return bool(getattr(type(obj), "__remote__", False))


@contextlib.contextmanager
def seeded(seed: int, obj=None):
    """The random generators seeded with ``seed`` for one call of ``obj``: in the sandbox, by the
    worker just before the call; here, on forked generators under the grader's lock."""
    scope = standins.current()
    if is_remote(obj):
        previous = None if scope is None else scope.seed
        if scope is not None:
            scope.seed = seed
        try:
            yield
        finally:
            if scope is not None:
                scope.seed = previous
        return
    # Here run the reference and its known mistakes, whose overflows are expected: numpy keeps quiet about them.
    # No other grading thread parses meanwhile: Triton's interpreter reads a kernel as a syntax tree as it runs
    # (attention_course.tooling.syntax).
    with global_rng.forked(seed), syntax.held(), np.errstate(all="ignore"):
        state, python = np.random.get_state(), random.getstate()
        np.random.seed(seed % 2**32)
        random.seed(seed)
        try:
            yield
        finally:
            np.random.set_state(state)
            random.setstate(python)


@dataclass(frozen=True)
class CallOptions:
    """The keyword options that checks share: ``seed``, of the inputs and of the call; for a class item,
    ``init``, the constructor's arguments (plain data), ``method``, called in place of the object itself,
    and ``mode``, ``"train"`` or ``"eval"`` (default: eval)."""

    seed: int = 0
    init: tuple | None = None
    method: str | None = None
    mode: str | None = None

    @classmethod
    def of(cls, arguments: dict) -> CallOptions:
        """The options among a check's arguments (by parameter name); the defaults for those it does not take."""
        return cls(**{name: arguments[name] for name in OPTIONS if name in arguments})

    def call(self, item: Item, prop: str, args, kwargs, hint: str) -> Call:
        """The check's call of ``item`` with these options."""
        return Call(item, prop, args, kwargs, self.seed, hint, init=self.init, method=self.method, mode=self.mode)


OPTIONS = tuple(option.name for option in dataclasses.fields(CallOptions))


def takes_options(*names: str, required: tuple[str, ...] = ()):
    """A check that takes the shared options ``names`` (default: all of :class:`CallOptions`) as keyword
    arguments, with their defaults (none for those ``required``), and gets them as one argument,
    ``options``. The check's signature, as callers and :func:`inspect.signature` see it, lists them."""
    return gathered(CallOptions, "options", names or OPTIONS, required=required)


class Call:
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
        self.weights = None  # a state_dict to load into the object before the call

    @classmethod
    def replaying(cls, item: Item, prop: str, arguments: dict) -> Call:
        """The call that a check made, from the check's arguments by parameter name (its inputs are
        ``args`` and ``kwargs``, or ``x`` for a check that feeds one sequence)."""
        args = arguments.get("args")
        if args is None:
            args = [arguments["x"]] if "x" in arguments else []
        return CallOptions.of(arguments).call(item, prop, args, arguments.get("kwargs"), "")

    # ------------------------------------------------------------------ building

    def use_reference_weights(self) -> None:
        """Build the reference object (seeded) and keep its parameters for the student's object.

        Only parameters cross, never buffers: a buffer can hold the answer (the table of a
        positional encoding), which the student's object must compute itself.
        """
        with seeded(self.seed):
            built = reference.get(self.item.assignment, self.item.name)(*self.init)
        self.weights = _randomised(dict(built.named_parameters()), self.seed)

    def build(self, cls):
        """The object the call goes to: an instance of ``cls`` with the weights, and its ``method``."""
        return self.bound(self.instance(cls))

    def instance(self, cls):
        """An instance of ``cls`` built with ``init`` (seeded), holding the weights, in ``mode`` (eval
        unless the check asks for train mode: a check without a mode grades no randomness)."""
        name = self.item.name
        scope = standins.current()
        if scope is not None and cls is self.item.obj:
            scope.chosen = {}  # what the stand-ins record of this build, for a reference built the same way
        try:
            with seeded(self.seed, cls):
                instance = cls(*self.init)
        except NotImplementedError:
            self.not_written(f"{name}({', '.join(map(repr, self.init))}) raised NotImplementedError")
        except CheckFailed:
            raise
        except Exception as exc:
            self.fail(f"{name}({', '.join(map(repr, self.init))}) raised {quoted_error(exc)}")
        if self.weights is not None:
            self._load_weights(instance, students=cls is self.item.obj)
        try:
            instance.train(self.mode == "train")
        except Exception as exc:
            if self.mode is not None:
                self.fail(
                    f"{name}.train() raised {quoted_error(exc)}",
                    f"{name} must be an nn.Module (class {name}(nn.Module)) that calls super().__init__()",
                )
        return instance

    def _load_weights(self, instance, students: bool) -> None:
        """Load the weights into ``instance`` (the reference's by name; the student's as the item's
        layout finds them). Parameters and buffers besides the contract's keep their own values."""
        weights, arranged = self.weights, None
        if students and self.item.layout != "contract":
            try:
                arranged = parameter_roles.arrange(self.item.layout, weights, self._state(instance), self.init)
            except parameter_roles.NotFound as exc:
                self.fail(str(exc), "build the model from the parts the assignment names")
            weights, self.weights = arranged.moved, arranged.common
        try:
            missing, unexpected = instance.load_state_dict(weights, strict=False)
            unexpected = [str(key) for key in unexpected]
        except Exception as exc:
            self.fail(
                f"loading the weights into it with load_state_dict failed: {quoted_error(exc)}",
                "give the submodules the shapes the assignment says",
            )
        if unexpected:
            self.fail(
                f"it has no parameter {', '.join(unexpected[:4])}"
                f"{' and others' if len(unexpected) > 4 else ''}, which the assignment names",
                "the grader loads weights by name: give the submodules the names the assignment says",
            )
        if arranged is not None:
            self.weights = arranged.settled(self._state(instance))

    def _state(self, instance) -> dict:
        try:
            state = instance.state_dict()
        except Exception as exc:
            self.fail(f"{self.item.name}.state_dict() raised {quoted_error(exc)}")
        if not isinstance(state, dict):
            self.fail(f"{self.item.name}.state_dict() returned a {type_name(state)}, not a dict of tensors")
        return state

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

    # ------------------------------------------------------------------ calling

    def run(self, obj=None, inputs=None):
        """Call the student's object (or ``obj``) on ``inputs`` (args, kwargs), by default fresh copies."""
        inputs, keywords = inputs or specs.materialize(self.args, self.kwargs, self.seed)
        target = self.item.obj if obj is None else obj
        if self.init is not None:
            target = self.build(target)
        return self.invoke(target, inputs, keywords)

    def shared_key(self, *what) -> tuple | None:
        """What the student's call depends on, for checks that share it (``shared.shared``): the item (its object, the
        items it uses and those the student may choose), the inputs' specs and the seed; ``what`` tells kinds of
        sharing apart. None where the call is not shared: a class item (the object built holds state), an input
        that is an object the grader holds (a scripted fixture, whose state a check reads)."""
        if self.init is not None or any(isinstance(spec, specs.Fixture) for spec in self._specs()):
            return None
        item = self.item
        return (
            *what,
            item.obj.__shared_as__()
            if is_remote(item.obj) and hasattr(item.obj, "__shared_as__")
            else Identity(item.obj),
            item.assignment,
            item.name,
            item.outputs,
            item.uses,
            repr(sorted(item.free.items())),
            repr(self.args),
            repr(sorted(self.kwargs.items())),
            self.seed,
        )

    def _specs(self):
        for spec in [*self.args, *self.kwargs.values()]:
            yield spec
            if isinstance(spec, specs.Group):
                yield from spec.parts

    def run_shared(self):
        """:meth:`run` on fresh inputs, or, where a check of the notebook being graded made the same call already
        (:meth:`shared_key`), a copy of what it returned: for checks that read only the returned values."""
        key = self.shared_key("returned")

        def made():
            returned = self.run()
            if not shareable(returned):
                raise NotShared(returned)
            return returned

        if key is None:
            return self.run()
        try:
            return shared(key, made)
        except NotShared as kept:
            return kept.returned

    def invoke(self, target, inputs, keywords):
        """Call ``target`` (the student's function, or a method of an object built for this call), seeded."""
        if not callable(target):
            self.fail(
                f"{self.item.name} is {type_name(target)}, not a function or class",
                f"define {self.item.name} as the assignment describes",
            )
        try:
            with seeded(self.seed, target):
                return target(*inputs, **keywords)
        except NotImplementedError:
            self.not_written("it raised NotImplementedError")
        except CheckFailed:
            raise
        except Exception as exc:  # the student's error, reported as a failed property
            named = [(self.name_of(i), value) for i, value in enumerate(inputs)] + list(keywords.items())
            self.fail(f"it raised {quoted_error(exc)}{fewer_dimensions(named)}")

    # ------------------------------------------------------------------ reporting

    def fail(self, problem: str, hint: str | None = None, unwritten: str = ""):
        what = (
            self.item.name
            if self.init is None
            else f"{self.item.name}({', '.join(map(repr, self.init))}){'.' + self.method if self.method else ''}"
        )
        prop = self.prop if self.mode is None else f"{self.prop} (in {self.mode} mode)"
        raise CheckFailed(what, prop, self.describe_inputs(), problem, hint or self.hint, unwritten)

    def not_written(self, raised: str = "it raised NotImplementedError"):
        """Fail as an item not written yet: its code still raises NotImplementedError, as released."""
        name = self.item.name
        self.fail(unwritten_problem(raised, name), f"write your implementation of {name}", unwritten=name)

    def describe_inputs(self) -> str:
        names = parameter_names(self.item.obj)
        if self.init is not None:
            names = self.method_parameters()
        parts = []
        for i, spec in enumerate(self.args):
            name = names[i] if i < len(names) else f"argument {i + 1}"
            parts.append(f"{name}={spec.describe()}")
        parts += [f"{k}={spec.describe()}" for k, spec in self.kwargs.items()]
        return ", ".join(parts) or "(none)"

    def method_parameters(self) -> list[str]:
        try:
            cls = reference.get(self.item.assignment, self.item.name)
        except reference.ReferenceUnavailable:  # a student's machine: the student's own class names them
            cls = self.item.obj if inspect.isclass(self.item.obj) else None
            if cls is None:
                return []
        names = parameter_names(getattr(cls, self.method or "forward", cls))
        return names[1:] if names[:1] == ["self"] else names

    def name_of(self, which: int | str) -> str:
        """The name of an input, by position or keyword."""
        if isinstance(which, str):
            return which
        names = self.method_parameters() if self.init is not None else parameter_names(self.item.obj)
        return names[which] if which < len(names) else f"argument {which + 1}"

    # ------------------------------------------------------------------ what came back

    def outputs(self, returned) -> dict:
        """The returned values by name, after checking the return structure. A returned value that is
        itself a tuple of arrays (a cache of keys and values) becomes ``name[0]``, ``name[1]``, ..."""
        names = self.item.outputs
        if not names:
            return {"result": returned}
        if not isinstance(returned, (tuple, list)) or len(returned) != len(names):
            got = f"a {type_name(returned)}"
            if isinstance(returned, (tuple, list)):
                got += f" of {quoted_size(len(returned), len(names))} values"
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
        self.fail(f"{name} is a {type_name(value)}, not a {'NumPy array' if library == 'numpy' else 'torch tensor'}")

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


def parameter_names(obj) -> list[str]:
    try:
        return [
            p.name
            for p in inspect.signature(obj).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return []
