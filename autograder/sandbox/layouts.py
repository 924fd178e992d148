"""Whether a tensor of a replayed launch holds one of the grader's own tensors, in whatever layout the launch used.

The grader recognises its tensors by their values: a launch's tensor that holds one of the check's inputs (reshaped,
its dimensions permuted, scaled, cast, or padded with zeros past each sequence's end) is that input. The grader's
side (:mod:`autograder.calls.launches`) reads the record with it, to fill the replay's tensors with its own copies;
the replay (:mod:`autograder.sandbox.replay`) reads with it what the replayed kernels wrote, so that a scratch copy
of the queries or keys is still the queries or keys it was copied from. Torch alone.
"""

from __future__ import annotations

import itertools
import math

import torch


def canonical(tensor: torch.Tensor) -> torch.Tensor:
    """``(N, L, d)`` of a tensor ``(..., L, d)``; ``(N, L)`` of one ``(..., L)`` with one dimension (an lse)."""
    if tensor.dim() >= 3:
        return tensor.reshape(-1, *tensor.shape[-2:])
    return tensor.reshape(-1, tensor.shape[-1]) if tensor.dim() == 2 else tensor.reshape(1, -1)


def matching(data: torch.Tensor, canon: torch.Tensor, loose: bool = False) -> tuple[tuple, float] | None:
    """``(permutation, scale)`` such that ``data`` holds ``scale * canon.permute(permutation)`` (flattened), or None;
    an infinity of ``canon`` (the lse of a query that sees no key) must be there too, scaled, and never a NaN."""
    if data is None or data.numel() != canon.numel() or not data.numel():
        return None
    flat = data.detach().double().reshape(-1)
    rtol = 1e-2 if loose or data.dtype in (torch.float16, torch.bfloat16) else 1e-4
    for permutation in itertools.permutations(range(canon.dim())):
        ref = canon.detach().double().permute(permutation).reshape(-1)
        finite = torch.isfinite(ref)
        norm = float(ref[finite] @ ref[finite])
        if not math.isfinite(norm) or norm == 0 or ref.isnan().any():
            continue
        scale = float(flat[finite] @ ref[finite]) / norm
        if not math.isfinite(scale) or scale == 0:
            continue
        if abs(scale - 1) < 1e-6:
            scale = 1.0
        if not torch.equal(flat[~finite], scale * ref[~finite]):
            continue
        atol = rtol * float(ref[finite].abs().max()) * abs(scale)
        if torch.allclose(flat[finite], scale * ref[finite], rtol=rtol, atol=atol, equal_nan=False):
            return permutation, scale
    return None


def laid_out(data: torch.Tensor | None, canon: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """What the grader puts in a tensor that holds ``canon`` (one of its own, canonical): its own copy, laid out as
    ``data`` holds it (dimensions permuted, scaled, cast, or padded with zeros past each sequence's end), flat, and
    the row (``n * L + l``) of each element, -1 in the padding; None where ``data`` holds no such thing."""
    heads, length = canon.shape[:2]
    grid = torch.arange(heads)[:, None] * length + torch.arange(length)[None, :]
    grid = grid[..., None].expand(canon.shape) if canon.dim() == 3 else grid
    found = matching(data, canon)
    if found is not None:
        permutation, scale = found
        return (scale * canon.double().permute(permutation)).reshape(-1), grid.permute(permutation).reshape(-1)
    flat = _padded(data, canon)
    if flat is None or flat[:, length:].any():
        return None
    found = matching(flat[:, :length].contiguous(), canon)
    if found is None or found[0] != tuple(range(canon.dim())):
        return None
    values = torch.zeros(flat.shape, dtype=torch.float64)
    values[:, :length] = found[1] * canon.double()
    numbers = torch.full(flat.shape, -1, dtype=torch.int64)
    numbers[:, :length] = grid
    return values.reshape(-1), numbers.reshape(-1)


def _padded(data: torch.Tensor | None, canon: torch.Tensor) -> torch.Tensor | None:
    """``data`` read as ``canon``'s sequences with more rows each (``(N, L', ...)``, ``L' > L``: a padded buffer),
    or None where it cannot be."""
    heads, length = canon.shape[:2]
    if data is None or data.dim() < 2 or data.numel() <= canon.numel() or data.numel() % heads:
        return None
    flat = canonical(data) if canon.dim() == 3 else data.reshape(heads, -1)
    if flat.dim() != canon.dim() or flat.shape[0] != heads or flat.shape[2:] != canon.shape[2:]:
        return None
    return flat if flat.shape[1] > length else None


def agrees(data: torch.Tensor | None, canon: torch.Tensor, rtol: float, atol: float, equal_nan: bool = False) -> bool:
    """Whether ``data`` holds ``canon`` (a reference, canonical) to the tolerances, laid out any way
    :func:`laid_out` reads (no scale: the values themselves), in its first rows where it is padded; an infinity
    where the reference has the same one, a NaN only where it has one too and ``equal_nan``."""
    if data is None or not data.numel():
        return False
    if data.dtype in (torch.float16, torch.bfloat16):
        rtol, atol = max(rtol, 1e-2), max(atol, 1e-2)
    values = data.detach().double()
    if values.numel() == canon.numel():
        flat = values.reshape(-1)
        for permutation in itertools.permutations(range(canon.dim())):
            ref = canon.detach().double().permute(permutation).reshape(-1)
            if bool(torch.isclose(flat, ref, rtol=rtol, atol=atol, equal_nan=equal_nan).all()):
                return True
        return False
    length = canon.shape[1]
    flat = _padded(values, canon)
    if flat is None:
        return False
    return bool(torch.isclose(flat[:, :length], canon.double(), rtol=rtol, atol=atol, equal_nan=equal_nan).all())
