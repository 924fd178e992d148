"""The models that ``make train`` trains, built from the graded pieces of chapters 3 to 7:
the encoder-decoder of "Attention Is All You Need" and a decoder-only language model.

They add to the exercises' ``Transformer`` what training at speed wants: pre-norm layers
(``norm_first=True``) with a final layer norm, and attention through PyTorch's fused kernels
(``fused=True``: ``F.scaled_dot_product_attention``). Conventions as in the rest of the course:
batch first; boolean masks with True = may attend; padding masks are (B, S) and look-ahead masks
(Lt, Lt), or anything broadcastable to (B, H, Lq, Lk).

The decoder-only model also takes the parts of the two families of published checkpoints that
:mod:`attention_course.pretrained` loads: GPT-2's learned positions and GELU, and the Llama family's
RMSNorm, SwiGLU feed-forward network and rotary positions (chapter 7's rotary grouped-query attention).

The layers and the attention are the reference solutions of exercises 3 to 7, so a
student's copy of the course has this module once those chapters' solutions are released.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_course.rope import ScaledRotary
from attention_course.solutions.ch03_multi_head import MultiHeadAttention, merge_heads, split_heads
from attention_course.solutions.ch04_masking import causal_mask, masked_softmax
from attention_course.solutions.ch05_positional_encoding import PositionalEncoding, apply_rotary
from attention_course.solutions.ch06_transformer import DecoderLayer, EncoderLayer, FeedForward
from attention_course.solutions.ch07_efficient_attention import (
    GroupedQueryAttention,
    RotaryGroupedQueryAttention,
    repeat_kv,
    sliding_window_mask,
)


class FusedMultiHeadAttention(MultiHeadAttention):
    """Multi-head attention whose heads attend through ``F.scaled_dot_product_attention``.

    That function picks a fused kernel where one applies (FlashAttention and memory-efficient
    kernels on a GPU) and never builds the weights: the module returns ``(output, None)``.
    The weights and the result are those of :class:`MultiHeadAttention`.
    """

    def forward(self, query, key, value, mask=None):
        q, k, v = (
            split_heads(project(x), self.num_heads)
            for project, x in ((self.W_q, query), (self.W_k, key), (self.W_v, value))
        )
        return self.W_o(merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask))), None


def use_fused_attention(model: nn.Module) -> nn.Module:
    """Make every multi-head attention of ``model`` compute with the fused kernels (in place)."""
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.__class__ = FusedMultiHeadAttention
    return model


def _key_padding(mask):
    """A (B, S) padding mask, shaped to broadcast over heads and queries: (B, 1, 1, S)."""
    return None if mask is None else mask[:, None, None, :]


class TokenEmbedding(nn.Module):
    """Token embeddings scaled by sqrt(d_model), plus sinusoidal positions.

    The embeddings start with standard deviation 1/sqrt(d_model), so that after the
    scaling they have the size of the positional encoding (entries in [-1, 1]).
    With nn.Embedding's default N(0, 1) they would be sqrt(d_model) times larger
    and drown the positions, and the date task would barely train.
    """

    def __init__(self, vocab_size: int, d_model: int, max_len: int, dropout: float):
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.tokens = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.tokens.weight, std=d_model**-0.5)
        self.positions = PositionalEncoding(d_model, max_len, dropout)

    def forward(self, ids, start=0):
        """The embeddings of ``ids`` (B, L) at positions ``start`` to ``start + L - 1``, or at the positions
        ``start`` (B, L) of each token (a left-padded batch's)."""
        length, table = ids.size(1), self.positions.pe
        last = int(start.max()) if torch.is_tensor(start) else start + length - 1
        if last >= table.size(0):
            raise ValueError(f"positions up to {last}; the encoding has max_len={table.size(0)}")
        x = self.tokens(ids) * self.scale
        rows = table[start] if torch.is_tensor(start) else table[start : start + length]
        return self.positions.dropout(x + rows.to(x.dtype))


class LearnedEmbedding(nn.Module):
    """Token embeddings plus a learned vector for each position, unscaled: GPT-2's ``wte`` and ``wpe``."""

    def __init__(self, vocab_size: int, d_model: int, max_len: int, dropout: float):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(max_len, d_model)
        for table in (self.tokens, self.positions):
            nn.init.normal_(table.weight, std=0.02)  # GPT-2's initialisation
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids, start=0):
        positions = start if torch.is_tensor(start) else torch.arange(start, start + ids.size(1), device=ids.device)
        return self.dropout(self.tokens(ids) + self.positions(positions))


