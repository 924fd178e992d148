"""The parts of the published families' layers, chosen by name: positions, norms, feed-forward networks, attention.

:class:`~attention_course.models.transformer.DecoderOnly` is built of them: sinusoidal positions (chapter 5's, the
encoder-decoder's too), GPT-2's learned positions, or none in the embeddings (rotary positions turn in
every attention layer instead); a layer norm or the Llama family's RMS norm; chapter 6's feed-forward
network, GPT-2's with GELU, or the Llama family's SwiGLU; and chapter 7's grouped-query attention, rotary
or not, with biases as each family has them.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_course.models.fused_attention import FusedGroupedQueryAttention, FusedRotaryGroupedQueryAttention
from attention_course.solutions.ch05_positional_encoding import PositionalEncoding
from attention_course.solutions.ch06_transformer import FeedForward
from attention_course.solutions.ch07_efficient_attention import GroupedQueryAttention, RotaryGroupedQueryAttention


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
    (GPT-2's) or ``swiglu`` (the Llama family's); its two (SwiGLU: three) linear layers biased where ``bias``."""
    if kind == "swiglu":
        return SwiGLU(d_model, d_ff, dropout, bias)
    if kind in ("gelu", "gelu_exact"):
        network = GELUFeedForward(d_model, d_ff, dropout, approximate="tanh" if kind == "gelu" else "none")
    elif kind == "relu":
        network = FeedForward(d_model, d_ff, dropout)
    else:
        raise ValueError(f"feed_forward must be relu, gelu, gelu_exact or swiglu, got {kind!r}")
    if not bias:  # chapter 6's network, without its biases (nanoGPT's bias=False)
        for layer in (network.linear1, network.linear2):
            layer.register_parameter("bias", None)
    return network


def norm_layer(kind: str, d_model: int, eps: float, bias: bool = True) -> nn.Module:
    """A layer norm (``layer``: centre and scale, with a bias where ``bias``) or an RMS norm (``rms``: scale
    only, the Llama family's, ``x / sqrt(mean(x²) + eps) * weight``)."""
    if kind == "layer":
        return nn.LayerNorm(d_model, eps=eps, bias=bias)
    if kind == "rms":
        return nn.RMSNorm(d_model, eps=eps)
    raise ValueError(f"norm must be layer or rms, got {kind!r}")


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
