"""Attacks and faults planted in real submissions of ch02, graded through `make grade`'s pipeline.

One class of 66 students is graded once (sandboxed, two at a time, under a term release in which
ch02 is not released), and every test of a graded class reads it: honest students; dishonest ones
(every attack class the grader defends against that a ch02 notebook can carry, with the holes a
security review of the grader found, run as root as in CI: an escape to host root, forged messages,
CPU starvation, uncapped in-memory file systems, a patched worker, and hand-edited nbgrader metadata
and a markdown cell nbconvert is slow on); faulty ones (every fault it must survive: loops, crashes,
memory hogs, fork bombs, huge replies, oversized grading files, live markup, terminal escapes, lone
surrogates, a flooded pipe); broken ones (malformed, renamed and missing notebooks, symbolic links to
solutions/); blank ones; five wrong answers of tests/buggy/ch02_scaled_dot_product.py, spread over the
list (tests/test_catalogue.py grades every one of them); and correct ones. Every honest score must be
exactly right (a correct notebook full marks, a wrong one what it scores graded on its own, before the
class), no attack may raise a score, every
fault costs only its own answers, the class is graded to the end in bounded time, and it is watched
(tests/support/host.py): nothing of a sandbox may be left running or behind.

A second, smaller class is graded by plain nbgrader (tests in the student's kernel) to show that the
attacks are real: there they raise the score; here they never do. The holes that need another
assignment (ch05), the host's view of a running sandbox, an unprivileged grader, the grader's own
failures (no sandbox at all) and two grader processes at once are tested one by one at the end.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_markdown_cell, new_raw_cell

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.calls import call as calls
from autograder.calls import global_rng
from autograder.cli import grade
from autograder.cli.check import format_report
from autograder.grading import run_nbgrader as _nbgrader
from autograder.grading.classroom import fill, make_course, solution_bodies, submit
from autograder.grading.gradesheet import db_url
from autograder.grading.handoff import report_path
from autograder.grading.notebook import Report, grade_notebook
from autograder.release import course as course_settings
from autograder.release import reference
from autograder.release.packages import sandbox_packages
from autograder.sandbox import values, wire
from autograder.sandbox.bwrap import bwrap_available
from autograder.sandbox.limits import Limits
from autograder.sandbox.pool import WarmPool
from autograder.sandbox.process import Sandbox
from autograder.sandbox.uids import UIDS
from tests import attacks
from tests.buggy.ch02_scaled_dot_product import BUGS, TESTS
from tests.support import broken_bwrap, host, unprivileged
from tests.support.points import full_marks, item_points, max_points, points_by_test, written_points
from tests.test_grader_output import task_attack

pytestmark = pytest.mark.slow

A = "ch02_scaled_dot_product"
FULL = full_marks(A)
POINTS = item_points(A, TESTS)
MASK_WITH_ZERO = next(b for b in BUGS if b.name == "sdpa_mask_with_zero")
# A mask applied by zeroing the scores gives wrong values wherever a mask is given: it loses the
# points of the item's mask test (its value tests give no mask), and keeps the others.
MASK_WITH_ZERO_SCORE = FULL - points_by_test(A)["test_sdpa_mask"]
IN_PLACE = next(b for b in BUGS if b.name == "softmax_in_place")
LIMITS = Limits()
# The class's limits, given to make grade as an instructor gives them: the defaults but for the time limits, which
# only the faults that loop (at the top level, in a call) reach, each waiting out its limit; no other notebook's cell
# or call comes near them (the memory hog's cell, ending in a MemoryError after 7 s, is the slowest), and a limit
# counts the notebook's own time, not the host's (tests/test_busy_host.py).
CLASS_LIMITS = Limits(cell_timeout=20.0, call_timeout=8.0)
# Short limits for a notebook graded on its own with a call that never returns:
# the reference's cells and calls take well under a second each (0.4 s in all for ch01), so the limit still stops
# the hanging call alone.
HANG_LIMITS = Limits(cell_timeout=8.0, call_timeout=8.0)
TERM = course_settings.Release("term", {"ch01_bahdanau"})  # graded before chapter 2's solutions are released
MAX_FILE_BYTES = 5_000_000  # no grading file (report, autograded notebook, feedback, CSV) is larger
AS_ROOT = os.geteuid() == 0
CLASS_SIZE = 66  # 5 wrong answers (each graded alone by the catalogue too), 8 right ones, attacks and faults
MIN_CORRECT = 8
CLASS_SECONDS = 1800  # the whole class, two at a time


class Graded(tuple):
    """(course, results, seconds) of a class graded once, with what the watch on it found."""

    def __new__(cls, course, results, seconds, watch: host.Watch, leftovers: dict):
        graded = super().__new__(cls, (course, results, seconds))
        graded.watch, graded.leftovers = watch, leftovers
        return graded


def grade_watched(course, jobs: int = 2) -> Graded:
    """Grade the class under ``course`` as `make grade` does (with :data:`CLASS_LIMITS`), watching what its
    sandboxes leave."""
    with host.Watch() as watch:
        started = time.monotonic()
        graded = grade.grade(A, root=course, quiet=True, jobs=jobs, settings=TERM, limits=CLASS_LIMITS)
        results = {r.student: r for r in graded}
        seconds = time.monotonic() - started
        leftovers = watch.leftovers()
    return Graded(course, results, seconds, watch, leftovers)


def with_cell(nb, code: str, *, after_setup: bool = False):
    """The notebook with one more student cell: right after the setup cell, or at the end."""
    cell = new_code_cell(code.strip("\n"))
    if after_setup:
        index = next(i for i, c in enumerate(nb.cells) if notebooks.is_setup(c)) + 1
        nb.cells.insert(index, cell)
    else:
        nb.cells.append(cell)
    return nb


def with_cells(nb, codes: list[str]):
    """The notebook with more student cells at the end."""
    nb.cells += [new_code_cell(code.strip("\n")) for code in codes]
    return nb


def zeros(**extra):
    return fill(A, {**attacks.ZEROS, **extra})


def blank():
    return fill(A, blank=True)


def wrong(bug):
    """A correct notebook but for one wrong answer of tests/buggy/ch02_scaled_dot_product.py."""
    return fill(A, {bug.item: bug.code})


# ----------------------------------------------------------------------------- the class: 66 students

ATTACKS = {  # student -> notebook; each must score no more than the honest "zeros" baseline
    "attack_patch_comparisons": lambda: with_cell(zeros(), attacks.PATCH_COMPARISONS, after_setup=True),
    "attack_patch_builtins": lambda: with_cell(zeros(), attacks.PATCH_BUILTINS, after_setup=True),
    "attack_ipython_hooks": lambda: with_cell(blank(), attacks.IPYTHON_HOOKS, after_setup=True),
    "attack_hijack_import": lambda: with_cell(zeros(), attacks.HIJACK_IMPORT, after_setup=True),
    "attack_rigged_tensors": lambda: with_cell(fill(A, attacks.NO_ANSWERS), attacks.RIGGED_TENSORS, after_setup=True),
    "attack_caller_frame": lambda: with_cell(
        fill(A, {**attacks.CALLER_FRAME_ANSWERS, **attacks.ZERO_QUESTIONS}), attacks.CALLER_FRAME, after_setup=True
    ),
    "attack_read_solutions": lambda: with_cell(fill(A, attacks.NO_ANSWERS), attacks.READ_SOLUTIONS, after_setup=True),
    "attack_write_gradebook": lambda: with_cell(zeros(), attacks.WRITE_GRADEBOOK, after_setup=True),
    "attack_import_reference": lambda: with_cell(
        fill(A, attacks.NO_ANSWERS), attacks.IMPORT_REFERENCE, after_setup=True
    ),
    "attack_kill_at_end": lambda: with_cell(zeros(), attacks.KILL_AT_END),
}
FAULTS = {  # student -> (notebook, expected score)
    "fault_loop_in_one_item": (
        lambda: fill(A, {"scaled_dot_product_attention": attacks.LOOP_IN_SDPA}),
        FULL - POINTS["scaled_dot_product_attention"],
    ),
    "fault_top_level_loop": (lambda: with_cell(fill(A), attacks.TOP_LEVEL_LOOP), FULL),
    "fault_abort_in_one_item": (
        lambda: fill(A, {"attention_numpy": attacks.ABORT_IN_ATTENTION_NUMPY}),
        FULL - POINTS["attention_numpy"],
    ),
    "fault_kernel_death": (lambda: with_cell(fill(A), attacks.KILL_AT_END), FULL),
    "fault_memory_hog": (lambda: with_cell(fill(A), attacks.MEMORY_HOG), FULL),
    "fault_memory_hog_in_one_item": (
        lambda: fill(A, {"scaled_dot_product_attention": attacks.HOG_IN_SDPA}),
        FULL - POINTS["scaled_dot_product_attention"],
    ),
    "fault_output_flood": (lambda: with_cell(fill(A), attacks.OUTPUT_FLOOD), FULL),
    "fault_background_processes": (lambda: with_cell(fill(A), attacks.BACKGROUND), FULL),
    "fault_fork_bomb": (lambda: with_cell(fill(A), attacks.FORK_BOMB), FULL),
    "fault_warnings": (lambda: with_cell(fill(A), attacks.WARNS), FULL),
}
SPINNERS_NEIGHBOUR = "attack_cpu_spinners_neighbour"  # honest; sorted right after the spinners: graded beside them
HONEST = {  # student -> (notebook, expected score; "alone": what it scores graded on its own)
    "honest_reference": (lambda: fill(A), FULL),
    "honest_zeros": (zeros, "alone"),
    "honest_mask_with_zero": (lambda: wrong(MASK_WITH_ZERO), MASK_WITH_ZERO_SCORE),
    "honest_softmax_in_place": (lambda: wrong(IN_PLACE), "alone"),
    SPINNERS_NEIGHBOUR: (lambda: fill(A), FULL),
}
BROKEN = ("broken_malformed", "broken_renamed", "broken_missing")  # no readable notebook: no sandbox starts
REVIEW_ATTACKS = {  # student -> (notebook, the honest student whose score it must not beat)
    "attack_escape_probe": (lambda: with_cell(zeros(), attacks.ESCAPE_PROBE, after_setup=True), "honest_zeros"),
    "attack_forged_cell_error": (
        lambda: with_cell(zeros(), attacks.FORGED_CELL_ERROR_LIST, after_setup=True),
        "honest_zeros",
    ),
    "attack_forged_end_of_run": (lambda: with_cell(zeros(), attacks.FORGED_CELLS_DONE_COUNT), "honest_zeros"),
    "attack_forged_replies": (
        lambda: with_cell(fill(A, attacks.FORGED_REPLIES), attacks.WORKER_FRAME, after_setup=True),
        "honest_zeros",
    ),
    "attack_cpu_spinners": (lambda: with_cell(zeros(), attacks.CPU_SPINNERS, after_setup=True), "honest_zeros"),
    "attack_fill_tmpfs": (lambda: with_cell(zeros(), attacks.FILL_TMPFS, after_setup=True), "honest_zeros"),
    "attack_hide_in_place": (
        lambda: with_cell(wrong(IN_PLACE), attacks.HIDE_IN_PLACE, after_setup=True),
        "honest_softmax_in_place",
    ),
}


def markup():
    nb = with_cell(fill(A), attacks.MARKUP_ERROR)
    raw = new_raw_cell(attacks.MARKUP_RAW, metadata={"raw_mimetype": "text/html", "format": "text/html"})
    nb.cells[1:1] = [new_markdown_cell(attacks.MARKUP_MARKDOWN), raw]
    return nb


REVIEW_FAULTS = {  # student -> (notebook, expected score: exactly what its honest answers earn)
    "fault_huge_reply": (
        lambda: fill(A, {"scaled_dot_product_attention": attacks.HUGE_REPLY_SDPA}),
        FULL - POINTS["scaled_dot_product_attention"],
    ),
    "fault_loud_errors": (lambda: with_cells(fill(A), [attacks.LOUD_ERROR] * 250 + [attacks.LOUD_ERROR_TYPE]), FULL),
    "fault_markup": (markup, FULL),
    "fault_terminal_escapes": (lambda: with_cell(fill(A), attacks.TERMINAL_ESCAPES), FULL),
    "fault_c1_escapes": (lambda: with_cell(fill(A), attacks.C1_ESCAPES), FULL),
    "fault_lone_surrogate": (
        lambda: with_cell(fill(A, {"scaled_dot_product_attention": attacks.SURROGATE_SDPA}), attacks.SURROGATE_ERROR),
        FULL - POINTS["scaled_dot_product_attention"],
    ),
    "fault_flooded_pipes": (lambda: with_cell(fill(A), attacks.FLOOD_PIPES), FULL),
}
SYMLINKED = ("refused_symlink_notebook", "refused_symlink_folder")  # no notebook to grade: no sandbox starts


def bracket_bomb():
    nb = fill(A)
    nb.cells.insert(1, new_markdown_cell(attacks.BRACKET_BOMB))
    return nb


MORE_ATTACKS = {  # student -> notebook: the attacks of tests/test_grades_hold.py and test_grader_output.py
    "attack_armed_helper": lambda: with_cell(fill(A, attacks.ARMED[A]), attacks.DISARM),
    "attack_task_cell": lambda: task_attack(fill(A)),
    "attack_newer_schema": lambda: task_attack(fill(A), "attention_numpy", attacks.NEWER_SCHEMA),
    "attack_bracket_bomb": bracket_bomb,
}
BLANK = [f"blank_{i}" for i in range(1, 4)]
ZEROS = [f"zeros_{i}" for i in range(1, 3)]
# What an honest student scores graded on its own: the key of its notebook in Graded.alone.
ALONE = {"honest_zeros": "zeros", "honest_softmax_in_place": f"buggy_{IN_PLACE.name}"}
ATTACKERS = {  # student -> (notebook, the notebook graded alone that it must not beat)
    **{s: (make, "zeros") for s, make in ATTACKS.items()},
    **{s: (make, ALONE[baseline]) for s, (make, baseline) in REVIEW_ATTACKS.items()},
}
OTHERS = [  # every student but the correct and the wrong ones
    *ATTACKS,
    *FAULTS,
    *HONEST,
    *BROKEN,
    *REVIEW_ATTACKS,
    *REVIEW_FAULTS,
    *SYMLINKED,
    *MORE_ATTACKS,
    *BLANK,
    *ZEROS,
]


def chosen_bugs(room: int) -> list:
    """At most ``room`` wrong answers, spread evenly over the list (so over every item), always with
    the in-place softmax (the honest notebook that an attack starts from)."""
    others = [bug for bug in BUGS if bug.name != IN_PLACE.name]
    if len(others) < room:
        return [IN_PLACE, *others]
    step = (len(others) - 1) / max(1, room - 2)
    return [IN_PLACE, *(others[round(i * step)] for i in range(room - 1))]


BUGGY = {f"buggy_{bug.name}": bug for bug in chosen_bugs(CLASS_SIZE - MIN_CORRECT - len(OTHERS))}
CORRECT = [f"correct_{i:02d}" for i in range(1, CLASS_SIZE + 1 - len(BUGGY) - len(OTHERS))]
STUDENTS = {*OTHERS, *BUGGY, *CORRECT}
NOTEBOOKS = {  # student -> notebook, for every student with a notebook (all but BROKEN and SYMLINKED)
    **ATTACKS,
    **{s: make for s, (make, _) in {**FAULTS, **HONEST, **REVIEW_ATTACKS, **REVIEW_FAULTS}.items()},
    **MORE_ATTACKS,
    **dict.fromkeys(BLANK, blank),
    **dict.fromkeys(ZEROS, zeros),
    **{s: (lambda bug=bug: wrong(bug)) for s, bug in BUGGY.items()},
    **dict.fromkeys(CORRECT, lambda: fill(A)),
}


def link_to_solutions(course: Path) -> None:
    """Two submissions that are symbolic links into solutions/: the notebook, and the whole folder."""
    solutions = (course / "solutions" / A).resolve()
    folder = course / "submitted" / SYMLINKED[0] / A
    folder.mkdir(parents=True)
    (folder / f"{A}.ipynb").symlink_to(solutions / f"{A}.ipynb")
    (course / "submitted" / SYMLINKED[1]).mkdir(parents=True)
    (course / "submitted" / SYMLINKED[1] / A).symlink_to(solutions)


def _leftover_processes() -> list[str]:
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in listing if line.startswith("sleep 424")]


@pytest.fixture(scope="module")
def graded(tmp_path_factory, reports):
    """The class of CLASS_SIZE, graded once; with what the zeros and each wrong answer score graded on their
    own (``alone``, two honest notebooks at a time and no attacker beside them, before the class; it took
    ``alone_seconds``) and the students submitted (``students``, sorted). The notebooks graded alone are the
    course's own: in workers forked from a warm sandbox (which grade as a sandbox of their own does,
    tests/test_warm_pool.py), through the test run's store of reports (the catalogue grades some of them)."""
    course = make_course(tmp_path_factory.mktemp("sandboxed"))
    for student, make in NOTEBOOKS.items():
        submit(course, student, A, make())
    (course / "submitted" / "broken_malformed" / A).mkdir(parents=True)
    (course / "submitted" / "broken_malformed" / A / f"{A}.ipynb").write_text('{"cells": [ this is not json')
    (course / "submitted" / "broken_renamed" / A).mkdir(parents=True)
    nbformat.write(fill(A), str(course / "submitted" / "broken_renamed" / A / "Untitled.ipynb"))
    (course / "submitted" / "broken_missing" / A).mkdir(parents=True)
    link_to_solutions(course)
    students = sorted(p.name for p in (course / "submitted").iterdir())
    assert len(students) == CLASS_SIZE, len(students)

    # What each wrong answer (honest_softmax_in_place's notebook among them), and the zeros that attacks
    # start from, score graded on their own (two honest notebooks at a time, no attacker beside them).
    alone_notebooks = {"zeros": zeros(), **{s: wrong(bug) for s, bug in BUGGY.items()}}
    started = time.monotonic()
    with WarmPool(2, release=TERM) as warm, ThreadPoolExecutor(max_workers=2) as threads:
        futures = {
            s: threads.submit(grade_notebook, A, nb, release=TERM, pool=warm, grader=reports)
            for s, nb in alone_notebooks.items()
        }
        alone = {s: future.result().score for s, future in futures.items()}
    alone_seconds = time.monotonic() - started

    graded = grade_watched(course)
    graded.alone, graded.alone_seconds, graded.students = alone, alone_seconds, students
    return graded