class TokenOnlyEmbedding(nn.Module):
    """Token embeddings alone, unscaled: with rotary positions, the positions enter every attention layer."""

    def __init__(self, vocab_size: int, d_model: int, max_len: int, dropout: float):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.tokens.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids, start=0):
        return self.dropout(self.tokens(ids))


EMBEDDINGS = {"sinusoidal": TokenEmbedding, "learned": LearnedEmbedding, "rotary": TokenOnlyEmbedding}


class GELUFeedForward(FeedForward):
    """GPT-2's feed-forward network: chapter 6's, with GELU (its tanh approximation, as GPT-2 computes it,
    or the exact one) in place of the ReLU."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, approximate: str = "tanh"):
        super().__init__(d_model, d_ff, dropout)
        self.approximate = approximate

    def forward(self, x):
        return self.linear2(self.dropout(F.gelu(self.linear1(x), approximate=self.approximate)))


class SwiGLU(nn.Module):
    """The gated feed-forward network of the Llama family: ``down(silu(gate(x)) * up(x))``.

    ``gate`` and ``up`` both map each position to ``d_ff`` features; the SiLU of the first gates the
    second, feature by feature, and ``down`` maps the product back to ``d_model``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, bias: bool = False):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.down(self.dropout(F.silu(self.gate(x)) * self.up(x)))


def feed_forward(kind: str, d_model: int, d_ff: int, dropout: float, bias: bool) -> nn.Module:
    """The feed-forward network of a decoder-only layer: ``relu`` (chapter 6's), ``gelu``, ``gelu_exact``
    (GPT-2's, biased) or ``swiglu`` (the Llama family's, biased where ``bias``)."""
    if kind == "swiglu":
        return SwiGLU(d_model, d_ff, dropout, bias)
    if kind in ("gelu", "gelu_exact"):
        return GELUFeedForward(d_model, d_ff, dropout, approximate="tanh" if kind == "gelu" else "none")
    if kind == "relu":
        return FeedForward(d_model, d_ff, dropout)
    raise ValueError(f"feed_forward must be relu, gelu, gelu_exact or swiglu, got {kind!r}")


def norm_layer(kind: str, d_model: int, eps: float) -> nn.Module:
    """A layer norm (``layer``: centre and scale, with a bias) or an RMS norm (``rms``: scale only, the Llama
    family's, ``x / sqrt(mean(x²) + eps) * weight``)."""
    if kind == "layer":
        return nn.LayerNorm(d_model, eps=eps)
    if kind == "rms":
        return nn.RMSNorm(d_model, eps=eps)
    raise ValueError(f"norm must be layer or rms, got {kind!r}")


