"""How a check's input tensor lies in memory: a spec's tensor made as a strided view, its dimensions permuted.

A ``(B, H, L, d)`` view of a ``(B, L, H, d)`` tensor (``x.transpose(1, 2)``), what a model's projections hand
attention, lies in memory as the dimensions ``(0, 2, 1, 3)``, outermost first: :class:`Laid` makes any spec's tensor
so (``tensor(..., memory=...)`` of :mod:`autograder.api.specs`, and chapter 11's ``attention_saved``), for checks that
ask a kernel to read it where it lies. The sandbox's wire keeps such a layout (:mod:`autograder.sandbox.values`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


def laid_in_memory(value: torch.Tensor, memory: tuple[int, ...]) -> torch.Tensor:
    """``value`` with the same values, its dimensions laid in memory in the order ``memory`` (outermost first): a
    view, as ``x.transpose(1, 2)`` of a ``(B, L, H, d)`` tensor is a ``(B, H, L, d)`` one laid as ``(0, 2, 1, 3)``;
    a :class:`ValueError` where ``value`` is no torch tensor or ``memory`` does not order its dimensions."""
    if not isinstance(value, torch.Tensor) or sorted(memory) != list(range(value.dim())):
        raise ValueError(f"memory must order the dimensions of a torch tensor, got {memory!r}")
    return value.permute(memory).contiguous().permute([memory.index(i) for i in range(len(memory))])


@dataclass(frozen=True)
class Laid:
    """The tensor that ``spec`` makes, laid in memory as ``memory`` orders its dimensions (a permutation)."""

    spec: Any
    memory: tuple[int, ...]

    def __post_init__(self):
        memory = tuple(self.memory)
        if sorted(memory) != list(range(len(memory))) or not memory:
            raise ValueError(f"memory must be a permutation of a tensor's dimensions, got {memory!r}")
        object.__setattr__(self, "memory", memory)

    def make(self, rng: np.random.Generator):
        return laid_in_memory(self.spec.make(rng), self.memory)

    def describe(self) -> str:
        return f"{self.spec.describe()}, laid in memory as the dimensions {self.memory}"

    def __getattr__(self, name: str):  # the spec's own fields (shape, dtype, library, ...)
        if name.startswith("__") or name in ("spec", "memory"):
            raise AttributeError(name)
        return getattr(self.spec, name)
