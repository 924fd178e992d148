"""The checks of a self-attention module with a key/value cache: decoding step by step, relative positions, a model.

The module is ``forward(x, mask=None, cache=None) -> (output, cache)``; the first two checks compare it with
itself (no reference needed), the last puts it into a Llama-family model (:mod:`autograder.calls.hosts`).
"""

from __future__ import annotations

import importlib

import numpy as np
import torch

from autograder.api import specs
from autograder.api.items import Item, dimensions, quoted_size
from autograder.api.options import CompareOptions, compares
from autograder.calls.call import CallOptions, takes_options
from autograder.calls.compare import compare
from autograder.calls.isolation import isolated
from autograder.calls.kv_cache import cache_pair, causal_block
from autograder.release import reference


@isolated()
@takes_options("seed", "init", "mode", required=("init",))
@compares(
    atol=1e-5,
    hint="with the cache, each new position must attend to every earlier position and "
    "to itself, and the cache must grow by the new positions",
)
def check_incremental(item: Item, x, *, options: CallOptions, compared: CompareOptions, chunks=(1,)):
    """A self-attention module with a key/value cache, ``forward(x, mask=None, cache=None) ->
    (output, cache)``, gives the same outputs fed ``chunks`` positions at a time, its cache carried from
    call to call, as fed the whole sequence at once with a look-ahead mask; and its cache holds every
    position. Needs no reference: the module is compared with itself."""
    call = options.call(item, "incremental decoding with the cache", [x], None, compared.hint)
    instance = call.instance(item.obj)
    (whole,), _ = specs.materialize(call.args, call.kwargs, options.seed)
    length = whole.size(1)
    full = call.outputs(call.invoke(instance, [whole], {"mask": causal_block(0, length)}))
    want = call.as_numpy(full["output"], "output")
    for size in chunks:
        cache, pieces = None, []
        for start in range(0, length, size):
            piece = whole[:, start : start + size]
            mask = None if piece.size(1) == 1 else causal_block(start, piece.size(1))
            got = call.outputs(call.invoke(instance, [piece], {"mask": mask, "cache": cache}))
            pieces.append(call.as_numpy(got["output"], "output"))
            cache = cache_pair(call, got)
            for name, part in zip(("keys", "values"), cache):
                held, length = call.as_numpy(part, f"cache {name}").shape, start + piece.size(1)
                if len(held) != 4 or held[2] != length:
                    found = (
                        f"have {dimensions(len(held))}"
                        if len(held) != 4
                        else f"have size {quoted_size(held[2], length)} in dimension 2"
                    )
                    call.fail(
                        f"after {length} positions the cached {name} {found}; "
                        f"expected (B, num_kv_heads, {length}, d_head)"
                    )
        got = np.concatenate(pieces, axis=1)
        if got.shape != want.shape or not np.allclose(got, want, atol=compared.atol, rtol=1e-5):
            diff = np.abs(got - want).max() if got.shape == want.shape else float("nan")
            call.fail(
                f"fed {size} position(s) at a time with the cache, the outputs differ from the whole "
                f"sequence with a look-ahead mask by up to {diff:.3g}"
            )


@isolated()
@takes_options("seed", "init", required=("init",))
@compares(atol=1e-5, hint="rotate the queries and the keys by the positions of the new tokens in the whole sequence")
def check_relative_positions(item: Item, x, *, options: CallOptions, compared: CompareOptions, offset: int = 4):
    """A self-attention module with rotary positions and a key/value cache, ``forward(x, mask=None,
    cache=None) -> (output, cache)``, attends by the distance between positions: ``x`` after ``offset``
    cached positions that the mask hides (every position moved by ``offset``, every distance kept) gives
    the outputs it gives alone with a look-ahead mask; and with no mask, reversing the order of ``x`` does
    more than reverse the outputs (attention without positions would only reverse them). Needs no reference."""
    atol = compared.atol
    call = options.call(item, "attention by the distance between positions", [x], None, compared.hint)
    instance = call.instance(item.obj)
    (whole,), _ = specs.materialize(call.args, call.kwargs, options.seed)
    batch, length, width = whole.shape
    alone = call.outputs(call.invoke(instance, [whole], {"mask": causal_block(0, length)}))
    earlier = torch.randn(batch, offset, width, generator=torch.Generator().manual_seed(options.seed + 1))
    first = call.outputs(call.invoke(instance, [earlier.to(whole.dtype)], {"mask": causal_block(0, offset)}))
    hidden_earlier = torch.cat([torch.zeros(length, offset, dtype=torch.bool), causal_block(0, length)], dim=1)
    moved = call.outputs(call.invoke(instance, [whole], {"mask": hidden_earlier, "cache": cache_pair(call, first)}))
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


@isolated()
@takes_options("seed", "init", required=("init",))
@compares(
    rtol=1e-4,
    atol=1e-5,
    hint="the model runs your attention on the prompt, then on one new token at a time with the cache",
)
def check_in_model(
    item: Item,
    x,
    *,
    options: CallOptions,
    compared: CompareOptions,
    layers: int = 2,
    new_tokens: int = 6,
    vocab_size: int = 50,
):
    """A rotary self-attention module with a key/value cache in place of the attention of every layer of a
    Llama-family model with random weights (:func:`autograder.calls.hosts.llama_family`; each layer's module
    holds that layer's weights): the model's logits on a batch of prompts of ``x``'s shape (B, L, d_model:
    B prompts of L tokens) equal those of the same model with the reference's attention; so do they at each
    of ``new_tokens`` steps of greedy generation with the cache, and on the whole sequence at once."""
    rtol, atol = compared.rtol, compared.atol
    call = options.call(item, "the logits of a Llama-family model with this attention", [x], None, compared.hint)
    (shape_of,), _ = specs.materialize(call.args, call.kwargs, options.seed)
    batch, length, _ = shape_of.shape
    # The course's models are built from the reference solutions of chapters 3 to 7: a students' copy of the
    # packages holds autograder.calls.hosts only once those are released (autograder.release.packages follows imports),
    # so it is imported by name, where a hidden test asks for it.
    hosts = importlib.import_module("autograder.calls.hosts")
    solution = reference.get(item.assignment, item.name)
    original = hosts.llama_family(solution, call.init, layers, vocab_size, length + new_tokens, options.seed)
    tested = hosts.with_attention(original, lambda i, attention: hosts.GuestAttention(call, attention, i))
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
