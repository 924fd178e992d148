"""Whose fault a failed check is: the item's own or a helper's.

The item's own (a known mistake of it named where one explains the failure), or possibly that of a
graded helper it uses. The one place that decides it.

An item that uses other graded items (:attr:`~autograder.api.items.Item.uses`) is graded on its own code.
Where it runs in the sandbox (the grader), every helper it uses is the grader's stand-in
(:mod:`autograder.calls.standins`), answered with the reference's values: a failure there is the item's.
Beside the student's own helpers (a notebook's kernel, make validate), nothing takes their place, and
a failure may be a helper's: the hint says what the check can establish first.
"""

from __future__ import annotations

from autograder.api.items import CheckFailed, Item, Mistake
from autograder.calls import diagnosis
from autograder.calls.call import is_remote


def in_sandbox(item: Item) -> bool:
    """Whether the item's checks call it in the sandbox, where the grader's stand-ins take its helpers' place."""
    return is_remote(item.obj)


def stood_in(item: Item) -> tuple[str, ...]:
    """The helpers that the grader's stand-ins replace while the item is checked: all those it uses, in
    the sandbox; none beside the student's own."""
    return item.uses if in_sandbox(item) else ()


def students_own(item: Item) -> tuple[str, ...]:
    """The helpers that run as the student's own code while the item is checked: a failure may be theirs."""
    return () if in_sandbox(item) else item.uses


def explained(
    failure: CheckFailed, item: Item, arguments: dict, known: tuple[Mistake, ...], diagnose: bool = True
) -> CheckFailed:
    """``failure`` of a check of ``item`` called with ``arguments`` (by parameter name), its hint saying
    whose fault it is: the cause of the one of the ``known`` mistakes that explains it (where ``diagnose``
    and :func:`diagnosis.possible`); else, beside the student's own helpers, that they may be at fault
    (:func:`uses_note`); else the check's own hint, the item's fault."""
    found = diagnosis.cause(item, arguments, known) if diagnose and diagnosis.possible(item, in_sandbox(item)) else None
    if found:
        return failure.with_hint(found)
    if students_own(item):
        return failure.with_hint(uses_note(item, failure.hint))
    return failure


def uses_note(item: Item, hint: str) -> str:
    """The hint of a check run beside the student's own helpers (a notebook, make validate), where no
    stand-in can take their place: what the check can establish first, then the property's hint."""
    names = ", ".join(students_own(item))
    return (
        f"{item.name} ran here with your own {names}: if a test of those fails, fix it first (graded, "
        f"{item.name} is checked with correct ones). If they all pass: {hint}"
    )
