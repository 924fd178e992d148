"""What ``make grade``'s phases and nbgrader's execute step (:mod:`autograder.nbgrader.execute`) hand each other.

``make grade`` grades a class in the sandbox first and saves a report per notebook where the execute step
finds it (:func:`report_path`); the execute step saves a notebook whose report does not fit where ``make grade``
grades it again (:func:`pending_path`), and raises :class:`GradeAgain` or, where the grader failed,
:class:`NotGraded`, which nbgrader's log names and ``make grade`` reads back. Both sides import this module; it
imports neither.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.grading.report import Report
from autograder.grading.source import MAX_NOTEBOOK_BYTES

REPORTS = Path("grades") / "reports"


class NotGraded(RuntimeError):
    """The grader could not grade this notebook (its failure, not the student's)."""


class GradeAgain(RuntimeError):
    """``make grade``'s report does not fit the notebook that nbgrader grades: ``make grade`` grades the notebook
    saved at :func:`pending_path` in the sandbox, then gives it to nbgrader again (no score is recorded now)."""


def report_path(root: Path, assignment: str, student: str, notebook: str) -> Path:
    return Path(root) / REPORTS / assignment / student / f"{notebook}.json"


def saved_reports(root: Path, assignment: str, student: str, notebooks: list[str]) -> dict[str, Report]:
    """The report saved at :func:`report_path` of each of ``notebooks`` that has one that reads (notebook -> report):
    what the grader graded last; a link there, which the grader never makes, is not read."""
    found = {}
    for name in notebooks:
        path = report_path(root, assignment, student, name)
        try:
            if not path.is_symlink():
                found[name] = Report.from_json(path.read_text())
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return found


def pending_path(root: Path, assignment: str, student: str, notebook: str) -> Path:
    """Where :class:`SandboxedExecute` saves a notebook, as nbgrader grades it, for ``make grade`` to grade again."""
    return Path(root) / REPORTS / assignment / student / f"{notebook}.to-grade.ipynb"


def as_submitted(path: Path):
    """The notebook at ``path`` as the student submitted it (nbgrader's copy has its test cells back, its copied
    cells' grade ids removed), where it can be read; else None."""
    try:
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_NOTEBOOK_BYTES:
            return nbformat.read(str(path), as_version=4)
    except Exception:  # an unreadable notebook: nbgrader's own copy is graded, without notes on it
        return None
    return None
