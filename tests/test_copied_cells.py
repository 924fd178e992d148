"""Copied and moved cells' nbgrader metadata: graded once, as the notebook runs, and in bounded time.

Jupyter's copy and paste keeps a cell's metadata, so a copied answer, test or written-answer cell holds the
grade_id of the cell it was copied from (JupyterLab gives the copy a new cell id; a copy made in a text editor
keeps that too). Both of `make grade`'s readings of a submission, the sandbox's (phase 3) and nbgrader's (phase 4,
through ``InstructorCellRoles``), give the first copy the role and read the others as the student's own
cells (:func:`autograder.grading.source.roles`), so that nbgrader neither fails on the copy (``KeyError:
'grade_id'``, a 0 for 20 points earned) nor grades a notebook whose metadata was moved again, in its own
process (a notebook graded twice, one at a time). Whatever still differs between the two readings (here,
an instructor's own sanitising step) is graded again in the sandbox, ``JOBS`` at a time, never in
nbgrader's process.

Unit tests of the roles against nbgrader's own sanitising steps and a real gradebook; then one class graded
by `make grade`'s function (``grade.grade``), and the same notebooks graded by plain ``nbgrader autograde``.
"""

from __future__ import annotations

import contextlib
import copy
import html
import importlib
import io
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell
from traitlets.config.loader import PyFileConfigLoader

from attention_course.tooling import notebooks
from autograder.cli import exercises, grade
from autograder.grading import run_nbgrader as _nbgrader
from autograder.grading.classroom import fill, make_course, released, submit
from autograder.grading.gradesheet import db_url
from autograder.grading.handoff import pending_path, report_path
from autograder.grading.report import Report
from autograder.grading.source import Source, copied_answers, roles, student_program, submission_key
from autograder.nbgrader.cell_roles import give_instructor_roles, instructor_metadata
from autograder.release import course
from autograder.sandbox.bwrap import bwrap_available
from autograder.sandbox.limits import Limits
from tests.support.points import full_marks, points_by_test, written_points

A = "ch02_scaled_dot_product"
FULL = full_marks(A)
SOFTMAX_POINTS = sum(points for gid, points in points_by_test(A).items() if gid.startswith("test_softmax"))
TERM = course.Release("term", {"ch01_bahdanau"})  # ch02 not released: grading it is allowed
WRITTEN = "explain_saturated_attention"
needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")

# An instructor's own sanitising step, after the course's: one student's notebook gets a line of code, so
# that nbgrader's copy of it runs other code than the notebook that make grade graded first.
INSTRUCTORS_OWN_STEP = """
from nbformat.v4 import new_code_cell
from nbgrader.preprocessors import NbGraderPreprocessor


class MarkReviewed(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        if resources["nbgrader"]["student"] == "drifted":
            nb.cells.append(new_code_cell("reviewed = True"))
        return nb, resources


c.Autograde.sanitize_preprocessors = [*c.Autograde.sanitize_preprocessors, MarkReviewed]
"""


def index_of(nb, gid: str, which: int = 0) -> int:
    return [i for i, cell in enumerate(nb.cells) if notebooks.cell_id(cell) == gid][which]


def pasted(nb, gid: str, source: str | None = None, *, new_id: bool = True, above: bool = False):
    """``nb`` with the cell ``gid`` copied and pasted below it, as Jupyter does: the whole cell, its nbgrader
    metadata included; JupyterLab gives the copy a new cell id (``new_id``), a text editor keeps it. The copy
    holds ``source`` (the original, where None); ``above``: the original holds it, the copy the first text."""
    nb = copy.deepcopy(nb)
    index = index_of(nb, gid)
    twin = copy.deepcopy(nb.cells[index])
    if new_id:
        twin.id = f"pasted-{index}"
    nb.cells.insert(index + 1, twin)
    if source is not None:
        nb.cells[index + (0 if above else 1)].source = source
    return nb


def moved_setup(nb):
    """``nb`` with the setup cell's nbgrader metadata moved onto a markdown cell at the end (the setup cell's
    code stays, a cell of the student's own)."""
    nb = copy.deepcopy(nb)
    index = index_of(nb, "setup")
    notes = new_markdown_cell("My notes")
    notes.metadata["nbgrader"] = nb.cells[index].metadata.pop("nbgrader")
    nb.cells.append(notes)
    return nb


def retyped(nb, gid: str, cell_type: str):
    """``nb`` with the cell ``gid`` turned into a ``cell_type`` cell (Jupyter's M or Y key), its text kept."""
    nb = copy.deepcopy(nb)
    index = index_of(nb, gid)
    cell = nb.cells[index]
    make = new_code_cell if cell_type == "code" else new_markdown_cell
    nb.cells[index] = make(cell.source, metadata=cell.metadata, id=cell.id)
    return nb


def stub(gid: str) -> str:
    """The released text of the answer cell ``gid``."""
    return next(cell.source for cell in released(A).cells if notebooks.cell_id(cell) == gid)


