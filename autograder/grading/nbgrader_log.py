"""What ``nbgrader autograde`` left undone: the submissions it scored nothing for, and its log's error for each.

nbgrader's log (its output, relayed and cleaned, :mod:`autograder.grading.run_nbgrader`) names a submission it
could not process in one record, ``There was an error processing assignment: <folder>``, followed by its
traceback; the exception that the traceback ends with is the reason given.
"""

from __future__ import annotations

import re
from pathlib import Path

from autograder.grading.submissions import notebook_names
from autograder.text.terminal import clean_text

_ERROR_AT = re.compile(r"There was an error processing assignment: (.+)$")
_FRAME = re.compile(r'^(\s*)File "')


def _exception_line(record: list[str]) -> str:
    """The exception that a traceback in nbgrader's log ends with: the first line after its last frame
    that is indented less than that frame (``KeyError: 'grade_id'``), or ''."""
    frames = [(i, len(m.group(1))) for i, line in enumerate(record) if (m := _FRAME.match(line))]
    if not frames:
        return ""
    last, indent = frames[-1]
    for line in record[last + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            return line.strip()
    return ""


def nbgrader_errors(log: str, assignment: str, students: list[str]) -> dict[str, str]:
    """student -> the error that nbgrader's log (its output, cleaned) gives for that student's submission."""
    lines = log.splitlines()
    found = {}
    for index, line in enumerate(lines):
        match = _ERROR_AT.search(line)
        folder = Path(match.group(1).strip()) if match else None
        if folder is None or folder.name != assignment or folder.parent.name not in students:
            continue
        record = lines[index + 1 : index + 2]  # nbgrader's next record: the traceback, up to the record after it
        for following in lines[index + 2 :]:
            if following.startswith("["):
                break
            record.append(following)
        reason = _exception_line(record)
        if reason:
            found[folder.parent.name] = clean_text(reason, 300)
    return found


def nbgrader_refused(assignment: str, students: list[str], root: Path, log: str) -> tuple[dict[str, str], list[str]]:
    """What ``nbgrader autograde`` left undone among ``students`` (those given to it): the students with
    a submitted notebook of which it left no autograded copy, and so recorded no score.

    Returns, first, student -> the error nbgrader's log gives for that student's notebook (nbgrader
    refused it), and second, the students for whom the log gives none (nbgrader stopped before
    them, say: not the student's doing).
    """
    names = notebook_names(assignment, root)
    undone = [
        student
        for student in students
        if any(
            (Path(root) / "submitted" / student / assignment / f"{name}.ipynb").is_file()
            and not (Path(root) / "autograded" / student / assignment / f"{name}.ipynb").is_file()
            for name in names
        )
    ]
    reasons = nbgrader_errors(log, assignment, undone)
    return reasons, [student for student in undone if student not in reasons]
