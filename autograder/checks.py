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
import importlib
import inspect
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from autograder import reference, specs


class CheckFailed(AssertionError):
    """A graded property does not hold. The message is written for the student."""


@dataclass(frozen=True)
class Item:
    """A graded item: the student's function or class under its contract name.

    ``outputs`` names the values the item returns, in order, when it returns a
    tuple (``("output", "weights")``); leave it empty for a single value.
    """

    assignment: str
    name: str
    obj: Any = field(compare=False, repr=False)
    outputs: tuple[str, ...] = ()


# --------------------------------------------------------------------------- helpers


# Seeding and building a module use PyTorch's global generator, which `make grade` shares
# between the threads that grade notebooks side by side.
_TORCH_RNG = threading.Lock()


class _Call:
    """One call of the student's code: its inputs (as plain data) and what it returned."""

    def __init__(self, item: Item, prop: str, args, kwargs, seed: int, hint: str,
                 init=None, method: str | None = None):
        self.item, self.prop, self.hint, self.seed = item, prop, hint, seed
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
        parameters = dict(built.named_parameters())
        self.weights = {key: value.detach().clone() for key, value in built.state_dict().items() if key in parameters}

    def build(self, cls):
        """The object the call goes to: an instance of ``cls`` with the weights, and its ``method``."""
        name = self.item.name
        try:
            with _TORCH_RNG:
                torch.manual_seed(self.seed)
                instance = cls(*self.init)
        except NotImplementedError:
            self.fail(f"{name}({', '.join(map(repr, self.init))}) raised NotImplementedError",
                      f"write your implementation of {name}")
        except Exception as exc:
            self.fail(f"{name}({', '.join(map(repr, self.init))}) raised {type(exc).__name__}: {exc}")
        if self.weights is not None:
            # The reference object gets them too: it computes with exactly what the student's got.
            # Parameters and buffers that the object has besides the contract's keep their own values.
            try:
                missing, unexpected = instance.load_state_dict(self.weights, strict=False)
                unexpected = [str(key) for key in unexpected]
            except Exception as exc:
                self.fail(f"loading the weights into it with load_state_dict failed: {exc}",
                          "give the submodules the shapes the assignment says")
            if unexpected:
                self.fail(f"it has no parameter {', '.join(unexpected[:4])}"
                          f"{' and others' if len(unexpected) > 4 else ''}, which the assignment names",
                          "the grader loads weights by name: give the submodules the names the assignment says")
        if self.method is None:
            return instance
        try:
            return getattr(instance, self.method)
        except AttributeError:
            self.fail(f"{name} has no method {self.method}", f"define {name}.{self.method} as the assignment says")

    def fail(self, problem: str, hint: str | None = None):
        what = self.item.name if self.init is None else \
            f"{self.item.name}({', '.join(map(repr, self.init))}){'.' + self.method if self.method else ''}"
        raise CheckFailed(
            f"{what}: {self.prop} failed\n"
            f"  inputs: {self.describe_inputs()}\n"
            f"  problem: {problem}\n"
            f"  hint: {hint or self.hint}"
        )

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
            self.fail(f"{self.item.name} is {type(target).__name__}, not a function or class",
                      f"define {self.item.name} as the assignment describes")
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
        """The returned values by name, after checking the return structure."""
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
        return dict(zip(names, returned))

    def expected_library(self) -> str | None:
        for spec in [*self.args, *self.kwargs.values()]:
            if getattr(spec, "library", "python") in specs.LIBRARIES:
                return spec.library
        return None

    def as_numpy(self, value, name: str) -> np.ndarray:
        """A returned tensor or array as a NumPy array (float64, or bool), checking its kind."""
        library = self.expected_library()
        if isinstance(value, torch.Tensor):
            if library == "numpy":
                self.fail(f"{name} is a torch tensor; this function works in NumPy",
                          "use NumPy operations only, and return a NumPy array")
            value = value.detach().cpu()
            return value.numpy() if value.dtype == torch.bool else value.double().numpy()
        if isinstance(value, (np.ndarray, np.generic)):
            if library == "torch":
                self.fail(f"{name} is a NumPy array; this function works in torch",
                          "use torch operations, and return a torch.Tensor")
            value = np.asarray(value)
            return value if value.dtype == bool else value.astype(np.float64)
        self.fail(f"{name} is a {type(value).__name__}, not a "
                  f"{'NumPy array' if library == 'numpy' else 'torch tensor'}")

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