# The submissions, each a way a cell's metadata gets copied or moved; with what each must score.
SUBMISSIONS = {
    "alice": (lambda: fill(A), FULL),
    "moved_setup": (lambda: moved_setup(fill(A)), FULL),
    "copied_answer": (lambda: pasted(fill(A), "softmax"), FULL),
    "copied_answer_same_id": (lambda: pasted(fill(A), "softmax", new_id=False), FULL),
    "copied_test": (lambda: pasted(fill(A), "test_softmax_values"), FULL),
    "copied_written_answer": (lambda: pasted(fill(A), WRITTEN, "A first draft."), FULL),
    # the last definition runs last: the one the tests use, as when the notebook runs top to bottom
    "answer_then_stub": (lambda: pasted(fill(A), "softmax", stub("softmax")), FULL - SOFTMAX_POINTS),
    "stub_then_answer": (lambda: pasted(fill(A), "softmax", stub("softmax"), above=True), FULL),
    "answer_as_markdown": (lambda: retyped(fill(A), "softmax", "markdown"), FULL),
}


# ----------------------------------------------------------------------------- nbgrader's reading, unit tests


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A course folder whose gradebook holds the assignment's cells (make grade's phase 1)."""
    folder = make_course(tmp_path_factory.mktemp("recorded"))
    exercises.generate([A], into=folder / "release", db_url=db_url(folder), root=folder, quiet=True)
    return folder


def as_nbgrader_sanitises(folder: Path, nb, student: str):
    """``nb`` after the sanitising steps of ``nbgrader autograde`` under the course folder's configuration (the
    notebook that ``SandboxedExecute`` is given), each made as nbgrader makes it."""
    config = PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()
    resources = {"nbgrader": {"db_url": db_url(folder), "assignment": A, "notebook": A, "student": student}}
    nb = copy.deepcopy(nb)
    for step in config.Autograde.sanitize_preprocessors:
        if isinstance(step, str):
            module, _, name = step.rpartition(".")
            step = getattr(importlib.import_module(module), name)
        nb, resources = step(config=config)(nb, resources)
    return nb


def test_the_first_copy_of_a_cell_keeps_its_role_and_every_cell_the_instructors_type():
    source = Source.load(A)
    nb = retyped(pasted(pasted(fill(A), "softmax"), "softmax"), "setup", "markdown")
    found = roles(nb, source.cell_types)
    first = index_of(nb, "softmax")
    assert [(r.grade_id, r.copy_of) for r in found[first : first + 3]] == [("softmax", None), *[(None, first)] * 2]
    assert [found[first + k].cell_type for k in range(3)] == ["code"] * 3
    setup = index_of(nb, "setup")
    assert nb.cells[setup].cell_type == "markdown" and found[setup] == roles(fill(A), source.cell_types)[setup]
    plain = [i for i, cell in enumerate(nb.cells) if notebooks.cell_id(cell) is None]
    assert all(found[i].grade_id is None and found[i].cell_type == nb.cells[i].cell_type for i in plain)


@pytest.mark.parametrize("student", list(SUBMISSIONS))
def test_nbgrader_reads_a_copied_or_moved_cell_as_the_sandbox_does(recorded, student):
    """nbgrader's sanitising steps accept the notebook (no ``KeyError: 'grade_id'``), leave one cell per grade_id,
    and the program, so the key of make grade's report, is the one the sandbox graded: the report is used."""
    nb = SUBMISSIONS[student][0]()
    source = Source.load(A)
    sanitised = as_nbgrader_sanitises(recorded, nb, student)
    gids = [notebooks.cell_id(cell) for cell in sanitised.cells if notebooks.cell_id(cell)]
    assert sorted(gids) == sorted(notebooks.cell_id(cell) for cell in released(A).cells if notebooks.cell_id(cell))
    assert student_program(source, sanitised)[0] == student_program(source, nb)[0]
    assert submission_key(source, sanitised, Limits(), TERM) == submission_key(source, nb, Limits(), TERM)
    for cell in sanitised.cells:  # every cell holds what its type may hold
        nbformat.validate(nbformat.v4.new_notebook(cells=[cell]))


def test_the_instructors_roles_from_the_gradebook_are_the_instructor_notebooks(recorded):
    """Phase 3 reads the cells' types from the instructor notebook, phase 4 from the gradebook: the same."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url(recorded)) as gradebook:
        roles_ = instructor_metadata(gradebook.find_notebook(A, A))
    assert {gid: meta["cell_type"] for gid, meta in roles_.items()} == Source.load(A).kinds
    nb = pasted(fill(A), "softmax")
    assert give_instructor_roles(nb, roles_) == 1  # the copy's metadata removed
    assert give_instructor_roles(nb, roles_) == 0


def test_a_copied_answer_that_differs_is_named_and_an_identical_one_is_not():
    source = Source.load(A)
    assert copied_answers(source, pasted(fill(A), "softmax")) == {}
    assert copied_answers(source, pasted(fill(A), "test_softmax_values", "print(1)")) == {}  # a test is the course's
    notes = copied_answers(source, pasted(fill(A), "softmax", stub("softmax")))
    assert (
        list(notes) == ["softmax"]
        and "the last (copy 2 of cell 'softmax') is the one the tests used" in notes["softmax"]
    )
    notes = copied_answers(source, pasted(fill(A), WRITTEN, "A first draft."))
    assert list(notes) == [WRITTEN] and "the first is the one graded by hand" in notes[WRITTEN]


# ----------------------------------------------------------------------------- `make grade`, end to end


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded by make grade's function (two at a time), with an instructor's own sanitising step that
    changes one student's notebook ("drifted"); its results, and what it printed."""
    folder = make_course(tmp_path_factory.mktemp("copied"))
    with (folder / "nbgrader_config.py").open("a") as f:
        f.write(INSTRUCTORS_OWN_STEP)
    for student, (make, _) in SUBMISSIONS.items():
        submit(folder, student, A, make())
    submit(folder, "drifted", A, fill(A))
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        results = {r.student: r for r in grade.grade(A, root=folder, quiet=False, jobs=2, settings=TERM)}
    return folder, results, printed.getvalue()


