"""Attention as the later chapters and the capstone use it: masks, scaled dot-product
attention and multi-head attention.

Conventions (those of the course contract): batch first; boolean masks with
True = "this query may attend to this key", broadcastable to the scores
``(..., Lq, Lk)``; a query whose keys are all masked gets zero weights and a
zero output, never NaN; attention returns ``(output, weights)``.

Chapters 3 and 4 show this code piece by piece; the exercises ask students to
write the same pieces themselves.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, L) token ids -> bool (B, L), True at real tokens and False at padding."""
    return tokens != pad_id


def causal_mask(size: int, device=None) -> torch.Tensor:
    """bool (size, size), True where key j <= query i: no query sees a later position."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def decoder_self_attention_mask(tgt: torch.Tensor, pad_id: int) -> torch.Tensor:
    """bool (B, 1, L, L): causal and not padding, ready to broadcast over heads."""
    causal = causal_mask(tgt.size(1), device=tgt.device)
    return causal[None, None, :, :] & padding_mask(tgt, pad_id)[:, None, None, :]


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -1) -> torch.Tensor:
    """Softmax over ``dim`` that gives masked entries (mask False) exactly zero weight.

    A row whose entries are all masked would be softmax(-inf, ..., -inf) = 0/0;
    the second masked_fill turns it into zeros.
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)
    return weights.masked_fill(~mask, 0.0)


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v over any leading dims; returns (output, weights)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = masked_softmax(scores, mask)
    return weights @ v, weights


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, L, D) -> (B, H, L, D // H); head h holds features h*dh:(h+1)*dh."""
    batch, length, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide the feature size {d_model} of x")
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, L, dh) -> (B, L, H * dh), the inverse of split_heads."""
    batch, heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_head)


class MultiHeadAttention(nn.Module):
    """H attention heads in parallel, each on its own d_model / H features.

    ``fused=True`` computes the attention with ``F.scaled_dot_product_attention``,
    which picks a fused kernel where one applies (FlashAttention and
    memory-efficient kernels on a GPU) and never builds the weights: it then
    returns ``(output, None)``.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, fused: bool = False):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        self.num_heads, self.fused = num_heads, fused
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.W_q(query), self.num_heads)  # (B, H, Lq, dh)
        k = split_heads(self.W_k(key), self.num_heads)  # (B, H, Lk, dh)
        v = split_heads(self.W_v(value), self.num_heads)  # (B, H, Lk, dh)
        if self.fused:
            output, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None
        else:
            output, weights = scaled_dot_product_attention(q, k, v, mask)
        return self.W_o(merge_heads(output)), weights


def to_torch_multihead(module: MultiHeadAttention) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention(batch_first=True)`` holding the same weights as ``module``."""
    d_model = module.W_q.in_features
    bias = module.W_q.bias is not None
    builtin = nn.MultiheadAttention(d_model, module.num_heads, bias=bias, batch_first=True)
    builtin = builtin.to(device=module.W_q.weight.device, dtype=module.W_q.weight.dtype)
    with torch.no_grad():
        builtin.in_proj_weight.copy_(torch.cat([module.W_q.weight, module.W_k.weight, module.W_v.weight]))
        builtin.out_proj.weight.copy_(module.W_o.weight)
        if bias:
            builtin.in_proj_bias.copy_(torch.cat([module.W_q.bias, module.W_k.bias, module.W_v.bias]))
            builtin.out_proj.bias.copy_(module.W_o.bias)
    return builtin


def to_torch_attn_mask(mask: torch.Tensor, batch: int, num_heads: int, q_len: int, k_len: int) -> torch.Tensor:
    """The course's mask (True = attend, broadcastable to (B, H, Lq, Lk)) as ``nn.MultiheadAttention``'s
    ``attn_mask``: True = may NOT attend, shaped (B * H, Lq, Lk)."""
    full = mask.expand(batch, num_heads, q_len, k_len)
    return ~full.reshape(batch * num_heads, q_len, k_len)
