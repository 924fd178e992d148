"""The course's attention layers computed through PyTorch's fused kernels (``F.scaled_dot_product_attention``).

Each class is a reference solution's layer (chapter 3's multi-head attention, chapter 7's grouped-query
and rotary grouped-query attention) with the same weights, the same key/value cache and the same result
up to rounding; the fused kernels never build the attention weights, so the multi-head one returns
``(output, None)``. The rotary one also turns its pairs at a long-context checkpoint's scaled frequencies
(:class:`~attention_course.models.rope.ScaledRotary`).

Two things make them fast in training. A look-ahead mask may be passed as :data:`CAUSAL`, which is never
built: the kernels are told ``is_causal=True`` instead, the one way to reach FlashAttention, which takes no
mask tensor. And a self-attention's query, key and value projections run as one matrix product, on the
three weight matrices side by side (:func:`projections`): one large product keeps the GPU busier than three
small ones. The parameters stay three ``nn.Linear`` layers, so checkpoints and published models load as before.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from attention_course.solutions.ch03_multi_head import MultiHeadAttention, merge_heads, split_heads
from attention_course.solutions.ch04_masking import causal_mask
from attention_course.solutions.ch05_positional_encoding import apply_rotary
from attention_course.solutions.ch07_efficient_attention import (
    GroupedQueryAttention,
    RotaryGroupedQueryAttention,
    repeat_kv,
)


class CausalMask:
    """The look-ahead mask of a sequence attending to itself from its first position (query i sees keys j <= i),
    as a marker rather than a tensor: the fused layers pass ``is_causal=True`` to the kernels for it. Any other
    layer is given the boolean mask instead (:func:`mask_for`)."""

    def __repr__(self) -> str:
        return "CAUSAL"


CAUSAL = CausalMask()


def mask_for(attention: nn.Module, mask, length: int, device):
    """``mask`` as ``attention`` takes it: :data:`CAUSAL` stays a marker for the fused layers of this module
    and becomes the boolean (length, length) look-ahead mask for any other layer (the course's own)."""
    if mask is CAUSAL and not isinstance(attention, FUSED):
        return causal_mask(length, device=device)
    return mask


def attend(q, k, v, mask):
    """``F.scaled_dot_product_attention`` of heads q (B, H, Lq, dh), k and v (B, H, Lk, dh) under ``mask``:
    a boolean mask (True = may attend), None, or :data:`CAUSAL` (then Lq == Lk)."""
    if mask is CAUSAL:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def projections(x, *layers: nn.Linear, fused: bool = True) -> tuple[torch.Tensor, ...]:
    """Each of ``layers`` applied to ``x``: where ``fused``, as one matrix product with their weights stacked
    (the same values up to rounding; gradients reach each layer's own parameters), else one product each."""
    if not fused:
        return tuple(layer(x) for layer in layers)
    weight = torch.cat([layer.weight for layer in layers])
    biases = [layer.bias for layer in layers]
    bias = (
        None
        if all(b is None for b in biases)
        else torch.cat(
            [
                torch.zeros(layer.out_features, device=x.device, dtype=layer.weight.dtype) if b is None else b
                for layer, b in zip(layers, biases)
            ]
        )
    )
    return F.linear(x, weight, bias).split([layer.out_features for layer in layers], dim=-1)


class FusedMultiHeadAttention(MultiHeadAttention):
    """Multi-head attention whose heads attend through ``F.scaled_dot_product_attention``.

    That function picks a fused kernel where one applies (FlashAttention and memory-efficient
    kernels on a GPU) and never builds the weights: the module returns ``(output, None)``.
    The weights and the result are those of :class:`MultiHeadAttention`. ``mask`` may be :data:`CAUSAL`.
    Self-attention (one tensor as query, key and value) projects with one matrix product, cross-attention its
    keys and values with one (unless ``fuse_projections`` is set False, as a benchmark does to measure it).
    """

    fuse_projections = True

    def forward(self, query, key, value, mask=None):
        if query is key and key is value:
            q, k, v = projections(query, self.W_q, self.W_k, self.W_v, fused=self.fuse_projections)
        elif key is value:
            q, (k, v) = self.W_q(query), projections(key, self.W_k, self.W_v, fused=self.fuse_projections)
        else:
            q, k, v = self.W_q(query), self.W_k(key), self.W_v(value)
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))
        return self.W_o(merge_heads(attend(q, k, v, mask))), None


def use_fused_attention(model: nn.Module) -> nn.Module:
    """Make every multi-head attention of ``model`` compute with the fused kernels (in place)."""
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.__class__ = FusedMultiHeadAttention
    return model


def _attend_fused(attention, q, k, v, mask, cache):
    """The rest of a grouped-query attention's forward from its new heads q (B, H, L, dh), k and v
    (B, H_kv, L, dh), through ``F.scaled_dot_product_attention``: ``(output, cache)``. ``mask`` may be
    :data:`CAUSAL` where there is no cache."""
    if cache is not None:
        if mask is CAUSAL:
            raise ValueError("CAUSAL is the mask of positions from the first: with a cache, pass the mask's rows")
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    n_rep = attention.num_heads // attention.num_kv_heads
    out = attend(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask)
    return attention.W_o(merge_heads(out)), (k, v)


class FusedGroupedQueryAttention(GroupedQueryAttention):
    """Chapter 7's grouped-query attention, its heads attending through ``F.scaled_dot_product_attention``
    (as in :class:`FusedMultiHeadAttention`): the same weights, the same cache, the same result."""

    fuse_projections = True

    def forward(self, x, mask=None, cache=None):
        q, k, v = projections(x, self.W_q, self.W_k, self.W_v, fused=self.fuse_projections)
        q, k, v = split_heads(q, self.num_heads), split_heads(k, self.num_kv_heads), split_heads(v, self.num_kv_heads)
        return _attend_fused(self, q, k, v, mask, cache)


class FusedRotaryGroupedQueryAttention(RotaryGroupedQueryAttention):
    """Chapter 7's rotary grouped-query attention through ``F.scaled_dot_product_attention``: the same
    weights, the same cache (keys rotated at their positions), the same result. With ``rotary`` (a
    :class:`~attention_course.models.rope.ScaledRotary`) the pairs turn at a long-context checkpoint's scaled
    frequencies instead of ``base``'s."""

    fuse_projections = True

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
        q, k, v = projections(x, self.W_q, self.W_k, self.W_v, fused=self.fuse_projections)
        # The queries' and the keys' heads rotated together: one call of apply_rotary instead of two.
        heads = torch.cat([split_heads(q, self.num_heads), split_heads(k, self.num_kv_heads)], 1)
        q, k = self.rotate(heads, positions).split([self.num_heads, self.num_kv_heads], dim=1)
        return _attend_fused(self, q, k, split_heads(v, self.num_kv_heads), mask, cache)


FUSED = (FusedMultiHeadAttention, FusedGroupedQueryAttention, FusedRotaryGroupedQueryAttention)
