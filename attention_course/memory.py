"""How much memory the attention score matrix takes."""

from __future__ import annotations

import torch


def attention_score_bytes(
    seq_len: int,
    *,
    batch: int = 1,
    heads: int = 1,
    dtype: torch.dtype = torch.float32,
    query_len: int | None = None,
) -> int:
    """Bytes of one ``(batch, heads, query_len, seq_len)`` score (or weight) matrix.

    ``query_len`` defaults to ``seq_len`` (self-attention), which makes the
    size grow with the square of the sequence length.
    """
    for name, value in (("seq_len", seq_len), ("batch", batch), ("heads", heads)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if query_len is None:
        query_len = seq_len
    elif not isinstance(query_len, int) or query_len < 1:
        raise ValueError(f"query_len must be a positive int or None, got {query_len!r}")
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype must be a torch.dtype, got {dtype!r}")
    element_size = torch.empty((), dtype=dtype).element_size()
    return batch * heads * query_len * seq_len * element_size


def format_bytes(n: int) -> str:
    """``1536`` -> ``'1.5 KiB'``: binary units, three significant figures."""
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    value = float(n)
    for unit in units:
        if value < 1024 or unit == units[-1]:
            return f"{int(value)} B" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
