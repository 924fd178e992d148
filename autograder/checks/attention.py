"""The checks of what attention may weigh and look at: weights that sum to one, none on masked keys, no look-ahead.

Those of influence (:func:`check_causal`, :func:`check_ignores_masked`) change an input at chosen positions and
watch which outputs move; the student's module is compared with itself, so no reference is needed.
"""

from __future__ import annotations

import numpy as np
import torch

from autograder.api import specs
from autograder.api.items import Item, dimensions, quoted_size
from autograder.api.options import CompareOptions, compares
from autograder.calls.call import Call, CallOptions, takes_options
from autograder.calls.compare import compare
from autograder.calls.isolation import isolated


@isolated()
@takes_options()
@compares(
    "output",
    atol=1e-5,
    hint="each query's weights over the keys (the last axis) must be non-negative and sum to one",
)
def check_rows_sum_to_one(
    item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, dim: int = -1
):
    """The chosen output is non-negative and sums to one along ``dim``."""
    output, atol = compared.output, compared.atol
    call = options.call(item, f"{output or 'result'} sum to one along dim {dim}", args, kwargs, compared.hint)
    name, got = call.select(call.run(), output)
    if got.ndim == 0 or not -got.ndim <= dim < got.ndim:
        call.fail(f"{name} has {dimensions(got.ndim)}, so no dimension {dim}")
    if not np.isfinite(got).all():
        call.fail(f"{name} contains NaN or inf", "the weights must stay finite for large scores, such as [1000, 1001]")
    if (got < -atol).any():
        call.fail(f"{name} has negative entries; weights from a softmax are never negative")
    sums = got.sum(axis=dim)
    if not np.allclose(sums, 1.0, atol=atol):
        call.fail(f"{name} sums to values between {sums.min():.4g} and {sums.max():.4g} along dim {dim}")


@isolated()
@takes_options()
@compares(
    output="weights",
    atol=1e-7,
    hint="keys where the mask is False must get exactly zero weight "
    "(True in the mask means 'may attend'); a masked score set to "
    "zero still gets a share",
)
def check_masked_get_zero_weight(
    item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, mask: int | str = "mask"
):
    """Where the mask is False the weight is zero, and every row still sums to one."""
    atol = compared.atol
    call = options.call(item, "masked keys get zero weight", args, kwargs, compared.hint)
    name, got = call.select(call.run(), compared.output)
    keep = np.asarray(call.input_value(mask))
    try:
        keep = np.broadcast_to(keep, got.shape)
    except ValueError:
        call.fail(_not_broadcast(name, got.shape, keep.shape))
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


def _not_broadcast(name: str, shape: tuple, mask: tuple) -> str:
    """Why the mask (of shape ``mask``, the check's input) does not broadcast to a returned value of ``shape``: one
    size of it at most (:func:`autograder.api.items.shape_difference`'s rule)."""
    if len(mask) > len(shape):
        return f"{name} has {dimensions(len(shape))}, fewer than the mask {mask}"
    for index in range(-1, -len(mask) - 1, -1):
        if mask[index] not in (1, shape[index]):
            size = quoted_size(shape[index], mask[index])
            return f"{name} has size {size} in dimension {index}, which the mask {mask} does not broadcast to"
    return f"{name} does not take the mask {mask}"


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
        if after.shape != before.shape:  # both the student's: which dimension changed, and no size of either
            changed = (
                "its number of dimensions"
                if after.ndim != before.ndim
                else f"its dimension {next(i for i, (a, b) in enumerate(zip(after.shape, before.shape)) if a != b)}"
            )
            call.fail(f"{name} changes shape when the input changes: {changed} is another")
        results.append((label, after))
    return name, before, results


