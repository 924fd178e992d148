"""Every known mistake and every correct idiom of the course, graded in the sandbox.

Each wrong answer of tests/buggy/ is one notebook (the reference everywhere else), and each notebook
of tests/correct/ holds the k-th correct answer of every item; each is graded on its own by
:func:`autograder.grading.notebook.grade_notebook`, the function that `make grade` runs for every
submission (tests/test_grading.py takes a class through the rest of the pipeline: nbgrader's
gradebook, feedback and the CSV, which copy these reports' points and messages). So every realistic
mistake must lose points in its own item and in no other, with a hint that names its cause, and
right answers in other idioms must keep full marks.

As :func:`tests.grading_accuracy.graded` grades them: each in a worker forked from a warm sandbox, and each
wrong answer on its own item's test cells, but the first of each item, graded whole (tests/test_catalogue_rules.py
proves that a wrong answer cannot reach another item). ``pytest --exhaustive`` (`make test-exhaustive`) grades
every notebook whole, each in a sandbox of its own.
"""

from __future__ import annotations

import importlib

import pytest

from attention_course.tooling import notebooks
from autograder.release import course
from tests import grading_accuracy
from tests.correct import notebooks as correct_notebooks

pytestmark = pytest.mark.slow

ASSIGNMENTS = course.assignments()
BUG_MODULES = {a: importlib.import_module(f"tests.buggy.{a}") for a in ASSIGNMENTS}
CORRECT = {a: correct_notebooks(importlib.import_module(f"tests.correct.{a}").ANSWERS) for a in ASSIGNMENTS}


_GRADED: dict[str, dict] = {}


def catalogue(assignment: str, exhaustive: bool, store) -> dict:
    """{"bug_<name>" or "correct_<k>": Report} of ``assignment``, graded once, two notebooks at a time."""
    if assignment not in _GRADED:
        reports, k = {}, 0
        for kind, what, report in grading_accuracy.graded(assignment, jobs=2, whole=exhaustive, store=store):
            if kind == "bug":
                reports[f"bug_{what.name}"] = report
            else:
                reports[f"correct_{k}"] = report
                k += 1
        _GRADED[assignment] = reports
    return _GRADED[assignment]


def failed(report) -> dict[str, str]:
    """grade_id -> the message of each failed test."""
    return {gid: test.message for gid, test in report.tests.items() if not test.passed}


@pytest.mark.parametrize(
    "assignment,bug",
    [(a, b) for a in ASSIGNMENTS for b in BUG_MODULES[a].BUGS],
    ids=lambda v: getattr(v, "name", v),
)
def test_each_buggy_submission_loses_points_in_its_item_and_no_other(assignment, bug, exhaustive, reports):
    report = catalogue(assignment, exhaustive, reports)[f"bug_{bug.name}"]
    assert not report.not_graded, report.not_graded
    assert report.max_score > 0 and report.score < report.max_score, f"{bug.name} ({bug.why}) kept full marks"
    item_tests = set(BUG_MODULES[assignment].TESTS[bug.item])
    assert item_tests <= set(report.tests), f"{bug.name} was not graded on {sorted(item_tests - set(report.tests))}"
    assert set(failed(report)) <= item_tests, (
        f"{bug.name} ({bug.why}), a mistake in {bug.item}, "
        f"also lost points in {sorted(set(failed(report)) - item_tests)}"
    )
    if bug.only:  # a mistake of one property costs points in that property's test cell alone
        assert set(failed(report)) == {bug.only}, f"{bug.name} ({bug.why}) lost points in {sorted(failed(report))}"


@pytest.mark.parametrize(
    "assignment,bug",
    [(a, b) for a in ASSIGNMENTS for b in BUG_MODULES[a].BUGS],
    ids=lambda v: getattr(v, "name", v),
)
def test_the_hint_names_the_cause_of_each_buggy_submission(assignment, bug, exhaustive, reports):
    messages = failed(catalogue(assignment, exhaustive, reports)[f"bug_{bug.name}"])
    hints = [line for message in messages.values() for line in message.splitlines() if line.strip().startswith("hint:")]
    assert any(bug.cause.lower() in hint.lower() for hint in hints), (
        f"{bug.name} ({bug.why}): no hint names its cause ({bug.cause!r}); the hints were {hints}"
    )
    if bug.every_hint:  # each failing test cell's hint names it, not one of them alone
        unnamed = {
            test: message
            for test, message in messages.items()
            if not any(bug.cause.lower() in line.lower() for line in message.splitlines() if "hint:" in line)
        }
        assert not unnamed, f"{bug.name} ({bug.why}): the hints of {sorted(unnamed)} do not name {bug.cause!r}"


@pytest.mark.parametrize("assignment,k", [(a, k) for a in ASSIGNMENTS for k in range(len(CORRECT[a]))])
def test_correct_answers_in_other_idioms_get_full_marks(assignment, k, exhaustive, reports):
    report = catalogue(assignment, exhaustive, reports)[f"correct_{k}"]
    answers = CORRECT[assignment][k]
    assert not report.not_graded, report.not_graded
    assert report.max_score > 0 and report.score == report.max_score, (
        f"correct answers lost points in {sorted(failed(report))}: "
        + "; ".join(f"{a.item} ({a.idiom})" for a in answers.values())
        + f"\n{failed(report)}"
    )


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_message_quotes_a_hidden_test(assignment, exhaustive, reports):
    """What a student reads of a failed test (its message, in the feedback) holds no line of the hidden
    tests that the released exercise does not show."""
    hidden = hidden_test_lines(assignment)
    for student, report in catalogue(assignment, exhaustive, reports).items():
        text = "\n".join(failed(report).values())
        assert "BEGIN HIDDEN TESTS" not in text
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{student}'s messages quote hidden test code: {leaked[:3]}"


def hidden_test_lines(assignment: str) -> set[str]:
    """The lines of the assignment's hidden tests that its released exercise does not show (short lines,
    `)` or `raise`, also occur in any student's code: they quote nothing)."""
    solution = notebooks.read(course.notebook_path(assignment, "solutions"))
    lines = {
        line.strip()
        for cell in solution.cells
        if notebooks.is_test(cell)
        for line in cell.source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0].splitlines()
        if len(line.strip()) >= 16
    }
    released = notebooks.read(course.notebook_path(assignment, "exercises"))
    lines -= {line.strip() for cell in released.cells for line in cell.source.splitlines()}
    assert lines
    return lines
