"""The attention and the gradients that a FlashAttention kernel must reproduce, computed the plain way in float64.

:func:`attention` and :func:`attention_gradients` compute what chapter 11's kernels compute from the whole matrix of
scores at once: the causal mask aligned bottom-right (FlashAttention >= 2.1), and a query that sees no key given
output 0 and gradient 0. Grouped-query heads are read as the kernels read them: ``q`` ``(..., H_q, Lq, d)`` and ``k``,
``v`` ``(..., H_kv, Lk, d)``, ``H_q`` a multiple of ``H_kv``, query head ``h`` attending to key/value head
``h // (H_q // H_kv)`` (:func:`grouped`); the gradients of ``k`` and ``v`` sum over the query heads of a group.
"""

from __future__ import annotations

import math

import torch


def grouped(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``k`` (or ``v``) with each key/value head repeated for the query heads that share it (chapter 7's GQA), the
    plain computation's way (a kernel finds the head instead: ``h // (H_q // H_kv)``); ``k`` itself where the heads
    agree. A :class:`ValueError` names ``k`` where its heads do not divide ``q``'s."""
    if q.dim() < 3 or k.dim() < 3 or q.shape[-3] == k.shape[-3]:
        return k
    heads, kv_heads = q.shape[-3], k.shape[-3]
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"k: its {kv_heads} heads must divide q's {heads} (grouped-query heads)")
    return k.repeat_interleave(heads // kv_heads, dim=-3)


def _scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    """The scaled scores q kᵀ / √d, in ``q``'s dtype, -inf where ``causal`` hides a key."""
    scores = q @ grouped(q, k).transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:  # aligned bottom-right (FlashAttention >= 2.1): query i sees keys j <= i + Lk - Lq
        lq, lk = q.shape[-2], k.shape[-2]
        visible = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(diagonal=lk - lq)
        scores = scores.masked_fill(~visible, float("-inf"))
    return scores


def _weights(scores: torch.Tensor) -> torch.Tensor:
    """The softmax of each row of ``scores``, a row that sees no key (all -inf, a causal mask with more queries
    than keys) getting weights 0 and gradients 0, not NaN."""
    hidden = torch.isinf(scores).all(dim=-1, keepdim=True) & (scores < 0).all(dim=-1, keepdim=True)
    return torch.softmax(scores.masked_fill(hidden, 0.0), dim=-1).masked_fill(hidden, 0.0)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False):
    """``(output, lse)``: softmax(q kᵀ / √d) v and the log-sum-exp of each query's scaled scores, computed in
    float64 from the whole matrix of scores and returned in ``q``'s dtype (``lse`` in float32). With ``causal`` the
    mask is aligned bottom-right, so a query that sees no key (``Lq > Lk``) gets output 0 and lse -inf."""
    scores = _scores(q.double(), k.double(), causal)
    lse = torch.logsumexp(scores, dim=-1)
    # a query that sees no key: output 0
    output = (torch.exp(scores - lse[..., None]) @ grouped(q, v.double())).nan_to_num(0.0)
    return output.to(q.dtype), lse.float()


def attention_gradients(q, k, v, grad_output, causal: bool = False):
    """``(grad_q, grad_k, grad_v)`` of ``(output * grad_output).sum()``, where output is :func:`attention`'s (a query
    that sees no key has gradient 0); with grouped-query heads, ``grad_k`` and ``grad_v`` have ``k``'s shape,
    summed over the query heads of each group."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    scores = _scores(leaves[0], leaves[1], causal)
    output = _weights(scores) @ grouped(leaves[0], leaves[2])
    grads = torch.autograd.grad(output, leaves, grad_output.double())
    return tuple(g.to(t.dtype) for g, t in zip(grads, (q, k, v)))
