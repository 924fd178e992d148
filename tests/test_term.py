"""Grading during a term: a submission can import only the solutions that are released.

The sandbox mounts the packages as students get them for the term's release
(`autograder.release.packages`), so an answer that only imports the reference scores nothing until the
chapter's solutions are released, and `make check` follows the same setting.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attention_course import solutions
from attention_course.tooling import notebooks
from autograder.grading.classroom import fill, solution_bodies
from autograder.grading.notebook import grade_notebook
from autograder.release import course, packages
from tests.support.points import full_marks

pytestmark = pytest.mark.slow

ROOT = course.COURSE_ROOT
TERM = course.Release("term", {"ch01_bahdanau"})
A = "ch03_multi_head"
IMPORT_ONLY = {  # answers that only import the items from the course's packages, one for every item
    name: f"from attention_course.solutions.{A} import {name}" for name in solution_bodies(A)
}
IMPORT_ONLY["MultiHeadAttention"] += "\nfrom attention_course.models.fused_attention import FusedMultiHeadAttention"


def test_answers_that_only_import_score_nothing_before_the_release():
    report = grade_notebook(A, fill(A, IMPORT_ONLY), release=TERM)
    assert report.score == 0 and report.max_score == full_marks(A)
    assert any(
        "No module named 'attention_course.solutions.ch03_multi_head'" in error for error in report.cell_errors.values()
    )


def test_once_released_the_solutions_are_importable_in_the_sandbox():
    released = course.Release("term", {"ch01_bahdanau", A})
    assert grade_notebook(A, fill(A, IMPORT_ONLY), release=released).score == full_marks(A)


def test_make_check_follows_RELEASED(tmp_path):
    path = tmp_path / f"{A}.ipynb"
    nbformat.write(fill(A, IMPORT_ONLY), str(path))
    env = {**os.environ, "RELEASED": "ch01_bahdanau"}
    result = subprocess.run(
        [sys.executable, "-m", "autograder.cli.check", str(path), "--assignment", A],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"Score: 0 / {full_marks(A):g}" in result.stdout


def test_pasting_the_students_packages_scores_nothing(tmp_path):
    """Everything students get in the term (the export's packages) pasted into every answer cell."""
    files = packages.write(tmp_path / "packages", TERM)
    code = "\n\n".join(
        (tmp_path / "packages" / rel).read_text().replace("from __future__ import annotations", "")
        for rel in files
        if rel.endswith(".py") and rel.startswith("attention_course/")
    )
    compile(code, "pasted", "exec")
    answers = dict.fromkeys(IMPORT_ONLY, code)
    assert grade_notebook(A, fill(A, answers), release=TERM).score == 0


def test_the_sandbox_packages_hold_only_released_solutions():
    folder = packages.sandbox_packages(TERM)
    modules = sorted(p.name for p in (folder / "attention_course" / "solutions").glob("*.py"))
    assert modules == ["__init__.py", "ch01_bahdanau.py"]
    assert not (folder / "attention_course" / "models" / "transformer.py").exists()  # it builds on chapters 3 to 6
    assert not (folder / "attention_course" / "moved" / "model.py").exists()  # and its earlier name with it
    assert (folder / "attention_course" / "solutions" / "ch01_bahdanau.py").read_text() == solutions.module_source(
        "ch01_bahdanau"
    )
    assert not (folder / "solutions").exists()


def _with_own_earlier_answers(nb, edit=None):
    """ch06 answered, with the student's own exercises 3 to 5 (``edit``-ed) pasted in the cell after the
    setup cell."""
    own = "\n\n".join(
        solution_bodies(a)[name]
        for a, names in {
            "ch03_multi_head": ("split_heads", "merge_heads", "MultiHeadAttention"),
            "ch04_masking": ("padding_mask", "causal_mask"),
            "ch05_positional_encoding": ("sinusoidal_positional_encoding", "PositionalEncoding"),
        }.items()
        for name in names
    )
    index = next(i for i, c in enumerate(nb.cells) if notebooks.is_setup(c) and notebooks.cell_id(c) == "setup")
    if edit is not None:
        own, unedited = edit(own), own
        assert own != unedited, "the edit changes nothing"
    nb.cells[index + 1].source = "import math\n\n" + own
    return nb


def test_ch06_grades_its_own_items_whatever_the_student_pasted_of_unreleased_chapters():
    """Until chapters 3 to 5 are released the student pastes their own answers to them, and ch06's items
    are graded on ch06's code alone: the names they use are the grader's stand-ins while each is checked
    (autograder/calls/standins.py), so nothing pasted, the student's own and a wrong one score the same."""
    full = full_marks("ch06_transformer")
    pasted = {
        "nothing": fill("ch06_transformer"),
        "their own": _with_own_earlier_answers(fill("ch06_transformer")),
        "an unscaled MultiHeadAttention": _with_own_earlier_answers(
            fill("ch06_transformer"), lambda code: code.replace(" / math.sqrt(q.size(-1))", "")
        ),
    }
    for what, nb in pasted.items():
        report = grade_notebook("ch06_transformer", nb, release=TERM)
        assert report.score == full, (what, {k: t.message for k, t in report.tests.items() if not t.passed})
    released = course.Release("term", {"ch03_multi_head", "ch04_masking", "ch05_positional_encoding"})
    assert grade_notebook("ch06_transformer", fill("ch06_transformer"), release=released).score == full


def test_the_own_answers_cell_is_where_the_notebook_says():
    nb = notebooks.read(course.notebook_path("ch06_transformer", "exercises"))
    index = next(i for i, c in enumerate(nb.cells) if notebooks.cell_id(c) == "setup")
    assert "not released yet" in nb.cells[index].source
    follower = nb.cells[index + 1]
    assert follower.cell_type == "code" and not notebooks.nbgrader_meta(follower)
    assert "paste your own" in follower.source


def test_release_settings_name_unknown_assignments(tmp_path):
    with pytest.raises(course.SettingsError, match="'ch9_nothing', which is not an assignment"):
        course.release(ROOT, {"RELEASED": "ch01_bahdanau ch9_nothing"})
    assert course.release(ROOT, {"RELEASED": "ch01_bahdanau,ch02_scaled_dot_product"}) == course.Release(
        "term", {"ch01_bahdanau", "ch02_scaled_dot_product"}
    )
    assert course.release(ROOT, {"RELEASED": "all"}).released == frozenset(course.assignments())
    assert course.release(ROOT, {"EDITION": "open", "RELEASED": "none"}).edition == "open"
    with pytest.raises(course.SettingsError, match="EDITION must be one of open, term"):
        course.release(ROOT, {"EDITION": "closed"})
    (tmp_path / "term.yml").write_text("edition: term\nreleased: [ch01_bahdanau]\n")
    assert course.release(tmp_path, {}) == course.Release("term", {"ch01_bahdanau"})
    assert course.Release.from_key(TERM.key) == TERM


def test_the_committed_settings_are_the_open_edition():
    """The repository builds the open edition unless an instructor sets a term (`term.yml`)."""
    assert course.release(ROOT, {}) == course.Release("open")
    assert Path(ROOT / "term.yml").is_file()


def test_an_assignment_on_unreleased_chapters_is_said_to_the_instructor(tmp_path):
    """ch07 builds on ch03, ch04 and ch05: in a term that has released only ch01, make check says so (for the
    instructor, on stderr), and the reference still gets full marks, graded with the stand-ins."""
    from autograder.grading.source import Source, unreleased_prerequisites_note

    assert Source.load("ch07_efficient_attention").builds_on() == [
        "ch03_multi_head",
        "ch04_masking",
        "ch05_positional_encoding",
    ]
    assert Source.load("ch02_scaled_dot_product").builds_on() == []
    term = course.Release("term", {"ch01_bahdanau"})
    note = unreleased_prerequisites_note("ch07_efficient_attention", term)
    assert note and "ch03_multi_head, ch04_masking, ch05_positional_encoding" in note
    assert unreleased_prerequisites_note("ch07_efficient_attention", course.Release("open")) is None
    path = course.notebook_path("ch07_efficient_attention", "solutions")
    env = {**os.environ, **course.environment(term)}
    run = subprocess.run(
        [sys.executable, "-m", "autograder.cli.check", str(path)], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"note: {note}" in run.stderr and "Verdict: every test passes" in run.stdout
    assert run.stdout.rstrip().endswith("Ready to submit.")
