"""Chapter 11's costs and variants of attention, computed the plain way beside the kernels.

A causal mask's two alignments, Flash-Decoding's split over the keys, the FLOPs and fewest bytes of a head's
attention, the FLOPs a byte that one program of the forward kernel requests, the registers of its tiles, and the
H100's rates that bound them (the chapter's roofline)."""

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


# The H100 SXM5 (compute capability 9.0) as chapter 11's cost argument uses it. NVIDIA's H100 architecture white
# paper gives its 132 SMs, its 50 MB of L2 cache and its dense FP16/BF16 tensor-core peak, 989.4 TFLOP/s, which is
# 4,096 FLOPs a clock on each SM at 1.83 GHz; the CUDA programming guide gives, for compute capability 9.0, 16
# results a clock on each SM of the special-function units (exp2, log2, reciprocal: FlashAttention-3's 3.9 TFLOP/s),
# 64 K 32-bit registers an SM, at most 255 a thread, 64 resident warps an SM and 227 KiB of shared memory a block.
H100_SXM = {
    "sms": 132,
    "clock_hz": 1.83e9,
    "tensor_flops_per_clock_per_sm": 4096,
    "special_functions_per_clock_per_sm": 16,
    "l2_bytes": 50e6,
    "registers_per_sm": 65536,
    "max_registers_per_thread": 255,
    "max_warps_per_sm": 64,
    "shared_memory_per_block": 227 * 1024,
}


def forward_program_intensity(block_q: int, lk: int, head_dim: int, element_bytes: int) -> float:
    """FLOPs per byte that one program of the non-causal forward kernel requests from memory: its ``block_q``
    queries against all ``lk`` keys (4 d FLOPs a pair), over the bytes it loads and stores (its queries, every key
    and value, its outputs, each ``element_bytes`` a number, and a float32 log-sum-exp a query). About ``block_q``
    FLOPs a byte in 16 bits, whatever the length: the keys and values are read again by every program."""
    for name, value in (("block_q", block_q), ("lk", lk), ("head_dim", head_dim), ("element_bytes", element_bytes)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    flops = 4 * block_q * lk * head_dim
    moved = (2 * block_q + 2 * lk) * head_dim * element_bytes + 4 * block_q
    return flops / moved


def tile_registers(block_q: int, block_k: int, head_dim: int, num_warps: int) -> int:
    """32-bit registers a thread needs for a program's float32 tiles alone, its (block_q, block_k) scores and its
    (block_q, head_dim) output accumulator, spread over ``num_warps`` warps of 32 threads (the compiler needs more:
    addresses, m and l, the operands of the products)."""
    for name, value in (("block_q", block_q), ("block_k", block_k), ("head_dim", head_dim), ("num_warps", num_warps)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    return -(-(block_q * block_k + block_q * head_dim) // (32 * num_warps))
