"""Phase 5 of ``make grade``: ``nbgrader generate_feedback`` for the class, each notebook within a time limit.

nbgrader is watched as it writes (:func:`write_feedback`), and ``jobs`` of its processes share the
class (:func:`write_feedback_in_parallel`); the pages of the notebooks it was stopped on are the course's
(:mod:`autograder.grading.feedback_pages`).
"""

from __future__ import annotations

import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.grading import run_nbgrader

FEEDBACK_PROGRESS = "AUTOGRADER_FEEDBACK_PROGRESS"  # the file LimitMarkdown names each notebook in, as it starts
FEEDBACK_SECONDS = 60.0  # the most that writing one notebook's feedback may take
NBGRADER_START_SECONDS = 120.0  # nbgrader's start-up, before it writes the first notebook's feedback


def write_feedback(
    assignment: str,
    students: list[str],
    root: Path = COURSE_ROOT,
    *,
    exclude: list[str] | tuple = (),
    env: dict | None = None,
    quiet: bool = False,
    seconds: float = FEEDBACK_SECONDS,
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Phase 5: ``nbgrader generate_feedback`` for ``students`` but ``exclude``, each notebook within ``seconds``.

    nbgrader renders each notebook as HTML with no time limit of its own, and one notebook can hold
    it for hours (the markdown that :class:`~autograder.nbgrader.limit_markdown.LimitMarkdown` cuts and
    :func:`~autograder.nbgrader.files_prefix.strip_files_prefix` renders in linear time is one such;
    others may be unknown). So one nbgrader process writes the class's feedback, watched:
    ``LimitMarkdown``, its first step for each notebook, names the notebook it starts in a file
    (``AUTOGRADER_FEEDBACK_PROGRESS``); a notebook still being written ``seconds`` later stops the
    process, with everything it started. That student's feedback on it is then a page of the
    course's saying so (written in phase 6, :mod:`autograder.grading.feedback_pages`), and nbgrader
    starts again for the students it had not reached. The phase takes at most ``seconds`` per
    notebook, and nbgrader's start-up (``NBGRADER_START_SECONDS`` at most) each time it starts.

    Returns the notes per student (markdown cut, feedback stopped) and, per student whose feedback
    was stopped, the notebook it was stopped on.
    """
    notes: dict[str, list[str]] = {}
    stopped: dict[str, str] = {}
    pending = [student for student in students if student not in set(exclude)]
    while pending:
        others = sorted(set(students) - set(pending))
        excluded = [f"--CourseDirectory.student_id_exclude={','.join(others)}"] if others else []
        with tempfile.TemporaryDirectory(prefix="autograder-feedback-") as tmp:
            progress = Path(tmp) / "progress.jsonl"
            progress.touch()
            running = run_nbgrader.start(
                "generate_feedback",
                assignment,
                "--force",
                *excluded,
                root=root,
                quiet=quiet,
                log_level="ERROR",
                env={**(env or {}), FEEDBACK_PROGRESS: str(progress)},
            )
            reached: list[str] = []  # students in the order nbgrader started them; all but the last are done
            current, since, limit, timed_out, unread = None, time.monotonic(), NBGRADER_START_SECONDS, False, ""
            with progress.open() as announcements:
                while True:
                    ended = running.poll() is not None
                    unread += announcements.read()
                    *complete, unread = unread.split("\n")
                    for line in complete:
                        try:
                            event = json.loads(line)
                            student, notebook = str(event["student"]), str(event["notebook"])
                        except (ValueError, TypeError, KeyError):  # written by LimitMarkdown alone; never expected
                            continue
                        if student not in pending:
                            continue
                        if student not in reached:
                            reached.append(student)
                        current, since, limit = (student, notebook), time.monotonic(), seconds
                        if event.get("cut"):
                            notes.setdefault(student, []).append(
                                f"feedback on {notebook}.ipynb: {int(event['cut'])} markdown cell(s) too long "
                                "to show were cut"
                            )
                    if ended:
                        break
                    if time.monotonic() - since > limit:
                        running.stop()
                        timed_out = True
                        break
                    time.sleep(0.1)
            running.wait()
        if not timed_out:
            break
        if current is None:  # nbgrader wrote nothing at all: its failure, not a student's
            for student in pending:
                notes.setdefault(student, []).append(
                    f"feedback not written: nbgrader generate_feedback started no notebook within "
                    f"{NBGRADER_START_SECONDS:g} s and was stopped"
                )
            break
        slow, notebook = current
        stopped[slow] = notebook
        notes.setdefault(slow, []).append(
            f"feedback on {notebook}.ipynb not written: it took over {seconds:g} s and was stopped "
            "(the student's feedback page says so)"
        )
        pending = [student for student in pending if student not in reached]
    return notes, stopped


def write_feedback_in_parallel(
    assignment: str, students: list[str], root: Path, jobs: int, *, exclude, **options
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Phase 5 in up to ``jobs`` nbgrader processes at once, each writing the feedback of every
    ``jobs``-th student (:func:`write_feedback` each); their notes and stopped notebooks together."""
    given = [student for student in students if student not in set(exclude)]
    shares = [given[i :: max(1, jobs)] for i in range(min(max(1, jobs), len(given)))] or [[]]
    with ThreadPoolExecutor(len(shares)) as pool:
        outcomes = list(
            pool.map(
                lambda share: write_feedback(
                    assignment, students, root, exclude=[s for s in students if s not in share], **options
                ),
                shares,
            )
        )
    notes: dict[str, list[str]] = {}
    stopped: dict[str, str] = {}
    for share_notes, share_stopped in outcomes:
        notes.update(share_notes)
        stopped.update(share_stopped)
    return notes, stopped
