"""What attention heads learn: chapter 10's model, its task and the circuits read off its weights.

- :class:`AttentionOnly` is a Transformer of attention layers alone (no feed-forward layers, no normalisation).
  Each head keeps its own matrices, ``W_Q``, ``W_K``, ``W_V`` (H, d_model, d_head) and ``W_O`` (H, d_head, d_model),
  so that what a head does is a product of its matrices. Each layer has hook points, ``nn.Identity`` modules
  whose forward hooks read or replace the residual stream that its queries, keys and values read
  (``hook_q_input``, ``hook_k_input``, ``hook_v_input``, (B, T, d_model) each: changing one changes that path
  alone), each head's queries, keys and values (``hook_q``, ``hook_k``, ``hook_v``, (B, H, T, d_head) each), the
  attention pattern (``hook_pattern``, (B, H, T, T)) and each head's output before ``W_O``
  (``hook_z``, (B, H, T, d_head)) and the residual stream before the layer, which the layer reads and adds to
  (``hook_resid_pre``, (B, T, d_model)); the model has one more, ``hook_unembed_input``, the stream that the
  unembedding reads (the direct path).
- :func:`repeated_tokens` draws the induction task: random tokens that repeat with a random period.
- :func:`train_induction` trains a model on it and records the loss on the repeat and elsewhere.
- :func:`qk_circuit`, :func:`ov_circuit` and :func:`composition_scores` read a head's circuits off its weights;
  :func:`random_composition_scores` is the composition score of random matrices of the same shapes.
- :func:`induction_by_hand` sets the weights of a two-layer model by hand, so that head 0 of layer 0 attends to
  the previous token and head 0 of layer 1 is an induction head.
- :func:`logit_lens` reads a :class:`~attention_course.models.transformer.DecoderOnly`'s prediction off its
  residual stream after each layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class AttentionOnlyConfig:
    """The sizes of an :class:`AttentionOnly` model; chapter 10 trains the default one."""

    vocab_size: int = 64
    max_len: int = 48
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_head: int | None = None  # None: d_model // num_heads

    def __post_init__(self):
        for name in ("vocab_size", "max_len", "d_model", "num_heads", "num_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.d_head is None:
            if self.d_model % self.num_heads:
                raise ValueError(f"d_model ({self.d_model}) must be a multiple of num_heads ({self.num_heads})")
            object.__setattr__(self, "d_head", self.d_model // self.num_heads)


def _uniform(generator, bound: float, *shape: int) -> nn.Parameter:
    return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound, generator=generator))


class AttentionLayer(nn.Module):
    """One layer of causal self-attention, its heads' matrices kept apart."""

    def __init__(self, config: AttentionOnlyConfig, generator: torch.Generator):
        super().__init__()
        heads, d, e = config.num_heads, config.d_model, config.d_head
        self.W_Q, self.W_K, self.W_V = (_uniform(generator, 1 / math.sqrt(d), heads, d, e) for _ in range(3))
        self.W_O = _uniform(generator, 1 / math.sqrt(heads * e), heads, e, d)
        # (B, T, d_model) each: the residual stream as the queries, keys and values read it (one path each)
        self.hook_q_input, self.hook_k_input, self.hook_v_input = nn.Identity(), nn.Identity(), nn.Identity()
        # (B, H, T, d_head) each: every head's queries, keys and values, after W_Q, W_K and W_V
        self.hook_q, self.hook_k, self.hook_v = nn.Identity(), nn.Identity(), nn.Identity()
        self.hook_pattern = nn.Identity()  # (B, H, T, T): each head's attention, a row per query
        self.hook_z = nn.Identity()  # (B, H, T, d_head): each head's weighted values, before W_O
        # (B, T, d_model): the residual stream before the layer, which the layer reads and adds its output to
        self.hook_resid_pre = nn.Identity()

    def forward(self, x):
        inputs = (self.hook_q_input(x), self.hook_k_input(x), self.hook_v_input(x))
        q, k, v = (
            hook(torch.einsum("btd,hde->bhte", x, w))
            for hook, x, w in zip((self.hook_q, self.hook_k, self.hook_v), inputs, (self.W_Q, self.W_K, self.W_V))
        )
        length = x.size(1)
        future = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(future, float("-inf"))
        pattern = self.hook_pattern(scores.softmax(dim=-1))
        z = self.hook_z(pattern @ v)
        return torch.einsum("bhte,hed->btd", z, self.W_O)  # the heads' outputs, added up


