"""The models that ``make train`` trains, built from the graded pieces of chapters 3, 5 and 6:
the encoder-decoder of "Attention Is All You Need" and a decoder-only language model.

They add to the exercises' ``Transformer`` what training at speed wants: pre-norm layers
(``norm_first=True``) with a final layer norm, and attention through PyTorch's fused kernels
(``fused=True``: ``F.scaled_dot_product_attention``). Conventions as in the rest of the course:
batch first; boolean masks with True = may attend; padding masks are (B, S) and look-ahead masks
(Lt, Lt), or anything broadcastable to (B, H, Lq, Lk).

The layers and the attention are the reference solutions of exercises 3, 5 and 6, so a
student's copy of the course has this module once those chapters' solutions are released.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_course.solutions.ch03_multi_head import MultiHeadAttention, merge_heads, split_heads
from attention_course.solutions.ch04_masking import causal_mask
from attention_course.solutions.ch05_positional_encoding import PositionalEncoding
from attention_course.solutions.ch06_transformer import DecoderLayer, EncoderLayer


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

    def forward(self, ids):
        return self.positions(self.tokens(ids) * self.scale)


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


class DecoderOnly(nn.Module):
    """A GPT-style language model: causal self-attention layers over one stream of tokens."""

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
    ):
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, d_model, max_len, dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first) for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.generator = nn.Linear(d_model, vocab_size)
        self.max_len = max_len
        if fused:
            use_fused_attention(self)

    def forward(self, ids):
        x, mask = self.embed(ids), causal_mask(ids.size(1), device=ids.device)
        for layer in self.layers:
            x = layer(x, mask)
        return self.generator(self.norm(x))

    @torch.no_grad()
    def generate(self, ids, new_tokens: int, temperature: float = 1.0, generator: torch.Generator | None = None):
        """Sample ``new_tokens`` tokens after ``ids`` (B, L); temperature 0 takes the most likely one."""
        for _ in range(new_tokens):
            logits = self(ids[:, -self.max_len :])[:, -1]
            if temperature == 0:
                next_token = logits.argmax(dim=-1, keepdim=True)
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                next_token = torch.multinomial(probs, 1, generator=generator)
            ids = torch.cat([ids, next_token], dim=1)
        return ids
