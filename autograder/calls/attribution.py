"""Whose fault a failed check is: the item's own or a helper's.

The item's own (a known mistake of it named where one explains the failure), or possibly that of a
graded helper it uses. The one place that decides it.

An item that uses other graded items (:attr:`~autograder.api.items.Item.uses`) is graded on its own code.
Where it runs in the sandbox (the grader), every helper it uses is the grader's stand-in
(:mod:`autograder.calls.standins`), answered with the reference's values: a failure there is the item's.
Beside the student's own helpers (a notebook's kernel, make validate), nothing takes their place, and
a failure may be a helper's: the hint says what the check can establish first.

Either way, a failure's first line says which helpers the item ran with (:func:`labelled`): the same check
of the same notebook can differ by another amount in make validate (the student's own helpers) and in make
check or make grade (correct ones), and each number is labelled with what it compares.
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
        return labelled(failure.with_hint(found, known=found), item)
    if students_own(item):
        return labelled(failure.with_hint(uses_note(item, failure.hint)), item)
    return labelled(failure, item)


def ran_with(item: Item) -> str:
    """What an item that uses graded helpers ran with, as a failure's first line says it (empty for one that
    uses none): correct ones in the grader (the stand-ins), the student's own beside them."""
    if not item.uses:
        return ""
    names = ", ".join(item.uses)
    return f" (graded with correct {names})" if in_sandbox(item) else f" (run with your own {names})"


def labelled(failure: CheckFailed, item: Item) -> CheckFailed:
    """``failure`` whose first line names the helpers the item ran with (:func:`ran_with`), once: a check that
    calls another is labelled by the inner one."""
    label = ran_with(item)
    if not label or failure.what.endswith(label):
        return failure
    return CheckFailed(
        failure.what + label,
        failure.prop,
        failure.inputs,
        failure.problem,
        failure.hint,
        failure.unwritten,
        failure.known,
    )


def uses_note(item: Item, hint: str) -> str:
    """The hint of a check run beside the student's own helpers (a notebook, make validate), where no
    stand-in can take their place: what the check can establish first, then the property's hint."""
    names = ", ".join(students_own(item))
    return (
        f"{item.name} ran here with your own {names}: if a test of those fails, fix it first (graded, "
        f"{item.name} is checked with correct ones). If they all pass: {hint}"
    )