class EncoderDecoder(nn.Module):
    """The encoder-decoder Transformer: encode(src) once, decode(tgt_in, memory) to next-token logits."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int,
        num_heads: int,
        num_layers: int,
        d_ff: int,
        dropout: float = 0.1,
        max_len: int = 512,
        norm_first: bool = False,
        fused: bool = False,
        tie_weights: bool = False,
    ):
        super().__init__()
        self.src_embed = TokenEmbedding(src_vocab_size, d_model, max_len, dropout)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model, max_len, dropout)
        layer_args = (d_model, num_heads, d_ff, dropout, norm_first)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(num_layers))
        # Pre-norm leaves the residual stream unnormalised: normalise it once at the end.
        self.encoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        if tie_weights:  # one matrix for the target embedding and the output layer (the paper's section 3.4)
            self.generator.weight = self.tgt_embed.tokens.weight
        if fused:
            use_fused_attention(self)

    def encode(self, src, src_mask=None):
        x, mask = self.src_embed(src), _key_padding(src_mask)
        for layer in self.encoder_layers:
            x = layer(x, mask)
        return self.encoder_norm(x)

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        x, memory_mask = self.tgt_embed(tgt_in), _key_padding(memory_mask)
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.generator(self.decoder_norm(x))

    def forward(self, src, tgt_in, src_mask=None, tgt_mask=None):
        return self.decode(tgt_in, self.encode(src, src_mask), tgt_mask, src_mask)


def _attend_fused(attention, q, k, v, mask, cache):
    """The rest of a grouped-query attention's forward from its new heads q (B, H, L, dh), k and v
    (B, H_kv, L, dh), through ``F.scaled_dot_product_attention``: ``(output, cache)``."""
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    n_rep = attention.num_heads // attention.num_kv_heads
    out = F.scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), attn_mask=mask)
    return attention.W_o(merge_heads(out)), (k, v)


class FusedGroupedQueryAttention(GroupedQueryAttention):
    """Chapter 7's grouped-query attention, its heads attending through ``F.scaled_dot_product_attention``
    (as in :class:`FusedMultiHeadAttention`): the same weights, the same cache, the same result."""

    def forward(self, x, mask=None, cache=None):
        q = split_heads(self.W_q(x), self.num_heads)
        k = split_heads(self.W_k(x), self.num_kv_heads)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        return _attend_fused(self, q, k, v, mask, cache)


class FusedRotaryGroupedQueryAttention(RotaryGroupedQueryAttention):
    """Chapter 7's rotary grouped-query attention through ``F.scaled_dot_product_attention``: the same
    weights, the same cache (keys rotated at their positions), the same result. With ``rotary`` (a
    :class:`~attention_course.rope.ScaledRotary`) the pairs turn at a long-context checkpoint's scaled
    frequencies instead of ``base``'s."""

    def __init__(self, *args, rotary=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.rotary = rotary

    def rotate(self, heads, positions):
        return apply_rotary(heads, positions, self.base) if self.rotary is None else self.rotary(heads, positions)

    def forward(self, x, mask=None, cache=None, positions=None):
        """As chapter 7's, with ``positions`` (B, L) the position of each new token where they are not those
        after the cache (a left-padded batch's)."""
        if positions is None:
            past = 0 if cache is None else cache[0].size(2)
            positions = torch.arange(past, past + x.size(1), device=x.device)
        else:
            positions = positions[:, None, :]  # (B, 1, L): the same for every head
        # The queries' and the keys' heads rotated together: one call of apply_rotary instead of two.
        heads = torch.cat([split_heads(self.W_q(x), self.num_heads), split_heads(self.W_k(x), self.num_kv_heads)], 1)
        q, k = self.rotate(heads, positions).split([self.num_heads, self.num_kv_heads], dim=1)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        return _attend_fused(self, q, k, v, mask, cache)


def self_attention(
    d_model, num_heads, num_kv_heads, bias, fused, rotary_base=None, rotary=None, qkv_bias=False
) -> nn.Module:
    """Chapter 7's grouped-query attention with a key/value cache; rotary where ``rotary_base`` is given, at
    ``rotary``'s scaled frequencies where that is given (fused only). ``qkv_bias`` gives the query, key and
    value projections biases where ``bias`` gives none (Qwen2's layout)."""
    if rotary_base is None:
        attention = FusedGroupedQueryAttention if fused else GroupedQueryAttention
        layer = attention(d_model, num_heads, num_kv_heads, bias=bias or qkv_bias)
    elif fused:
        layer = FusedRotaryGroupedQueryAttention(
            d_model, num_heads, num_kv_heads, bias=bias or qkv_bias, base=rotary_base, rotary=rotary
        )
    elif rotary is None:
        layer = RotaryGroupedQueryAttention(d_model, num_heads, num_kv_heads, bias=bias or qkv_bias, base=rotary_base)
    else:
        raise ValueError("scaled rotary frequencies (rotary_scaling) need fused=True")
    if qkv_bias and not bias:
        layer.W_o.register_parameter("bias", None)  # biases on the query, key and value projections only
    return layer


class DecoderOnlyLayer(EncoderLayer):
    """A layer of :class:`DecoderOnly`: chapter 6's encoder layer (self-attention and a feed-forward
    network, each in a residual connection with a layer norm) whose self-attention is chapter 7's
    grouped-query attention, with a key/value cache. Its parameters have the encoder layer's names.

    The keyword options swap in the parts of other model families (see :class:`DecoderOnly`): the
    attention's biases and rotary positions, the kind of norm, and the feed-forward network.
    """

    def __init__(
        self,
        d_model,
        num_heads,
        num_kv_heads,
        d_ff,
        dropout=0.0,
        norm_first=True,
        fused=False,
        *,
        bias=True,
        rotary_base=None,
        rotary=None,
        qkv_bias=False,
        norm="layer",
        norm_eps=1e-5,
        feed_forward_kind="relu",
    ):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first)
        self.self_attn = self_attention(d_model, num_heads, num_kv_heads, bias, fused, rotary_base, rotary, qkv_bias)
        if feed_forward_kind != "relu":
            self.ff = feed_forward(feed_forward_kind, d_model, d_ff, dropout, bias)
        if (norm, norm_eps) != ("layer", 1e-5):
            self.norm1, self.norm2 = norm_layer(norm, d_model, norm_eps), norm_layer(norm, d_model, norm_eps)

    def forward(self, x, mask=None, cache=None, positions=None):
        """``(x, cache)``: the layer's output and its self-attention's keys and values of every position so far;
        ``positions`` (B, L), where given, are the new tokens' positions for rotary attention."""
        where = {}
        if positions is not None and isinstance(self.self_attn, RotaryGroupedQueryAttention):
            if not isinstance(self.self_attn, FusedRotaryGroupedQueryAttention):
                raise ValueError("positions for rotary attention need fused=True")
            where = {"positions": positions}
        if self.norm_first:
            attended, cache = self.self_attn(self.norm1(x), mask, cache, **where)
            x = x + self.dropout1(attended)
            return x + self.dropout2(self.ff(self.norm2(x))), cache
        attended, cache = self.self_attn(x, mask, cache, **where)
        x = self.norm1(x + self.dropout1(attended))
        return self.norm2(x + self.dropout2(self.ff(x))), cache


