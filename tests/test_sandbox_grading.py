"""Attacks and faults planted in real submissions of ch02, graded through `make grade`'s pipeline.

One class of students is graded once (sandboxed, two at a time): honest ones,
dishonest ones (every attack class the grader defends against) and broken ones
(every fault it must survive). A second, smaller class is graded by plain
nbgrader (tests in the student's kernel) to show that the attacks are real:
there they raise the score; here they never do.
"""

from __future__ import annotations

import os
import subprocess
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder import _nbgrader, grade, notebooks
from autograder import course as course_settings
from autograder.grader import grade_notebook
from autograder.sandbox import Limits
from tests import attacks
from tests.buggy.ch02_scaled_dot_product import BUGS
from tests.submissions import fill, submit

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sandbox")]

A = "ch02_scaled_dot_product"
FULL = 13.0
POINTS = {"softmax": 4.0, "attention_numpy": 4.0, "scaled_dot_product_attention": 5.0}
MASK_WITH_ZERO = next(b for b in BUGS if b.name == "sdpa_mask_with_zero")
LIMITS = Limits()
TERM = course_settings.Release("term", {"ch01_bahdanau"})  # graded before chapter 2's solutions are released


def with_cell(nb, code: str, *, after_setup: bool = False):
    """The notebook with one more student cell: right after the setup cell, or at the end."""
    cell = new_code_cell(code.strip("\n"))
    if after_setup:
        index = next(i for i, c in enumerate(nb.cells) if notebooks.is_setup(c)) + 1
        nb.cells.insert(index, cell)
    else:
        nb.cells.append(cell)
    return nb


def zeros(**extra):
    return fill(A, {**attacks.ZEROS, **extra})


def blank():
    return fill(A, blank=True)


ATTACKS = {  # student -> notebook; each must score no more than the honest "zeros" baseline
    "attack_patch_comparisons": lambda: with_cell(zeros(), attacks.PATCH_COMPARISONS, after_setup=True),
    "attack_patch_builtins": lambda: with_cell(zeros(), attacks.PATCH_BUILTINS, after_setup=True),
    "attack_ipython_hooks": lambda: with_cell(blank(), attacks.IPYTHON_HOOKS, after_setup=True),
    "attack_hijack_import": lambda: with_cell(zeros(), attacks.HIJACK_IMPORT, after_setup=True),
    "attack_rigged_tensors": lambda: with_cell(fill(A, attacks.NO_ANSWERS), attacks.RIGGED_TENSORS, after_setup=True),
    "attack_caller_frame": lambda: with_cell(fill(A, attacks.CALLER_FRAME_ANSWERS), attacks.CALLER_FRAME,
                                             after_setup=True),
    "attack_read_solutions": lambda: with_cell(fill(A, attacks.NO_ANSWERS), attacks.READ_SOLUTIONS, after_setup=True),
    "attack_write_gradebook": lambda: with_cell(zeros(), attacks.WRITE_GRADEBOOK, after_setup=True),
    "attack_import_reference": lambda: with_cell(fill(A, attacks.NO_ANSWERS), attacks.IMPORT_REFERENCE,
                                                 after_setup=True),
    "attack_kill_at_end": lambda: with_cell(zeros(), attacks.KILL_AT_END),
}
FAULTS = {  # student -> (notebook, expected score)
    "fault_loop_in_one_item": (lambda: fill(A, {"scaled_dot_product_attention": attacks.LOOP_IN_SDPA}),
                               FULL - POINTS["scaled_dot_product_attention"]),
    "fault_top_level_loop": (lambda: with_cell(fill(A), attacks.TOP_LEVEL_LOOP), FULL),
    "fault_abort_in_one_item": (lambda: fill(A, {"attention_numpy": attacks.ABORT_IN_ATTENTION_NUMPY}),
                                FULL - POINTS["attention_numpy"]),
    "fault_kernel_death": (lambda: with_cell(fill(A), attacks.KILL_AT_END), FULL),
    "fault_memory_hog": (lambda: with_cell(fill(A), attacks.MEMORY_HOG), FULL),
    "fault_memory_hog_in_one_item": (lambda: fill(A, {"scaled_dot_product_attention": attacks.HOG_IN_SDPA}),
                                     FULL - POINTS["scaled_dot_product_attention"]),
    "fault_output_flood": (lambda: with_cell(fill(A), attacks.OUTPUT_FLOOD), FULL),
    "fault_background_processes": (lambda: with_cell(fill(A), attacks.BACKGROUND), FULL),
    "fault_fork_bomb": (lambda: with_cell(fill(A), attacks.FORK_BOMB), FULL),
    "fault_warnings": (lambda: with_cell(fill(A), attacks.WARNS), FULL),
}
HONEST = {
    "honest_reference": (lambda: fill(A), FULL),
    "honest_zeros": (zeros, None),
    "honest_mask_with_zero": (lambda: fill(A, {MASK_WITH_ZERO.item: MASK_WITH_ZERO.code}), FULL - 2),
}


