"""attention_course.positions: the code chapter 5 shows, its properties, and its agreement with the solutions."""

from __future__ import annotations

import math

import pytest
import torch

from attention_course.positions import PositionalEncoding, apply_rotary, sinusoidal_positional_encoding
from autograder import reference


def test_sinusoidal_formula_and_interleaving():
    pe = sinusoidal_positional_encoding(50, 8)
    assert pe.shape == (50, 8) and pe.dtype == torch.float32
    for p, i in [(0, 0), (7, 1), (49, 3)]:
        angle = p / 10000 ** (2 * i / 8)
        assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
        assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    with pytest.raises(ValueError, match="d_model must be even"):
        sinusoidal_positional_encoding(4, 7)


def test_a_shift_of_position_is_a_fixed_rotation():
    pe = sinusoidal_positional_encoding(120, 16).double()
    k = 9
    frequencies = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    shift = torch.zeros(16, 16, dtype=torch.float64)
    for i, w in enumerate(frequencies):
        c, s = math.cos(k * w), math.sin(k * w)
        shift[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    torch.testing.assert_close(pe[:-k] @ shift.T, pe[k:], atol=1e-6, rtol=0)


def test_positional_encoding_module():
    module = PositionalEncoding(8, max_len=10)
    x = torch.randn(3, 6, 8)
    torch.testing.assert_close(module(x), x + module.pe[:6])
    assert module(x.half()).dtype == torch.float16
    assert "pe" in module.state_dict()
    with pytest.raises(ValueError, match="max_len=10"):
        module(torch.randn(1, 11, 8))


def test_rotary_scores_depend_only_on_the_distance():
    q, k = torch.randn(2, 3, 1, 16, dtype=torch.float64), torch.randn(2, 3, 1, 16, dtype=torch.float64)
    scores = [(apply_rotary(q, torch.tensor([m])) * apply_rotary(k, torch.tensor([m - 4]))).sum(-1)
              for m in (4, 11, 300)]
    torch.testing.assert_close(scores[0], scores[1])
    torch.testing.assert_close(scores[0], scores[2])
    x = torch.randn(5, 8)
    rotated = apply_rotary(x)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))  # rotations keep lengths
    torch.testing.assert_close(rotated[0], x[0])  # position 0 is not rotated
    assert apply_rotary(x.half()).dtype == torch.float16


@pytest.mark.parametrize("name", ["sinusoidal_positional_encoding", "PositionalEncoding", "apply_rotary"])
def test_the_package_agrees_with_the_reference_solutions(name):
    theirs = reference.get("ch05_positional_encoding", name)
    if name == "sinusoidal_positional_encoding":
        torch.testing.assert_close(sinusoidal_positional_encoding(300, 32), theirs(300, 32))
    elif name == "PositionalEncoding":
        x = torch.randn(2, 7, 12)
        torch.testing.assert_close(PositionalEncoding(12, 20)(x), theirs(12, 20)(x))
    else:
        x, positions = torch.randn(2, 3, 9, 16), torch.arange(5, 14)
        torch.testing.assert_close(apply_rotary(x, positions, base=500.0), theirs(x, positions, base=500.0))
