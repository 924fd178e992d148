"""`make check`'s exit status: 0 full marks, 1 tests failed, 2 not checked (never 1 for the grader's own failure)."""

from __future__ import annotations

import shutil

from autograder import course
from autograder.cli import check

A = "ch02_scaled_dot_product"


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
