"""Realistic wrong answers, one module per assignment.

Each module defines ``BUGS``: a list of :class:`Bug` (a name, the graded item it
breaks, the code a student might write for it, why it is wrong, and the words that
the grader's hint must use to name its cause) and ``TESTS``: for each graded item,
the grade_ids of the test cells that grade it. ``tests/test_grading.py`` submits each
bug as its own student and proves that it loses points in the tests of its item and
in no other, and that the hint of a failing test names its cause.

Each module makes its Bugs with ``bug = wrong_answers(A)``: a wrong answer is the reference solution with one
checked change (:func:`tests.catalogue.variant`), so that a bug cannot silently become the right answer;
:func:`mask_bugs` makes those that cost points in the test cell of an item's mask alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.catalogue import KnownAnswer, variant


@dataclass(frozen=True)
class Bug(KnownAnswer):
    why: str
    cause: str = ""  # words that the hint of a failing test of the item must hold (its diagnosis)
    # A mistake of one property (a mask bug) costs points in that property's test cell alone (``only``), or is
    # seen first in the visible checks of its test cell (``visible``), before the student submits.
    only: str = ""
    visible: str = ""
    # A mistake that fails several test cells of its item names its cause in the hint of each, not of one alone.
    every_hint: bool = False


def wrong_answers(assignment: str, **marks: str) -> Callable[..., Bug]:
    """``bug(name, item, *replacements, why=..., cause=...)``: the :class:`Bug` whose code is the reference answer
    to ``item`` of ``assignment`` with each ``(old, new)`` replacement made (:func:`tests.catalogue.variant`);
    ``marks`` (``only``, ``visible``) go to every Bug it makes but where the call names its own."""

    def bug(name: str, item: str, *replacements: tuple[str, str], why: str, cause: str, **own: str) -> Bug:
        return Bug(name, item, variant(assignment, item, *replacements), why, cause, **{**marks, **own})

    return bug


def mask_bugs(assignment: str, test: str) -> Callable[..., Bug]:
    """:func:`wrong_answers` for the mask bugs of an item that has a test cell of its mask, ``test``: each costs
    points in that cell alone, and its visible checks find it before the student submits."""
    return wrong_answers(assignment, only=test, visible=test)
