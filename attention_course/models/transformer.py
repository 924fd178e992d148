"""The models that ``make train`` trains (the encoder-decoder and the decoder-only model) and their shared settings.

They are built from the graded pieces of chapters 3 to 7: the encoder-decoder of "Attention Is All
You Need" and a decoder-only language model. They add to the exercises' ``Transformer`` what
training at speed wants: pre-norm layers (``norm_first=True``) with a final layer norm, and attention
through PyTorch's fused kernels (``fused=True``: ``F.scaled_dot_product_attention``,
:mod:`attention_course.models.fused_attention`). Conventions as in the rest of the course: batch first;
boolean masks with True = may attend; padding masks are (B, S) and look-ahead masks (Lt, Lt), or
anything broadcastable to (B, H, Lq, Lk).

The decoder-only model also takes the parts of the two families of published checkpoints that
:mod:`attention_course.published.pretrained` loads (:mod:`attention_course.models.layers`): GPT-2's learned positions
and GELU, and the Llama family's RMSNorm, SwiGLU feed-forward network and rotary positions (chapter
7's rotary grouped-query attention).

The layers and the attention are the reference solutions of exercises 3 to 7, so a
student's copy of the course has this module once those chapters' solutions are released.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn as nn

from attention_course.models.fused_attention import (
    CAUSAL,
    FUSED,
    FusedRotaryGroupedQueryAttention,
    mask_for,
    use_fused_attention,
)
from attention_course.models.layers import EMBEDDINGS, TokenEmbedding, feed_forward, norm_layer, self_attention
from attention_course.models.rope import ScaledRotary
from attention_course.solutions.ch03_multi_head import split_heads
from attention_course.solutions.ch04_masking import causal_mask, masked_softmax
from attention_course.solutions.ch05_positional_encoding import apply_rotary
from attention_course.solutions.ch06_transformer import DecoderLayer, EncoderLayer
from attention_course.solutions.ch07_efficient_attention import (
    RotaryGroupedQueryAttention,
    repeat_kv,
    sliding_window_mask,
)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The settings that both models take, in their constructors' order after the vocabulary sizes.

    A model keeps its own as ``config``, and ``from_config`` builds a model from one: a program that
    trains either model (``make train``) sets them once.
    """

    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int
    dropout: float
    max_len: int
    norm_first: bool
    fused: bool
    tie_weights: bool


def _key_padding(mask):
    """A (B, S) padding mask, shaped to broadcast over heads and queries: (B, 1, 1, S)."""
    return None if mask is None else mask[:, None, None, :]


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
        self.config = ModelConfig(
            d_model, num_heads, num_layers, d_ff, dropout, max_len, norm_first, fused, tie_weights
        )
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

    @classmethod
    def from_config(cls, src_vocab_size: int, tgt_vocab_size: int, config: ModelConfig) -> EncoderDecoder:
        """The model of ``config``'s settings for these vocabularies."""
        return cls(src_vocab_size, tgt_vocab_size, **dataclasses.asdict(config))

    def encode(self, src, src_mask=None):
        x, mask = self.src_embed(src), _key_padding(src_mask)
        for layer in self.encoder_layers:
            x = layer(x, mask)
        return self.encoder_norm(x)

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        """Next-token logits of ``tgt_in`` over ``memory``; ``tgt_mask`` may be
        :data:`~attention_course.models.fused_attention.CAUSAL`, the look-ahead mask as the fused kernels'
        ``is_causal``."""
        x, memory_mask = self.tgt_embed(tgt_in), _key_padding(memory_mask)
        masks = {}  # whether a layer's attention is fused -> the mask it takes
        for layer in self.decoder_layers:
            fused = isinstance(layer.self_attn, FUSED)
            if fused not in masks:
                masks[fused] = mask_for(layer.self_attn, tgt_mask, tgt_in.size(1), tgt_in.device)
            x = layer(x, memory, masks[fused], memory_mask)
        return self.generator(self.decoder_norm(x))

    def forward(self, src, tgt_in, src_mask=None, tgt_mask=None):
        return self.decode(tgt_in, self.encode(src, src_mask), tgt_mask, src_mask)


