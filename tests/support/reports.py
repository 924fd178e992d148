"""One store of grading reports for a test run: a notebook of the course's own that several tests grade (in any
test file, on either pytest-xdist worker) is graded once.

A report is stored under its key (:func:`autograder.grading.source.submission_key`: the program, the tests, the
items graded, the grader's own code, the limits and the release), the key that ``make grade``'s saved reports
are checked against too, so that a report of other code, or of another grader, is never read. One process
grades a key while holding its lock file; another that asks for the same key waits, then reads the report.
A report of a notebook that could not be graded (the grader's failure) is never stored. The run's
:class:`~autograder.grading.grader.Grader` holds the store (tests/conftest.py's ``reports``) and grades
through it (:func:`~autograder.grading.notebook.grade_notebook` with ``grader=``).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

from autograder.grading.report import Report


class ReportStore:
    """Reports by key, in ``folder`` (shared by the processes of one test run)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.read = self.graded = 0  # this process's reports read from the store, and graded for it

    def report(self, key: str, grade: Callable[[], Report]) -> Report:
        """The report stored under ``key``, or ``grade()``'s, stored unless the notebook could not be graded."""
        path = self.folder / f"{key}.json"
        with open(self.folder / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if path.is_file():
                self.read += 1
                return Report.from_json(path.read_text())
            report = grade()
            self.graded += 1
            if not report.not_graded:
                partial = path.with_suffix(f".{os.getpid()}.part")
                partial.write_text(report.to_json())
                partial.replace(path)
            return report