class DecoderOnly(nn.Module):
    """A GPT-style language model: causal self-attention layers over one stream of tokens.

    Its self-attention is chapter 7's grouped-query attention: ``num_kv_heads`` key/value heads (by
    default ``num_heads``, which is multi-head attention) shared by the query heads. ``extend`` runs
    new positions after those of a key/value cache, so that ``generate`` computes one new position
    per step instead of the whole sequence again.

    The keyword options build the models of published checkpoints (:mod:`attention_course.pretrained`):

    - ``positions``: ``"sinusoidal"`` (chapter 5's, added to embeddings scaled by sqrt(d_model)),
      ``"learned"`` (GPT-2) or ``"rotary"`` (the Llama family: chapter 7's rotary attention, with
      ``rotary_base``, and ``rotary_scaling``: a long-context checkpoint's ``rope_scaling`` settings,
      :mod:`attention_course.rope`);
    - ``sliding_window``: ``None``, a window (chapter 7's ``sliding_window_mask``) for every layer (Mistral),
      or one window or ``None`` per layer (Qwen2); the cache keeps every position, and the mask hides
      those that have left a layer's window;
    - ``norm``: ``"layer"`` or ``"rms"`` (the Llama family), with ``norm_eps``;
    - ``feed_forward``: ``"relu"`` (chapter 6's), ``"gelu"`` (GPT-2: tanh-approximated), ``"gelu_exact"``
      or ``"swiglu"`` (the Llama family);
    - ``bias``: whether the attention's projections (and a SwiGLU's) have biases; ``qkv_bias``, whether
      the query, key and value projections have them all the same (Qwen2); ``output_bias``, the output
      layer's.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        num_heads: int,
        num_layers: int,
        d_ff: int,
        dropout: float = 0.1,
        max_len: int = 512,
        norm_first: bool = True,
        fused: bool = False,
        tie_weights: bool = False,
        num_kv_heads: int | None = None,
        *,
        positions: str = "sinusoidal",
        rotary_base: float = 10000.0,
        norm: str = "layer",
        norm_eps: float = 1e-5,
        feed_forward: str = "relu",
        rotary_scaling: dict | None = None,
        sliding_window: int | list[int | None] | None = None,
        bias: bool = True,
        qkv_bias: bool = False,
        output_bias: bool = True,
    ):
        super().__init__()
        if positions not in EMBEDDINGS:
            raise ValueError(f"positions must be one of {', '.join(EMBEDDINGS)}, got {positions!r}")
        self.embed = EMBEDDINGS[positions](vocab_size, d_model, max_len, dropout)
        kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.windows = sliding_window if isinstance(sliding_window, list) else [sliding_window] * num_layers
        if len(self.windows) != num_layers:
            raise ValueError(f"sliding_window has {len(self.windows)} entries for num_layers={num_layers}")
        rotary = None
        if rotary_scaling is not None and positions == "rotary":
            rotary = ScaledRotary(d_model // num_heads, {**rotary_scaling, "rope_theta": rotary_base}, max_len)
        options = {
            "bias": bias,
            "qkv_bias": qkv_bias,
            "rotary_base": rotary_base if positions == "rotary" else None,
            "rotary": rotary,
            "norm": norm,
            "norm_eps": norm_eps,
            "feed_forward_kind": feed_forward,
        }
        self.layers = nn.ModuleList(
            DecoderOnlyLayer(d_model, num_heads, kv_heads, d_ff, dropout, norm_first, fused, **options)
            for _ in range(num_layers)
        )
        self.norm = norm_layer(norm, d_model, norm_eps) if norm_first else nn.Identity()
        self.generator = nn.Linear(d_model, vocab_size, bias=output_bias)
        if tie_weights:  # one matrix for the embedding and the output layer, as in GPT-2
            self.generator.weight = self.embed.tokens.weight
        self.max_len = max_len

    def forward(self, ids, mask=None):
        return self.extend(ids, mask=mask)[0]

    def extend(self, ids, cache=None, mask=None, positions=None):
        """``(logits, cache)`` for the positions ``ids`` (B, L) that follow those of ``cache``.

        ``cache`` is None (``ids`` start the sequence) or the cache an earlier call returned: for every
        layer, the keys and values ``(B, num_kv_heads, L_past, dh)`` of the positions before ``ids``.
        ``logits`` (B, L, V) equal those of the whole sequence at once, and the returned cache holds
        ``L_past + L`` positions.

        ``mask`` (bool, broadcastable to ``(B, num_heads, L, L_past + L)``, True where a query may
        attend to a key) replaces the look-ahead mask: a prefix-LM's mask, or an encoder's, which
        attends in both directions (:mod:`attention_course.families`), or a left-padded batch's
        (:mod:`attention_course.batching`); a layer's sliding window still applies. ``positions``
        (B, L) give each new token's position where they are not ``L_past`` to ``L_past + L - 1``.
        """
        hidden, cache = self.hidden_states(ids, cache, mask, positions)
        return self.generator(hidden), cache

    def hidden_states(self, ids, cache=None, mask=None, positions=None):
        """``(hidden, cache)`` as :meth:`extend`, with the last layer's normalised outputs (B, L, d_model)
        in place of the logits: the output layer turns them into logits."""
        past = 0 if cache is None else self.cached_length(cache)
        length = ids.size(1)
        if past + length > self.max_len:
            raise ValueError(f"{past} cached and {length} new positions are more than max_len={self.max_len}")
        x = self.embed(ids, start=past if positions is None else positions)
        masks = {}
        new_cache = []
        for i, (layer, window) in enumerate(zip(self.layers, self.windows)):
            if window not in masks:
                masks[window] = look_ahead(past, length, window, ids.device, mask)
            layer_cache = None if cache is None else cache[i]
            x, layer_cache = layer(x, masks[window], layer_cache, positions)
            new_cache.append(layer_cache)
        return self.norm(x), new_cache

    @staticmethod
    def cached_length(cache) -> int:
        """The number of positions a cache holds: its first layer's keys are (B, H_kv, L_past, d_h)."""
        return cache[0][0].size(2)

    @torch.inference_mode()
    def generate(
        self,
        ids,
        new_tokens: int,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
        use_cache: bool = True,
    ):
        """Sample ``new_tokens`` tokens after ``ids`` (B, L); temperature 0 takes the most likely one.

        With ``use_cache`` the prompt runs once and every step after it runs the newest token alone,
        with the key/value cache of the others; without it, every step runs the model on the whole
        sequence again. Both give the same tokens. Only the last position's logits are computed, as
        only they are sampled from. A sequence longer than ``max_len`` is cut to its last ``max_len``
        tokens: that moves every token to another position, so then each step computes the window
        anew, cache or not.
        """
        cache = None
        for _ in range(new_tokens):
            if not use_cache:
                hidden, _ = self.hidden_states(ids[:, -self.max_len :])
            elif cache is None or ids.size(1) > self.max_len:
                hidden, cache = self.hidden_states(ids[:, -self.max_len :])
            else:
                hidden, cache = self.hidden_states(ids[:, -1:], cache)
            logits = self.generator(hidden[:, -1])
            ids = torch.cat([ids, next_tokens(logits, temperature, generator)], dim=1)
        return ids


