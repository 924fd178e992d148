"""How a returned value differs from the expected one, in words that never give it away.

Comparing what an item returned with what it should have: :func:`compare` fails a call with a
message that says how the values differ (never what they should be), :func:`same` only answers."""

from __future__ import annotations

import numpy as np

from autograder.calls import Call


def compare(
    call: Call,
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    rtol: float,
    atol: float,
    against: str = "the reference solution",
) -> None:
    if got.shape != want.shape:
        call.fail(f"{name} has shape {got.shape}, but {against} gives shape {want.shape}")
    if want.dtype == bool:
        if got.dtype != bool:
            call.fail(
                f"{name} has a numeric dtype; expected a boolean mask (torch.bool, True = may attend)",
                "a mask is boolean from start to end: True where a query may attend, never 0/1 numbers",
            )
        extra, missing = int((got & ~want).sum()), int((~got & want).sum())
        if extra or missing:
            call.fail(
                f"{name} differs from {against}: {extra} entries are True where they should be False "
                f"and {missing} are False where they should be True, of {want.size}"
            )
        return
    got_bad, want_bad = ~np.isfinite(got), ~np.isfinite(want)
    if (got_bad & ~want_bad).any():
        call.fail(
            f"{name} contains NaN or inf where {against} is finite",
            "NaN and inf come from exponentials of large numbers, or from a row whose entries are all masked",
        )
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        if want.size == 1:  # one number: its distance from the answer would give the answer away
            call.fail(f"{name} differs from {against} (allowed: {atol:g} + {rtol:g} x |value|)")
        diff = np.abs(np.where(want_bad | got_bad, 0.0, got - want))
        wrong = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        call.fail(
            f"{name} differs from {against}: the largest difference is {diff.max():.3g} "
            f"(allowed: {atol:g} + {rtol:g} x |value|), and {wrong.mean():.0%} of its entries are off"
        )


def same(call: Call, got: dict, want: dict, rtol: float, atol: float) -> bool:
    """Whether two calls' outputs (by name) are equal within the tolerance (exactly, for masks)."""
    if set(got) != set(want):
        return False
    for name in want:
        a, b = call.as_numpy(got[name], name), call.as_numpy(want[name], name)
        if a.shape != b.shape or (a.dtype == bool) != (b.dtype == bool):
            return False
        if not (np.array_equal(a, b) if b.dtype == bool else np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)):
            return False
    return True
