"""The cause of a failed check, where it is a known mistake of the item (:class:`~autograder.api.items.Mistake`).

The failed call is made again, and its values are compared with those of each known mistake (the
reference solution with that mistake made in it) on the same inputs. A mistake is named only when
it explains the failure on *these* inputs: its values differ from the reference solution's (a
mistake that changes nothing here, such as a guard for rows that these inputs do not have,
explains nothing) and equal the student's at the check's own tolerance. Otherwise the check's own
hint, which says what the property needs, stands.

The known mistakes come in as data (the item's own, or those its notebook's record holds:
:class:`~autograder.api.items.KnownMistakes`); this module keeps no record of them. A student's code that cannot
be replayed explains nothing, nor does a mistake whose code fails on these inputs; a mistake whose variant
cannot be built at all is the course's to mend: a :class:`~autograder.api.items.BrokenMistake` where the record
of the test cells being run is strict (a notebook's kernel, a test), else (graded) left out, at no cost to
the student.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import torch

from autograder.api import items
from autograder.api.items import Item, Mistake
from autograder.api.options import CompareOptions
from autograder.calls import standins
from autograder.calls.call import Call
from autograder.calls.compare import same
from autograder.release import course, reference


def possible(item: Item, in_sandbox: bool) -> bool:
    """Whether a failure may be diagnosed with the item's reference: always when graded; in a notebook
    only where the term releases the chapter, so that the visible tests say the same in the
    instructor's checkout as in the students' repository, on Colab or a hub (which hold no reference of
    an unreleased chapter)."""
    if in_sandbox:
        return True
    try:
        return course.release().is_released(item.assignment)
    except course.SettingsError:
        return False


def cause(item: Item, arguments: dict, known: tuple[Mistake, ...]) -> str | None:
    """The cause of the failure of a check called with ``arguments`` (by parameter name): the one of the
    ``known`` mistakes that explains it, or None."""
    if not known:
        return None
    started = time.monotonic()
    try:
        return _cause(item, arguments, known)
    finally:  # the grader adds it to the notebook's diagnosis phase (autograder.grading.timings)
        items.current_record().seconds += time.monotonic() - started


def _cause(item: Item, arguments: dict, known: tuple[Mistake, ...]) -> str | None:
    try:
        solution = reference.get(item.assignment, item.name)
    except reference.ReferenceUnavailable:  # a student's machine: the visible tests only
        return None
    call = Call.replaying(item, "replay", arguments)
    compared = CompareOptions.of(arguments)  # a check without tolerances of its own: CompareOptions' defaults
    rtol, atol = compared.rtol, compared.atol
    try:
        if call.init is not None:
            call.use_reference_weights()
        got = call.outputs(call.run())
        right = _right(call, standins.as_chosen(solution, item.free), arguments)
    except Exception:  # the student's code cannot even be replayed: nothing to compare
        return None
    for mistake in known:
        variant = items.current_record().variant(item, mistake)
        if variant is None:
            continue
        try:
            with warnings.catch_warnings():  # a mistake's own warnings (`k.T` on 3-D tensors) are the grader's
                warnings.simplefilter("ignore")
                wrong = call.outputs(call.run(standins.as_chosen(variant, item.free)))
            explains = not same(call, {name: wrong.get(name) for name in right}, right, rtol, atol)
            if explains and same(call, got, wrong, rtol, atol):
                return mistake.cause
        except Exception:  # the mistake's code fails on these inputs: it explains nothing here
            continue
    return None


def _right(call: Call, solution, arguments: dict) -> dict:
    """The right values of the call, by output name: the known answer of a check that has one (a question's
    number, which the reference gives in its own form), else what the reference solution returns."""
    if "expected" in arguments:
        name = arguments.get("output") or (call.item.outputs or ("result",))[0]
        value = np.asarray(arguments["expected"])
        return {name: torch.from_numpy(value) if call.expected_library() == "torch" else value}
    return call.outputs(call.run(solution))
