"""Chapter 10's finer experiments: inside a head, backups, and a circuit judged with the rest mean-ablated.

- :func:`head_activations` records one activation of every head of an
  :class:`~attention_course.interpret.circuits.AttentionOnly` (its queries ``"q"``, keys ``"k"``, values ``"v"``,
  attention ``"pattern"`` or output ``"z"``); :func:`patch_each_head_activation` patches that activation alone, one
  head at a time, from another run: which part of a head (where it looks, or what it reads) carries an effect.
- :func:`heads_replaced` is a context manager: while inside, some heads' ``z`` are another run's (or a mean), for
  whatever runs the model, such as :func:`~attention_course.interpret.patching.logit_attribution` (it takes an
  ``AttentionOnly`` or a ``DecoderOnly``).
- :func:`backup_effects`: each head's noising effect, alone and once other heads have been replaced. A head whose
  effect grows when others are gone is a *backup* (Wang et al.'s backup name movers): noising one head at a time
  under-finds the heads that the model can do without, because another takes over.
- :func:`mean_outputs` is every head's mean output at each position over reference inputs; :func:`circuit_score`
  is a metric of the model with every head outside a circuit (and those of ``removed``) mean-ablated.
  :func:`faithfulness`, :func:`completeness` and :func:`minimality` are Wang et al.'s three criteria for a circuit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import ExitStack, contextmanager
from itertools import combinations

import torch

from attention_course.interpret.patching import _heads, _is_attention_only, _layers, _replacing_z, head_outputs

ACTIVATIONS = ("q", "k", "v", "pattern", "z")
Head = tuple[int, int]


def _point(model, layer: int, activation: str):
    if not _is_attention_only(model):
        raise ValueError("patching inside a head takes chapter 10's AttentionOnly model")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    return getattr(model.layers[layer], f"hook_{activation}")


def head_activations(model, tokens, activation: str) -> list[torch.Tensor]:
    """Every layer's ``activation`` on ``tokens``, (B, H, T, d_head), or (B, H, T, T) for ``"pattern"``."""
    seen = []
    handles = [
        _point(model, layer, activation).register_forward_hook(lambda m, i, out: seen.append(out.detach()))
        for layer in range(_layers(model))
    ]
    try:
        with torch.no_grad():
            model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return seen


@torch.no_grad()
def patch_each_head_activation(model, tokens, source: list[torch.Tensor], metric: Callable, activation: str):
    """(layers, heads): ``metric`` of the logits on ``tokens`` with one head's ``activation`` (its queries, keys,
    values, pattern or output) taken from ``source`` (:func:`head_activations` of another run) at every position,
    for each head alone; the rest of the head computes from it as usual (patched keys move its pattern, say)."""
    if len(source) != _layers(model):
        raise ValueError(f"source must hold one {activation} per layer ({_layers(model)}), got {len(source)}")
    out = torch.zeros(_layers(model), _heads(model))
    for layer in range(_layers(model)):
        point = _point(model, layer, activation)
        if source[layer].shape[:2] != (tokens.size(0), _heads(model)):
            raise ValueError(f"source's {activation} must be (batch, heads, ...), got {tuple(source[layer].shape)}")
        for head in range(_heads(model)):

            def replace(module, inputs, x, layer=layer, head=head):
                x = x.clone()
                x[:, head] = source[layer][:, head].to(x)
                return x

            handle = point.register_forward_hook(replace)
            try:
                out[layer, head] = float(metric(model(tokens)))
            finally:
                handle.remove()
    return out


def _check_heads(model, heads: Iterable[Head]) -> list[Head]:
    heads = [(int(layer), int(head)) for layer, head in heads]
    for layer, head in heads:
        if not (0 <= layer < _layers(model) and 0 <= head < _heads(model)):
            raise ValueError(f"heads must be (layer, head) pairs of this model, got {(layer, head)}")
    return heads


@contextmanager
def heads_replaced(model, source: list[torch.Tensor], heads: Iterable[Head], positions=None):
    """While inside, the ``z`` of each head ``(layer, head)`` of ``heads`` is ``source``'s (one (B or 1, H, T,
    d_head) per layer: another run's :func:`~attention_course.interpret.patching.head_outputs`, or
    :func:`mean_outputs`), at every position or at ``positions`` only, in every run of ``model``."""
    heads = _check_heads(model, heads)
    if len(source) != _layers(model):
        raise ValueError(f"source must hold one z per layer ({_layers(model)}), got {len(source)}")
    where = slice(None) if positions is None else torch.as_tensor(positions).reshape(-1)
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)
    with ExitStack() as stack:
        for layer, chosen in by_layer.items():

            def change(z, layer=layer, chosen=chosen):
                z = z.clone()
                replacement = source[layer].to(z).expand(z.size(0), -1, -1, -1)
                z[:, chosen, where] = replacement[:, chosen, where]
                return z

            stack.enter_context(_replacing_z(model, layer, change))
        yield


