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
from attention_course.solutions.ch07_efficient_attention import GroupedQueryAttention, repeat_kv


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


class FusedGroupedQueryAttention(GroupedQueryAttention):
    """Chapter 7's grouped-query attention, its heads attending through ``F.scaled_dot_product_attention``
    (as in :class:`FusedMultiHeadAttention`): the same weights, the same cache, the same result."""

    def forward(self, x, mask=None, cache=None):
        q = split_heads(self.W_q(x), self.num_heads)
        k = split_heads(self.W_k(x), self.num_kv_heads)
        v = split_heads(self.W_v(x), self.num_kv_heads)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        n_rep = self.num_heads // self.num_kv_heads
        out = F.scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), attn_mask=mask)
        return self.W_o(merge_heads(out)), (k, v)


class DecoderOnlyLayer(EncoderLayer):
    """A layer of :class:`DecoderOnly`: chapter 6's encoder layer (self-attention and a feed-forward
    network, each in a residual connection with a layer norm) whose self-attention is chapter 7's
    grouped-query attention, with a key/value cache. Its parameters have the encoder layer's names."""

    def __init__(self, d_model, num_heads, num_kv_heads, d_ff, dropout=0.0, norm_first=True, fused=False):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first)
        attention = FusedGroupedQueryAttention if fused else GroupedQueryAttention
        self.self_attn = attention(d_model, num_heads, num_kv_heads, bias=True)

    def forward(self, x, mask=None, cache=None):
        """``(x, cache)``: the layer's output and its self-attention's keys and values of every position so far."""
        if self.norm_first:
            attended, cache = self.self_attn(self.norm1(x), mask, cache)
            x = x + self.dropout1(attended)
            return x + self.dropout2(self.ff(self.norm2(x))), cache
        attended, cache = self.self_attn(x, mask, cache)
        x = self.norm1(x + self.dropout1(attended))
        return self.norm2(x + self.dropout2(self.ff(x))), cache


class DecoderOnly(nn.Module):
    """A GPT-style language model: causal self-attention layers over one stream of tokens.

    Its self-attention is chapter 7's grouped-query attention: ``num_kv_heads`` key/value heads (by
    default ``num_heads``, which is multi-head attention) shared by the query heads. ``extend`` runs
    new positions after those of a key/value cache, so that ``generate`` computes one new position
    per step instead of the whole sequence again.
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
    ):
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, d_model, max_len, dropout)
        kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.layers = nn.ModuleList(
            DecoderOnlyLayer(d_model, num_heads, kv_heads, d_ff, dropout, norm_first, fused) for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.generator = nn.Linear(d_model, vocab_size)
        if tie_weights:  # one matrix for the embedding and the output layer, as in GPT-2
            self.generator.weight = self.embed.tokens.weight
        self.max_len = max_len

    def forward(self, ids):
        return self.extend(ids)[0]

    def extend(self, ids, cache=None):
        """``(logits, cache)`` for the positions ``ids`` (B, L) that follow those of ``cache``.

        ``cache`` is None (``ids`` start the sequence) or the cache an earlier call returned: for every
        layer, the keys and values ``(B, num_kv_heads, L_past, dh)`` of the positions before ``ids``.
        ``logits`` (B, L, V) equal those of the whole sequence at once, and the returned cache holds
        ``L_past + L`` positions.
        """
        past = 0 if cache is None else cache[0][0].size(2)
        length = ids.size(1)
        if past + length > self.max_len:
            raise ValueError(f"{past} cached and {length} new positions are more than max_len={self.max_len}")
        x = self.embed.tokens(ids) * self.embed.scale  # TokenEmbedding, with the positions of the new tokens
        x = self.embed.positions.dropout(x + self.embed.positions.pe[past : past + length].to(x.dtype))
        # The new positions' rows of the look-ahead mask over all past + length positions; a single new
        # position may see every position so far, and needs no mask.
        mask = causal_mask(past + length, device=ids.device)[past:] if length > 1 else None
        new_cache = []
        for i, layer in enumerate(self.layers):
            x, layer_cache = layer(x, mask, None if cache is None else cache[i])
            new_cache.append(layer_cache)
        return self.generator(self.norm(x)), new_cache

    @torch.no_grad()
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
        sequence again. Both give the same tokens. A sequence longer than ``max_len`` is cut to its
        last ``max_len`` tokens: that moves every token to another position, so then each step
        computes the window anew, cache or not.
        """
        cache = None
        for _ in range(new_tokens):
            if not use_cache:
                logits = self(ids[:, -self.max_len :])[:, -1]
            elif cache is None or ids.size(1) > self.max_len:
                logits, cache = self.extend(ids[:, -self.max_len :])
                logits = logits[:, -1]
            else:
                logits, cache = self.extend(ids[:, -1:], cache)
                logits = logits[:, -1]
            if temperature == 0:
                next_token = logits.argmax(dim=-1, keepdim=True)
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                next_token = torch.multinomial(probs, 1, generator=generator)
            ids = torch.cat([ids, next_token], dim=1)
        return ids