class AttentionOnly(nn.Module):
    """Token and learned position embeddings, attention layers that add to the residual stream, and an unembedding.

    With no normalisation and no feed-forward layer, the logits are a sum of paths through the heads: the
    direct path ``W_E W_U``, one head's ``W_E W_V^h W_O^h W_U``, and the paths through two heads."""

    def __init__(self, config: AttentionOnlyConfig | None = None, seed: int = 0):
        super().__init__()
        self.config = config = config or AttentionOnlyConfig()
        generator = torch.Generator().manual_seed(seed)
        self.W_E = nn.Parameter(torch.randn(config.vocab_size, config.d_model, generator=generator))
        self.W_pos = nn.Parameter(torch.randn(config.max_len, config.d_model, generator=generator))
        self.layers = nn.ModuleList(AttentionLayer(config, generator) for _ in range(config.num_layers))
        self.W_U = _uniform(generator, 1 / math.sqrt(config.d_model), config.d_model, config.vocab_size)
        self.hook_unembed_input = nn.Identity()  # (B, T, d_model): the last residual stream, as W_U reads it

    def residuals(self, ids) -> list[torch.Tensor]:
        """The residual stream (B, T, d_model) before the first layer and after each layer."""
        if ids.dim() != 2 or ids.size(1) > self.config.max_len:
            raise ValueError(
                f"ids must be (batch, length) with length <= {self.config.max_len}, got {tuple(ids.shape)}"
            )
        x = self.W_E[ids] + self.W_pos[: ids.size(1)]
        stream = []
        for layer in self.layers:
            x = layer.hook_resid_pre(x)
            stream.append(x)
            x = x + layer(x)
        stream.append(x)
        return stream

    def forward(self, ids):
        return self.hook_unembed_input(self.residuals(ids)[-1]) @ self.W_U

    def patterns(self, ids) -> list[torch.Tensor]:
        """Every layer's attention pattern (B, H, T, T) on ``ids``, read at its hook point."""
        seen = []
        hooks = [layer.hook_pattern.register_forward_hook(lambda m, i, out: seen.append(out)) for layer in self.layers]
        try:
            with torch.no_grad():
                self(ids)
        finally:
            for hook in hooks:
                hook.remove()
        return seen


