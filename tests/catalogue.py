"""Known answers to graded items, and the reference code they are written from (tests/buggy, tests/correct).

A :class:`KnownAnswer` is code that a student could submit for one item; a wrong one (:class:`tests.buggy.Bug`)
is the reference with checked changes (:func:`variant`), and a correct one in another idiom
(:class:`tests.correct.Answer`) may keep the part of the reference that its idiom leaves alone
(:func:`reference_head`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from autograder.grading.classroom import solution_bodies
from autograder.release.reference import replaced

# The catalogue makes dozens of answers from each notebook's reference: read it once.
_bodies = functools.cache(solution_bodies)


@dataclass(frozen=True)
class KnownAnswer:
    name: str
    item: str
    code: str


def variant(assignment: str, item: str, *replacements: tuple[str, str]) -> str:
    """The reference answer to ``item`` with each ``(old, new)`` replacement made; each ``old`` must be there."""
    return replaced(_bodies(assignment)[item], replacements, f"{assignment}/{item}")


def reference_head(assignment: str, item: str, end: str) -> str:
    """The reference answer to ``item`` up to the line that starts with ``end`` (``"    def forward"``, or the
    question's ``"def <item>"``), without the blank lines before it: the part an answer in another idiom keeps."""
    code = _bodies(assignment)[item]
    return code[: code.index("\n" + end)].rstrip("\n") + "\n"