def _parameter_names(obj) -> list[str]:
    try:
        return [p.name for p in inspect.signature(obj).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _compare(call: _Call, name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
             against: str = "the reference solution"):
    if got.shape != want.shape:
        call.fail(f"{name} has shape {got.shape}, but {against} gives shape {want.shape}")
    if want.dtype == bool:
        if got.dtype != bool:
            call.fail(f"{name} has a numeric dtype; expected a boolean mask (torch.bool, True = may attend)",
                      "a mask is boolean from start to end: True where a query may attend, never 0/1 numbers")
        extra, missing = int((got & ~want).sum()), int((~got & want).sum())
        if extra or missing:
            call.fail(f"{name} differs from {against}: {extra} entries are True where they should be False "
                      f"and {missing} are False where they should be True, of {want.size}")
        return
    got_bad, want_bad = ~np.isfinite(got), ~np.isfinite(want)
    if (got_bad & ~want_bad).any():
        call.fail(f"{name} contains NaN or inf where {against} is finite",
                  "NaN and inf come from exponentials of large numbers, or from a row whose entries are all masked")
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        diff = np.abs(np.where(want_bad | got_bad, 0.0, got - want))
        wrong = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        call.fail(
            f"{name} differs from {against}: the largest difference is {diff.max():.3g} "
            f"(allowed: {atol:g} + {rtol:g} x |value|), and {wrong.mean():.0%} of its entries are off"
        )


# --------------------------------------------------------------------------- checks


def check_output_shapes(item: Item, args, kwargs=None, *, shapes, seed: int = 0,
                        hint: str = "check the shape of each returned value against the assignment",
                        init=None, method: str | None = None):
    """The item returns the right structure (a value, or a tuple of ``item.outputs``) with these shapes."""
    call = _Call(item, "output shapes", args, kwargs, seed, hint, init=init, method=method)
    values = call.outputs(call.run())
    shapes = [tuple(s) for s in shapes]
    if len(shapes) != len(values):
        raise ValueError(f"shapes lists {len(shapes)} shapes for {len(values)} outputs")
    for (name, value), shape in zip(values.items(), shapes):
        got = call.as_numpy(value, name).shape
        if got != shape:
            call.fail(f"{name} has shape {got}; expected {shape}")


def check_matches_reference(item: Item, args, kwargs=None, *, seed: int = 0, rtol: float = 1e-5,
                            atol: float = 1e-6, outputs: tuple[str, ...] | None = None,
                            hint: str = "compare your steps with the formula in the assignment",
                            init=None, method: str | None = None):
    """Every returned value (or those named in ``outputs``) equals the reference solution's."""
    call = _Call(item, "agreement with the reference solution", args, kwargs, seed, hint,
                 init=init, method=method)
    if init is not None:
        call.use_reference_weights()
    got = call.outputs(call.run())
    want = call.outputs(call.run(reference.get(item.assignment, item.name)))
    for name in outputs or got:
        _compare(call, name, call.as_numpy(got[name], name), call.as_numpy(want[name], name), rtol, atol)


def check_matches(item: Item, other: str, args, kwargs=None, *, output: str | None = None,
                  rename: dict | None = None, seed: int = 0, rtol: float = 1e-5, atol: float = 1e-6,
                  hint: str = "compare your steps with the formula in the assignment"):
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


def check_matches_torch(item: Item, builtin: str, args, kwargs=None, *, init, seed: int = 0,
                        rtol: float = 1e-5, atol: float = 1e-6, outputs: tuple[str, ...] | None = None,
                        hint: str = "name the submodules as the assignment says and follow its formula",
                        method: str | None = None):
    """A class item returns what the ``torch.nn`` built-in returns, both holding the same weights.

    ``builtin`` names a converter in :mod:`autograder.torch_builtins` (e.g.
    ``"multihead_attention"``). It makes random weights (seeded) under the
    names the contract gives the submodules, which are loaded into the student's
    object, builds the built-in from them and calls it on the same inputs. The
    reference solution is not needed, so visible tests can use this check.
    """
    from autograder import torch_builtins

    converter = torch_builtins.CONVERTERS[builtin]
    call = _Call(item, f"agreement with {converter.label}", args, kwargs, seed, hint, init=init, method=method)
    call.weights = converter.weights(tuple(init), seed)
    got = call.outputs(call.run())
    inputs, keywords = specs.materialize(call.args, call.kwargs, seed)
    want = converter(call.weights, call.init, inputs, keywords)
    for name in outputs or want:
        _compare(call, name, call.as_numpy(got[name], name), call.as_numpy(want[name], name), rtol, atol,
                 against=converter.label)


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


def check_causal(item: Item, args, kwargs=None, *, change: int | str, init=None, method: str | None = None,
                 output: str | None = None, seed: int = 0, atol: float = 1e-5,
                 hint: str = "the output at position t must not depend on later inputs: the look-ahead mask "
                             "has to reach every attention over these positions"):
    """Output position t (dim 1) does not change when input ``change`` changes after position t.

    The output must also depend on that input at all, so that ignoring it does not pass.
    """
    call = _Call(item, "causality", args, kwargs, seed, hint, init=init, method=method)
    length = call.input_value(change).size(1)
    cuts = sorted({0, length // 2, max(0, length - 2)})

    def later_than(value):
        for t in cuts:
            where = torch.zeros_like(value, dtype=torch.bool)
            where[:, t + 1:] = True
            yield t, where

    name, before, results = _perturbation(call, change, output, later_than, seed + 1)
    changed = _name_of(call, change)
    depends = False
    for t, after in results:
        diff = np.abs(after[:, :t + 1] - before[:, :t + 1]).max()
        if diff > atol:
            call.fail(f"changing {changed}[:, {t + 1}:] (later positions) changed {name}[:, :{t + 1}] "
                      f"(earlier positions) by up to {diff:.3g}")
        depends = depends or np.abs(after - before).max() > atol
    if not depends:
        call.fail(f"{name} does not change at all when {changed} changes",
                  f"the output at position t must be computed from {changed}[:, :t+1]")


def check_ignores_masked(item: Item, args, kwargs=None, *, change: int | str, mask: int | str, init=None,
                         method: str | None = None, output: str | None = None, seed: int = 0, atol: float = 1e-5,
                         hint: str = "masked (padding) positions must have no influence: the padding mask has "
                                     "to reach every attention over these positions"):
    """The output does not change when input ``change`` changes where ``mask`` is False (padding),
    and does change when it changes where ``mask`` is True."""
    call = _Call(item, "masked positions have no influence", args, kwargs, seed, hint, init=init, method=method)
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
        call.fail(f"{name} does not change when {changed} changes where {mask_name} is True",
                  f"the output must be computed from the visible positions of {changed}")


def check_equals(item: Item, args, expected, kwargs=None, *, output: str | None = None,
                 rtol: float = 1e-6, atol: float = 1e-8,
                 hint: str = "work the example by hand and compare each step",
                 init=None, method: str | None = None):
    """One returned value equals ``expected`` (plain nested lists), e.g. a published worked example.

    A class item is built with ``init`` and keeps its own weights and buffers.
    """
    call = _Call(item, "the worked example", args, kwargs, 0, hint, init=init, method=method)
    name, got = call.select(call.run(), output)
    want = np.asarray(expected)
    want = want if want.dtype == bool else want.astype(np.float64)
    _compare(call, name, got, want, rtol, atol, against="the known answer")


def check_rows_sum_to_one(item: Item, args, kwargs=None, *, output: str | None = None, dim: int = -1,
                          seed: int = 0, atol: float = 1e-5,
                          hint: str = "each query's weights over the keys (the last axis) must be non-negative "
                                      "and sum to one",
                          init=None, method: str | None = None):
    """The chosen output is non-negative and sums to one along ``dim``."""
    call = _Call(item, f"{output or 'result'} sum to one along dim {dim}", args, kwargs, seed, hint,
                 init=init, method=method)
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


def check_masked_get_zero_weight(item: Item, args, kwargs=None, *, mask: int | str = "mask",
                                 output: str = "weights", seed: int = 0, atol: float = 1e-7,
                                 hint: str = "keys where the mask is False must get exactly zero weight "
                                             "(True in the mask means 'may attend'); a masked score set to "
                                             "zero still gets a share",
                                             init=None, method: str | None = None):
    """Where the mask is False the weight is zero, and every row still sums to one."""
    call = _Call(item, "masked keys get zero weight", args, kwargs, seed, hint, init=init, method=method)
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
        call.fail(f"masked keys get weight up to {leaked.max():.3g}, "
                  f"in {(leaked > atol).mean() / max(1e-12, (~keep).mean()):.0%} of the masked positions")
    sums = got.sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=1e-5):
        call.fail(f"with the mask applied, rows of {name} sum to values between "
                  f"{sums.min():.4g} and {sums.max():.4g}",
                  "the visible keys must share all of the weight: a masked key takes none of it")


def check_finite(item: Item, args, kwargs=None, *, seed: int = 0,
                 hint: str = "every returned value must be finite: look for an exponential of a large number "
                             "that overflows, or a 0/0 in a row with nothing left to weigh",
                 init=None, method: str | None = None):
    """No returned value contains NaN or inf."""
    call = _Call(item, "finite outputs", args, kwargs, seed, hint, init=init, method=method)
    for name, value in call.outputs(call.run()).items():
        got = call.as_numpy(value, name)
        if not np.isfinite(got).all():
            call.fail(f"{name} contains NaN or inf")


def check_inputs_unchanged(item: Item, args, kwargs=None, *, seed: int = 0,
                           hint: str = "the arguments must be the same after the call: compute new arrays or "
                                       "tensors instead of writing into an argument in place"):
    """The item does not modify its arguments."""
    call = _Call(item, "inputs left unchanged", args, kwargs, seed, hint)
    inputs, keywords = specs.materialize(call.args, call.kwargs, seed)
    call.run(inputs=(inputs, keywords))
    fresh, fresh_kw = specs.materialize(call.args, call.kwargs, seed)
    names = _parameter_names(item.obj)
    pairs = [(names[i] if i < len(names) else f"argument {i + 1}", a, b) for i, (a, b) in enumerate(zip(inputs, fresh))]
    pairs += [(k, keywords[k], fresh_kw[k]) for k in keywords]
    for name, used, original in pairs:
        if isinstance(original, (np.ndarray, torch.Tensor)):
            if not np.array_equal(np.asarray(used), np.asarray(original), equal_nan=True):
                call.fail(f"argument {name} was modified")


def check_dtype_follows_input(item: Item, args, kwargs=None, *, seed: int = 0,
                              hint: str = "the outputs must have the dtype of the inputs: a tensor made with a "
                                          "fixed dtype, or with the default one, changes it",
                                          init=None, method: str | None = None):
    """Every floating-point output has the dtype of the first floating-point input."""
    call = _Call(item, "output dtype follows the inputs", args, kwargs, seed, hint, init=init, method=method)
    want = next((v.dtype for v in [*call.inputs, *call.keywords.values()]
                 if isinstance(v, (np.ndarray, torch.Tensor)) and v.dtype not in (torch.bool, np.bool_)), None)
    if want is None:
        raise ValueError("check_dtype_follows_input needs a floating-point input")
    for name, value in call.outputs(call.run()).items():
        call.as_numpy(value, name)  # checks the kind of value
        if value.dtype != want:
            call.fail(f"{name} has dtype {value.dtype}; the inputs have dtype {want}")


def check_raises(item: Item, args, kwargs=None, *, exception: str = "ValueError",
                 mentions: tuple[str, ...] = (), seed: int = 0,
                 hint: str = "check the arguments first and raise an error that names the wrong one",
                 init=None, method: str | None = None):
    """Calling the item raises ``exception`` (a builtin's name) whose message mentions each of ``mentions``.

    Without ``init`` the item itself is called (for a class: its constructor, with ``args``);
    with ``init`` an object is built first and its ``method`` (default: forward) gets ``args``.
    """
    expected = getattr(builtins, exception)
    call = _Call(item, f"{exception} for bad arguments", args, kwargs, seed, hint, init=init, method=method)
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
