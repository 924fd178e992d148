"""How a returned value differs from the expected one, in words that never give it away unless it is public.

Comparing what an item returned with what it should have: :func:`compare` fails a call with a
message that says how the values differ (never what they should be, unless the check says the expected
value is public: a visible test's known answer, :func:`autograder.api.items.known_answers_shown`; then both
values are shown, in short), :func:`same` only answers."""

from __future__ import annotations

import numpy as np

from autograder.api.items import dimensions, shape_difference
from autograder.api.options import CompareOptions
from autograder.calls.call import Call

# A failure at the checks' default tolerances (a check that sets none compares the formula, not its precision) where
# every entry is within NEAR_MISS times what the tolerance allows it: what differs is of the size that rounding makes,
# and the check's own hint, which names what a wrong formula misses, would name a mistake the values do not show.
NEAR_MISS = 10.0
NEAR_MISS_HINT = (
    "every entry is within ten times the allowed difference: the values are nearly right, and what differs is of the "
    "size that rounding makes; look for a step that loses precision that the formula keeps, such as a large number "
    "rounded and then subtracted back, or an intermediate in a narrower dtype"
)


def compare(
    call: Call,
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    rtol: float,
    atol: float,
    against: str = "the reference solution",
    public: bool = False,
) -> None:
    """Fail ``call`` where ``got`` differs from ``want`` beyond the tolerances, saying how; where ``want`` is
    ``public``, the message shows both values too (:func:`shown`)."""
    if public:
        call = _Showing(call, got, want, against, rtol, atol)
    if got.shape != want.shape:
        call.fail(shape_difference(name, got.shape, want.shape, f"{against} gives"))
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
            f"(allowed: {atol:g} + {rtol:g} x |value|), and {wrong.mean():.0%} of its entries are off",
            NEAR_MISS_HINT if _near_miss(diff, want, rtol, atol) else None,
        )


def _near_miss(diff: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> bool:
    """Whether values that differ by ``diff`` (0 where either is not finite, both alike there) miss ``want`` by no
    more than rounding would, at the default tolerances only (:data:`NEAR_MISS`)."""
    if (rtol, atol) != (CompareOptions.rtol, CompareOptions.atol):
        return False
    allowed = atol + rtol * np.abs(np.where(np.isfinite(want), want, 0.0))
    return bool((diff <= NEAR_MISS * allowed).all())


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


# A value shown in a failure's message: whole up to this many entries, else its shape and its first entries.
SHOWN_ENTRIES = 12


class _Showing:
    """A call whose failures end with the value returned and the expected one (public: a visible test's known
    answer), each in short (:func:`shown`), and where they differ first."""

    def __init__(self, call: Call, got: np.ndarray, want: np.ndarray, against: str, rtol: float, atol: float):
        self._call, self._got, self._want, self._against = call, got, want, against
        self._tolerances = {"rtol": rtol, "atol": atol}

    def fail(self, problem: str, hint: str | None = None):
        lines = [problem, f"returned: {shown(self._got)}", f"{self._against}: {shown(self._want)}"]
        if self._got.shape == self._want.shape and self._got.size > SHOWN_ENTRIES:
            if self._want.dtype == bool or self._got.dtype == bool:
                differ = self._got != self._want
            else:
                differ = ~np.isclose(self._got, self._want, equal_nan=True, **self._tolerances)
            if differ.any():
                where = tuple(int(i) for i in np.argwhere(differ)[0])
                lines.append(
                    f"first difference at index {where}: returned {_entry(self._got[where])}, "
                    f"{self._against} {_entry(self._want[where])}"
                )
        self._call.fail("\n    ".join(lines), hint)


def shown(value: np.ndarray) -> str:
    """``value`` in a line: whole where it has at most :data:`SHOWN_ENTRIES` entries, else its shape and its
    first entries (four significant digits); an empty one by its number of dimensions alone (it may have any
    shape, and its nested lists could be as many as its first dimension says)."""
    value = np.asarray(value)
    if value.size == 0:
        return f"an empty array of {dimensions(value.ndim)}"
    if value.size <= SHOWN_ENTRIES:
        return _nested(value)
    first = ", ".join(_entry(entry) for entry in value.reshape(-1)[:6])
    return f"shape {value.shape}, first entries (flattened) [{first}, ...]"


def _nested(value: np.ndarray) -> str:
    return _entry(value[()]) if value.ndim == 0 else f"[{', '.join(_nested(part) for part in value)}]"


def _entry(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    return str(int(value)) if isinstance(value, (int, np.integer)) else f"{float(value):.4g}"
