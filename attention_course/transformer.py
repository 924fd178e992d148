"""The Transformer of chapter 6, in one file: the encoder-decoder of "Attention Is All You Need"
and a decoder-only language model built from the same layers.

Conventions as in the rest of the course: batch first; boolean masks with
True = may attend; padding masks are (B, S) and look-ahead masks (Lt, Lt), or
anything broadcastable to (B, H, Lq, Lk). ``norm_first=False`` is the paper's
post-norm; ``norm_first=True`` the pre-norm of most models since. ``fused=True``
computes attention with ``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_course.attention import MultiHeadAttention, causal_mask, to_torch_multihead
from attention_course.positions import PositionalEncoding


class FeedForward(nn.Module):
    """The position-wise network: linear2(dropout(relu(linear1(x))))."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward network, each in a residual connection with layer norm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 fused: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, fused=fused)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _attend(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask)[0])

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self._attend(self.norm1(x), mask)
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + self._attend(x, mask))
        return self.norm2(x + self.dropout2(self.ff(x)))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's memory, and a feed-forward network."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 fused: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, fused=fused)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, fused=fused)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def _self(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask)[0])

    def _cross(self, x, memory, mask):
        return self.dropout2(self.cross_attn(x, memory, memory, mask)[0])

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            x = x + self._self(self.norm1(x), tgt_mask)
            x = x + self._cross(self.norm2(x), memory, memory_mask)
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self._self(x, tgt_mask))
        x = self.norm2(x + self._cross(x, memory, memory_mask))
        return self.norm3(x + self.dropout3(self.ff(x)))


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
        nn.init.normal_(self.tokens.weight, std=d_model ** -0.5)
        self.positions = PositionalEncoding(d_model, max_len, dropout)

    def forward(self, ids):
        return self.positions(self.tokens(ids) * self.scale)


class Transformer(nn.Module):
    """The encoder-decoder Transformer: encode(src) once, decode(tgt_in, memory) to next-token logits."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int, num_heads: int, num_layers: int,
                 d_ff: int, dropout: float = 0.1, max_len: int = 512, norm_first: bool = False, fused: bool = False):
        super().__init__()
        self.src_embed = TokenEmbedding(src_vocab_size, d_model, max_len, dropout)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model, max_len, dropout)
        layer_args = (d_model, num_heads, d_ff, dropout, norm_first, fused)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(num_layers))
        # Pre-norm leaves the residual stream unnormalised: normalise it once at the end.
        self.encoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.generator = nn.Linear(d_model, tgt_vocab_size)

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


@torch.no_grad()
def greedy_decode(model, src, src_mask, bos_id: int, eos_id: int, max_len: int) -> torch.Tensor:
    """Decode by feeding back the most likely token: (B, T) ids without the leading bos_id, T <= max_len.

    Decoding stops once every sequence has produced ``eos_id``; a finished
    sequence is filled with ``eos_id`` from then on.
    """
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits = model.decode(ys, memory, causal_mask(ys.size(1), device=src.device), src_mask)
        next_token = logits[:, -1].argmax(dim=-1).masked_fill(finished, eos_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return ys[:, 1:]


class DecoderOnly(nn.Module):
    """A GPT-style language model: causal self-attention layers over one stream of tokens."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, d_ff: int,
                 dropout: float = 0.1, max_len: int = 512, norm_first: bool = True, fused: bool = False):
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, d_model, max_len, dropout)
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first, fused)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.generator = nn.Linear(d_model, vocab_size)
        self.max_len = max_len

    def forward(self, ids):
        x, mask = self.embed(ids), causal_mask(ids.size(1), device=ids.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.generator(self.norm(x))

    @torch.no_grad()
    def generate(self, ids, new_tokens: int, temperature: float = 1.0, generator: torch.Generator | None = None):
        """Sample ``new_tokens`` tokens after ``ids`` (B, L); temperature 0 takes the most likely one."""
        for _ in range(new_tokens):
            logits = self(ids[:, -self.max_len:])[:, -1]
            if temperature == 0:
                next_token = logits.argmax(dim=-1, keepdim=True)
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                next_token = torch.multinomial(probs, 1, generator=generator)
            ids = torch.cat([ids, next_token], dim=1)
        return ids


def _copy_attention(source: MultiHeadAttention, target: nn.MultiheadAttention) -> None:
    target.load_state_dict(to_torch_multihead(source).state_dict())


def to_torch_encoder_layer(layer: EncoderLayer) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer(batch_first=True, activation="relu", dropout=0)`` with ``layer``'s weights."""
    d_model, d_ff = layer.ff.linear1.in_features, layer.ff.linear1.out_features
    builtin = nn.TransformerEncoderLayer(d_model, layer.self_attn.num_heads, d_ff, dropout=0.0, activation="relu",
                                         batch_first=True, norm_first=layer.norm_first)
    builtin = builtin.to(device=layer.norm1.weight.device, dtype=layer.norm1.weight.dtype)
    _copy_attention(layer.self_attn, builtin.self_attn)
    for name in ("linear1", "linear2"):
        getattr(builtin, name).load_state_dict(getattr(layer.ff, name).state_dict())
    for name in ("norm1", "norm2"):
        getattr(builtin, name).load_state_dict(getattr(layer, name).state_dict())
    return builtin


def to_torch_decoder_layer(layer: DecoderLayer) -> nn.TransformerDecoderLayer:
    """An ``nn.TransformerDecoderLayer(batch_first=True, activation="relu", dropout=0)`` with ``layer``'s weights."""
    d_model, d_ff = layer.ff.linear1.in_features, layer.ff.linear1.out_features
    builtin = nn.TransformerDecoderLayer(d_model, layer.self_attn.num_heads, d_ff, dropout=0.0, activation="relu",
                                         batch_first=True, norm_first=layer.norm_first)
    builtin = builtin.to(device=layer.norm1.weight.device, dtype=layer.norm1.weight.dtype)
    _copy_attention(layer.self_attn, builtin.self_attn)
    _copy_attention(layer.cross_attn, builtin.multihead_attn)
    for name in ("linear1", "linear2"):
        getattr(builtin, name).load_state_dict(getattr(layer.ff, name).state_dict())
    for name in ("norm1", "norm2", "norm3"):
        getattr(builtin, name).load_state_dict(getattr(layer, name).state_dict())
    return builtin
