"""The checks of the values an item returns: the reference's, a torch built-in's, a known answer, within memory.

Each compares the values (:func:`autograder.calls.compare.compare`) at its tolerances, never showing the expected one
but a visible test's known answer (:func:`check_equals`).
"""

from __future__ import annotations

import importlib

import numpy as np
import torch

from autograder.api import items, specs
from autograder.api.items import CheckFailed, Item
from autograder.api.options import CompareOptions, compares
from autograder.calls import standins, torch_builtins
from autograder.calls.call import CallOptions, seeded, takes_options
from autograder.calls.compare import compare
from autograder.calls.isolation import isolated
from autograder.release import reference


@isolated()
@takes_options()
@compares("outputs", "rtol", "atol", hint="compare your steps with the formula in the assignment")
def check_matches_reference(item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions):
    """Every returned value (or those named in ``outputs``) equals the reference solution's."""
    call = options.call(item, "agreement with the reference solution", args, kwargs, compared.hint)
    if options.init is not None:
        call.use_reference_weights()
    got = call.outputs(call.run_shared())
    want = call.outputs(call.run(standins.as_chosen(reference.get(item.assignment, item.name), item.free)))
    for name in compared.outputs or got:
        compare(
            call, name, call.as_numpy(got[name], name), call.as_numpy(want[name], name), compared.rtol, compared.atol
        )


@isolated()
@takes_options("seed")
@compares("output", "rtol", "atol", hint="compare your steps with the formula in the assignment")
def check_matches(
    item: Item,
    other: str,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    compared: CompareOptions,
    rename: dict | None = None,
):
    """One returned value equals what another function (a dotted path, e.g. a torch built-in) returns.

    ``rename`` maps the item's keyword names to the other function's
    (``{"mask": "attn_mask"}``).
    """
    module_name, _, attr = other.rpartition(".")
    builtin = getattr(importlib.import_module(module_name), attr)
    call = options.call(item, f"agreement with {other}", args, kwargs, compared.hint)
    name, got = call.select(call.run_shared(), compared.output)
    inputs, keywords = specs.materialize(call.args, call.kwargs, options.seed)
    keywords = {(rename or {}).get(k, k): v for k, v in keywords.items()}
    want = call.as_numpy(builtin(*inputs, **keywords), name)
    compare(call, name, got, want, compared.rtol, compared.atol, against=other)


@isolated()
@takes_options(required=("init",))
@compares("outputs", "rtol", "atol", hint="name the submodules as the assignment says and follow its formula")
def check_matches_torch(item: Item, builtin: str, args, kwargs=None, *, options: CallOptions, compared: CompareOptions):
    """A class item returns what the ``torch.nn`` built-in returns, both holding the same weights.

    ``builtin`` names a converter in :mod:`autograder.calls.torch_builtins` (e.g.
    ``"multihead_attention"``). It makes random weights (seeded) under the
    names the contract gives the submodules, which are loaded into the student's
    object, builds the built-in from them and calls it on the same inputs. The
    reference solution is not needed, so visible tests can use this check.
    """
    converter = torch_builtins.CONVERTERS[builtin]
    call = options.call(item, f"agreement with {converter.label}", args, kwargs, compared.hint)
    call.weights = converter.weights(tuple(options.init), options.seed)
    got = call.outputs(call.run())
    inputs, keywords = specs.materialize(call.args, call.kwargs, options.seed)
    want = converter(call.weights, call.init, inputs, keywords)
    for name in compared.outputs or want:
        compare(
            call,
            name,
            call.as_numpy(got[name], name),
            call.as_numpy(want[name], name),
            compared.rtol,
            compared.atol,
            against=converter.label,
        )


