"""The term's deadlines in nbgrader's gradebook: due dates, extensions, submission times and late penalties.

``make grade`` (after phase 4) and ``make grades`` call :func:`settle`, so that what nbgrader reads (``nbgrader
export``, its collect's ``--before-duedate``, its late-penalty step, the feedback) holds what ``term.yml`` says
(:mod:`autograder.grading.deadlines`): the assignment's ``duedate``, each submission's ``extension``, its time, and
each notebook's ``late_submission_penalty``, the policy's share of the points the notebook earns now (a score given
by hand since the last grading counts). The time is the collect's, ``submitted/<student>/<assignment>/timestamp.txt``,
which the course's collect writes from the kernel's record of when the submission last changed in the exchange
(:mod:`autograder.exchange.collect`), read without following a link; the student's own ``timestamp.txt`` in the
exchange never reaches it. An assignment that ``term.yml`` gives no due date keeps the gradebook's (one set with
``nbgrader db assignment add --duedate``) and nbgrader's own penalties. :func:`late_note` gives every output its words.
"""

from __future__ import annotations

from pathlib import Path

from autograder.exchange.records import collected_time
from autograder.grading.deadlines import Deadline, deadline, late_words


def settle(gradebook, assignment: str, students: list[str], root: Path) -> dict[str, str]:
    """Write ``term.yml``'s deadline of ``assignment`` into the open nbgrader ``gradebook`` for each of ``students``
    that it holds a submission of, with the collect's time of it (module docstring); student -> :func:`late_note`'s
    words ('' on time)."""
    from nbgrader.api import MissingEntry

    found = deadline(assignment, root)
    if found is not None:
        gradebook.find_assignment(assignment).duedate = found.due
    words = {}
    for student in students:
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            continue
        recorded = collected_time(Path(root) / "submitted" / student / assignment)
        if recorded is not None:
            submission.timestamp = recorded
        if found is not None:
            submission.extension = found.extension(student)
            for notebook in submission.notebooks:
                points = found.policy.penalty_points(notebook.score, submission.total_seconds_late)
                notebook.late_submission_penalty = points or None
        words[student] = late_note(submission, found)
    gradebook.db.commit()
    return words


def penalty(submission) -> float:
    """The points that ``submission`` (nbgrader's) loses for lateness: its notebooks' penalties."""
    return sum(notebook.late_submission_penalty or 0.0 for notebook in submission.notebooks)


def late_note(submission, found: Deadline | None) -> str:
    """The words on nbgrader's ``submission`` being late ("late by 6 h 41 min: -10%"), under ``term.yml``'s
    deadline ``found`` of its assignment (None: the gradebook's due date and nbgrader's own penalty); '' on time."""
    policy = None if found is None else found.policy
    return late_words(submission.total_seconds_late, policy, submission.extension, penalty(submission))


def note_for(gradebook, assignment: str, student: str, root: Path) -> str:
    """:func:`late_note` of ``student``'s submission of ``assignment`` in the open ``gradebook``; '' without one."""
    from nbgrader.api import MissingEntry

    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return ""
    return late_note(submission, deadline(assignment, root))


def is_late_note(note: str) -> bool:
    """Whether ``note``, one of a CSV row's, is :func:`late_note`'s, the gradebook's to give afresh."""
    return note.startswith("late by ") or note.startswith("late: ")
