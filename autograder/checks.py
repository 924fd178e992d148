"""The checks that test cells call, one property each.

Every check takes an :class:`~autograder.items.Item` (the student's object and its name in the
course contract), inputs described as plain data (see :mod:`autograder.specs`), and keyword options
that are plain data too (those that checks share, the seed and how a class item is built and called,
declared once: :class:`~autograder.calls.CallOptions`). It makes the inputs, calls the student's code
(:class:`~autograder.calls.Call`), and raises :class:`~autograder.items.CheckFailed` with a message
that names

* the item,
* the property that failed,
* the shapes of the inputs,
* and a hint,

and never prints an expected value (:mod:`autograder.compare` says how values differ). Because
everything but the student's object is plain data, a check call can be recorded and replayed by a
grader that runs the student's code in another process.

Each check grades its item's own code (:mod:`autograder.graded`): graded in the sandbox, an item that
uses other graded items runs with the grader's stand-ins for them (:mod:`autograder.standins`), and a
failure's hint says whose fault it is (:mod:`autograder.attribution`), naming one of the item's known
mistakes where one explains it (:mod:`autograder.diagnosis`).
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import importlib
import numbers

import numpy as np
import torch

from autograder import reference, specs, standins, torch_builtins
from autograder.calls import Call, CallOptions, parameter_names, seeded, takes_options
from autograder.compare import compare
from autograder.graded import graded
from autograder.items import CheckFailed, Item, PartlyRight


@graded()
@takes_options()
def check_output_shapes(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    shapes,
    hint: str = "check the shape of each returned value against the assignment",
):
    """The item returns the right structure (a value, or a tuple of ``item.outputs``) with these shapes."""
    call = options.call(item, "output shapes", args, kwargs, hint)
    values = call.outputs(call.run())
    shapes = [tuple(s) for s in shapes]
    if len(shapes) != len(values):
        raise ValueError(f"shapes lists {len(shapes)} shapes for {len(values)} outputs")
    for (name, value), shape in zip(values.items(), shapes):
        got = call.as_numpy(value, name).shape
        if got != shape:
            call.fail(f"{name} has shape {got}; expected {shape}")


@graded()
@takes_options()
def check_matches_reference(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    outputs: tuple[str, ...] | None = None,
    hint: str = "compare your steps with the formula in the assignment",
):
    """Every returned value (or those named in ``outputs``) equals the reference solution's."""
    call = options.call(item, "agreement with the reference solution", args, kwargs, hint)
    if options.init is not None:
        call.use_reference_weights()
    got = call.outputs(call.run())
    want = call.outputs(call.run(standins.as_chosen(reference.get(item.assignment, item.name), item.free)))
    for name in outputs or got:
        compare(call, name, call.as_numpy(got[name], name), call.as_numpy(want[name], name), rtol, atol)


