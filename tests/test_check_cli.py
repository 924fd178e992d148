"""The exit status of `make check` and `make validate`, and of their commands: 0 every test passed, 1 a test
failed, 2 not checked (a usage error, a file that is not a readable notebook, the grader's own failure: never 1).
Both Makefiles, the instructor's and the students' template, fail unless the command's status is 0."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from attention_course.notebooks import COURSE_ROOT
from autograder import course
from autograder.cli import check, validate
from autograder.grading import report as graded

A = "ch02_scaled_dot_product"
STUDENTS_MAKEFILE = COURSE_ROOT / "course_site" / "templates" / "student" / "Makefile"


def test_a_failure_of_the_grader_is_not_checked_not_a_score(tmp_path, monkeypatch, capsys):
    path = tmp_path / f"{A}.ipynb"
    shutil.copy(course.notebook_path(A, "exercises"), path)

    def crash(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(check, "grade_notebook", crash)
    assert check.main([str(path)]) == 2
    out = capsys.readouterr()
    verdict = out.out.strip().splitlines()[-1]
    assert verdict == "Verdict: not checked. The grader failed: OSError: no space left on device"
    assert "Traceback" in out.err


def _report(*passed: bool, message: str = "softmax: rows sum to 1 failed") -> graded.Report:
    report = graded.Report(A, A)
    for index, ok in enumerate(passed):
        report.tests[f"test_{index}"] = graded.TestResult(f"test_{index}", 1.0, ok, "" if ok else message)
    return report


@pytest.mark.parametrize(
    "report,status,verdict",
    [
        (_report(True, True), 0, "Verdict: full marks (2 / 2). Ready to submit."),
        (_report(True, False), 1, "Verdict: 1 / 2; 1 test fails."),
        (
            _report(False, False, message="no test ran: could not read the notebook: NotJSONError: not JSON"),
            2,
            "Verdict: not checked. The notebook was not run: could not read the notebook: NotJSONError: not JSON",
        ),
    ],
    ids=["full marks", "a test fails", "not run"],
)
def test_check_exits_0_for_full_marks_1_for_a_failed_test_and_2_for_a_notebook_not_run(
    report, status, verdict, tmp_path, monkeypatch, capsys
):
    path = tmp_path / f"{A}.ipynb"
    shutil.copy(course.notebook_path(A, "exercises"), path)
    monkeypatch.setattr(check, "grade_notebook", lambda *args, **kwargs: report)
    assert check.main([str(path)]) == status
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(verdict)


def _notebook(path: Path, *tests: str) -> Path:
    """A notebook of one code cell and a test cell per source in ``tests`` (nbgrader's metadata, 1 point each)."""
    cells = [new_code_cell("x = 1")]
    for index, source in enumerate(tests):
        meta = {"grade": True, "solution": False, "locked": True, "points": 1, "grade_id": f"test_{index}"}
        cells.append(new_code_cell(source, metadata={"nbgrader": {**meta, "schema_version": 3}}))
    nbformat.write(new_notebook(cells=cells), str(path))
    return path


def test_validate_exits_0_when_every_visible_test_passed_and_1_when_one_failed(tmp_path, capsys):
    assert validate.main([str(_notebook(tmp_path / "right.ipynb", "assert x == 1"))]) == 0
    assert "All visible tests passed" in capsys.readouterr().out
    assert validate.main([str(_notebook(tmp_path / "wrong.ipynb", "assert x == 1", "assert x == 2"))]) == 1
    out = capsys.readouterr().out
    assert "FAIL  test_1" in out and "pass  test_0" in out and "Some visible tests failed" in out


def test_validate_exits_2_for_a_file_that_is_not_a_notebook_with_tests(tmp_path, capsys):
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [ not json')
    assert validate.main([str(broken)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"Not validated: {broken} could not be read as a notebook (") and "Traceback" not in out
    assert validate.main([str(_notebook(tmp_path / "untested.ipynb"))]) == 2
    assert "untested.ipynb has no test cells: is it an exercise?" in capsys.readouterr().out
    with pytest.raises(SystemExit) as usage:
        validate.main([str(tmp_path / "absent.ipynb")])
    assert usage.value.code == 2


def _make(makefile_dir: Path, target: str, status: int, tmp_path: Path, *old: str) -> subprocess.CompletedProcess:
    """`make target NOTEBOOK=...` in ``makefile_dir`` with a stand-in python that exits with ``status`` (BIN
    given on the command line: the venv and the sandbox taken as made, ``old``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    python = bin_dir / "python"
    python.write_text(f"#!/bin/sh\necho 'the command ran'\nexit {status}\n")
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "-C", str(makefile_dir), *(f"--assume-old={name}" for name in old), f"BIN={bin_dir}", target]
        + ["NOTEBOOK=exercises/x/x.ipynb"],
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("target", ["check", "validate"])
@pytest.mark.parametrize("makefile", ["instructor", "students"])
def test_make_check_and_validate_fail_unless_every_test_passed(makefile, target, tmp_path):
    """make exits 0 only for the command's 0; for 1 (a test failed) and 2 (not checked) it fails, naming the
    status (make's own exit status is 2 for both)."""
    if makefile == "instructor":
        folder, old = COURSE_ROOT, (".venv/.installed", ".venv/.bytecode", "sandbox")
    else:
        folder, old = tmp_path / "students", (".venv/.installed", ".venv/.jupyter-config")
        folder.mkdir()
        shutil.copy(STUDENTS_MAKEFILE, folder / "Makefile")
    for status in (0, 1, 2):
        made = _make(folder, target, status, tmp_path, *old)
        assert "the command ran" in made.stdout, made.stdout + made.stderr
        assert (made.returncode == 0) == (status == 0), (status, made.stdout, made.stderr)
        if status:
            assert f"[{target}] Error {status}" in made.stderr or f"{target}] Error {status}" in made.stderr, (
                made.stderr
            )


def test_a_partly_right_question_is_marked_part_with_its_share(tmp_path, monkeypatch, capsys):
    report = _report(True, False, message="mask_for: 1 of 3 situations wrong, 2 right")
    report.tests["test_1"].partial = 0.67
    path = tmp_path / f"{A}.ipynb"
    shutil.copy(course.notebook_path(A, "exercises"), path)
    monkeypatch.setattr(check, "grade_notebook", lambda *args, **kwargs: report)
    assert check.main([str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "  PART  test_1  0.67 / 1" in lines and "        mask_for: 1 of 3 situations wrong, 2 right" in lines
    assert lines[-1].startswith("Verdict: 1.67 / 2; 1 test fails.")


def test_a_written_answer_is_left_to_the_instructor_and_its_rubric_shown(tmp_path, monkeypatch, capsys):
    """make check does not grade a written answer: it says so and prints its points and rubric from the
    instructor notebook (which a students' copy holds once the chapter is released), and the verdict and exit
    status are those of the tests."""
    a = "ch10_what_heads_learn"
    report = graded.Report(a, a)
    report.tests["test_0"] = graded.TestResult("test_0", 2.0, True, "")
    path = tmp_path / f"{a}.ipynb"
    shutil.copy(course.notebook_path(a, "exercises"), path)
    monkeypatch.setattr(check, "grade_notebook", lambda *args, **kwargs: report)
    assert check.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "Written answers: graded by your instructor, not here." in out
    assert "  explain_split_prefix_score (2 points)" in out and "        **Rubric (2 points).**" in out
    assert out.splitlines()[-1] == "Verdict: full marks (2 / 2). Ready to submit."
    assert "  explain_saturated_attention (2 points)" in check.written_rubrics(A)
