"""``nbgrader export``'s CSV as the course writes it (``CourseCsvExport``, named in ``nbgrader_config.py``).

nbgrader's own CSV plugin gives every assignment that a student has no submission of a score of 0.0, as if it
had been graded: a student who never submitted reads like one who submitted nothing right. The course's plugin
writes nbgrader's columns and a ``note``:

- an assignment with no submission in the gradebook has an empty ``raw_score``, ``late_submission_penalty`` and
  ``score``, and the note ``not submitted``; where ``make grade`` refused the student's submission (its
  ``grades/<assignment>.csv`` says so, and records no submission in the gradebook), the score that CSV gives
  (0) and its reason;
- a submission whose written answers you have not graded yet says which, and how many points they hold (its
  score counts them as 0 until you grade them in the formgrader); one whose written answers were left as
  released (nbgrader scores them 0 at once) says so;
- a notebook that answers nothing (its code as released) is noted ``nothing answered``, as in the summary, the CSV
  and the feedback (:func:`autograder.grading.gradesheet.unanswered_note`);
- a late submission's note says how late and what it lost, in the words of the summary, the CSV and the feedback
  ("late by 6 h 41 min: -10%": :func:`autograder.grading.lateness.late_note`, under ``term.yml``'s late policy),
  and its score is the same total.

Every field is written by Python's ``csv`` module (a name with a comma stays one field).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins.export import ExportPlugin

from autograder.grading import lateness
from autograder.grading.deadlines import deadline
from autograder.grading.gradesheet import AWAITING, awaiting_words, blank_words, unanswered_note, written_state
from autograder.grading.lateness import late_note
from autograder.grading.sandboxed import nothing_answered

COLUMNS = [
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
    "note",
]
NOT_SUBMITTED = "not submitted"


def refusals(root: Path, assignment: str) -> dict[str, tuple[str, str]]:
    """student -> (score, note) of each refused submission in ``grades/<assignment>.csv`` (``make grade``'s)."""
    path = Path(root) / "grades" / f"{assignment}.csv"
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError):
        return {}
    found = {}
    for row in rows:
        note = row.get("note") or ""
        if note.startswith("refused") and row.get("student"):
            found[row["student"]] = (row.get("score") or "", note.split("; ")[0])
    return found


def written(submission) -> tuple[dict[str, float], dict[str, float]]:
    """grade_id -> points of each written answer of ``submission`` that nobody has graded yet, and of each left as
    released (nbgrader scores it 0 at once: its checksum rule)."""
    waiting, blank = {}, {}
    for notebook in submission.notebooks:
        for grade in notebook.grades:
            state = written_state(grade) if grade.max_score and grade.cell.cell_type == "markdown" else None
            if state is not None:
                (waiting if state == AWAITING else blank)[grade.name] = grade.max_score
    return waiting, blank


class CourseCsvExport(ExportPlugin):
    """nbgrader's CSV with a ``note``, and no score for an assignment that was never submitted (module docstring)."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        students = {str(s) for s in self.student}
        assignments = {str(a) for a in self.assignment}
        self.log.info("Exporting grades to %s", dest)
        with open(dest, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                refused = refusals(Path(os.getcwd()), assignment.name)
                found = deadline(assignment.name, Path(os.getcwd()))
                for student in gradebook.students:
                    if students and student.id not in students:
                        continue
                    writer.writerow(self.row(gradebook, assignment, student, refused, found))

    @staticmethod
    def row(gradebook: Gradebook, assignment, student, refused: dict[str, tuple[str, str]], found=None) -> dict:
        """The CSV's row of ``student`` for ``assignment``; ``found``: ``term.yml``'s deadline of it, if any."""
        row = {
            "assignment": assignment.name,
            "duedate": assignment.duedate or "",
            "student_id": student.id,
            "last_name": student.last_name or "",
            "first_name": student.first_name or "",
            "email": student.email or "",
            "max_score": assignment.max_score,
        }
        try:
            submission = gradebook.find_submission(assignment.name, student.id)
        except MissingEntry:
            score, note = refused.get(student.id, ("", NOT_SUBMITTED))
            return {
                **row,
                "timestamp": "",
                "raw_score": "",
                "late_submission_penalty": "",
                "score": score,
                "note": note,
            }
        penalty = lateness.penalty(submission)
        waiting, blank = written(submission)
        root = Path(os.getcwd())  # nbgrader runs in the course folder
        unanswered = [
            unanswered_note(notebook.name)
            for notebook in sorted(submission.notebooks, key=lambda nb: nb.name)
            if nothing_answered(assignment.name, notebook.name, student.id, root)
        ]
        notes = [late_note(submission, found), *unanswered, awaiting_words(waiting), blank_words(blank)]
        notes = list(filter(None, notes))
        return {
            **row,
            "timestamp": submission.timestamp or "",
            "raw_score": submission.score,
            "late_submission_penalty": penalty,
            "score": max(0.0, submission.score - penalty),
            "note": "; ".join(notes),
        }