@isolated()
@takes_options()
@compares(
    "output",
    atol=1e-5,
    hint="the output at position t must not depend on later inputs: the look-ahead mask "
    "has to reach every attention over these positions",
)
def check_causal(item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, change: int | str):
    """Output position t (dim 1) does not change when input ``change`` changes after position t.

    The output must also depend on that input at all, so that ignoring it does not pass.
    """
    atol = compared.atol
    call = options.call(item, "causality", args, kwargs, compared.hint)
    length = call.input_value(change).size(1)
    cuts = sorted({0, length // 2, max(0, length - 2)})

    def later_than(value):
        for t in cuts:
            where = torch.zeros_like(value, dtype=torch.bool)
            where[:, t + 1 :] = True
            yield t, where

    name, before, results = _perturbation(call, change, compared.output, later_than, options.seed + 1)
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


@isolated()
@takes_options()
@compares(
    "output",
    atol=1e-5,
    hint="masked (padding) positions must have no influence: the padding mask has "
    "to reach every attention over these positions",
)
def check_ignores_masked(
    item: Item,
    args,
    kwargs=None,
    *,
    options: CallOptions,
    compared: CompareOptions,
    change: int | str,
    mask: int | str,
):
    """The output does not change when input ``change`` changes where ``mask`` is False (padding),
    and does change when it changes where ``mask`` is True."""
    call = options.call(item, "masked positions have no influence", args, kwargs, compared.hint)
    keep = call.input_value(mask)

    def masked_then_visible(value):
        hidden = ~torch.as_tensor(keep).bool().expand_as(value)
        yield "masked", hidden
        yield "visible", ~hidden

    name, before, results = _perturbation(call, change, compared.output, masked_then_visible, options.seed + 1)
    changed, mask_name = call.name_of(change), call.name_of(mask)
    (_, after_masked), (_, after_visible) = results
    diff = np.abs(after_masked - before).max()
    if diff > compared.atol:
        call.fail(f"changing {changed} where {mask_name} is False changed {name} by up to {diff:.3g}")
    if np.abs(after_visible - before).max() <= compared.atol:
        call.fail(
            f"{name} does not change when {changed} changes where {mask_name} is True",
            f"the output must be computed from the visible positions of {changed}",
        )


@isolated()
@takes_options()
@compares(
    "rtol",
    "atol",
    rtol=1e-5,
    atol=1e-6,
    hint="a masked key must count as a key left out: the softmax runs over each query's visible keys alone, and a "
    "query that sees no key gets zero weights and a zero attention output",
)
def check_masking_removes_keys(
    item: Item, args, kwargs=None, *, options: CallOptions, compared: CompareOptions, mask: int | str = "mask"
):
    """A masked key counts as a key left out: with the mask (the same for every head), each query's output and
    weights equal the module's own for that query over its visible keys alone, called without a mask, and its
    masked keys get zero weight; a query that sees no key gets zero weights, and an output that no key or value
    changes. The module (its first three inputs query, key and value; its outputs the output, then the weights) is
    compared with itself: no reference is needed, and a mistake of it that masks nothing (its scaling, its
    projections) changes both sides alike, so that a mask's test cell costs points for the mask alone."""
    call = options.call(item, "a masked key counts as a key left out", args, kwargs, compared.hint)
    target = call.item.obj if call.init is None else call.build(call.item.obj)
    inputs, keywords = specs.materialize(call.args, call.kwargs, call.seed)
    query, key, value = inputs[:3]
    batch, queries, keys = query.shape[0], query.shape[1], key.shape[1]
    try:  # the mask's visible keys of each query, the same in every head
        seen = torch.broadcast_to(torch.as_tensor(call.input_value(mask)).bool(), (batch, 1, queries, keys))[:, 0]
    except RuntimeError:
        raise ValueError("check_masking_removes_keys takes a mask that is the same for every head") from None
    names = call.item.outputs[:2]
    output, weights = (call.as_numpy(call.outputs(call.invoke(target, inputs, keywords))[n], n) for n in names)
    if weights.ndim != 4 or weights.shape[0] != batch or weights.shape[2:] != (queries, keys):
        call.fail(f"{names[1]} has {dimensions(weights.ndim)}; expected (batch, heads, queries, keys)")
    if not (np.isfinite(output).all() and np.isfinite(weights).all()):
        call.fail("with the mask applied, the outputs contain NaN or inf")
    blind = []  # (batch element, query) of each query that sees no key
    for b in range(batch):
        leaked = np.abs(np.where(seen[b].numpy()[None], 0.0, weights[b])).max(initial=0.0)
        if leaked > compared.atol:
            call.fail(f"a masked key gets weight up to {leaked:.3g} (in batch element {b})")
        for visible, rows in _alike(seen[b]):
            if not visible.any():
                blind += [(b, i) for i in rows]
                continue
            kept = [query[b : b + 1, rows], key[b : b + 1][:, visible], value[b : b + 1][:, visible]]
            alone = call.outputs(call.invoke(target, kept, {}))
            against = f"those queries (of batch element {b}) over their visible keys alone, without a mask"
            got, want = output[b, rows], call.as_numpy(alone[names[0]], names[0])[0]
            compare(call, names[0], got, want, compared.rtol, compared.atol, against=against)
            got, want = weights[b][:, rows][..., visible.numpy()], call.as_numpy(alone[names[1]], names[1])[0]
            compare(call, f"{names[1]} of the visible keys", got, want, compared.rtol, compared.atol, against=against)
    if blind:  # their output comes from no key: other keys and values must leave it as it is
        generator = torch.Generator().manual_seed(call.seed + 1)
        other = [query, *(torch.randn(t.shape, generator=generator).to(t.dtype) for t in (key, value)), *inputs[3:]]
        again = call.as_numpy(call.outputs(call.invoke(target, other, keywords))[names[0]], names[0])
        moved = max(float(np.abs(again[b, i] - output[b, i]).max()) for b, i in blind)
        if moved > compared.atol:
            call.fail(
                f"the output of a query that sees no key changes by up to {moved:.3g} when the keys and values change",
                "a query that sees no key must get zero weights and a zero attention output, not an average of the "
                "values",
            )


def _alike(seen: torch.Tensor) -> list[tuple[torch.Tensor, list[int]]]:
    """The queries of one batch element grouped by the keys they see (``seen``: queries x keys): each group's
    visible keys and its queries, called together (a padding mask: one group of every query)."""
    groups: dict[tuple, list[int]] = {}
    for i, row in enumerate(seen):
        groups.setdefault(tuple(row.tolist()), []).append(i)
    return [(torch.tensor(visible, dtype=torch.bool), rows) for visible, rows in groups.items()]
