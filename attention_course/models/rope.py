"""Rotary frequencies as published checkpoints set them: RoPE's base and the linear, Llama 3 and YaRN scalings.

Chapter 5's rotary embedding turns the pair ``i`` of a head of ``d`` features by ``p * base^(-2i/d)`` at
position ``p``. Models trained on short contexts and stretched to long ones change those inverse frequencies
(``config.json``'s ``rope_scaling``, which ``transformers`` 5 writes as ``rope_parameters``):

- ``linear`` (position interpolation): every frequency divided by ``factor``;
- ``llama3`` (Llama 3.1 and 3.2): the slow pairs divided by ``factor``, the fast ones kept, a blend between
  (chapter 5's exercise, :func:`~attention_course.solutions.ch05_positional_encoding.llama3_inverse_frequencies`);
- ``yarn`` (Qwen, DeepSeek and others): the same three bands, set by how many turns each pair makes over the
  original context, and an attention temperature: queries and keys both multiplied by ``0.1 ln(factor) + 1``.

:class:`ScaledRotary` turns a layer's queries and keys with such frequencies.
"""

from __future__ import annotations

import math

import torch

SCALINGS = ("default", "linear", "llama3", "yarn")


def rope_parameters(config: dict) -> dict:
    """The rotary settings of a ``config.json``: its ``rope_parameters`` (or the older ``rope_scaling``), with
    ``rope_type``, ``rope_theta`` and, for the scalings, ``original_max_position_embeddings`` filled in as
    ``transformers`` fills them."""
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    rope.setdefault("rope_type", rope.get("type", "default"))
    rope.setdefault("rope_theta", config.get("rope_theta", 10000.0))
    if rope["rope_type"] in ("llama3", "yarn"):
        original = config.get("original_max_position_embeddings")  # Phi-3 keeps it outside, and it wins there
        if original is not None:
            rope["original_max_position_embeddings"] = original
        rope.setdefault("original_max_position_embeddings", config["max_position_embeddings"])
    return rope


def inverse_frequencies(head_dim: int, rope: dict, max_position_embeddings: int) -> tuple[torch.Tensor, float]:
    """``(inverse frequencies (head_dim / 2,) float32, attention factor)`` for the settings ``rope`` (as
    :func:`rope_parameters` gives them); a ValueError naming the setting where the course has no such scaling."""
    kind = rope["rope_type"]
    if kind not in SCALINGS:
        raise ValueError(
            f"rope_type {kind!r} is not one the course computes ({', '.join(SCALINGS)}): 'dynamic' changes the "
            f"frequencies with each input's length, and 'longrope' keeps a factor per pair"
        )
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"partial_rotary_factor={rope['partial_rotary_factor']}: the course rotates every feature")
    base = float(rope["rope_theta"])
    default = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    if kind == "default":
        return default, 1.0
    if kind == "linear":
        return default / rope["factor"], 1.0
    if kind == "llama3":
        from attention_course.solutions.ch05_positional_encoding import llama3_inverse_frequencies

        keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        return llama3_inverse_frequencies(head_dim, base, **{key: rope[key] for key in keys}), 1.0
    return yarn(default, base, rope, max_position_embeddings)


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def yarn(default: torch.Tensor, base: float, rope: dict, max_position_embeddings: int) -> tuple[torch.Tensor, float]:
    """YaRN's "NTK-by-parts" frequencies and attention factor (Peng et al., 2023), from the ``default`` ones.

    A pair that turns more than ``beta_fast`` (32) times over the original context keeps its frequency; one
    that turns fewer than ``beta_slow`` (1) times is interpolated (divided by ``factor``); a linear ramp over
    the pair index blends the two between.
    """
    original = rope["original_max_position_embeddings"]
    factor = rope.get("factor") or max_position_embeddings / original
    attention = rope.get("attention_factor")
    if attention is None:
        mscale, mscale_all_dim = rope.get("mscale"), rope.get("mscale_all_dim")
        if mscale and mscale_all_dim:  # DeepSeek's form: a ratio of two temperatures
            attention = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention = _yarn_mscale(factor)
    dim = 2 * default.numel()

    def pair_turning(turns: float) -> float:  # the (fractional) pair index that turns `turns` times
        return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_turning(rope.get("beta_fast") or 32), pair_turning(rope.get("beta_slow") or 1)
    if rope.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / max(high - low, 1e-3)).clamp(0, 1)
    return default * (1 - ramp) + default / factor * ramp, float(attention)


class ScaledRotary:
    """Turns queries or keys (..., L, d) at their positions with the frequencies of ``rope``: chapter 5's
    interleaved pairs, each multiplied by the attention factor. The frequencies are computed on first use,
    on the inputs' device."""

    def __init__(self, head_dim: int, rope: dict, max_position_embeddings: int):
        inverse_frequencies(head_dim, rope, max_position_embeddings)  # a bad setting fails here, not later
        self.head_dim, self.rope, self.max_position_embeddings = head_dim, dict(rope), max_position_embeddings
        self._frequencies: dict[torch.device, tuple[torch.Tensor, float]] = {}

    def __call__(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if x.device not in self._frequencies:
            with torch.device("cpu"):
                inverse, factor = inverse_frequencies(self.head_dim, self.rope, self.max_position_embeddings)
            self._frequencies[x.device] = inverse.to(x.device), factor
        inverse, factor = self._frequencies[x.device]
        angles = positions.to(torch.float32)[..., None] * inverse  # (..., L, d / 2)
        cos, sin = (angles.cos() * factor).to(x.dtype), (angles.sin() * factor).to(x.dtype)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)

    def __repr__(self) -> str:
        return f"ScaledRotary({self.rope})"
