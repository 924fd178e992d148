"""Position information for attention: sinusoidal encodings, and rotary position embedding.

Self-attention treats its input as a set; these functions give it the order of
the sequence. Chapter 5 shows this code piece by piece, and the exercise asks
students to write the same pieces.
"""

from __future__ import annotations

import torch
import torch.nn as nn


def _check_even(d: int, name: str) -> None:
    if d % 2 != 0:
        raise ValueError(f"{name} must be even (features come in sin/cos pairs), got {d}")


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d))."""
    _check_even(d_model, "d_model")
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model / 2,)
    angles = positions * frequencies  # (max_len, d_model / 2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.float()


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding of each position to a batch of embeddings (B, L, D)."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.size(1)
        if length > self.pe.size(0):
            raise ValueError(f"x has {length} positions (dim 1), more than max_len={self.pe.size(0)}")
        return self.dropout(x + self.pe[:length].to(x.dtype))


def apply_rotary(x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding (RoFormer) with interleaved pairs, for x (..., L, d).

    The pair (x[..., 2i], x[..., 2i+1]) at position p is rotated by the angle
    p * base^(-2i/d). ``positions`` (default ``arange(L)``) broadcasts against
    x's leading dims and L.
    """
    length, d = x.shape[-2], x.shape[-1]
    _check_even(d, "the last dimension of x")
    compute = torch.promote_types(x.dtype, torch.float32)  # angles in at least float32, also for float16 x
    if positions is None:
        positions = torch.arange(length, device=x.device)
    frequencies = base ** (-torch.arange(0, d, 2, device=x.device, dtype=compute) / d)  # (d / 2,)
    angles = positions.to(compute)[..., None] * frequencies  # (..., L, d / 2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    x0, x1 = x[..., 0::2].to(compute), x[..., 1::2].to(compute)
    rotated = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)  # (..., L, d / 2, 2)
    return rotated.flatten(-2).to(x.dtype)
