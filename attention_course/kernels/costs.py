"""Chapter 11's costs and variants of attention, computed the plain way beside the kernels.

A causal mask's two alignments, Flash-Decoding's split over the keys, and the FLOPs and fewest bytes of a head's
attention (the chapter's roofline)."""

from __future__ import annotations

import torch

from attention_course.kernels.plain import attention


def causal_mask(lq: int, lk: int, align: str = "top-left") -> torch.Tensor:
    """The keys each of ``lq`` queries sees among ``lk`` keys under a causal mask, aligned ``"top-left"`` (query i
    sees keys j <= i: SDPA's ``is_causal``) or ``"bottom-right"`` (the last query sees the last key: query i sees
    keys j <= i + lk - lq, FlashAttention 2.1 on and the course's kernels, a cache's new queries after its old keys)."""
    if align not in ("top-left", "bottom-right"):
        raise ValueError(f"align must be 'top-left' or 'bottom-right', got {align!r}")
    shift = 0 if align == "top-left" else lk - lq
    return torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=shift)


def split_kv_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunks: int):
    """Flash-Decoding's split over the keys: each of ``chunks`` chunks of ``k`` and ``v`` gives its partial output
    and log-sum-exp (:func:`attention` on the chunk), and the partials combine exactly, each weighted by
    e^(its lse - the whole lse). Returns ``(output, lse)``, as :func:`attention` does for the whole."""
    if not 1 <= chunks <= k.shape[-2]:
        raise ValueError(f"chunks must be between 1 and the number of keys ({k.shape[-2]}), got {chunks}")
    partial = [attention(q, kc, vc) for kc, vc in zip(k.tensor_split(chunks, -2), v.tensor_split(chunks, -2))]
    outputs = torch.stack([o.double() for o, _ in partial])
    lses = torch.stack([lse.double() for _, lse in partial])
    lse = torch.logsumexp(lses, dim=0)
    output = (torch.exp(lses - lse)[..., None] * outputs).sum(dim=0)
    return output.to(q.dtype), lse.float()


def attention_flops(lq: int, lk: int, head_dim: int, causal: bool = False) -> dict[str, int]:
    """Matrix-product FLOPs of one head's attention (2 per multiply-add), over the (query, key) pairs the mask keeps
    (top-left): ``forward`` (S = Q Kᵀ and P V: 4 d per pair), ``backward_five`` (FlashAttention-2's five tile
    products: S, dP, dV, dK, dQ) and ``backward_seven`` (the course's two kernels: S and dP in each, seven)."""
    for name, value in (("lq", lq), ("lk", lk), ("head_dim", head_dim)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    pairs = int(causal_mask(lq, lk).sum()) if causal else lq * lk
    product = 2 * pairs * head_dim
    return {"forward": 2 * product, "backward_five": 5 * product, "backward_seven": 7 * product}


def fused_forward_bytes(lq: int, lk: int, head_dim: int, element_bytes: int) -> int:
    """Bytes a fused forward pass of one head must move at least: Q, K and V read once, O written once (each
    ``element_bytes`` per number), and one float32 log-sum-exp per query."""
    return (2 * lq + 2 * lk) * head_dim * element_bytes + 4 * lq
