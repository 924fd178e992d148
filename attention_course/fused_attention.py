"""The course's attention layers computed through PyTorch's fused kernels (``F.scaled_dot_product_attention``).

Each class is a reference solution's layer (chapter 3's multi-head attention, chapter 7's grouped-query
and rotary grouped-query attention) with the same weights, the same key/value cache and the same result
up to rounding; the fused kernels never build the attention weights, so the multi-head one returns
``(output, None)``. The rotary one also turns its pairs at a long-context checkpoint's scaled frequencies
(:class:`~attention_course.rope.ScaledRotary`).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_course.solutions.ch03_multi_head import MultiHeadAttention, merge_heads, split_heads
from attention_course.solutions.ch05_positional_encoding import apply_rotary
from attention_course.solutions.ch07_efficient_attention import (
    GroupedQueryAttention,
    RotaryGroupedQueryAttention,
    repeat_kv,
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