def test_honest_students_keep_their_exact_scores_beside_attackers(graded):
    _, results, _ = graded
    for student, (_, expected) in HONEST.items():
        want = graded.alone[ALONE[student]] if expected == "alone" else expected
        assert results[student].score == want, (student, results[student].failed, results[student].note)
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
    renamed = "refused: missing ch02_scaled_dot_product.ipynb, the only name grading reads; the submission holds"
    assert (
        f"{renamed} Untitled.ipynb instead: rename it ch02_scaled_dot_product.ipynb" in results["broken_renamed"].note
    )
    assert "refused: missing ch02_scaled_dot_product.ipynb: the submission holds no notebook" in (
        results["broken_missing"].note
    )
    for student in BROKEN:
        assert not results[student].score


SUMMARY_LINES = {  # student -> what its line in the summary says (any one of)
    "fault_loop_in_one_item": ["a call of scaled_dot_product_attention did not finish within its time limit"],
    "fault_top_level_loop": ["did not finish within its time limit; the cell was skipped"],
    "fault_abort_in_one_item": ["killed by signal 6 (SIGABRT)"],
    "fault_kernel_death": ["killed by signal 9 (SIGKILL) during"],
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
    """Each notebook within its worst case; the whole class: test_the_class_is_graded_in_a_few_minutes."""
    course, results, _ = graded
    slowest = max(grade_report_seconds(course, student) for student in results if student not in (*BROKEN, *SYMLINKED))
    # A notebook's worst case: a hanging cell and a hanging item, each hitting its limit once.
    assert slowest < 2 * CLASS_LIMITS.cell_timeout + 2 * CLASS_LIMITS.call_timeout + 30, slowest


def grade_report_seconds(course, student) -> float:
    return Report.from_json(report_path(course, A, student, A).read_text()).seconds


def test_gradebook_and_submissions_are_untouched_by_attackers(graded):
    course, results, _ = graded
    reference = nbformat.read(str(course / "submitted" / "honest_reference" / A / f"{A}.ipynb"), as_version=4)
    assert len(reference.cells) > 5
    export = _nbgrader.run("export", "--to", "grades.csv", root=course, check=False, quiet=True)
    assert export.returncode == 0, export.stderr[-2000:]
    with (course / "grades.csv").open(newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    # the written answer awaits the instructor: it counts in the maximum, not yet in the score, and the note says so
    honest = rows["honest_reference"]
    assert (float(honest["score"]), float(honest["max_score"])) == (FULL, max_points(A)), honest
    assert honest["note"].startswith("written answer ") and " awaiting grading: " in honest["note"], honest


def test_same_submission_same_score():
    nb = with_cell(fill(A, {MASK_WITH_ZERO.item: MASK_WITH_ZERO.code}), attacks.WARNS)
    first, second = grade_notebook(A, nb), grade_notebook(A, nb)
    assert first.score == second.score == MASK_WITH_ZERO_SCORE
    assert {k: v.message for k, v in first.tests.items()} == {k: v.message for k, v in second.tests.items()}


def test_feedback_of_attackers_shows_no_hidden_tests(graded):
    course, _, _ = graded
    for student in ATTACKS:
        html = (course / "feedback" / student / A / f"{A}.html").read_text()
        assert "BEGIN HIDDEN TESTS" not in html and "check_matches_reference(" not in html


# ----------------------------------------------------------------------------- the attacks are real

REAL_ATTACKS = [
    "attack_patch_comparisons",
    "attack_ipython_hooks",
    "attack_hijack_import",
    "attack_caller_frame",
    "attack_read_solutions",
    "attack_import_reference",
]


@pytest.fixture(scope="module")
def graded_plainly(tmp_path_factory):
    course = make_course(tmp_path_factory.mktemp("plain"), plain=True)
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

    from autograder.grading.handoff import report_path
    from autograder.grading.notebook import Report

    course, results, _ = graded
    student = "honest_mask_with_zero"
    path = course / "submitted" / student / A / f"{A}.ipynb"
    env = {**os.environ, **course_settings.environment(TERM)}
    run = subprocess.run(
        [sys.executable, "-m", "autograder.cli.check", str(path)], capture_output=True, text=True, env=env
    )
    assert run.returncode == 1, run.stderr[-2000:]
    report = Report.from_json(report_path(course, A, student, A).read_text())
    checked = results[student].max_score - written_points(A)  # make check grades the tests, not the written answer
    assert f"Score: {results[student].score:g} / {checked:g}" in run.stdout
    last = run.stdout.rstrip().splitlines()[-1]
    assert last.startswith(f"Verdict: {results[student].score:g} / {checked:g}; "), last
    for gid, test in report.tests.items():
        assert f"{'PASS' if test.passed else 'PART' if test.partial else 'FAIL'}  {gid}" in run.stdout
        for line in test.message.splitlines():
            assert line in run.stdout


def test_plain_nbgrader_autograde_command_grades_in_the_sandbox(tmp_path):
    """`nbgrader autograde` alone (no reports from `make grade`) runs the sandboxed grader itself."""
    from nbgrader.api import Gradebook

    from autograder.cli import exercises

    course = make_course(tmp_path / "course")
    submit(course, "alice", A, fill(A))
    submit(course, "zoe", A, zeros())  # answers that return zeros, honestly
    submit(course, "mallory", A, with_cell(zeros(), attacks.PATCH_COMPARISONS, after_setup=True))
    exercises.generate([A], into=tmp_path / "release", db_url=db_url(course), root=course, quiet=True)
    _nbgrader.run("autograde", A, "--force", root=course, quiet=True)
    assert not (course / "grades" / "reports").exists()
    with Gradebook(db_url(course)) as gradebook:
        assert gradebook.find_submission(A, "alice").score == FULL
        zeros_score = gradebook.find_submission(A, "zoe").score
        assert zeros_score < FULL
        # patching the comparisons gains nothing over the same answers without the patch
        assert gradebook.find_submission(A, "mallory").score == zeros_score


def test_plain_nbgrader_refuses_a_released_chapter_as_make_grade_does(tmp_path, capsys, monkeypatch):
    """In a term that has released ch02's solutions, answers that only import them are not graded by plain
    `nbgrader autograde` (the course's plugin refuses, with make grade's message) unless the instructor
    allows it with the same switch; make grade refuses before anything runs."""
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.cli import exercises

    course = make_course(tmp_path / "course")
    released_term = course_settings.Release("term", {A})
    env = course_settings.environment(released_term)
    importing = dict.fromkeys(solution_bodies(A), f"from attention_course.solutions.{A} import *\n")
    submit(course, "dave", A, fill(A, importing))
    exercises.generate([A], into=tmp_path / "release", db_url=db_url(course), root=course, quiet=True)
    message = course_settings.grading_refusal(A, released_term)
    assert message and "--allow-released" in message and "SandboxedExecute.allow_released" in message

    refused = _nbgrader.run("autograde", A, "--force", root=course, check=False, quiet=True, env=env)
    assert refused.returncode != 0
    assert message in " ".join(f"{refused.stdout}\n{refused.stderr}".split()), refused.stderr[-3000:]
    assert not (course / "autograded" / "dave" / A / f"{A}.ipynb").exists()
    with Gradebook(db_url(course)) as gradebook:
        try:  # nbgrader may have entered the submission before the plugin refused it: never a score
            score = gradebook.find_submission(A, "dave").score
        except MissingEntry:
            score = 0
        assert score == 0

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert grade.main([A, "--root", str(course)]) == 2
    assert message in capsys.readouterr().err
    with pytest.raises(course_settings.ReleasedRefusal):
        grade.grade(A, course, quiet=True, settings=released_term)

    allowed = _nbgrader.run(
        "autograde", A, "--force", "--SandboxedExecute.allow_released=True", root=course, quiet=True, env=env
    )
    assert allowed.returncode == 0
    with Gradebook(db_url(course)) as gradebook:
        assert gradebook.find_submission(A, "dave").score == FULL  # what an allowed released chapter gives


def test_a_hanging_method_of_a_class_item_costs_only_that_item():
    """Class items stay in the sandbox as objects; a method that never returns fails its tests alone. Under short
    limits (HANG_LIMITS): the method spins until its call's limit, whatever the limit is, and the reference's own
    cells and calls take a fraction of a second (not 20 s of a spinning CPU waited out for the same verdict)."""
    from tests.buggy.ch01_bahdanau import decoder

    first = "        embedded = self.embedding(prev_tokens)\n"
    hanging = decoder((first, "        while True:\n            pass\n" + first))
    started = time.monotonic()
    report = grade_notebook("ch01_bahdanau", fill("ch01_bahdanau", {"BahdanauDecoder": hanging}), limits=HANG_LIMITS)
    failed = {gid for gid, test in report.tests.items() if not test.passed}
    assert failed == {"test_step_shapes", "test_step_values"}, failed
    points = points_by_test("ch01_bahdanau")
    assert report.score == full_marks("ch01_bahdanau") - points["test_step_shapes"] - points["test_step_values"]
    assert any("did not finish within its time limit" in note for note in report.notes)
    assert time.monotonic() - started < 2 * HANG_LIMITS.cell_timeout + 2 * HANG_LIMITS.call_timeout + 30


# ----------------------------------------------------------------------------- what grading leaves behind


def grading_files(course: Path) -> list[Path]:
    """Every file that grading wrote: reports and CSV (grades/), autograded notebooks, feedback."""
    return sorted(
        path
        for folder in ("grades", "autograded", "feedback")
        for path in (course / folder).rglob("*")
        if path.is_file()
    )


def assert_nothing_left(graded: Graded) -> None:
    assert graded.watch.started, "the watch saw no sandbox start"
    assert graded.leftovers == {"processes": [], "cgroups": [], "temporary folders": [], "sandbox folders": []}
    if AS_ROOT:  # hole 1: every sandbox ran under a uid of its own, never root
        assert all(uid in UIDS for uid in graded.watch.uids()), graded.watch.uids()


def test_nothing_of_a_sandbox_is_left_behind(graded):
    """Hole 3: no process, cgroup or temporary folder of a sandbox outlives the grading of the class, and
    every student with a notebook to grade had a sandbox of its own."""
    assert len(graded.watch.started) >= CLASS_SIZE - len(SYMLINKED) - len(BROKEN), len(graded.watch.started)
    assert_nothing_left(graded)


def test_no_grading_file_is_over_5_mb(graded):
    """Hole 6: whatever the submissions print (fault_output_flood: 200 MB; 250 cells raising 300 kB errors,
    forged 7 MB errors, a 24 MB error), no file of grading is over 5 MB."""
    course = graded[0]
    files = grading_files(course)
    assert any(path.suffix == ".html" for path in files) and (course / "grades" / f"{A}.csv") in files
    for student in ("fault_loud_errors", "attack_forged_replies", "fault_flooded_pipes"):
        assert report_path(course, A, student, A) in files
        assert course / "feedback" / student / A / f"{A}.html" in files
    assert [(str(p), p.stat().st_size) for p in files if p.stat().st_size > MAX_FILE_BYTES] == []


# ----------------------------------------------------------------------------- the review's holes, in the class
# The holes that a security review of the grader found, planted beside honest students in the one class.

REVIEW_SUMMARY_LINES = {  # student -> what its line in the summary says (any one of)
    "attack_forged_cell_error": ["broke the grading protocol (an unexpected 'cell_done' message)"],
    "attack_forged_end_of_run": ["broke the grading protocol (an unexpected 'cells_done' message)"],
    "attack_forged_replies": ["broke the grading protocol"],
    "attack_cpu_spinners": ["left 30 other process(es) running; they were stopped"],
    "fault_huge_reply": ["sent a malformed message (WireError)"],
    "fault_flooded_pipes": ["sent a malformed message (WireError)"],
    "fault_terminal_escapes": ["MemoryError"],
    "refused_symlink_notebook": ["refused: the submission holds a symbolic link"],
    "refused_symlink_folder": ["refused: the submission holds a symbolic link"],
}


def review_report(course: Path, student: str) -> Report:
    return Report.from_json(report_path(course, A, student, A).read_text())


def cell_error(course: Path, student: str, marker: str) -> str:
    """The error of the submission's cell whose message holds ``marker`` (what a probe reported)."""
    errors = review_report(course, student).cell_errors.values()
    found = [error for error in errors if marker in error]
    assert found, list(errors)
    return found[0]


@pytest.mark.parametrize("student", list(REVIEW_ATTACKS))
def test_review_attacks_never_raise_a_score(graded, student):
    _, results, _ = graded
    baseline = REVIEW_ATTACKS[student][1]
    assert results[student].score is not None, results[student].note
    assert results[student].score <= results[baseline].score, (results[student].failed, results[student].note)


@pytest.mark.parametrize("student", list(REVIEW_FAULTS))
def test_review_faults_cost_nothing_but_their_own_answers(graded, student):
    _, results, _ = graded
    assert results[student].score == REVIEW_FAULTS[student][1], (results[student].failed, results[student].note)


@pytest.mark.parametrize("student", list(REVIEW_SUMMARY_LINES))
def test_each_review_attack_gets_a_clear_line_in_the_summary(graded, student):
    _, results, _ = graded
    line = next(line for line in grade.summary(A, list(results.values())).splitlines() if line.startswith(student))
    assert any(text in line for text in REVIEW_SUMMARY_LINES[student]), line


def test_the_student_never_is_host_root(graded):
    """Hole 1: /proc/sys takes no write from the student, and (seen from the host) every sandbox of the
    class ran under an unprivileged uid of its own."""
    course, _, _ = graded
    probe = cell_error(course, "attack_escape_probe", "escape probe:")
    assert "uid_map=" in probe and "core_pattern=refused" in probe, probe
    assert "=written" not in probe, probe
    if AS_ROOT:
        assert graded.watch.uids() and all(uid in UIDS for uid in graded.watch.uids()), graded.watch.uids()


def test_forged_messages_fail_only_the_forger(graded):
    """Hole 2: forged messages (a list as a cell's error, a count that is no integer, replies) end the
    forger's conversation; the grader goes on, and nothing of the forger's sandboxes is left."""
    course, results, _ = graded
    for student in ("attack_forged_cell_error", "attack_forged_end_of_run", "attack_forged_replies"):
        report = review_report(course, student)
        assert not report.not_graded, report.not_graded
        assert any("broke the grading protocol" in text for text in [*report.notes, *report.cell_errors.values()]), (
            report.notes,
            report.cell_errors,
        )
    assert_nothing_left(graded)


def test_in_memory_file_systems_are_capped(graded):
    """Hole 5: /tmp, /home and /dev/shm take at most Limits.tmpfs_mb each."""
    course, _, _ = graded
    probe = cell_error(course, "attack_fill_tmpfs", "filled:")
    sizes = {place: int(size) for place, size in re.findall(r"(\S+)=(\d+)MiB", probe)}
    assert set(sizes) == {"/tmp", "/home/student", "/dev/shm"}, probe
    assert all(0 < size <= CLASS_LIMITS.tmpfs_mb for size in sizes.values()), probe


def test_a_reply_over_the_message_limit_fails_its_own_item(graded):
    """Hole 5: a graded function that returns a 64 MiB tensor fails its tests, and only those."""
    _, results, _ = graded
    assert set(results["fault_huge_reply"].failed) == set(TESTS["scaled_dot_product_attention"])


LIVE_MARKUP = re.compile(r"<script>window\.owned|<[^>]*\son[a-z]+\s*=|href=[\"']?\s*javascript:", re.IGNORECASE)


def test_feedback_and_autograded_notebooks_hold_no_live_markup(graded):
    """Hole 8: a submission's <script>, onerror and javascript: links (in markdown, a raw HTML cell, error
    messages) reach neither the feedback page nor the autograded notebook live."""
    course, _, _ = graded
    for student in ("fault_markup", "fault_loud_errors"):
        html = (course / "feedback" / student / A / f"{A}.html").read_text()
        assert "window.owned" in html, student  # the payload is there, as inert text
        assert LIVE_MARKUP.findall(html) == [], student
        notebook = nbformat.read(str(course / "autograded" / student / A / f"{A}.ipynb"), as_version=4)
        for cell in notebook.cells:
            if cell.cell_type in ("markdown", "raw"):  # what a notebook viewer renders as HTML
                assert LIVE_MARKUP.findall(cell.source) == [] and "<script" not in cell.source, cell.source
            for output in cell.get("outputs", []):
                assert not {"text/html", "application/javascript"} & set(output.get("data", {})), output


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
C1_CONTROL = re.compile(r"[\x80-\x9f]")


def instructor_texts(course: Path, results: dict) -> dict[str, str]:
    """What may reach the instructor's terminal: the summary `make grade` prints, the CSV and the reports
    as files (cat), and each report as `make check` prints it."""
    texts = {
        "summary": grade.summary(A, list(results.values())),
        "csv": (course / "grades" / f"{A}.csv").read_text().replace("\r\n", "\n"),
    }
    for path in (course / "grades" / "reports").rglob("*.json"):
        texts[str(path)] = path.read_text()
        texts[f"make check: {path}"] = format_report(Report.from_json(path.read_text()), path)
    return texts


def test_no_terminal_escapes_reach_the_instructor(graded):
    """Hole 9: errors full of escapes (a MemoryError, listed in the summary; forged errors) reach the
    summary, the CSV and the reports without a control character."""
    course, results, _ = graded
    texts = instructor_texts(course, results)
    assert "MemoryError" in next(
        line for line in texts["summary"].splitlines() if line.startswith("fault_terminal_escapes")
    )
    assert {name: CONTROL.findall(text)[:5] for name, text in texts.items() if CONTROL.search(text)} == {}


def test_no_c1_controls_reach_the_instructor(graded):
    """Hole 9, C1 controls: 8-bit CSI and OSC are terminal escapes too (fault_c1_escapes raises
    MemoryError('\\x9b2J...')); none reaches the summary, the CSV, the reports or `make check`."""
    course, results, _ = graded
    line = next(
        line for line in grade.summary(A, list(results.values())).splitlines() if line.startswith("fault_c1_escapes")
    )
    assert "MemoryError" in line
    texts = instructor_texts(course, results)
    assert {name: C1_CONTROL.findall(text)[:5] for name, text in texts.items() if C1_CONTROL.search(text)} == {}


def test_symbolic_links_to_solutions_are_refused_and_show_nothing_of_them(graded):
    """Hole 9: a notebook, or a whole folder, that links to solutions/ scores nothing, and nothing of
    solutions/ reaches an autograded notebook or feedback."""
    course, results, _ = graded
    solution_lines = [
        line.strip() for body in solution_bodies(A).values() for line in body.splitlines() if len(line.strip()) > 25
    ]
    assert solution_lines
    for student in SYMLINKED:
        assert results[student].score == 0, results[student].note
        assert "symbolic link" in results[student].note
        for folder in ("autograded", "feedback"):
            for path in (course / folder / student).rglob("*"):
                if path.is_file():
                    text = path.read_text(errors="replace")
                    assert "BEGIN SOLUTION" not in text and not any(line in text for line in solution_lines), path


def test_a_patched_worker_cannot_hide_what_a_call_did_to_its_arguments(graded):
    """Hole 9: a worker patched to report no args_after fails the calls, so an in-place answer gains nothing."""
    course, results, _ = graded
    assert results["attack_hide_in_place"].score <= results["honest_softmax_in_place"].score < FULL
    messages = [test.message for test in review_report(course, "attack_hide_in_place").tests.values()]
    assert any("could not be read back" in message for message in messages), messages


def test_a_lone_surrogate_in_an_error_is_graded_and_fed_back(graded):
    """Hole 9: nbgrader writes the autograded notebook and the feedback of an error with a lone surrogate."""
    course, results, _ = graded
    assert set(results["fault_lone_surrogate"].failed) == set(TESTS["scaled_dot_product_attention"])
    for path in (
        course / "feedback" / "fault_lone_surrogate" / A / f"{A}.html",
        course / "autograded" / "fault_lone_surrogate" / A / f"{A}.ipynb",
    ):
        assert "no attention today" in path.read_bytes().decode("utf-8"), path


def test_a_flooded_pipe_is_graded_in_bounded_time(graded):
    """Hole 10: 50 MB forged into every pipe, then a 24 MB error: that student is done well within the limit
    for one notebook (600 s), and the class goes on."""
    course, results, _ = graded
    seconds = review_report(course, "fault_flooded_pipes").seconds
    assert seconds < 2 * CLASS_LIMITS.cell_timeout + 2 * CLASS_LIMITS.call_timeout + 30, seconds
    slowest = max(review_report(course, student).seconds for student in results if student not in (*SYMLINKED, *BROKEN))
    assert slowest < 300, slowest


# ----------------------------------------------------------------------------- the class under load
# Eighty notebooks, two at a time: every honest score exactly right beside every attack and fault.


def test_the_class_is_graded_to_the_end(graded):
    course, results, _ = graded
    assert set(results) == STUDENTS
    assert sorted(results) == graded.students
    assert [s for s, r in results.items() if r.score is None] == []
    with (course / "grades" / f"{A}.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {row["student"] for row in rows} == STUDENTS
    assert sorted(row["student"] for row in rows) == graded.students
    assert all(row["score"] != "" for row in rows)


def test_correct_notebooks_get_full_marks(graded):
    _, results, _ = graded
    assert len(CORRECT) >= MIN_CORRECT
    assert {s: results[s].score for s in CORRECT} == dict.fromkeys(CORRECT, FULL)


def test_blank_notebooks_score_nothing(graded):
    _, results, _ = graded
    assert {s: results[s].score for s in BLANK} == dict.fromkeys(BLANK, 0)


def test_each_wrong_answer_loses_exactly_what_it_loses_alone(graded):
    _, results, _ = graded
    got = {s: results[s].score for s in [*BUGGY, *ZEROS]}
    want = {**{s: graded.alone[s] for s in BUGGY}, **dict.fromkeys(ZEROS, graded.alone["zeros"])}
    assert got == want


def test_no_attack_beats_the_honest_notebook_it_starts_from(graded):
    _, results, _ = graded
    beaten = {
        s: (results[s].score, graded.alone[baseline])
        for s, (_, baseline) in ATTACKERS.items()
        if results[s].score > graded.alone[baseline]
    }
    assert beaten == {}


def test_faults_cost_only_their_own_answers(graded):
    _, results, _ = graded
    assert {s: results[s].score for s in REVIEW_FAULTS} == {s: want for s, (_, want) in REVIEW_FAULTS.items()}
    assert {s: results[s].score for s in SYMLINKED} == dict.fromkeys(SYMLINKED, 0)


def test_a_class_with_every_attack_is_graded_to_the_end(graded):
    """Every attack and fault of the course's tests that a ch02 notebook can carry, beside honest and
    realistically wrong students (tests/test_grades_hold.py's class): each wrong answer fails only tests of
    its own item."""
    course, results, _ = graded
    assert len(results) == CLASS_SIZE and [s for s, r in results.items() if r.score is None] == []
    with (course / "grades" / f"{A}.csv").open() as f:
        assert len(f.read().strip().splitlines()) == CLASS_SIZE + 1
    zeros_score = results["honest_zeros"].score
    assert results["honest_reference"].score == FULL
    baselines = {
        **dict.fromkeys(ATTACKS, "honest_zeros"),
        **{student: baseline for student, (_, baseline) in REVIEW_ATTACKS.items()},
    }
    assert {s: results[s].score for s, b in baselines.items() if results[s].score > results[b].score} == {}
    assert zeros_score < FULL
    assert results["attack_armed_helper"].score <= FULL - POINTS["attention_numpy"]
    for student, (_, expected) in {**FAULTS, **REVIEW_FAULTS}.items():
        assert results[student].score == expected, (student, results[student].failed, results[student].note)
    for student in ("attack_task_cell", "attack_newer_schema", "attack_bracket_bomb"):
        assert results[student].score == FULL, (student, results[student].note)
    for student, bug in BUGGY.items():
        failed = set(results[student].failed)
        assert failed and failed <= set(TESTS[bug.item]), (student, failed)
    assert graded.leftovers == {"processes": [], "cgroups": [], "temporary folders": [], "sandbox folders": []}


def test_the_class_is_graded_in_a_few_minutes(graded, capsys):
    course, results, seconds = graded
    with capsys.disabled():
        print(
            f"\n{len(results)} notebooks graded (jobs=2) in {seconds:.0f} s; "
            f"the {len(graded.alone)} notebooks graded alone first took {graded.alone_seconds:.0f} s"
        )
    assert seconds < CLASS_SECONDS, seconds


# ----------------------------------------------------------------------------- hole 7: reference values (ch05)

C05 = "ch05_positional_encoding"
TERM_BEFORE_CH05 = course_settings.Release("term", {a for a in course_settings.assignments() if a < C05})


def test_reference_buffers_are_never_handed_to_a_submission(monkeypatch):
    """Hole 7: only parameters cross; a positional encoding whose table is zero (but for the worked example)
    loses the points of its values. Loaded with the reference's buffers too, as the grader once did, the
    same notebook scores full marks: the attack is real."""
    nb = fill(C05, {"PositionalEncoding": attacks.ZERO_TABLE_ENCODING})
    report = grade_notebook(C05, nb, release=TERM_BEFORE_CH05)
    assert not report.not_graded, report.not_graded
    assert not report.tests["test_positional_encoding"].passed
    assert report.score <= report.max_score - report.tests["test_positional_encoding"].points

    def whole_state_dict(call):  # the former use_reference_weights: buffers as well as parameters
        with global_rng.forked(call.seed):
            call.weights = reference.get(call.item.assignment, call.item.name)(*call.init).state_dict()

    monkeypatch.setattr(calls.Call, "use_reference_weights", whole_state_dict)
    assert grade_notebook(C05, nb, release=TERM_BEFORE_CH05).score == report.max_score


# ----------------------------------------------------------------------------- hole 1: the host's view of a sandbox

SPIN_AND_SLEEP = [
    "import subprocess\nsleeper = subprocess.Popen(['sleep', '4246'])",
    "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        while True:\n            pass",
]


def _cgroup_value(path: Path, *names: str) -> str | None:
    for name in names:
        if (path / name).is_file():
            return (path / name).read_text().strip()
    return None


def _cpu_seconds(pids) -> float:
    """CPU time (user and system) that the processes have used so far."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
def test_a_running_sandbox_runs_under_an_unprivileged_uid_in_capped_cgroups():
    """Holes 1, 3 and 4, seen from the host: every process of a running sandbox has a uid other than 0
    (as root: one of UIDS), sits in the sandbox's cgroups, whose CPU quota is Limits.cpus and which
    hold spinning processes to about one CPU; closing the sandbox leaves nothing."""
    with host.Watch() as watch:
        sandbox = Sandbox(LIMITS, "bwrap", sandbox_packages(TERM))
        try:
            assert sandbox.run_cells(SPIN_AND_SLEEP) == [None, None]
            started = watch.started[-1]
            tree = [host.process(started.pid), *host.descendants(started.pid)]
            tree = [p for p in tree if p is not None and p.alive]
            assert any("autograder.sandbox.worker" in p.command for p in tree), [p.command for p in tree]
            assert any(p.command == "sleep 4246" for p in tree), [p.command for p in tree]
            assert [(p.pid, p.uid, p.command) for p in tree if p.uid == 0] == []
            if AS_ROOT:
                assert started.uid in UIDS and {p.uid for p in tree} == {started.uid}
                assert started.cgroups, "no cgroup was made for the sandbox"
                members = {pid for path in started.cgroups for pid in host.cgroup_members(path)}
                assert {p.pid for p in tree} <= members
                cpu = next(
                    path
                    for path in started.cgroups
                    if (path / "cpu.cfs_quota_us").exists() or (path / "cpu.max").exists()
                )
                quota = _cgroup_value(cpu, "cpu.cfs_quota_us", "cpu.max").split()[0]
                assert int(quota) == int(100_000 * LIMITS.cpus)
                pids = next(path for path in started.cgroups if (path / "pids.max").exists())
                assert _cgroup_value(pids, "pids.max") == str(LIMITS.processes)
                # Three spinners against a quota of one CPU: together they get at most about one.
                pids = [p.pid for p in tree]
                before, started_at = _cpu_seconds(pids), time.monotonic()
                time.sleep(4)
                used, window = _cpu_seconds(pids) - before, time.monotonic() - started_at
                assert used <= 1.15 * LIMITS.cpus * window + 0.2, (used, window)
        finally:
            sandbox.close()
        assert watch.leftovers() == {"processes": [], "cgroups": [], "temporary folders": [], "sandbox folders": []}


BLOCKWISE = """
import torch

def blockwise(blocks):
    kept = None
    for _ in range(blocks):
        scores = torch.randn(2, 4096, 512)  # 16 MiB, freed before the next block
        weights = torch.exp(scores - scores.amax(-1, keepdim=True))
        step = weights.sum(-1, keepdim=True, dtype=torch.float64)  # 64 KiB, kept into the next block
        kept = step if kept is None else kept * 0.5 + step
    return float(kept.sum())

def whole(blocks):
    scores = torch.randn(2, 4096, 512 * blocks)  # every block at once
    return float(scores.sum())
"""


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
def test_a_memory_budget_counts_what_the_call_holds_not_what_the_allocator_kept():
    """A call that computes and frees 64 blocks of 16 MiB, keeping a little of each, holds about 70 MiB
    at once and passes a 128 MiB budget (glibc's moving mmap threshold once let the heap keep the freed
    blocks: measured 194 MiB); the same blocks held at once (1 GiB) do not."""
    with Sandbox(LIMITS, "bwrap", sandbox_packages(TERM)) as sandbox:
        assert sandbox.run_cells([BLOCKWISE]) == [None]
        for _ in range(2):  # the second time too: the heap has already served the first
            reply = sandbox.call("blockwise", [values.encode(64)], {}, memory_mb=128)
            assert not isinstance(reply, wire.Raised), reply
        reply = sandbox.call("whole", [values.encode(64)], {}, memory_mb=128)
        assert isinstance(reply, wire.Raised) and reply.error_type == "MemoryError", reply


BALLAST = """
import torch

ballast = None

def hold(megabytes):
    global ballast
    ballast = torch.ones(megabytes * 2**18)

def whole(length):
    global ballast
    kept, ballast = ballast.numel() // 2**18, None  # the ballast freed for the call...
    scores = torch.ones(length, length)  # ...which holds 512 MiB at once
    total = float(scores.sum())
    del scores
    hold(kept)  # and held again after it
    return total
"""


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
@pytest.mark.parametrize("measured_by", ["cgroup", "address space"])
def test_memory_held_before_a_call_and_freed_in_it_does_not_count_for_the_call(measured_by, monkeypatch):
    """Issue 37: a call with a budget of 128 MiB that frees 768 MiB the notebook held (a "ballast"), holds
    512 MiB and takes the ballast back used to pass: its growth over what the sandbox held when it started was
    nothing. The budget now counts from what the sandbox held before any of the student's code ran, of which
    the notebook may keep NOTEBOOK_MB; by the cgroup's peak or, where there is none, by each process's address
    space (which a grader sets where it runs the sandbox as its own uid: here, with no bubblewrap). Blockwise
    work passes beside a notebook that keeps 64 MiB; measured by the cgroup, not beside one that keeps 768
    (its message says why)."""
    if measured_by == "address space":
        monkeypatch.setattr("autograder.sandbox.cgroups.Cgroups.memory_peak", lambda self: None)
    isolation = "bwrap" if measured_by == "cgroup" else "none"
    with Sandbox(LIMITS, isolation, sandbox_packages(TERM)) as sandbox:
        assert sandbox.run_cells([BLOCKWISE, BALLAST]) == [None, None]
        for megabytes, passes in ((64, True), (768, False)):
            assert not isinstance(sandbox.call("hold", [values.encode(megabytes)], {}), wire.Raised)
            reply = sandbox.call("blockwise", [values.encode(64)], {}, memory_mb=128)
            if passes or measured_by == "cgroup":  # an address space may reuse what the heap kept: no new space
                assert isinstance(reply, wire.Raised) is not passes, (megabytes, reply)
        reply = sandbox.call("whole", [values.encode(2**13 + 2**12)], {}, memory_mb=128)
        assert isinstance(reply, wire.Raised), reply
        if measured_by == "cgroup":  # the grader's verdict, after the call
            assert reply.error_type == "MemoryError", reply
            assert "it kept 7" in reply.error and "del the large objects it keeps" in reply.error, reply.error
        else:  # the allocation itself fails, in the student's code
            assert "can't allocate memory" in reply.error and reply.raised_in == "whole", reply
        assert not sandbox.unbounded


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
def test_an_unprivileged_grader_gives_the_student_no_way_to_host_root():
    """Hole 1, as a normal user: `python -m autograder.cli.check` run by nobody grades the escape probe; every
    process of its sandbox is nobody's on the host, and /proc/sys takes no write."""
    why = unprivileged.available()
    if why:
        pytest.skip(why)
    home = unprivileged.home()
    try:
        path = home / f"{A}.ipynb"
        nbformat.write(with_cell(zeros(), attacks.ESCAPE_PROBE, after_setup=True), str(path))
        os.chown(path, unprivileged.NOBODY, unprivileged.NOBODY)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "TMPDIR": str(home),
            "LANG": "C.UTF-8",
            **course_settings.environment(TERM),
        }
        seen: dict[int, host.Process] = {}

        def look(pid: int) -> None:  # the sandbox's processes, seen from the host while it runs
            for process in host.descendants(pid):
                if process.alive and ("autograder.sandbox.worker" in process.command or "bwrap" in process.command):
                    seen.setdefault(process.pid, process)

        run = unprivileged.run_as(
            [sys.executable, "-m", "autograder.cli.check", str(path)], env=env, cwd=COURSE_ROOT, observe=look
        )
        assert run.returncode == 1, (run.stdout, run.stderr[-3000:])
        assert f"/ {FULL:g}" in run.stdout.splitlines()[-1], (run.stdout, run.stderr[-3000:])
        probe = next((line for line in run.stdout.splitlines() if "escape probe:" in line), None)
        assert probe is not None, run.stdout
        assert "core_pattern=refused" in probe and "=written" not in probe, probe
        assert any("autograder.sandbox.worker" in p.command for p in seen.values()), [p.command for p in seen.values()]
        assert {p.uid for p in seen.values()} == {unprivileged.NOBODY}, [(p.uid, p.command) for p in seen.values()]
        assert [p.name for p in home.iterdir() if p.name.startswith(host.TEMP_PREFIXES)] == []
    finally:
        shutil.rmtree(home, ignore_errors=True)


# ----------------------------------------------------------------------------- hole 11: the grader's own failures


def small_class(tmp_path: Path, students: dict) -> Path:
    course = make_course(tmp_path / "course")
    for student, nb in students.items():
        submit(course, student, A, nb)
    return course


def assert_nothing_scored(course: Path, students) -> None:
    from nbgrader.api import Gradebook, MissingEntry

    assert not (course / "grades").exists() and not (course / "autograded").exists()
    assert not (course / "feedback").exists()
    with Gradebook(db_url(course)) as gradebook:
        for student in students:
            with pytest.raises(MissingEntry):
                gradebook.find_submission(A, student)


@pytest.fixture
def sandbox_that_cannot_start(tmp_path, monkeypatch):
    """A class of two, and a broken bwrap first on PATH (no sandbox starts); the runs it saw, after."""
    course = small_class(tmp_path, {"alice": fill(A), "bob": zeros()})
    broken = broken_bwrap.install(passes=0)
    monkeypatch.setenv("PATH", f"{broken.folder}{os.pathsep}{os.environ['PATH']}")
    yield course, broken
    broken.remove()


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
def test_nothing_is_scored_when_the_sandbox_cannot_start(sandbox_that_cannot_start):
    """Hole 11: a sandbox that cannot start at all stops grading at the preflight: no score, report,
    feedback or CSV is written, and no student's sandbox was tried."""
    course, broken = sandbox_that_cannot_start
    with pytest.raises(BaseException):  # noqa: B017 (what it raises is the next test's concern)
        grade.grade(A, root=course, quiet=True, jobs=2, settings=TERM)
    assert broken.runs == 1  # the preflight's sandbox, and no other
    assert_nothing_scored(course, ("alice", "bob"))


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
def test_make_grade_stops_with_one_clear_error_when_the_sandbox_cannot_start(
    sandbox_that_cannot_start, monkeypatch, capsys
):
    """Hole 11: `make grade` (autograder.cli.grade.main) says what is wrong in one error line for the instructor,
    exits with status 2 and scores nobody."""
    course, _ = sandbox_that_cannot_start
    monkeypatch.setenv("RELEASED", "ch01_bahdanau")
    monkeypatch.delenv("EDITION", raising=False)
    try:
        status = grade.main([A, "--root", str(course), "--jobs", "2"])
    finally:
        err = capsys.readouterr().err
        assert_nothing_scored(course, ("alice", "bob"))
    assert status == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "grading cannot start, and nothing was scored" in errors[0], err
    assert broken_bwrap.MESSAGE in errors[0] and "Traceback" not in err, err


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
def test_a_notebook_whose_sandbox_cannot_start_is_not_graded_never_zero(tmp_path, monkeypatch):
    """Hole 11: when the sandbox breaks after the preflight, the notebooks it could not start are "not
    graded" (score None, an empty score in the CSV, a note), never 0; the others are graded."""
    course = small_class(tmp_path, {"a_graded": fill(A), "b_not_graded": fill(A)})
    broken = broken_bwrap.install(passes=2)  # the preflight, then a_graded (one sandbox); then it breaks
    try:
        monkeypatch.setenv("PATH", f"{broken.folder}{os.pathsep}{os.environ['PATH']}")
        graded = grade_watched(course, jobs=1)
    finally:
        broken.remove()
    _, results, _ = graded
    assert results["a_graded"].score == FULL
    assert results["b_not_graded"].score is None
    assert (
        results["b_not_graded"].note.startswith("not graded:") and broken_bwrap.MESSAGE in results["b_not_graded"].note
    )
    with (course / "grades" / f"{A}.csv").open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert rows["b_not_graded"]["score"] == "" and rows["a_graded"]["score"] == str(FULL)
    assert "not graded: 1" in grade.summary(A, list(results.values()))
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url(course)) as gradebook:
        assert gradebook.find_submission(A, "a_graded").score == FULL
        with pytest.raises(MissingEntry):
            gradebook.find_submission(A, "b_not_graded")
    assert graded.leftovers == {"processes": [], "cgroups": [], "temporary folders": [], "sandbox folders": []}


# ----------------------------------------------------------------------------- two grader processes at once

# Each grader is a fresh process: with a uid pool of its own, each would give its first sandbox the
# first uid of UIDS, so the two sandboxes below would share one whatever ran before in this process.
GRADER = """
import json, sys
from autograder.release import course
from autograder.release.packages import sandbox_packages
from autograder.sandbox.process import Sandbox
cell = '''
import os, time
for _ in range({children}):
    if os.fork() == 0:
        time.sleep(300)
        os._exit(0)
'''
with Sandbox(packages=sandbox_packages(course.Release("term", {{"ch01_bahdanau"}}))) as sandbox:
    print(json.dumps({{"uid": sandbox._uid, "errors": sandbox.run_cells([cell])}}), flush=True)
    {then}
"""
HOLDING_GRADER = GRADER.format(children=50, then="sys.stdin.read()  # holds the sandbox and its 50 processes")
FORKING_GRADER = GRADER.format(children=20, then="pass")


def grader_process(code: str, **options) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(COURSE_ROOT)},
        **options,
    )