@isolated()
@takes_options("init", "method", "mode")
@compares("output", rtol=1e-6, atol=1e-8, hint="work the example by hand and compare each step")
def check_equals(item: Item, args, expected, kwargs=None, *, options: CallOptions, compared: CompareOptions):
    """One returned value equals ``expected`` (plain nested lists), e.g. a published worked example.
    A failure is headed "a known answer", which a hidden input is as well as the worked example. A visible
    test's known answer is public (its cell prints it): where only visible tests run (a notebook's kernel,
    `make validate`), a failure shows the value returned beside it; where hidden tests run (the grader),
    no failure shows either (:func:`autograder.api.items.known_answers_shown`).

    A class item is built with ``init`` and keeps its own weights and buffers.
    """
    call = options.call(item, "a known answer", args, kwargs, compared.hint)
    name, got = call.select(call.run(), compared.output)
    want = np.asarray(expected)
    want = want if want.dtype == bool else want.astype(np.float64)
    public = items.known_answers_shown()
    compare(call, name, got, want, compared.rtol, compared.atol, against="the known answer", public=public)


@isolated()
@takes_options("seed", "init")
@compares("rtol", "atol", hint="hold only what the method needs at once, never the whole matrix of scores")
def check_within_memory(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    compared: CompareOptions,
    budget_mb: int,
    queries: tuple = (0,),
    rows: int = 32,
    values_hint: str = "a long input must give the same values as a short one: every block of keys counts",
):
    """The item computes its result within ``budget_mb`` MiB of memory beyond what its sandbox holds
    when the call starts (and beyond what it held before the student's code ran, of which the notebook
    may keep :data:`~autograder.sandbox.limits.NOTEBOOK_MB`), and the result is right: its rows for
    ``rows`` queries drawn at random equal the reference's, computed on those queries alone (a failure
    there gets ``values_hint``).

    The budget is enforced on every process of the sandbox, from outside (the student's code cannot
    lift it); beside the student's own code, in a notebook, it cannot be, and only the values are
    checked. ``queries`` names the inputs (by position or keyword) that hold one row per query along
    dimension -2 (the queries, a mask with a row per query); the result holds one row per query too.
    A class item is built with ``init`` and the reference's weights, as the reference is.
    """
    call = options.call(item, f"a result within {budget_mb} MiB of memory", args, kwargs, compared.hint)
    if options.init is not None:
        call.use_reference_weights()
    scope = standins.current()
    if scope is not None:
        scope.memory_mb = budget_mb
    try:
        name, got = call.select(call.run(), None)
    except CheckFailed as failure:
        try:
            call.fail(f"with {budget_mb} MiB of memory to spare, {failure.problem}")
        except CheckFailed as beyond:
            beyond.replay = None  # made again without the budget, the call would only hold the whole matrix
            raise beyond from None
    finally:
        if scope is not None:
            scope.memory_mb = None
    length = call.input_value(queries[0]).shape[-2]
    picked = np.sort(np.random.default_rng(options.seed).choice(length, size=min(rows, length), replace=False))
    index = torch.from_numpy(picked)
    inputs, keywords = specs.materialize(call.args, call.kwargs, options.seed)
    for which in queries:
        value = keywords[which] if isinstance(which, str) else inputs[which]
        if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[-2] == length:
            value = value.index_select(-2, index)
        if isinstance(which, str):
            keywords[which] = value
        else:
            inputs[which] = value
    try:
        if got.ndim < 2:
            call.fail(
                f"{name} has {items.dimensions(got.ndim)}: expected one row per query ({length} along dimension -2)"
            )
        if got.shape[-2] != length:
            rows = items.quoted_size(got.shape[-2], length)
            call.fail(f"{name} has size {rows} in dimension -2: expected one row per query ({length})")
        solution = reference.get(item.assignment, item.name)
        if options.init is not None:
            want = call.as_numpy(call.outputs(call.run(solution, (inputs, keywords)))[name], name)
        else:
            with seeded(options.seed):
                want = call.as_numpy(call.outputs(solution(*inputs, **keywords))[name], name)
        call.hint = values_hint
        compare(
            call,
            f"{name} at {len(picked)} queries drawn at random",
            got[..., picked, :],
            want,
            compared.rtol,
            compared.atol,
        )
    except CheckFailed as failure:  # diagnosed on the queries compared, not on the whole call made again
        failure.replay = {
            "args": [specs.made(v) for v in inputs],
            "kwargs": {k: specs.made(v) for k, v in keywords.items()},
        }
        raise