def _leftover_processes() -> list[str]:
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in listing if line.startswith("sleep 424")]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = _nbgrader.make_course(tmp_path_factory.mktemp("sandboxed"))
    for student, make in {**ATTACKS, **{s: m for s, (m, _) in {**FAULTS, **HONEST}.items()}}.items():
        submit(course, student, A, make())
    (course / "submitted" / "broken_malformed" / A).mkdir(parents=True)
    (course / "submitted" / "broken_malformed" / A / f"{A}.ipynb").write_text('{"cells": [ this is not json')
    (course / "submitted" / "broken_renamed" / A).mkdir(parents=True)
    nbformat.write(fill(A), str(course / "submitted" / "broken_renamed" / A / "Untitled.ipynb"))
    (course / "submitted" / "broken_missing" / A).mkdir(parents=True)
    started = time.monotonic()
    results = {r.student: r for r in grade.grade(A, root=course, quiet=True, jobs=2, settings=TERM)}
    return course, results, time.monotonic() - started


def test_honest_students_get_their_scores_beside_attackers(graded):
    _, results, _ = graded
    for student, (_, expected) in HONEST.items():
        if expected is not None:
            assert results[student].score == expected, (student, results[student].failed)
    assert results["honest_zeros"].score < FULL


@pytest.mark.parametrize("student", list(ATTACKS))
def test_attacks_never_raise_a_score(graded, student):
    _, results, _ = graded
    assert results[student].score is not None, results[student].note
    assert results[student].score <= results["honest_zeros"].score, results[student].failed


@pytest.mark.parametrize("student", list(FAULTS))
def test_faults_are_graded_safely(graded, student):
    _, results, _ = graded
    expected = FAULTS[student][1]
    assert results[student].score == expected, (results[student].failed, results[student].note)


def test_broken_notebooks_score_zero_with_a_clear_note(graded):
    _, results, _ = graded
    assert "could not read the notebook" in results["broken_malformed"].note
    assert "missing ch02_scaled_dot_product.ipynb (found: Untitled.ipynb" in results["broken_renamed"].note
    assert "missing ch02_scaled_dot_product.ipynb" in results["broken_missing"].note
    for student in ("broken_malformed", "broken_renamed", "broken_missing"):
        assert not results[student].score


SUMMARY_LINES = {  # student -> what its line in the summary says (any one of)
    "fault_loop_in_one_item": ["a call of scaled_dot_product_attention did not finish within its time limit"],
    "fault_top_level_loop": ["did not finish within its time limit; the cell was skipped"],
    "fault_abort_in_one_item": ["killed by signal 6 (SIGABRT)"],
    "fault_kernel_death": ["killed by signal 9 (SIGKILL) during cell"],
    "fault_memory_hog": ["MemoryError", "killed by signal 9"],
    "fault_output_flood": ["output cut to 256 KiB"],
    "fault_background_processes": ["left 2 other process(es) running; they were stopped"],
    "fault_fork_bomb": ["BlockingIOError"],
}


@pytest.mark.parametrize("student", list(SUMMARY_LINES))
def test_each_fault_gets_a_clear_line_in_the_summary(graded, student):
    _, results, _ = graded
    assert any(text in results[student].note for text in SUMMARY_LINES[student]), results[student].note
    line = next(line for line in grade.summary(A, list(results.values())).splitlines() if line.startswith(student))
    assert any(text in line for text in SUMMARY_LINES[student]), line


def test_no_process_survives_grading(graded):
    assert _leftover_processes() == []


def test_the_class_is_graded_in_bounded_time(graded):
    course, results, seconds = graded
    slowest = max(
        grade_report_seconds(course, student) for student in results if not student.startswith("broken_"))
    # A notebook's worst case: a hanging cell and a hanging item, each hitting its limit once.
    assert slowest < 2 * LIMITS.cell_timeout + 2 * LIMITS.call_timeout + 30, slowest
    assert seconds < 600, seconds


def grade_report_seconds(course, student) -> float:
    from autograder.grader import Report
    from autograder.sandboxed import report_path

    return Report.from_json(report_path(course, A, student, A).read_text()).seconds


