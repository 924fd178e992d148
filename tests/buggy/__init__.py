"""Realistic wrong answers, one module per assignment.

Each module defines ``BUGS``: a list of :class:`Bug` (a name, the graded item it
breaks, the code a student might write for it) and ``TESTS``: for each graded
item, the grade_ids of the test cells that grade it. The suite in
``tests/test_grading.py`` submits each bug as its own student and proves that
it loses points in the tests of its item.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bug:
    name: str
    item: str
    code: str
    why: str
