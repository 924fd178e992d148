"""A self-attention module's key/value cache as checks read it: the pair it returned, the masks of new positions.

The look-ahead mask of new positions after cached ones is :func:`causal_block`.
"""

from __future__ import annotations

import torch

from autograder.calls.call import Call


def cache_pair(call: Call, got: dict) -> tuple:
    """The cache that a self-attention module with a key/value cache returned (its outputs by name)."""
    cache = tuple(got[f"cache[{i}]"] for i in range(2)) if "cache[1]" in got else got.get("cache")
    if not isinstance(cache, tuple) or len(cache) != 2:
        call.fail("the returned cache is not a pair (keys, values)")
    return cache


def causal_block(start: int, length: int) -> torch.Tensor:
    """The look-ahead mask of ``length`` new positions after ``start`` cached ones: (length, start + length)."""
    queries = torch.arange(start, start + length)[:, None]
    return torch.arange(start + length)[None, :] <= queries