def next_tokens(logits, temperature: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, 1): the next token of each sequence from its logits (B, V), drawn at ``temperature``; temperature 0
    takes the most likely one."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    return torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator)


def look_ahead(past: int, length: int, window: int | None, device, mask=None) -> torch.Tensor | None:
    """The rows of the new positions ``past`` to ``past + length - 1`` of the look-ahead mask over all
    ``past + length`` positions, within ``window`` where it is given; None where the mask would hide
    nothing (a single new position that may see every position so far). A ``mask`` given replaces the
    look-ahead mask, and is only narrowed to the window."""
    size = past + length
    if mask is not None:
        if window is None or window >= size:
            return mask
        key, query = torch.arange(size, device=device), torch.arange(past, size, device=device)[:, None]
        return mask & (key > query - window)
    if window is not None and window < size:
        return sliding_window_mask(size, window, device=device)[past:]
    return causal_mask(size, device=device)[past:] if length > 1 else None


@torch.no_grad()
def attention_weights(model: DecoderOnly, ids) -> list[torch.Tensor]:
    """The attention weights of every layer of ``model`` on ``ids`` (B, L): for each layer, (B, H, L, L), what
    each head's queries give each key. The fused kernels do not return them, so they are computed again from
    each layer's attention input, as its attention computes its scores (with the rotation of rotary layers)."""
    inputs = []
    hooks = [
        layer.self_attn.register_forward_pre_hook(lambda _, args: inputs.append(args[0])) for layer in model.layers
    ]
    try:
        model(ids)
    finally:
        for hook in hooks:
            hook.remove()
    positions = torch.arange(ids.size(1), device=ids.device)
    weights = []
    for layer, x, window in zip(model.layers, inputs, model.windows):
        attention, mask = layer.self_attn, look_ahead(0, ids.size(1), window, ids.device)
        q, k = split_heads(attention.W_q(x), attention.num_heads), split_heads(attention.W_k(x), attention.num_kv_heads)
        if isinstance(attention, FusedRotaryGroupedQueryAttention):
            q, k = attention.rotate(q, positions), attention.rotate(k, positions)
        elif isinstance(attention, RotaryGroupedQueryAttention):
            q, k = apply_rotary(q, positions, attention.base), apply_rotary(k, positions, attention.base)
        k = repeat_kv(k, attention.num_heads // attention.num_kv_heads)
        weights.append(masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), mask))
    return weights