def repeated_tokens(batch: int, length: int, vocab_size: int, generator=None, periods=None):
    """``(tokens, periods)``: ``batch`` sequences (batch, length) of random tokens, each repeating with its own
    period (token i equals token i - period from position ``period`` on), drawn from ``length // 4`` to
    ``length // 2`` unless ``periods`` gives them. A model that has learned induction predicts every token
    after the first ``period + 1`` of its sequence; the rest cannot be predicted."""
    if periods is None:
        periods = torch.randint(length // 4, length // 2 + 1, (batch,), generator=generator)
    periods = torch.as_tensor(periods).expand(batch)
    if not ((periods >= 1) & (periods < length)).all():
        raise ValueError(f"periods must be between 1 and length - 1 ({length - 1})")
    first = torch.randint(vocab_size, (batch, length), generator=generator)
    position = torch.arange(length)
    source = position[None, :] % periods[:, None]  # position i copies position i mod period
    return first.gather(1, source), periods


def on_the_repeat(periods, length: int) -> torch.Tensor:
    """(B, length - 1): True where logits[:, i] predict a token of the repeat from a token seen before
    (i >= period), for the next-token predictions logits[:, :-1] of sequences of ``repeated_tokens``."""
    return torch.arange(length - 1)[None, :] >= torch.as_tensor(periods)[:, None]


def next_token_losses(model, tokens) -> torch.Tensor:
    """(B, T - 1): the cross-entropy of each next-token prediction."""
    logits = model(tokens)[:, :-1]
    return F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")


def train_induction(
    model: AttentionOnly,
    steps: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    eval_every: int = 20,
    eval_batch: int = 256,
) -> list[dict]:
    """Train ``model`` with AdamW on :func:`repeated_tokens`; every ``eval_every`` steps (and at the end),
    record the mean loss on held-out sequences, on the repeat and elsewhere: a list of
    ``{"step", "repeat_loss", "other_loss"}``."""
    config = model.config
    generator = torch.Generator().manual_seed(seed)
    held_out, held_periods = repeated_tokens(eval_batch, config.max_len, config.vocab_size, generator)
    repeat = on_the_repeat(held_periods, config.max_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    history = []
    for step in range(steps + 1):
        if step % eval_every == 0 or step == steps:
            with torch.no_grad():
                losses = next_token_losses(model, held_out)
            history.append(
                {"step": step, "repeat_loss": losses[repeat].mean().item(), "other_loss": losses[~repeat].mean().item()}
            )
        if step == steps:
            break
        tokens, _ = repeated_tokens(batch_size, config.max_len, config.vocab_size, generator)
        loss = next_token_losses(model, tokens).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return history


@torch.no_grad()
def qk_circuit(model: AttentionOnly, layer: int, head: int, *, positions: bool = False) -> torch.Tensor:
    """The head's query-key circuit over tokens, ``W_E W_Q^h (W_E W_K^h)^T`` (V, V): entry [i, j] is the score a
    query on token i gives a key on token j, through the embeddings alone. With ``positions``, the same over
    positions, ``W_pos W_Q^h (W_pos W_K^h)^T`` (T, T)."""
    attention = model.layers[layer]
    embed = model.W_pos if positions else model.W_E
    return (embed @ attention.W_Q[head]) @ (embed @ attention.W_K[head]).T


@torch.no_grad()
def ov_circuit(model: AttentionOnly, layer: int, head: int) -> torch.Tensor:
    """The head's output-value circuit, ``W_E W_V^h W_O^h W_U`` (V, V): row i is what the head adds to the logits
    where it attends to token i, through the embedding and the unembedding alone."""
    attention = model.layers[layer]
    return model.W_E @ attention.W_V[head] @ attention.W_O[head] @ model.W_U


@torch.no_grad()
def composition_scores(model: AttentionOnly, kind: str = "K") -> torch.Tensor:
    """(H, H) for a two-layer model: how much head j of layer 1 reads, through its keys (``"K"``), queries
    (``"Q"``) or values (``"V"``), what head i of layer 0 writes; the Frobenius norm of the product of their
    matrices over the product of their norms (0: they share no direction; at most 1)."""
    first, second = model.layers[0], model.layers[1]
    heads = model.config.num_heads
    scores = torch.zeros(heads, heads)
    for i in range(heads):
        for j in range(heads):
            scores[i, j] = _composition(first.W_V[i], first.W_O[i], second, j, kind)
    return scores


def _composition(w_v, w_o, reader, j: int, kind: str) -> torch.Tensor:
    """The composition score of the head whose OV matrix is ``w_v @ w_o`` with head ``j`` of ``reader``."""
    writes = w_v @ w_o  # (d, d): what the first head adds, as a map of the residual stream
    qk = reader.W_Q[j] @ reader.W_K[j].T  # x_q^T W_QK x_k
    reads = {"K": qk.T, "Q": qk, "V": reader.W_V[j] @ reader.W_O[j]}[kind]
    norm = torch.linalg.matrix_norm
    return norm(writes @ reads) / (norm(writes) * norm(reads))


@torch.no_grad()
def random_composition_scores(config: AttentionOnlyConfig, kind: str = "K", samples: int = 256, seed: int = 0):
    """(samples,): :func:`composition_scores` of random matrices of a model's shapes, the baseline that a score
    is compared with: each sample draws the four matrices of two heads (``W_V``, ``W_O`` of the writer,
    ``W_Q``, ``W_K``, ``W_V``, ``W_O`` of the reader) with independent standard normal entries. Low-rank
    products of random matrices in ``d_model`` dimensions share directions by chance: the score is not 0."""
    generator = torch.Generator().manual_seed(seed)
    d, e = config.d_model, config.d_head
    scores = torch.zeros(samples)
    for k in range(samples):
        w_v, w_o = torch.randn(d, e, generator=generator), torch.randn(e, d, generator=generator)
        reader = _RandomHead(*(torch.randn(*shape, generator=generator) for shape in [(1, d, e)] * 3 + [(1, e, d)]))
        scores[k] = _composition(w_v, w_o, reader, 0, kind)
    return scores


@dataclass(frozen=True)
class _RandomHead:
    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    W_O: torch.Tensor


def induction_by_hand(
    vocab_size: int = 32, max_len: int = 32, num_heads: int = 2, strength: float = 12.0, seed: int = 0
) -> AttentionOnly:
    """A two-layer model whose weights are set by hand to do induction; its other heads keep small random weights.

    The residual stream has four parts: the token (one-hot), the position (one-hot), the previous token (written
    by head 0 of layer 0, which attends from each position to the one before it) and the output, which the
    unembedding reads. Head 0 of layer 1 attends from a token to every position whose previous token is the
    same (never position 0, which has none), and copies the token found there into the output: the next token of
    an earlier occurrence."""
    v, t = vocab_size, max_len
    token, position, previous, output = 0, v, v + t, 2 * v + t
    d = 3 * v + t
    config = AttentionOnlyConfig(vocab_size=v, max_len=t, d_model=d, num_heads=num_heads, num_layers=2, d_head=v + t)
    model = AttentionOnly(config, seed=seed)
    scale = math.sqrt(config.d_head) * strength  # a score of `strength` after the division by sqrt(d_head)
    with torch.no_grad():
        for layer in model.layers:
            for w in (layer.W_Q, layer.W_K, layer.W_V, layer.W_O):
                w.mul_(0.05)
        model.W_E.zero_()
        model.W_E[:, token:position] = torch.eye(v)
        model.W_pos.zero_()
        model.W_pos[:, position:previous] = torch.eye(t)
        model.W_U.zero_()
        model.W_U[output:, :] = torch.eye(v)
        prev, induction = model.layers[0], model.layers[1]
        for w in (prev.W_Q, prev.W_K, prev.W_V, prev.W_O, induction.W_Q, induction.W_K, induction.W_V, induction.W_O):
            w[0].zero_()
        # Layer 0, head 0: the query of position i matches the key of position i - 1; it copies that token.
        prev.W_Q[0, position + 1 : previous, : t - 1] = torch.eye(t - 1) * scale
        prev.W_K[0, position : previous - 1, : t - 1] = torch.eye(t - 1)
        prev.W_V[0, token:position, :v] = torch.eye(v)
        prev.W_O[0, :v, previous:output] = torch.eye(v)
        # Layer 1, head 0: a token's query matches the key of a position whose previous token it is; it copies.
        induction.W_Q[0, token:position, :v] = torch.eye(v) * scale
        induction.W_K[0, previous:output, :v] = torch.eye(v)
        # Position 0 has no previous token (layer 0's head read position 0 itself there): no query attends to it.
        induction.W_Q[0, position:previous, v] = scale
        induction.W_K[0, position, v] = -2.0
        induction.W_V[0, token:position, :v] = torch.eye(v)
        induction.W_O[0, :v, output:] = torch.eye(v) * strength
    return model


@torch.no_grad()
def logit_lens(model, ids) -> list[torch.Tensor]:
    """The logits (B, L, V) that a :class:`~attention_course.models.transformer.DecoderOnly` would give if it stopped
    after its embedding and after each layer: the residual stream there, through its final normalisation and output
    layer (the last of them is the model's own output)."""
    stream = []

    def keep(module, inputs, output):
        stream.append(output[0])

    hooks = [layer.register_forward_hook(keep) for layer in model.layers]
    try:
        hidden, _ = model.hidden_states(ids)
    finally:
        for hook in hooks:
            hook.remove()
    embedded = model.embed(ids)
    return [model.generator(model.norm(x)) for x in (embedded, *stream)]
