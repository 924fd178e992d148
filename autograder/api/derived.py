"""Inputs that a check cannot draw at random one by one: those computed from other inputs.

A backward pass takes what its forward pass saved (:func:`attention_saved`): drawn apart, the saved values would not
be those of the inputs, and correct answers that use them in different ways would differ.
"""

from __future__ import annotations

import torch

from attention_course.kernels.plain import attention
from autograder.api import specs


def attention_saved(
    *shape: int,
    n_keys: int | None = None,
    causal: bool = False,
    seed: int,
    dtype: str = "float32",
    kv_heads: int | None = None,
    memory: tuple[int, ...] = (),
) -> list[specs.Literal | specs.Laid]:
    """``[q, k, v, output, lse, grad_output]`` for a backward pass of attention, as specs: random queries
    ``shape`` = ``(..., Lq, d)``, keys and values of ``n_keys`` positions (default ``Lq``) and a gradient of the
    output, all standard normal from ``seed`` and then rounded to ``dtype`` (``"float32"``, ``"float16"``);
    ``output`` (in ``dtype``) and ``lse`` (float32) what the forward pass saves for them
    (:func:`attention_course.kernels.plain.attention`), so that every correct way of using them gives the same
    gradients. ``kv_heads``: grouped-query heads, the keys and values ``(..., kv_heads, Lk, d)`` for queries
    ``(..., H, Lq, d)``; ``memory``: how q, k, v, output and grad_output lie in memory (:func:`specs.tensor`'s: a
    strided view)."""
    if dtype not in ("float32", "float16"):
        raise ValueError(f"dtype must be 'float32' or 'float16' (NumPy has no bfloat16), got {dtype!r}")
    shape = specs.check_shape(shape)
    if len(shape) < 2:
        raise ValueError(f"the queries' shape must be (..., Lq, d), got {shape!r}")
    *lead, length, d = shape
    if kv_heads is not None:
        if len(lead) < 1 or kv_heads < 1 or lead[-1] % kv_heads:
            raise ValueError(f"kv_heads must divide the queries' heads (their shape's third last), got {kv_heads}")
        lead = [*lead[:-1], kv_heads]
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(shape, generator=generator)
    k, v = (torch.randn(*lead, n_keys or length, d, generator=generator) for _ in range(2))
    grad_output = torch.randn(shape, generator=generator)
    q, k, v, grad_output = (t.to(getattr(torch, dtype)) for t in (q, k, v, grad_output))
    output, lse = attention(q, k, v, causal)
    made = [specs.made(t) for t in (q, k, v, output, lse, grad_output)]
    return [specs.Laid(m, tuple(memory)) if memory and i != 4 else m for i, m in enumerate(made)]  # lse contiguous