@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("student", list(SUBMISSIONS))
def test_copied_and_moved_cells_cost_nothing_in_the_gradebook(graded, student):
    """The gradebook's score is what the notebook earns, once per test (a copied test cell counts once), never a
    refusal; and nbgrader used make grade's report, graded once."""
    folder, results, printed = graded
    result = results[student]
    assert result.score == SUBMISSIONS[student][1], (result.score, result.failed, result.note)
    assert "refused" not in result.note and set(result.tests) == set(results["alice"].tests)
    assert set(result.written) == {WRITTEN}
    report = Report.from_json(report_path(folder, A, student, A).read_text())
    nb = as_nbgrader_sanitises(folder, notebooks.read(folder / "submitted" / student / A / f"{A}.ipynb"), student)
    assert report.key == submission_key(Source.load(A), nb, Limits(), TERM)
    assert not pending_path(folder, A, student, A).exists()


@pytest.mark.slow
@needs_bwrap
def test_a_copied_answer_that_differs_says_which_copy_the_tests_used(graded):
    folder, results, _ = graded
    note = "the last (copy 2 of cell 'softmax') is the one the tests used"
    assert note in results["answer_then_stub"].note and note in results["stub_then_answer"].note
    page = html.unescape((folder / "feedback" / "answer_then_stub" / A / f"{A}.html").read_text())
    assert "Note from the grader: cell 'softmax' is in the notebook 2 times, with different code" in page
    assert "the first is the one graded by hand" in results["copied_written_answer"].note
    for student in ("copied_answer", "copied_answer_same_id", "copied_test", "moved_setup"):
        assert "copy" not in results[student].note, results[student].note  # identical copies: nothing to say
    assert results["copied_written_answer"].awaiting == [WRITTEN]  # one written answer, for the instructor


@pytest.mark.slow
@needs_bwrap
def test_a_notebook_nbgrader_reads_otherwise_is_graded_again_in_the_sandbox_not_in_nbgrader(graded):
    """What still differs (the instructor's own step) is graded again in the sandbox by phase 4, as phase 3
    grades, JOBS at a time, and given to nbgrader once more: its report is of nbgrader's copy, the score right;
    no other notebook was graded again."""
    folder, results, printed = graded
    assert results["drifted"].score == FULL, results["drifted"].note
    assert f"grading {A} again for 1 student(s), 2 at a time" in printed, printed[-3000:]
    report = Report.from_json(report_path(folder, A, "drifted", A).read_text())
    nb = as_nbgrader_sanitises(folder, notebooks.read(folder / "submitted" / "drifted" / A / f"{A}.ipynb"), "drifted")
    assert nb.cells[-1].source == "reviewed = True"
    assert report.key == submission_key(Source.load(A), nb, Limits(), TERM)
    assert not pending_path(folder, A, "drifted", A).exists()


# ----------------------------------------------------------------------------- plain nbgrader


@pytest.mark.slow
@needs_bwrap
def test_plain_nbgrader_autograde_grades_copied_cells_as_make_grade_does(tmp_path):
    """`nbgrader autograde` alone, with the course's configuration: a copied answer, test or written answer
    cell is graded, not refused; a copy that differs is graded as the notebook runs."""
    from nbgrader.api import Gradebook

    folder = make_course(tmp_path / "course")
    chosen = ["copied_answer", "copied_test", "copied_written_answer", "answer_then_stub"]
    for student in chosen:
        submit(folder, student, A, SUBMISSIONS[student][0]())
    exercises.generate([A], into=tmp_path / "release", db_url=db_url(folder), root=folder, quiet=True)
    run = _nbgrader.run("autograde", A, "--force", root=folder, check=False, quiet=True, env=course.environment(TERM))
    assert "KeyError" not in run.stderr, run.stderr[-3000:]
    with Gradebook(db_url(folder)) as gradebook:
        for student in chosen:
            submission = gradebook.find_submission(A, student)
            assert submission.score == SUBMISSIONS[student][1], student
            assert submission.max_score == FULL + written_points(A)  # the written answer counts once
