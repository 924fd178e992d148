"""Realistic wrong answers, one module per assignment.

Each module defines ``BUGS``: a list of :class:`Bug` (a name, the graded item it
breaks, the code a student might write for it, why it is wrong, and the words that
the grader's hint must use to name its cause) and ``TESTS``: for each graded item,
the grade_ids of the test cells that grade it. ``tests/test_grading.py`` submits each
bug as its own student and proves that it loses points in the tests of its item and
in no other, and that the hint of a failing test names its cause.

:func:`variant` writes a wrong answer as the reference solution with one checked
change, so that a bug cannot silently become the right answer.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from autograder.classroom import solution_bodies

# Each module of wrong answers makes dozens of variants of its notebook's reference: read it once.
_bodies = functools.cache(solution_bodies)


@dataclass(frozen=True)
class Bug:
    name: str
    item: str
    code: str
    why: str
    cause: str = ""  # words that the hint of a failing test of the item must hold (its diagnosis)
    # A mistake of one property (a mask bug) costs points in that property's test cell alone (``only``), or is
    # seen first in the visible checks of its test cell (``visible``), before the student submits.
    only: str = ""
    visible: str = ""


def variant(assignment: str, item: str, *replacements: tuple[str, str]) -> str:
    """The reference answer to ``item`` with each ``(old, new)`` replacement made; each ``old`` must be there."""
    code = _bodies(assignment)[item]
    for old, new in replacements:
        if old not in code:
            raise ValueError(f"{assignment}/{item}: {old!r} is not in the reference solution")
        code = code.replace(old, new)
    return code
