"""How much memory attention's score matrix and a layer's activations take, and a byte count's readable form."""

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


RECOMPUTATION = ("none", "selective", "full")


def megatron_activation_bytes(
    seq_len: int,
    batch_size: int,
    hidden: int,
    heads: int,
    *,
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> float:
    """Bytes of activations that one layer of a GPT model keeps for its backward pass on each GPU, by the count
    of Korthikanti et al. (2022), table 2: 16-bit activations, 1-byte dropout masks, a GELU feed-forward network
    of width ``4 * hidden``, dropout after the attention weights and after both sublayers.

    Without parallelism a layer keeps ``sbh(34 + 5as/h)`` bytes (``s`` = ``seq_len``, ``b`` = ``batch_size``,
    ``h`` = ``hidden``, ``a`` = ``heads``): ``34sbh`` from the tensors of width ``h`` or ``4h``, ``5as²b`` from
    the attention weights (the softmax's output, 2 bytes; the dropout's mask, 1; its output, 2).

    - ``tensor_parallel`` = ``t``: the attention's and the feed-forward network's insides are split across
      ``t`` GPUs (``24sbh`` and the ``5as²b``); the layer norms' inputs, the inputs of the first projections and
      the two dropout masks after the sublayers, ``10sbh``, stay whole on every GPU.
    - ``sequence_parallel``: those ``10sbh`` are split along the sequence across the same ``t`` GPUs.
    - ``recompute="selective"``: the ``5as²b`` are recomputed in the backward pass instead of kept;
      ``"full"``: every layer keeps its input alone, ``2sbh``.
    """
    for name, value in (
        ("seq_len", seq_len),
        ("batch_size", batch_size),
        ("hidden", hidden),
        ("heads", heads),
        ("tensor_parallel", tensor_parallel),
    ):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if recompute not in RECOMPUTATION:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTATION)}, got recompute={recompute!r}")
    s, b, h, a, t = seq_len, batch_size, hidden, heads, tensor_parallel
    if recompute == "full":
        return float(2 * s * b * h)
    weights = 0.0 if recompute == "selective" else 5 * a * s * s * b / t
    rest = 34 * s * b * h / t if sequence_parallel else 10 * s * b * h + 24 * s * b * h / t
    return rest + weights
