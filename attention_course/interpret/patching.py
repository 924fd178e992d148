"""Chapter 10's experiments that run a model on one input with activations taken from another.

A *clean* input and a *corrupted* one differ in what the model needs for its answer; a metric of the logits,
normalised so that the clean run scores 1 and the corrupted run 0 (:func:`normalised`, here of a logit
difference, :class:`LogitDifference`), says how much of the clean behaviour a run keeps. The activations patched
are the heads' outputs before their output matrix (``z``, (B, H, T, d_head) per layer) or the residual stream
before a layer, in either of two models: chapter 10's :class:`~attention_course.interpret.circuits.AttentionOnly` (at
its hook points) and a :class:`~attention_course.models.transformer.DecoderOnly` such as GPT-2 (``z`` read at the
input of each layer's ``W_o``).

- :func:`head_outputs` records every layer's ``z``; :func:`patch_heads` runs a model with some heads' ``z``
  (at some positions) replaced by another run's.
- :func:`patch_each_head` and :func:`patch_each_position` patch one head, or one head at one position, at a time:
  *denoising* runs the corrupted input with clean activations (what suffices to restore the behaviour), *noising*
  runs the clean input with corrupted activations (what the behaviour needs); :func:`patch_residual` does the
  same for the residual stream at one position before a layer.
- :func:`path_patch_from` patches a path: sender heads' output from another run, added to one input (queries,
  keys or values) of a later layer alone, or to the unembedding's (Wang et al.'s path patching, for a model of
  attention alone).
- :func:`attribution_patching` estimates noising every head at every position at once, by the metric's first-order
  Taylor expansion around the clean run: ``(z_corrupted - z_clean) . d metric / d z`` at the clean run.
- :func:`logit_attribution` splits a ``DecoderOnly``'s logit difference into the direct contributions of its
  heads, attention biases, feed-forward networks and embeddings, with the final LayerNorm's scale frozen at its
  value in the run (which makes the split exact).

Wang et al.'s indirect-object prompts, on which GPT-2's cells of the chapter run these, are in
:mod:`attention_course.interpret.ioi`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import torch
import torch.nn as nn

PATHS = ("query", "key", "value", "direct")


@dataclass(frozen=True)
class LogitDifference:
    """The mean, over a batch and the ``positions`` measured, of the logit of the ``right`` token minus the logit of
    the ``wrong`` one: ``positions`` (P,) of the sequence (the same in every sequence of the batch), ``right`` and
    ``wrong`` (B, P) the tokens compared at each."""

    positions: torch.Tensor
    right: torch.Tensor
    wrong: torch.Tensor

    def __post_init__(self):
        positions, right, wrong = (torch.as_tensor(x) for x in (self.positions, self.right, self.wrong))
        if positions.dim() != 1:
            raise ValueError(f"positions must be (P,), got shape {tuple(positions.shape)}")
        for name, tokens in (("right", right), ("wrong", wrong)):
            if tokens.dim() != 2 or tokens.size(1) != positions.numel():
                raise ValueError(
                    f"{name} must be (batch, P) with P = {positions.numel()} positions, got {tuple(tokens.shape)}"
                )
        object.__setattr__(self, "positions", positions)
        object.__setattr__(self, "right", right)
        object.__setattr__(self, "wrong", wrong)

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        at = logits[:, self.positions]  # (B, P, V)
        if at.size(0) != self.right.size(0):
            raise ValueError(f"logits have a batch of {at.size(0)}, the tokens compared {self.right.size(0)}")
        right = at.gather(-1, self.right[..., None].to(at.device))
        wrong = at.gather(-1, self.wrong[..., None].to(at.device))
        return (right - wrong).mean()


def normalised(metric: Callable, clean_logits: torch.Tensor, corrupted_logits: torch.Tensor) -> Callable:
    """``metric`` rescaled so that it is 1 on ``clean_logits`` and 0 on ``corrupted_logits``:
    ``(metric(x) - metric(corrupted)) / (metric(clean) - metric(corrupted))``."""
    with torch.no_grad():
        clean, corrupted = float(metric(clean_logits)), float(metric(corrupted_logits))
    if abs(clean - corrupted) < 1e-6:
        raise ValueError(
            f"the metric is the same on the clean and the corrupted logits ({clean:.3g}): nothing to normalise by"
        )

    def rescaled(logits):
        return (metric(logits) - corrupted) / (clean - corrupted)

    return rescaled


def _is_attention_only(model) -> bool:
    return hasattr(model.layers[0], "hook_z")


@contextmanager
def _replacing_z(model, layer: int, change: Callable[[torch.Tensor], torch.Tensor]):
    """While inside, ``change`` maps layer ``layer``'s ``z`` (B, H, T, d_head) to what the layer uses instead (its
    argument is the run's own; it may return it, to only read it)."""
    if _is_attention_only(model):
        handle = model.layers[layer].hook_z.register_forward_hook(lambda module, inputs, z: change(z))
    else:  # a DecoderOnly: z is the input of W_o, the heads side by side (B, T, H * d_head)
        attention = model.layers[layer].self_attn
        heads = attention.num_heads

        def pre_hook(module, args):
            merged = args[0]
            b, t, width = merged.shape
            z = merged.view(b, t, heads, width // heads).transpose(1, 2)
            return (change(z).transpose(1, 2).reshape(b, t, width), *args[1:])

        handle = attention.W_o.register_forward_pre_hook(pre_hook)
    try:
        yield
    finally:
        handle.remove()


def _layers(model) -> int:
    return len(model.layers)


def _heads(model) -> int:
    return model.config.num_heads


def head_outputs(model, tokens) -> list[torch.Tensor]:
    """Every layer's ``z`` (B, H, T, d_head) on ``tokens``: each head's weighted values, before ``W_O``."""
    seen = []
    with ExitStack() as stack:
        for layer in range(_layers(model)):
            stack.enter_context(_replacing_z(model, layer, lambda z: seen.append(z.detach()) or z))
        with torch.no_grad():
            model(tokens)
    return seen


def _check_source(model, source, tokens) -> None:
    if len(source) != _layers(model):
        raise ValueError(f"source must hold one z per layer ({_layers(model)}), got {len(source)}")
    b, t = tokens.shape
    for z in source:
        if z.dim() != 4 or z.size(0) != b or z.size(1) != _heads(model) or z.size(2) != t:
            raise ValueError(
                f"source's z must be (batch, heads, T, d_head) = ({b}, {_heads(model)}, {t}, d_head), "
                f"got {tuple(z.shape)}"
            )


def patch_heads(model, tokens, source: list[torch.Tensor], heads: Iterable[tuple[int, int]], positions=None):
    """The logits of ``model`` on ``tokens`` with the ``z`` of each head ``(layer, head)`` of ``heads`` replaced by
    ``source``'s (:func:`head_outputs` of another run), at every position or at ``positions`` only (an int, or a
    list of them); every later layer computes on as usual from what the patched heads write."""
    _check_source(model, source, tokens)
    where = slice(None) if positions is None else torch.as_tensor(positions).reshape(-1)
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        if not (0 <= layer < _layers(model) and 0 <= head < _heads(model)):
            raise ValueError(f"heads must be (layer, head) pairs of this model, got {(layer, head)}")
        by_layer.setdefault(layer, []).append(head)
    with ExitStack() as stack:
        for layer, chosen in by_layer.items():

            def change(z, layer=layer, chosen=chosen):
                z = z.clone()
                for head in chosen:
                    z[:, head, where] = source[layer][:, head, where].to(z)
                return z

            stack.enter_context(_replacing_z(model, layer, change))
        return model(tokens)


@torch.no_grad()
def patch_each_head(model, tokens, source, metric: Callable) -> torch.Tensor:
    """(layers, heads): ``metric`` of the logits on ``tokens`` with one head's ``z`` taken from ``source`` at every
    position, for each head alone. Denoising: corrupted ``tokens``, clean ``source``; noising: the other way."""
    return torch.tensor(
        [
            [float(metric(patch_heads(model, tokens, source, [(layer, head)]))) for head in range(_heads(model))]
            for layer in range(_layers(model))
        ]
    )


@torch.no_grad()
def patch_each_position(model, tokens, source, metric: Callable, positions=None) -> torch.Tensor:
    """(layers, heads, T): as :func:`patch_each_head`, one head at one position at a time; with ``positions`` (a
    list of P positions), at those alone: (layers, heads, P), column k for ``positions[k]``."""
    length = tokens.size(1)
    chosen = list(range(length)) if positions is None else [int(p) for p in positions]
    if any(not -length <= p < length for p in chosen):
        raise ValueError(f"positions must be positions of the sequence (length {length}), got {chosen}")
    out = torch.zeros(_layers(model), _heads(model), len(chosen))
    for layer in range(_layers(model)):
        for head in range(_heads(model)):
            for k, position in enumerate(chosen):
                out[layer, head, k] = float(
                    metric(patch_heads(model, tokens, source, [(layer, head)], positions=position))
                )
    return out


def _residual_point(model, layer: int) -> nn.Module:
    """The hook point of an ``AttentionOnly``'s residual stream before layer ``layer`` (the unembedding's input
    after the last)."""
    if not _is_attention_only(model):
        raise ValueError("residual-stream patching takes chapter 10's AttentionOnly model")
    if layer == _layers(model):
        return model.hook_unembed_input
    if not 0 <= layer < _layers(model):
        raise ValueError(f"layer must be from 0 to {_layers(model)} (the unembedding's input), got {layer}")
    return model.layers[layer].hook_resid_pre


def residual_streams(model, tokens) -> list[torch.Tensor]:
    """The residual stream (B, T, d_model) before each layer and before the unembedding, of an ``AttentionOnly``."""
    with torch.no_grad():
        return model.residuals(tokens)


@torch.no_grad()
def patch_residual(model, tokens, source: list[torch.Tensor], metric: Callable, positions=None) -> torch.Tensor:
    """(layers + 1, T): ``metric`` with the residual stream before one layer (or before the unembedding, the last
    row) at one position replaced by ``source``'s (:func:`residual_streams` of another run), for each layer and
    position alone. With ``positions`` (a list), every position of it at once: (layers + 1,)."""
    if len(source) != _layers(model) + 1:
        raise ValueError(f"source must hold the stream before each layer and the unembedding ({_layers(model) + 1})")
    rows = []
    for layer in range(_layers(model) + 1):
        point = _residual_point(model, layer)
        each = [positions] if positions is not None else [[p] for p in range(tokens.size(1))]
        row = []
        for where in each:

            def replace(module, inputs, x, layer=layer, where=where):
                x = x.clone()
                x[:, where] = source[layer][:, where].to(x)
                return x

            handle = point.register_forward_hook(replace)
            try:
                row.append(float(metric(model(tokens))))
            finally:
                handle.remove()
        rows.append(row)
    out = torch.tensor(rows)
    return out[:, 0] if positions is not None else out


def path_patch_from(
    model, tokens, source: list[torch.Tensor], sender: tuple[int, Iterable[int]], receiver: int, path: str
) -> torch.Tensor:
    """The logits of an ``AttentionOnly`` on ``tokens`` where the sender heads (``(layer, heads)``) send ``source``'s
    output (another run's ``z``) along one path only: into the ``path`` input (``"query"``, ``"key"`` or
    ``"value"``) of every head of layer ``receiver``, or into the unembedding (``"direct"``; ``receiver`` is then
    ignored). Every other reader of the senders, and every other input, sees the run on ``tokens`` itself."""
    if not _is_attention_only(model):
        raise ValueError("path_patch_from takes chapter 10's AttentionOnly model")
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    _check_source(model, source, tokens)
    layer, heads = sender
    heads = list(heads)
    if path != "direct" and not layer < receiver < _layers(model):
        raise ValueError(f"receiver must be a layer after the sender's ({layer}) and before {_layers(model)}")
    own = head_outputs(model, tokens)[layer]
    w_o = model.layers[layer].W_O
    change = torch.einsum("bhte,hed->btd", (source[layer] - own)[:, heads], w_o[heads].detach())
    if path == "direct":
        point = model.hook_unembed_input
    else:
        point = getattr(
            model.layers[receiver], {"query": "hook_q_input", "key": "hook_k_input"}.get(path, "hook_v_input")
        )
    handle = point.register_forward_hook(lambda module, inputs, x: x + change)
    try:
        return model(tokens)
    finally:
        handle.remove()


def attribution_patching(model, clean_tokens, corrupted_tokens, metric: Callable) -> torch.Tensor:
    """(layers, heads, T): for each head at each position, the first-order estimate of what noising it (its ``z``
    from the corrupted run, in the clean run) changes ``metric`` by: ``(z_corrupted - z_clean) . grad`` summed
    over the batch and ``d_head``, with the gradient of ``metric`` with respect to ``z`` at the clean run. Two
    forward passes and one backward pass, for every head and position at once."""
    corrupted = head_outputs(model, corrupted_tokens)
    kept = []
    with ExitStack() as stack:
        for layer in range(_layers(model)):

            def keep(z):
                kept.append(z)
                return z

            stack.enter_context(_replacing_z(model, layer, keep))
        with torch.enable_grad():
            value = metric(model(clean_tokens))
            grads = torch.autograd.grad(value, kept)
    return torch.stack(
        [((c - z.detach()) * g).sum(dim=(0, 3)) for c, z, g in zip(corrupted, kept, grads)]
    )  # (layers, H, T)


@dataclass(frozen=True)
class Attribution:
    """A logit difference split into the direct contributions of a ``DecoderOnly``'s parts, each the mean over the
    batch: ``heads`` (layers, heads), ``attention_biases`` and ``feed_forward`` (layers,), ``embeddings`` and
    ``norm_bias`` (the final LayerNorm's bias). They add up to ``total``, the logit difference itself."""

    heads: torch.Tensor
    attention_biases: torch.Tensor
    feed_forward: torch.Tensor
    embeddings: float
    norm_bias: float
    total: float

    def summed(self) -> float:
        parts = self.heads.sum() + self.attention_biases.sum() + self.feed_forward.sum()
        return float(parts) + self.embeddings + self.norm_bias


@torch.no_grad()
def logit_attribution(model, tokens, right, wrong, position: int = -1) -> Attribution:
    """Each part's direct contribution to the logit of ``right`` minus that of ``wrong`` (tokens (B,)) at
    ``position``, for a pre-norm ``DecoderOnly`` with a final LayerNorm (GPT-2's layout). The final stream ``x`` is
    the sum of the parts' outputs; the LayerNorm maps it to ``(x - mean(x)) / s * gamma + beta`` with
    ``s = sqrt(var(x) + eps)``. With ``s`` frozen at its value in this run, that map is linear, so a part that writes
    ``c`` contributes ``(c - mean(c)) / s * gamma . (u_right - u_wrong)``, and the parts add up to the logit
    difference exactly."""
    norm = model.norm
    if not isinstance(norm, nn.LayerNorm):
        raise ValueError(f"logit_attribution takes a model with a final LayerNorm (GPT-2's), got {type(norm).__name__}")
    if not all(layer.norm_first for layer in model.layers):
        raise ValueError("logit_attribution takes a pre-norm model (norm_first), whose stream is a sum of its parts")
    right, wrong = torch.as_tensor(right), torch.as_tensor(wrong)
    if right.shape != (tokens.size(0),) or wrong.shape != (tokens.size(0),):
        raise ValueError(f"right and wrong must be one token per sequence, ({tokens.size(0)},)")
    z_of, attended, fed, final = [], [], [], []
    handles = []
    for layer in model.layers:
        handles.append(layer.self_attn.register_forward_hook(lambda m, i, out: attended.append(out[0])))
        handles.append(layer.ff.register_forward_hook(lambda m, i, out: fed.append(out)))
    handles.append(norm.register_forward_hook(lambda m, inputs, out: final.append(inputs[0])))
    with ExitStack() as stack:
        for layer in range(_layers(model)):
            stack.enter_context(_replacing_z(model, layer, lambda z: z_of.append(z) or z))
        try:
            logits = model(tokens)
            embedded = model.embed(tokens)
        finally:
            for handle in handles:
                handle.remove()
    weight = model.generator.weight  # (V, d)
    direction = (weight[right] - weight[wrong]) * norm.weight  # (B, d): gamma . (u_right - u_wrong)
    x = final[0][:, position]  # (B, d), before the final norm
    scale = (x.var(dim=-1, unbiased=False, keepdim=True) + norm.eps).sqrt()

    def through(c):  # (B, ..., d) at the position: the direct contribution, mean over the batch
        c = c - c.mean(dim=-1, keepdim=True)
        shape = (-1,) + (1,) * (c.dim() - 2) + (c.size(-1),)
        return ((c / scale.view(shape[:-1] + (1,))) * direction.view(shape)).sum(-1).mean(0)

    heads, biases = [], []
    for layer, z in zip(model.layers, z_of):
        w_o = layer.self_attn.W_o.weight  # (d, H * d_head)
        h = z.size(1)
        per_head = torch.einsum("bhe,dhe->bhd", z[:, :, position], w_o.view(w_o.size(0), h, -1))
        heads.append(through(per_head))
        bias = layer.self_attn.W_o.bias
        biases.append(through(bias.expand_as(x)) if bias is not None else torch.tensor(0.0))
    feed = torch.stack([through(f[:, position]) for f in fed])
    unembedded = weight[right] - weight[wrong]  # (B, d): u_right - u_wrong
    constant = unembedded @ norm.bias if norm.bias is not None else torch.zeros(tokens.size(0))
    if model.generator.bias is not None:  # an output layer's bias adds to the logits directly
        constant = constant + model.generator.bias[right] - model.generator.bias[wrong]
    at = logits[:, position]
    total = at.gather(-1, right[:, None]) - at.gather(-1, wrong[:, None])
    return Attribution(
        heads=torch.stack(heads),
        attention_biases=torch.stack(biases),
        feed_forward=feed,
        embeddings=float(through(embedded[:, position])),
        norm_bias=float(constant.mean()),
        total=float(total.mean()),
    )