@torch.no_grad()
def backup_effects(model, tokens, source, metric: Callable, removed: Iterable[Head]) -> tuple[torch.Tensor, ...]:
    """(alone, after), each (layers, heads): ``metric`` with one head's ``z`` from ``source``, for each head, in the
    run on ``tokens`` (alone) and in the same run with the heads of ``removed`` already taken from ``source``
    (after). A head whose patch costs more after than alone matters more once the removed heads are gone."""
    removed = _check_heads(model, removed)
    alone = torch.zeros(_layers(model), _heads(model))
    after = torch.zeros(_layers(model), _heads(model))
    for layer in range(_layers(model)):
        for head in range(_heads(model)):
            with heads_replaced(model, source, [(layer, head)]):
                alone[layer, head] = float(metric(model(tokens)))
            with heads_replaced(model, source, [*removed, (layer, head)]):
                after[layer, head] = float(metric(model(tokens)))
    return alone, after


def mean_outputs(model, reference_tokens) -> list[torch.Tensor]:
    """Every layer's ``z`` averaged over the batch of ``reference_tokens``: (1, H, T, d_head) per layer, what a
    head writes at each position whatever the tokens are (the mean ablation's replacement)."""
    return [z.mean(dim=0, keepdim=True) for z in head_outputs(model, reference_tokens)]


def _every_head(model) -> list[Head]:
    return [(layer, head) for layer in range(_layers(model)) for head in range(_heads(model))]


@torch.no_grad()
def circuit_score(model, tokens, means, metric: Callable, circuit: Iterable[Head], removed: Iterable[Head] = ()):
    """``metric`` on ``tokens`` with every head outside ``circuit``, and every head of ``removed``, mean-ablated
    (its ``z`` replaced by ``means``, :func:`mean_outputs`); the embeddings' direct path always kept. With every
    head in ``circuit`` and nothing removed, the model's own score."""
    kept = set(_check_heads(model, circuit)) - set(_check_heads(model, removed))
    ablated = [head for head in _every_head(model) if head not in kept]
    with heads_replaced(model, means, ablated):
        return float(metric(model(tokens)))


def faithfulness(model, tokens, means, metric: Callable, circuit: Iterable[Head]) -> tuple[float, float]:
    """(F(C), F(M)): the metric of the circuit alone (the rest mean-ablated) and of the whole model. A faithful
    circuit scores as the model does; Wang et al. report F(C) / F(M)."""
    return circuit_score(model, tokens, means, metric, circuit), circuit_score(
        model, tokens, means, metric, _every_head(model)
    )


def _subsets(heads: list[Head]) -> list[tuple[Head, ...]]:
    return [subset for size in range(len(heads) + 1) for subset in combinations(heads, size)]


def completeness(model, tokens, means, metric: Callable, circuit: Iterable[Head]) -> list[tuple[tuple, float, float]]:
    """For every subset K of ``circuit`` (the empty one first): (K, F(C without K), F(M without K)), the circuit's and
    the whole model's score with K mean-ablated as well. A complete circuit loses what the model loses for every K:
    a K that the circuit misses no matter but the model does means the model does the task with heads left out."""
    circuit = _check_heads(model, circuit)
    every = _every_head(model)
    return [
        (
            subset,
            circuit_score(model, tokens, means, metric, circuit, removed=subset),
            circuit_score(model, tokens, means, metric, every, removed=subset),
        )
        for subset in _subsets(circuit)
    ]


def minimality(model, tokens, means, metric: Callable, circuit: Iterable[Head]) -> dict[Head, float]:
    """For each head v of ``circuit``: the largest |F(C without K and v) - F(C without K)| over the subsets K of the
    circuit's other heads. A minimal circuit has no head whose removal changes nothing whatever else is removed."""
    circuit = _check_heads(model, circuit)
    score = {
        frozenset(subset): circuit_score(model, tokens, means, metric, circuit, removed=subset)
        for subset in _subsets(circuit)
    }
    return {
        v: max(abs(score[frozenset(k) | {v}] - score[frozenset(k)]) for k in _subsets([h for h in circuit if h != v]))
        for v in circuit
    }