# DecoderOnly's options for a model without a bias anywhere: nanoGPT's default (bias=False), and the Llama family's.
NO_BIASES = {"bias": False, "qkv_bias": False, "output_bias": False, "feed_forward_bias": False, "norm_bias": False}


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
        feed_forward_bias=True,
        norm_bias=True,
    ):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first)
        self.self_attn = self_attention(d_model, num_heads, num_kv_heads, bias, fused, rotary_base, rotary, qkv_bias)
        if feed_forward_kind == "swiglu":  # biased as the attention's projections are
            self.ff = feed_forward(feed_forward_kind, d_model, d_ff, dropout, bias)
        elif (feed_forward_kind, feed_forward_bias) != ("relu", True):
            self.ff = feed_forward(feed_forward_kind, d_model, d_ff, dropout, feed_forward_bias)
        if (norm, norm_eps, norm_bias) != ("layer", 1e-5, True):
            self.norm1 = norm_layer(norm, d_model, norm_eps, norm_bias)
            self.norm2 = norm_layer(norm, d_model, norm_eps, norm_bias)

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

    The keyword options build the models of published checkpoints (:mod:`attention_course.published.pretrained`):

    - ``positions``: ``"sinusoidal"`` (chapter 5's, added to embeddings scaled by sqrt(d_model)),
      ``"learned"`` (GPT-2) or ``"rotary"`` (the Llama family: chapter 7's rotary attention, with
      ``rotary_base``, and ``rotary_scaling``: a long-context checkpoint's ``rope_scaling`` settings,
      :mod:`attention_course.models.rope`);
    - ``sliding_window``: ``None``, a window (chapter 7's ``sliding_window_mask``) for every layer (Mistral),
      or one window or ``None`` per layer (Qwen2); the cache keeps every position, and the mask hides
      those that have left a layer's window;
    - ``norm``: ``"layer"`` or ``"rms"`` (the Llama family), with ``norm_eps``;
    - ``feed_forward``: ``"relu"`` (chapter 6's), ``"gelu"`` (GPT-2: tanh-approximated), ``"gelu_exact"``
      or ``"swiglu"`` (the Llama family);
    - ``bias``: whether the attention's projections (and a SwiGLU's) have biases; ``qkv_bias``, whether
      the query, key and value projections have them all the same (Qwen2); ``output_bias``, the output
      layer's; ``feed_forward_bias``, a ReLU or GELU network's; ``norm_bias``, the layer norms'. All five
      off is nanoGPT's ``bias=False`` (:data:`NO_BIASES`).
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
        feed_forward_bias: bool = True,
        norm_bias: bool = True,
    ):
        super().__init__()
        self.config = ModelConfig(
            d_model, num_heads, num_layers, d_ff, dropout, max_len, norm_first, fused, tie_weights
        )
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
            "feed_forward_bias": feed_forward_bias,
            "norm_bias": norm_bias,
        }
        self.layers = nn.ModuleList(
            DecoderOnlyLayer(d_model, num_heads, kv_heads, d_ff, dropout, norm_first, fused, **options)
            for _ in range(num_layers)
        )
        self.norm = norm_layer(norm, d_model, norm_eps, norm_bias) if norm_first else nn.Identity()
        self.generator = nn.Linear(d_model, vocab_size, bias=output_bias)
        if tie_weights:  # one matrix for the embedding and the output layer, as in GPT-2
            self.generator.weight = self.embed.tokens.weight
        self.max_len = max_len

    @classmethod
    def from_config(cls, vocab_size: int, config: ModelConfig, **options) -> DecoderOnly:
        """The model of ``config``'s settings for this vocabulary, with the keyword ``options`` of a family
        (``num_kv_heads``, ``positions``, ...)."""
        return cls(vocab_size, **dataclasses.asdict(config), **options)

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
        attends in both directions (:mod:`attention_course.basics.families`), or a left-padded batch's
        (:mod:`attention_course.published.batching`); a layer's sliding window still applies. ``positions``
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
            key = (window, isinstance(layer.self_attn, FUSED))  # a layer's window, and whether it takes CAUSAL
            if key not in masks:
                ahead = look_ahead(past, length, window, ids.device, mask, marker=True)
                masks[key] = mask_for(layer.self_attn, ahead, length, ids.device)
            layer_cache = None if cache is None else cache[i]
            x, layer_cache = layer(x, masks[key], layer_cache, positions)
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


def look_ahead(past: int, length: int, window: int | None, device, mask=None, marker: bool = False):
    """The rows of the new positions ``past`` to ``past + length - 1`` of the look-ahead mask over all
    ``past + length`` positions, within ``window`` where it is given; None where the mask would hide
    nothing (a single new position that may see every position so far). A ``mask`` given replaces the
    look-ahead mask, and is only narrowed to the window. With ``marker``, the whole look-ahead mask (no
    cache, no window) is :data:`~attention_course.models.fused_attention.CAUSAL`, which the fused kernels take as
    ``is_causal`` (:func:`~attention_course.models.fused_attention.mask_for` builds it for other layers)."""
    size = past + length
    if mask is not None:
        if window is None or window >= size:
            return mask
        key, query = torch.arange(size, device=device), torch.arange(past, size, device=device)[:, None]
        return mask & (key > query - window)
    if window is not None and window < size:
        return sliding_window_mask(size, window, device=device)[past:]
    if marker and past == 0 and length > 1:
        return CAUSAL
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
