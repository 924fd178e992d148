"""Correct answers written in other idioms, one module per assignment.

Each module defines ``ANSWERS``: a list of :class:`Answer` (a name, the graded item,
the code, and what makes it different from the reference: einsum instead of
matmul, a loop over heads, float64 intermediates, another way to mask, extra
buffers...). ``tests/test_grading.py`` grades them, several answers per notebook
(the k-th answer of every item in notebook k), and proves that every one gets
full marks: the grader accepts any right answer, not only the reference's idiom.
What an idiom keeps of the reference (a class's ``__init__``, a question's options) is read from the
reference with :func:`tests.catalogue.reference_head`; what several idioms of a class write alike (the layers
that the assignment names) is written once, as a skeleton that each answer fills in (:func:`fill_in`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.catalogue import KnownAnswer


@dataclass(frozen=True)
class Answer(KnownAnswer):
    idiom: str


def notebooks(answers: list[Answer]) -> list[dict[str, Answer]]:
    """The answers grouped so that notebook k holds the k-th answer of every item (item -> answer)."""
    by_item: dict[str, list[Answer]] = {}
    for answer in answers:
        by_item.setdefault(answer.item, []).append(answer)
    depth = max((len(found) for found in by_item.values()), default=0)
    return [{item: found[k] for item, found in by_item.items() if k < len(found)} for k in range(depth)]


def fill_in(skeleton: str, **parts: str) -> str:
    """``skeleton`` with each line that holds only the name of one of ``parts`` replaced by that part."""
    for name, part in parts.items():
        if skeleton.count(f"\n{name}\n") != 1:
            raise ValueError(f"{name} is not a line of the skeleton")
        skeleton = skeleton.replace(f"\n{name}\n", "\n" + part)
    return skeleton
