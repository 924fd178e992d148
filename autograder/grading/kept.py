"""What ``make grade``'s phases 1, 4 and 5 left, each kept with the key of what it read.

``make grade`` run again skips a phase where nothing it reads changed (as :mod:`autograder.grading.saved` does for
phase 3).

Each record is signed with the grader's secret (:meth:`autograder.grading.saved.Saved.keep`) in its state folder
``grades/.grader/`` (never mounted in the sandbox), and each key is computed from what the phase reads, never from a
file's time:

- phase 1, the assignment's tests recorded in the gradebook (:class:`Keys.tests`): the grader's digest (its code and
  every instructor notebook), the pinned environment and release, nbgrader's configuration (``nbgrader_config.py``).
  Skipped where the record's key is the same and the gradebook holds the assignment with the same graded cells
  (:func:`recorded_as_released`; else phase 1 runs before phase 4 all the same);
- phase 4, ``nbgrader autograde`` of one student (:meth:`Keys.autograde`): phase 3's inputs of each of the student's
  notebooks (the notebook's bytes, the assignment's instructor and released notebooks, the grader, the environment),
  the report handed to nbgrader, the submission's collected time (``timestamp.txt``), nbgrader's configuration and
  the options of the run. Skipped where they are the
  same, nbgrader's autograded copies are as it left them, and the gradebook holds the submission;
- phase 5, the student's feedback (:meth:`Keys.feedback`): the autograded copies, the student's submission as the
  gradebook holds it (:func:`submission_state`: every score, automatic and given by hand, every comment, the late
  penalty, the time), nbgrader's configuration, the grader, the MathJax the page carries, the time limit. Skipped
  where they are the same and the feedback pages are as phase 5 wrote them; phase 5's notes on the student (markdown
  cut) are kept and given again.

A student cannot steer a key: their notebook is one input, hashed, and none of the rest is theirs. A score given by
hand changes the gradebook's state of the submission: the feedback is written again (and the CSV, phase 6, is always
written from the gradebook).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from autograder.exchange.records import TIMESTAMP
from autograder.grading.handoff import report_path
from autograder.grading.saved import Class, Inputs
from autograder.release import course

TESTS, AUTOGRADE, FEEDBACK = "tests", "autograde", "feedback"  # the kinds of record


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str | None:
    """The digest of the plain file at ``path``, never following a link; None where there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class Keys:
    """The keys of phases 1, 4 and 5 for one ``make grade`` of ``assignment`` (what the class shares, once)."""

    def __init__(self, assignment: str, root: Path, release: course.Release, options: list[str]):
        self.assignment, self.root = assignment, Path(root)
        shared = Class(assignment, root, release)
        config = file_digest(self.root / "nbgrader_config.py")
        self._pipeline = _sha(json.dumps([assignment, shared.grader, shared.environment, config]).encode())
        self._options = sorted(options)
        parts = course.FEEDBACK_MATHJAX_PARTS
        mathjax = [course.FEEDBACK_MATHJAX, *(course.FEEDBACK_MATHJAX.parent / f"{part}.js" for part in parts)]
        self._mathjax = _sha(json.dumps([file_digest(path) for path in mathjax]).encode())

    @property
    def tests(self) -> str:
        return self._pipeline

    def autograde(self, student: str, inputs: dict[str, Inputs | None]) -> str | None:
        """Phase 4's key of ``student``, from phase 3's inputs of each notebook (None where one has none: then
        nothing is kept and autograde always runs)."""
        if not inputs or any(found is None for found in inputs.values()):
            return None
        handed = {name: file_digest(report_path(self.root, self.assignment, student, name)) for name in inputs}
        fields = {name: asdict(found) for name, found in sorted(inputs.items())}
        # the collect's time of the submission, which autograde records: a resubmission of the same notebook is one
        collected = file_digest(self.root / "submitted" / student / self.assignment / TIMESTAMP)
        message = [self._pipeline, self._options, fields, handed, collected]
        return _sha(json.dumps(message, sort_keys=True).encode())

    def feedback(self, autograded: dict[str, str | None], state: str | None, seconds: float) -> str | None:
        """Phase 5's key of a student, from the digests of their autograded copies and their submission's state
        in the gradebook (None where it holds none: nothing kept)."""
        if state is None or not autograded or None in autograded.values():
            return None
        message = [self._pipeline, self._mathjax, seconds, autograded, state]
        return _sha(json.dumps(message, sort_keys=True).encode())

    def autograded(self, student: str, names: list[str]) -> dict[str, str | None]:
        """The digests of nbgrader's autograded copies of ``student``'s notebooks ``names``."""
        folder = self.root / "autograded" / student / self.assignment
        return {name: file_digest(folder / f"{name}.ipynb") for name in names}

    def pages(self, student: str, names: list[str]) -> dict[str, str | None]:
        """The digests of the feedback pages of ``student``'s notebooks ``names``."""
        folder = self.root / "feedback" / student / self.assignment
        return {name: file_digest(folder / f"{name}.html") for name in names}


def submission_state(gradebook, assignment: str, student: str) -> str | None:
    """A digest of ``student``'s submission of ``assignment`` as nbgrader's ``gradebook`` holds it: what the
    feedback shows (each grade's scores, automatic and given by hand, extra credit and maximum; each comment; the
    late penalty and the submission's time). None where the gradebook holds no submission."""
    from nbgrader.api import MissingEntry

    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return None
    parts: list = [str(submission.timestamp), submission.late_submission_penalty, str(submission.duedate)]
    for notebook in sorted(submission.notebooks, key=lambda nb: nb.name):
        for grade in sorted(notebook.grades, key=lambda g: g.name):
            parts.append(
                ["grade", notebook.name, grade.name, grade.auto_score, grade.manual_score, grade.extra_credit,
                 grade.max_score, grade.needs_manual_grade]
            )  # fmt: skip
        for comment in sorted(notebook.comments, key=lambda c: c.name):
            parts.append(["comment", notebook.name, comment.name, comment.auto_comment, comment.manual_comment])
    return _sha(json.dumps(parts, default=str).encode())


def with_words(state: str, words: str) -> str:
    """A submission's ``state`` (:func:`submission_state`) with the ``words`` its feedback adds from elsewhere than
    the gradebook (its lateness under ``term.yml``'s policy, :mod:`autograder.grading.lateness`)."""
    return state if not words else _sha(json.dumps([state, words]).encode())


def recorded_as_released(gradebook, assignment: str, root: Path) -> bool:
    """Whether the gradebook holds ``assignment`` with the graded cells (name, points) of its instructor
    notebooks: what phase 1 records, and phase 4 reads."""
    from nbgrader.api import MissingEntry

    from attention_course.tooling import notebooks
    from autograder.grading.submissions import notebook_names

    try:
        found = gradebook.find_assignment(assignment)
    except MissingEntry:
        return False
    held = {(nb.name, cell.name, float(cell.max_score)) for nb in found.notebooks for cell in nb.grade_cells}
    expected = set()
    for name in notebook_names(assignment, root):
        for cell in notebooks.read(Path(root) / "solutions" / assignment / f"{name}.ipynb").cells:
            points = cell.get("metadata", {}).get("nbgrader", {}).get("points")
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade") and points is not None:
                expected.add((name, notebooks.cell_id(cell), float(points)))
    return held == expected