def test_gradebook_and_submissions_are_untouched_by_attackers(graded):
    course, results, _ = graded
    reference = nbformat.read(str(course / "submitted" / "honest_reference" / A / f"{A}.ipynb"), as_version=4)
    assert len(reference.cells) > 5
    export = _nbgrader.run("export", "--to", "grades.csv", root=course, check=False, quiet=True)
    assert export.returncode == 0, export.stderr[-2000:]
    rows = (course / "grades.csv").read_text().splitlines()
    assert any(",honest_reference," in row and row.endswith(",13.0,13.0") for row in rows), rows[:3]


def test_same_submission_same_score():
    nb = with_cell(fill(A, {MASK_WITH_ZERO.item: MASK_WITH_ZERO.code}), attacks.WARNS)
    first, second = grade_notebook(A, nb), grade_notebook(A, nb)
    assert first.score == second.score == FULL - 2
    assert {k: v.message for k, v in first.tests.items()} == {k: v.message for k, v in second.tests.items()}


def test_feedback_of_attackers_shows_no_hidden_tests(graded):
    course, _, _ = graded
    for student in ATTACKS:
        html = (course / "feedback" / student / A / f"{A}.html").read_text()
        assert "BEGIN HIDDEN TESTS" not in html and "check_matches_reference(" not in html


# ----------------------------------------------------------------------------- the attacks are real

REAL_ATTACKS = ["attack_patch_comparisons", "attack_ipython_hooks", "attack_hijack_import",
                "attack_caller_frame", "attack_read_solutions", "attack_import_reference"]


@pytest.fixture(scope="module")
def graded_plainly(tmp_path_factory):
    course = _nbgrader.make_course(tmp_path_factory.mktemp("plain"), plain=True)
    submit(course, "honest_zeros", A, zeros())
    for student in REAL_ATTACKS:
        submit(course, student, A, ATTACKS[student]())
    return {r.student: r for r in grade.grade(A, root=course, quiet=True, sandbox=False)}


@pytest.mark.parametrize("student", REAL_ATTACKS)
def test_each_attack_does_raise_the_score_under_plain_nbgrader(graded_plainly, graded, student):
    plain, ours = graded_plainly, graded[1]
    assert plain[student].score > plain["honest_zeros"].score, "the attack should work against plain nbgrader"
    assert ours[student].score <= ours["honest_zeros"].score


def test_self_check_gives_the_instructors_verdicts_and_messages(graded):
    import sys

    from autograder.grader import Report
    from autograder.sandboxed import report_path

    course, results, _ = graded
    student = "honest_mask_with_zero"
    path = course / "submitted" / student / A / f"{A}.ipynb"
    env = {**os.environ, **course_settings.environment(TERM)}
    run = subprocess.run([sys.executable, "-m", "autograder.check", str(path)], capture_output=True, text=True,
                         env=env)
    assert run.returncode == 1, run.stderr[-2000:]
    report = Report.from_json(report_path(course, A, student, A).read_text())
    assert f"Score: {results[student].score:g} / {results[student].max_score:g}" in run.stdout
    for gid, test in report.tests.items():
        assert f"{'PASS' if test.passed else 'FAIL'}  {gid}" in run.stdout
        for line in test.message.splitlines():
            assert line in run.stdout


def test_plain_nbgrader_autograde_command_grades_in_the_sandbox(tmp_path):
    """`nbgrader autograde` alone (no reports from `make grade`) runs the sandboxed grader itself."""
    from nbgrader.api import Gradebook

    from autograder import release

    course = _nbgrader.make_course(tmp_path / "course")
    submit(course, "alice", A, fill(A))
    submit(course, "mallory", A, with_cell(zeros(), attacks.PATCH_COMPARISONS, after_setup=True))
    release.generate([A], release_dir=tmp_path / "release", db_url=grade.db_url(course), root=course, quiet=True)
    _nbgrader.run("autograde", A, "--force", root=course, quiet=True)
    assert not (course / "grades" / "reports").exists()
    with Gradebook(grade.db_url(course)) as gradebook:
        assert gradebook.find_submission(A, "alice").score == FULL
        assert gradebook.find_submission(A, "mallory").score == 0


def test_a_hanging_method_of_a_class_item_costs_only_that_item():
    """Class items stay in the sandbox as objects; a method that never returns fails its tests alone."""
    from tests.buggy.ch01_bahdanau import decoder

    hanging = decoder("        while True:\n            pass\n")
    started = time.monotonic()
    report = grade_notebook("ch01_bahdanau", fill("ch01_bahdanau", {"BahdanauDecoder": hanging}))
    failed = {gid for gid, test in report.tests.items() if not test.passed}
    assert failed == {"test_step_shapes", "test_step_values"}, failed
    assert report.score == 6
    assert any("did not finish within its time limit" in note for note in report.notes)
    assert time.monotonic() - started < 2 * LIMITS.cell_timeout + 2 * LIMITS.call_timeout + 30
