"""The course's own feedback pages where nbgrader wrote none: a refused submission's, a stopped notebook's.

Each page is plain text, cleaned and escaped (:func:`feedback_page`), written where nbgrader writes
the student's feedback, with what ``nbgrader release_feedback`` reads beside it (:func:`_releasable`).
"""

from __future__ import annotations

import html
import time
from pathlib import Path

from attention_course.tooling import notebooks
from autograder import exchange
from autograder.grading.gradesheet import Result
from autograder.grading.submissions import notebook_names
from autograder.text.terminal import clean_text


def feedback_page(assignment: str, notebook: str, paragraphs: list[str]) -> str:
    """A feedback page of the course's own: a title and ``paragraphs`` of plain text, every one cleaned
    (:func:`clean_text`) and escaped."""
    title = f"Feedback on {notebook}.ipynb ({assignment})"
    body = "".join(f"<p>{html.escape(clean_text(text, 4000))}</p>\n" for text in paragraphs)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n</head>\n<body>\n<h1>{html.escape(title)}</h1>\n{body}</body>\n</html>\n"
    )


def write_feedback_page(root: Path, student: str, assignment: str, notebook: str, paragraphs: list[str]) -> Path:
    """Write :func:`feedback_page` where nbgrader writes the student's feedback on that notebook."""
    path = Path(root) / "feedback" / student / assignment / f"{notebook}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(feedback_page(assignment, notebook, paragraphs))
    return path


def _score_line(assignment: str, result: Result) -> str:
    failed = f" Tests failed: {', '.join(result.failed)}." if result.failed else ""
    points = result.awaiting_points
    if points:  # written answers that the instructor has not graded yet count for nothing so far
        awaits = f"{notebooks.points_text(points)} {'awaits' if points == 1 else 'await'}"
        return (
            f"Your score for {assignment}: {result.score:g} / {result.max_score - points:g} so far; {awaits} your "
            f"instructor's grading of your written answers.{failed}"
        )
    return f"Your score for {assignment}: {result.score:g} / {result.max_score:g}.{failed}"


def write_feedback_pages(
    root: Path,
    assignment: str,
    result: Result,
    refused: dict[str, str],
    refused_by_nbgrader: dict[str, str],
    stopped: dict[str, str],
    seconds: float,
) -> str | None:
    """The course's own feedback pages, where nbgrader wrote none: for a refused submission (every
    notebook) and for a notebook whose feedback was stopped (it and the student's notebooks after it).
    A note for the instructor where they cannot be released."""
    student, names = result.student, notebook_names(assignment, root)
    if student in refused:
        why = f"Your submission was refused: {refused[student].removeprefix('refused: ')}."
        pages = dict.fromkeys(names, [why, _score_line(assignment, result), "Submit again, or ask your instructor."])
    elif student in refused_by_nbgrader:
        # The student's page names the kind of error only: nbgrader's message can quote the notebook as
        # the gradebook restored it (hidden tests included), so it goes to the instructor's notes alone.
        kind = refused_by_nbgrader[student].split(":")[0].rsplit(".", 1)[-1].strip()
        why = (
            f"Your notebook was not graded: nbgrader, which records the grades, refused it"
            f"{f' ({kind})' if kind.isidentifier() else ''}. This happens when a notebook's format or the "
            "nbgrader metadata of its cells was changed by hand."
        )
        advice = "Copy your answers into the notebook as it was released and submit that, or ask your instructor."
        pages = dict.fromkeys(names, [why, _score_line(assignment, result), advice])
    elif student in stopped:
        folder = Path(root) / "feedback" / student / assignment
        late = [name for name in names if name == stopped[student] or not (folder / f"{name}.html").is_file()]
        why = (
            f"The feedback on this notebook could not be written: writing it took more than {seconds:g} s, "
            "so it was stopped. This happens when a cell is very large (a markdown cell of many thousands "
            "of characters, for example). Your work was graded as usual."
        )
        pages = dict.fromkeys(late, [why, _score_line(assignment, result)])
    else:
        return None
    written = [write_feedback_page(root, student, assignment, name, paragraphs) for name, paragraphs in pages.items()]
    return _releasable(root, student, assignment, written)


def _releasable(root: Path, student: str, assignment: str, written: list[Path]) -> str | None:
    """Give the feedback folder what ``nbgrader release_feedback`` reads beside each page (the
    submission's secret and time, from the autograded or collected submission) so that it can
    release the pages just ``written``. A submission the course's collect refused without a secret
    it could read (the student may have made it unreadable) leaves no page: one page without a
    secret stops the release for the whole class; a note for the instructor then. Any other
    submission without one did not come through ``nbgrader submit``, and its pages stay, as
    nbgrader's own would."""
    folder = Path(root) / "feedback" / student / assignment
    sources = [folder, *(Path(root) / kind / student / assignment for kind in ("autograded", "submitted"))]
    secret = next(filter(None, map(exchange.submission_secret, sources)), None)
    if secret is None and exchange.refusal_reason(sources[-1]) is not None:
        for page in written:
            page.unlink(missing_ok=True)
        return (
            f"no feedback page released: the refused submission has no readable {exchange.SECRET}, which "
            "nbgrader release_feedback needs (the student sees their score in the course's export only)"
        )
    if secret is not None:
        (folder / exchange.SECRET).write_text(secret)
    if not (folder / exchange.TIMESTAMP).is_file() or (folder / exchange.TIMESTAMP).is_symlink():
        when = next(filter(None, map(exchange.submitted_time, sources[1:])), None)
        (folder / exchange.TIMESTAMP).unlink(missing_ok=True)
        (folder / exchange.TIMESTAMP).write_text(when or time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    return None