@graded()
@takes_options("seed")
def check_matches(
    item: Item,
    other: str,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    output: str | None = None,
    rename: dict | None = None,
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
    call = options.call(item, f"agreement with {other}", args, kwargs, hint)
    name, got = call.select(call.run(), output)
    inputs, keywords = specs.materialize(call.args, call.kwargs, options.seed)
    keywords = {(rename or {}).get(k, k): v for k, v in keywords.items()}
    want = call.as_numpy(builtin(*inputs, **keywords), name)
    compare(call, name, got, want, rtol, atol, against=other)


@graded()
@takes_options(required=("init",))
def check_matches_torch(
    item: Item,
    builtin: str,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    outputs: tuple[str, ...] | None = None,
    hint: str = "name the submodules as the assignment says and follow its formula",
):
    """A class item returns what the ``torch.nn`` built-in returns, both holding the same weights.

    ``builtin`` names a converter in :mod:`autograder.torch_builtins` (e.g.
    ``"multihead_attention"``). It makes random weights (seeded) under the
    names the contract gives the submodules, which are loaded into the student's
    object, builds the built-in from them and calls it on the same inputs. The
    reference solution is not needed, so visible tests can use this check.
    """
    converter = torch_builtins.CONVERTERS[builtin]
    call = options.call(item, f"agreement with {converter.label}", args, kwargs, hint)
    call.weights = converter.weights(tuple(options.init), options.seed)
    got = call.outputs(call.run())
    inputs, keywords = specs.materialize(call.args, call.kwargs, options.seed)
    want = converter(call.weights, call.init, inputs, keywords)
    for name in outputs or want:
        compare(
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


def _perturbation(call: Call, change: int | str, output: str | None, where_fn, seed: int):
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


@graded()
@takes_options()
def check_causal(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    change: int | str,
    output: str | None = None,
    atol: float = 1e-5,
    hint: str = "the output at position t must not depend on later inputs: the look-ahead mask "
    "has to reach every attention over these positions",
):
    """Output position t (dim 1) does not change when input ``change`` changes after position t.

    The output must also depend on that input at all, so that ignoring it does not pass.
    """
    call = options.call(item, "causality", args, kwargs, hint)
    length = call.input_value(change).size(1)
    cuts = sorted({0, length // 2, max(0, length - 2)})

    def later_than(value):
        for t in cuts:
            where = torch.zeros_like(value, dtype=torch.bool)
            where[:, t + 1 :] = True
            yield t, where

    name, before, results = _perturbation(call, change, output, later_than, options.seed + 1)
    changed = call.name_of(change)
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


@graded()
@takes_options()
def check_ignores_masked(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    change: int | str,
    mask: int | str,
    output: str | None = None,
    atol: float = 1e-5,
    hint: str = "masked (padding) positions must have no influence: the padding mask has "
    "to reach every attention over these positions",
):
    """The output does not change when input ``change`` changes where ``mask`` is False (padding),
    and does change when it changes where ``mask`` is True."""
    call = options.call(item, "masked positions have no influence", args, kwargs, hint)
    keep = call.input_value(mask)

    def masked_then_visible(value):
        hidden = ~torch.as_tensor(keep).bool().expand_as(value)
        yield "masked", hidden
        yield "visible", ~hidden

    name, before, results = _perturbation(call, change, output, masked_then_visible, options.seed + 1)
    changed, mask_name = call.name_of(change), call.name_of(mask)
    (_, after_masked), (_, after_visible) = results
    diff = np.abs(after_masked - before).max()
    if diff > atol:
        call.fail(f"changing {changed} where {mask_name} is False changed {name} by up to {diff:.3g}")
    if np.abs(after_visible - before).max() <= atol:
        call.fail(
            f"{name} does not change when {changed} changes where {mask_name} is True",
            f"the output must be computed from the visible positions of {changed}",
        )


@graded()
@takes_options("init", "method", "mode")
def check_equals(
    item: Item,
    args,
    expected,
    kwargs=None,
    *,
    options: CallOptions,
    output: str | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-8,
    hint: str = "work the example by hand and compare each step",
):
    """One returned value equals ``expected`` (plain nested lists), e.g. a published worked example.
    A failure is headed "a known answer", which a hidden input is as well as the worked example.

    A class item is built with ``init`` and keeps its own weights and buffers.
    """
    call = options.call(item, "a known answer", args, kwargs, hint)
    name, got = call.select(call.run(), output)
    want = np.asarray(expected)
    want = want if want.dtype == bool else want.astype(np.float64)
    compare(call, name, got, want, rtol, atol, against="the known answer")


def check_choices(
    item: Item,
    argument: str,
    values,
    options,
    answers: dict | None = None,
    *,
    hint: str,
    form_hint: str,
):
    """A multiple-choice question, asked for each of ``values`` of ``argument``: each answer is one of
    ``options`` (``item`` gives it as a one-hot vector over them) and, given ``answers`` (each value's right
    option: the hidden tests'), the right one. Each part is checked on its own; where some are wrong,
    :class:`~autograder.items.PartlyRight` names every wrong one, and graded, the cell earns a share of its
    points per right part."""
    values, options = list(values), list(options)
    if answers is not None and (set(answers) != set(values) or not set(answers.values()) <= set(options)):
        raise ValueError("answers must give one of the options for each of the values, and nothing else")
    chosen = dataclasses.replace(item, obj=_chose_an_option(item.obj), known=())
    failures = []
    for value in values:
        try:
            part = "one of the options"
            check_equals(chosen, [], True, {argument: value}, hint=form_hint)
            if answers is not None:
                part = "the right option"
                check_equals(item, [], [answers[value] == o for o in options], {argument: value}, hint=hint)
        except CheckFailed as failure:  # said as a choice, not as the one-hot vectors that were compared
            problem = "another option" if part == "the right option" else "none of the options, as written there"
            failures.append(CheckFailed(failure.what, part, failure.inputs, f"the answer is {problem}", failure.hint))
    if failures:
        raise PartlyRight(item.name, f"{argument}s", len(values) - len(failures), len(values), failures)


def _chose_an_option(one_hot):
    @functools.wraps(one_hot)
    def chose(*args, **kwargs):
        return torch.as_tensor(one_hot(*args, **kwargs)).any()

    return chose


@graded()
@takes_options()
def check_rows_sum_to_one(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    output: str | None = None,
    dim: int = -1,
    atol: float = 1e-5,
    hint: str = "each query's weights over the keys (the last axis) must be non-negative and sum to one",
):
    """The chosen output is non-negative and sums to one along ``dim``."""
    call = options.call(item, f"{output or 'result'} sum to one along dim {dim}", args, kwargs, hint)
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


@graded()
@takes_options()
def check_masked_get_zero_weight(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    mask: int | str = "mask",
    output: str = "weights",
    atol: float = 1e-7,
    hint: str = "keys where the mask is False must get exactly zero weight "
    "(True in the mask means 'may attend'); a masked score set to "
    "zero still gets a share",
):
    """Where the mask is False the weight is zero, and every row still sums to one."""
    call = options.call(item, "masked keys get zero weight", args, kwargs, hint)
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


@graded()
@takes_options()
def check_finite(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    hint: str = "every returned value must be finite: look for an exponential of a large number "
    "that overflows, or a 0/0 in a row with nothing left to weigh",
):
    """No returned value contains NaN or inf."""
    call = options.call(item, "finite outputs", args, kwargs, hint)
    for name, value in call.outputs(call.run()).items():
        got = call.as_numpy(value, name)
        if not np.isfinite(got).all():
            call.fail(f"{name} contains NaN or inf")


@graded()
@takes_options("seed")
def check_inputs_unchanged(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    hint: str = "the arguments must be the same after the call: compute new arrays or "
    "tensors instead of writing into an argument in place",
):
    """The item does not modify its arguments."""
    call = options.call(item, "inputs left unchanged", args, kwargs, hint)
    inputs, keywords = specs.materialize(call.args, call.kwargs, options.seed)
    call.run(inputs=(inputs, keywords))
    fresh, fresh_kw = specs.materialize(call.args, call.kwargs, options.seed)
    names = parameter_names(item.obj)
    pairs = [(names[i] if i < len(names) else f"argument {i + 1}", a, b) for i, (a, b) in enumerate(zip(inputs, fresh))]
    pairs += [(k, keywords[k], fresh_kw[k]) for k in keywords]
    for name, used, original in pairs:
        if isinstance(original, (np.ndarray, torch.Tensor)) and not np.array_equal(
            np.asarray(used), np.asarray(original), equal_nan=True
        ):
            call.fail(f"argument {name} was modified")


@graded()
@takes_options()
def check_dtype_follows_input(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    hint: str = "the outputs must have the dtype of the inputs: a tensor made with a "
    "fixed dtype, or with the default one, changes it",
):
    """Every floating-point output has the dtype of the first floating-point input."""
    call = options.call(item, "output dtype follows the inputs", args, kwargs, hint)
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


def _cache_pair(call: Call, got: dict) -> tuple:
    """The cache that a self-attention module with a key/value cache returned (its outputs by name)."""
    cache = tuple(got[f"cache[{i}]"] for i in range(2)) if "cache[1]" in got else got.get("cache")
    if not isinstance(cache, tuple) or len(cache) != 2:
        call.fail("the returned cache is not a pair (keys, values)")
    return cache


def _causal_block(start: int, length: int) -> torch.Tensor:
    """The look-ahead mask of ``length`` new positions after ``start`` cached ones: (length, start + length)."""
    queries = torch.arange(start, start + length)[:, None]
    return torch.arange(start + length)[None, :] <= queries


@graded()
@takes_options("seed", "init", "mode", required=("init",))
def check_incremental(
    item: Item,
    x,
    *,
    options: CallOptions,
    chunks=(1,),
    atol: float = 1e-5,
    hint: str = "with the cache, each new position must attend to every earlier position and "
    "to itself, and the cache must grow by the new positions",
):
    """A self-attention module with a key/value cache, ``forward(x, mask=None, cache=None) ->
    (output, cache)``, gives the same outputs fed ``chunks`` positions at a time, its cache carried from
    call to call, as fed the whole sequence at once with a look-ahead mask; and its cache holds every
    position. Needs no reference: the module is compared with itself."""
    call = options.call(item, "incremental decoding with the cache", [x], None, hint)
    instance = call.instance(item.obj)
    (whole,), _ = specs.materialize(call.args, call.kwargs, options.seed)
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
            cache = _cache_pair(call, got)
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


@graded()
@takes_options("seed", "init", required=("init",))
def check_relative_positions(
    item: Item,
    x,
    *,
    options: CallOptions,
    offset: int = 4,
    atol: float = 1e-5,
    hint: str = "rotate the queries and the keys by the positions of the new tokens in the whole sequence",
):
    """A self-attention module with rotary positions and a key/value cache, ``forward(x, mask=None,
    cache=None) -> (output, cache)``, attends by the distance between positions: ``x`` after ``offset``
    cached positions that the mask hides (every position moved by ``offset``, every distance kept) gives
    the outputs it gives alone with a look-ahead mask; and with no mask, reversing the order of ``x`` does
    more than reverse the outputs (attention without positions would only reverse them). Needs no reference."""
    call = options.call(item, "attention by the distance between positions", [x], None, hint)
    instance = call.instance(item.obj)
    (whole,), _ = specs.materialize(call.args, call.kwargs, options.seed)
    batch, length, width = whole.shape
    alone = call.outputs(call.invoke(instance, [whole], {"mask": _causal_block(0, length)}))
    earlier = torch.randn(batch, offset, width, generator=torch.Generator().manual_seed(options.seed + 1))
    first = call.outputs(call.invoke(instance, [earlier.to(whole.dtype)], {"mask": _causal_block(0, offset)}))
    hidden_earlier = torch.cat([torch.zeros(length, offset, dtype=torch.bool), _causal_block(0, length)], dim=1)
    moved = call.outputs(call.invoke(instance, [whole], {"mask": hidden_earlier, "cache": _cache_pair(call, first)}))
    want, got = call.as_numpy(alone["output"], "output"), call.as_numpy(moved["output"], "output")
    if got.shape != want.shape or not np.allclose(got, want, atol=atol, rtol=1e-5):
        diff = np.abs(got - want).max() if got.shape == want.shape else float("nan")
        call.fail(
            f"after {offset} cached positions that the mask hides, every position {offset} places further on, "
            f"the outputs differ from those of x alone by up to {diff:.3g}; the distances between the positions, "
            f"and so the scores, are the same"
        )
    forwards = call.as_numpy(call.outputs(call.invoke(instance, [whole], {}))["output"], "output")
    backwards = call.as_numpy(call.outputs(call.invoke(instance, [whole.flip(1)], {}))["output"], "output")
    if np.allclose(backwards[:, ::-1], forwards, atol=atol, rtol=1e-5):
        call.fail(
            "with no mask, reversing the order of the positions of x only reverses the outputs: the attention "
            "does not see where its positions are"
        )


@graded()
@takes_options("seed", "init", required=("init",))
def check_in_model(
    item: Item,
    x,
    *,
    options: CallOptions,
    layers: int = 2,
    new_tokens: int = 6,
    vocab_size: int = 50,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    hint: str = "the model runs your attention on the prompt, then on one new token at a time with the cache",
):
    """A rotary self-attention module with a key/value cache in place of the attention of every layer of a
    Llama-family model with random weights (:func:`autograder.models.llama_family`; each layer's module
    holds that layer's weights): the model's logits on a batch of prompts of ``x``'s shape (B, L, d_model:
    B prompts of L tokens) equal those of the same model with the reference's attention; so do they at each
    of ``new_tokens`` steps of greedy generation with the cache, and on the whole sequence at once."""
    call = options.call(item, "the logits of a Llama-family model with this attention", [x], None, hint)
    (shape_of,), _ = specs.materialize(call.args, call.kwargs, options.seed)
    batch, length, _ = shape_of.shape
    # The course's models are built from the reference solutions of chapters 3 to 7: a students' copy of the
    # packages holds autograder.models only once those are released (autograder.packages follows imports),
    # so it is imported by name, where a hidden test asks for it.
    models = importlib.import_module("autograder.models")
    solution = reference.get(item.assignment, item.name)
    original = models.llama_family(solution, call.init, layers, vocab_size, length + new_tokens, options.seed)
    tested = models.with_attention(original, lambda i, attention: _Attention(call, attention, i))
    ids = torch.randint(vocab_size, (batch, length), generator=torch.Generator().manual_seed(options.seed))
    with torch.no_grad():
        want, want_cache = original.extend(ids)
        got, got_cache = tested.extend(ids)
        compare(
            call, "the logits of the prompt", _numbers(got), _numbers(want), rtol, atol, against="the original model"
        )
        for step in range(1, new_tokens + 1):
            chosen = want[:, -1].argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, chosen], dim=1)
            want, want_cache = original.extend(chosen, want_cache)
            got, got_cache = tested.extend(chosen, got_cache)
            name = f"the logits of generated token {step} (with the cache)"
            compare(call, name, _numbers(got), _numbers(want), rtol, atol, against="the original model")
        name = f"the logits of all {ids.size(1)} positions at once (no cache)"
        compare(call, name, _numbers(tested(ids)), _numbers(original(ids)), rtol, atol, against="the original model")


def _numbers(logits: torch.Tensor) -> np.ndarray:
    return logits.detach().double().numpy()


class _Attention(torch.nn.Module):
    """The student's module in place of one layer's attention: built in the sandbox with that layer's weights,
    each call sent there, and what comes back checked for its shapes before the model goes on with it."""

    def __init__(self, call: Call, attention: torch.nn.Module, layer: int):
        super().__init__()
        call.weights = {k: v.detach().clone() for k, v in attention.state_dict().items()}
        self.call, self.layer = call, layer
        self.instance = call.instance(call.item.obj)
        self.kv_heads, self.d_head = attention.num_kv_heads, attention.W_q.out_features // attention.num_heads

    def forward(self, x, mask=None, cache=None):
        past = 0 if cache is None else cache[0].size(2)
        got = self.call.outputs(self.call.invoke(self.instance, [x], {"mask": mask, "cache": cache}))
        keys, values = _cache_pair(self.call, got)
        kv_shape = (x.size(0), self.kv_heads, past + x.size(1), self.d_head)
        for name, value, shape in (
            ("output", got.get("output"), x.shape),
            ("keys", keys, kv_shape),
            ("values", values, kv_shape),
        ):
            if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.shape != shape:
                found = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                self.call.fail(
                    f"in layer {self.layer}, after {past} cached positions, the {name} it returned "
                    f"{'are' if name != 'output' else 'is'} {found}; expected a float tensor {tuple(shape)}"
                )
        return got["output"].to(x.dtype), (keys.to(x.dtype), values.to(x.dtype))


NUMBERS = {"int": "an int", "float": "a float"}  # the kinds of number a contract names as a return type


@graded()
@takes_options()
def check_returns_number(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    kind: str,
    hint: str = "return the kind of number that the contract names",
):
    """The item returns one number of the ``kind`` its contract names: ``"int"``, an integer (Python's or
    NumPy's; not a bool, not a float that happens to be whole, not a tensor), or ``"float"``, a real number
    (an int is one as well). The message names the type returned, never the value."""
    if kind not in NUMBERS:
        raise ValueError(f"kind must be one of {sorted(NUMBERS)}, got {kind!r}")
    call = options.call(item, f"the result is {NUMBERS[kind]}", args, kwargs, hint)
    got = call.run()
    wanted = numbers.Integral if kind == "int" else numbers.Real
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, wanted):
        call.fail(f"it returned a {type(got).__name__}, not {NUMBERS[kind]}")


@graded()
@takes_options()
def check_output_device(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    device: str = "meta",
    hint: str = "make the result on the device you are given, not on the default one",
):
    """Every returned tensor lies on ``device`` (``"meta"``: a device with no data, so the check runs on
    any machine, with or without a GPU)."""
    call = options.call(item, f"result on the device {device!r}", args, kwargs, hint)
    for name, value in call.outputs(call.run()).items():
        if not isinstance(value, torch.Tensor):
            call.fail(f"{name} is a {type(value).__name__}, not a torch tensor")
        if value.device.type != torch.device(device).type:
            call.fail(f"{name} is on the device {value.device.type!r}")


@graded()
@takes_options("seed")
def check_within_memory(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    budget_mb: int,
    queries: tuple = (0,),
    rows: int = 32,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    hint: str = "hold only what the method needs at once, never the whole matrix of scores",
    values_hint: str = "a long input must give the same values as a short one: every block of keys counts",
):
    """The item computes its result within ``budget_mb`` MiB of memory beyond what its sandbox holds
    when the call starts (and beyond what it held before the student's code ran, of which the notebook
    may keep :data:`~autograder.sandbox.process.NOTEBOOK_MB`), and the result is right: its rows for
    ``rows`` queries drawn at random equal the reference's, computed on those queries alone (a failure
    there gets ``values_hint``).

    The budget is enforced on every process of the sandbox, from outside (the student's code cannot
    lift it); beside the student's own code, in a notebook, it cannot be, and only the values are
    checked. ``queries`` names the inputs (by position or keyword) that hold one row per query along
    dimension -2 (the queries, a mask with a row per query); the result holds one row per query too.
    """
    call = options.call(item, f"a result within {budget_mb} MiB of memory", args, kwargs, hint)
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
        if got.ndim < 2 or got.shape[-2] != length:
            call.fail(f"{name} has shape {got.shape}: expected one row per query ({length} along dimension -2)")
        solution = reference.get(item.assignment, item.name)
        with seeded(options.seed):
            want = call.as_numpy(call.outputs(solution(*inputs, **keywords))[name], name)
        call.hint = values_hint
        compare(call, f"{name} at {len(picked)} queries drawn at random", got[..., picked, :], want, rtol, atol)
    except CheckFailed as failure:  # diagnosed on the queries compared, not on the whole call made again
        failure.replay = {
            "args": [specs.made(v) for v in inputs],
            "kwargs": {k: specs.made(v) for k, v in keywords.items()},
        }
        raise


@graded(diagnose=False)
@takes_options("init", required=("init",))
def check_buffer(
    item: Item,
    name: str,
    *,
    options: CallOptions,
    shape=None,
    hint: str = "keep it as a buffer of the module: saved and moved with it, but not trained",
):
    """A class item's object holds ``name`` as a buffer (in its state, not among its parameters), of
    ``shape`` where given."""
    call = options.call(item, f"{name} is a buffer", [], None, hint)
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


@graded(diagnose=False)
@takes_options()
def check_raises(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    exception: str = "ValueError",
    mentions: tuple[str, ...] = (),
    hint: str = "check the arguments first and raise an error that names the wrong one",
):
    """Calling the item raises ``exception`` (a builtin's name) whose message mentions each of ``mentions``.

    Without ``init`` the item itself is called (for a class: its constructor, with ``args``);
    with ``init`` an object is built first and its ``method`` (default: forward) gets ``args``.
    """
    expected = getattr(builtins, exception)
    call = options.call(item, f"{exception} for bad arguments", args, kwargs, hint)
    inputs, keywords = specs.materialize(call.args, call.kwargs, options.seed)
    target = item.obj if options.init is None else call.build(item.obj)
    try:
        with seeded(options.seed, target):
            target(*inputs, **keywords)
    except expected as exc:
        missing = [word for word in mentions if word not in str(exc)]
        if missing:
            call.fail(f"the {exception} message {str(exc)!r} does not mention {', '.join(missing)}")
        return
    except Exception as exc:
        call.fail(f"it raised {type(exc).__name__}: {exc}; expected {exception}")
    call.fail(f"it raised no error; expected {exception}")
