"""Chapter 11's causal loop counted in Triton's interpreter: the tiles of scores a causal kernel computes and masks.

A causal forward kernel gives each block of ``block_q`` queries a loop over the blocks of ``block_k`` keys up to the
diagonal. Written as one loop, every tile it computes pays for the mask (the comparison of every key with every
query, and the ``tl.where``), though only the tiles the diagonal cuts need it. Triton's tutorial runs the loop in
two stages: first the blocks of keys that every query of the block sees, wholly below the diagonal, with no mask;
then the few blocks the diagonal cuts, masked. :func:`causal_tile_counts` launches a kernel that walks both loops
as a causal forward kernel does (aligned bottom-right: query i sees the keys j <= i + Lk - Lq) and counts, with
atomic adds, each tile it would compute and whether it masks it: the interpreter's own count of the loop, not a
formula. The kernel computes no attention; the course's graded kernels are not used here.
"""

from __future__ import annotations

import functools

import torch

from attention_course.kernels.interpreter import load_triton


@functools.cache
def _walker():
    """The kernel that walks the causal loop of one block of queries per program, counting tiles (defined once
    Triton is loaded, in its interpreter)."""
    triton, tl = load_triton()

    @triton.jit
    def walk(counts, n_queries, n_keys, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, TWO_STAGES: tl.constexpr):
        block = tl.program_id(0)
        shift = n_keys - n_queries  # query i sees the keys j <= i + shift
        end = tl.minimum(n_keys, (block + 1) * BLOCK_Q + shift)  # past the last key the block's last row sees
        below = 0  # one loop: every tile is masked
        if TWO_STAGES:  # the blocks every query of the block sees whole: no mask
            below = tl.maximum(tl.minimum(n_keys, block * BLOCK_Q + shift + 1), 0) // BLOCK_K * BLOCK_K
        for _start in range(0, below, BLOCK_K):
            tl.atomic_add(counts + 0, 1)  # a tile computed without the mask
        for _start in range(below, end, BLOCK_K):
            tl.atomic_add(counts + 1, 1)  # a tile computed with it

    return triton, walk


def causal_tile_counts(
    n_queries: int, n_keys: int | None = None, block_q: int = 64, block_k: int = 64
) -> dict[str, dict[str, int]]:
    """The tiles of ``block_q x block_k`` scores a causal forward kernel computes for one head of ``n_queries``
    queries and ``n_keys`` keys (default as many), counted in Triton's interpreter: ``{"one_loop": {"tiles",
    "masked"}, "two_stages": {"tiles", "masked"}}``. Both compute the same tiles; one loop masks all of them, the
    two stages only those the diagonal cuts."""
    n_keys = n_queries if n_keys is None else n_keys
    for name, value in (("n_queries", n_queries), ("n_keys", n_keys), ("block_q", block_q), ("block_k", block_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    triton, walk = _walker()
    counts = {}
    for name, two in (("one_loop", False), ("two_stages", True)):
        tally = torch.zeros(2, dtype=torch.int32)
        walk[(triton.cdiv(n_queries, block_q),)](
            tally, n_queries, n_keys, BLOCK_Q=block_q, BLOCK_K=block_k, TWO_STAGES=two
        )
        unmasked, masked = (int(n) for n in tally)
        counts[name] = {"tiles": unmasked + masked, "masked": masked}
    return counts