@pytest.mark.skipif(not (bwrap_available() and AS_ROOT), reason="needs bubblewrap and a grader running as root")
def test_a_sandbox_of_another_grader_process_is_not_starved_of_processes():
    """Two grader processes at once: the 50 processes that one's sandbox holds cost the other's sandbox
    nothing (RLIMIT_NPROC counts a host uid's processes, so each sandbox needs a uid of its own on the
    whole machine), and neither leaves anything behind."""
    with host.Watch() as watch:
        holder = grader_process(HOLDING_GRADER, stdin=subprocess.PIPE)
        try:
            line = holder.stdout.readline()
            assert line, holder.stderr.read()[-3000:]
            held = json.loads(line)
            assert held["errors"] == [None] and held["uid"] in UIDS, held
            other = grader_process(FORKING_GRADER)
            out, err = other.communicate(timeout=300)
        finally:
            holder.communicate(input="", timeout=120)
        assert watch.leftovers() == {"processes": [], "cgroups": [], "temporary folders": [], "sandbox folders": []}
    assert holder.returncode == 0 and other.returncode == 0, err[-3000:]
    found = json.loads(out.strip().splitlines()[-1])
    assert found["uid"] in UIDS and found["uid"] != held["uid"], (found, held)
    assert found["errors"] == [None], (found, held)


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
def test_the_first_call_on_the_meta_device_is_not_charged_for_torchs_meta_kernels():
    """The first operation on the "meta" device imports hundreds of modules (torch's meta kernels and sympy: 8 s on a
    quiet 2-core machine, more than the 20 s of a call on a busy one). A call that passes the device gets them
    loaded first, within the start-up's time: afterwards the student's call imports nothing."""
    from autograder.grading.session import _passes_meta

    probe = (
        "import sys\n"
        "import torch\n\n"
        "def on(device):\n"
        "    before = set(sys.modules)\n"
        "    positions = torch.arange(5, device=device)\n"
        "    (positions[:, None] >= positions[None, :]).tril().float().softmax(-1)\n"
        "    return sorted(set(sys.modules) - before)\n"
    )
    assert _passes_meta(("meta",), {}) and _passes_meta((), {"device": torch.device("meta")})
    assert not _passes_meta((torch.zeros(2), "cpu"), {"size": 3})
    with Sandbox(LIMITS, "bwrap", sandbox_packages(TERM)) as sandbox:
        assert sandbox.run_cells([probe]) == [None]
        sandbox.warm_up()
        reply = sandbox.call("on", [values.encode("meta")], {})
        assert isinstance(reply, wire.Returned) and values.decode(reply.value) == [], reply
    with Sandbox(LIMITS, "bwrap", sandbox_packages(TERM)) as sandbox:  # without it, the call pays
        assert sandbox.run_cells([probe]) == [None]
        reply = sandbox.call("on", [values.encode("meta")], {})
        assert isinstance(reply, wire.Returned) and "sympy" in values.decode(reply.value), reply


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
def test_the_sandbox_compiles_nothing_as_it_starts():
    """Every module the sandbox imports to run a notebook (torch, NumPy, IPython, the course's packages) comes
    with its bytecode where the sandbox's Python looks for it: a sandbox writes none, so a module without it
    is compiled again by every sandbox that starts (seconds of torch alone, on every notebook graded)."""
    probe = (
        "import importlib.util, os, sys\n"
        "import numpy, torch\n"
        "from autograder import *\n"
        "import attention_course.data.dates\n\n"
        "def uncompiled():\n"
        "    files = {getattr(m, '__file__', None) for m in list(sys.modules.values())}\n"
        "    files = sorted(f for f in files if isinstance(f, str) and os.path.isabs(f) and f.endswith('.py'))\n"
        "    return len(files), [f for f in files if not os.path.exists(importlib.util.cache_from_source(f))]\n"
    )
    with Sandbox(LIMITS, "bwrap", sandbox_packages(TERM)) as sandbox:
        assert sandbox.run_cells([probe]) == [None]
        reply = sandbox.call("uncompiled", [], {})
        assert isinstance(reply, wire.Returned), reply
        imported, missing = values.decode(reply.value)
    assert imported > 500, imported
    assert missing == [], f"{len(missing)} of {imported} modules have no bytecode, e.g. {missing[:5]}"
