"""Finding a class's submissions of an assignment, and refusing those that cannot be graded safely or by name.

A submission is ``submitted/<student>/<assignment>/``. It is refused (it scores nothing, and nbgrader is
not given it) when the course's collect refused it, when it holds anything but plain folders and files
(in ``submitted/`` or in the student's submissions in the exchange), or when it holds no notebook of
the assignment's name (:func:`refusals`).
"""

from __future__ import annotations

from pathlib import Path

from attention_course.notebooks import COURSE_ROOT
from autograder import exchange
from autograder.terminal import clean_text


def submitted_students(assignment: str, root: Path = COURSE_ROOT) -> list[str]:
    return sorted(
        p.parent.name for p in (Path(root) / "submitted").glob(f"*/{assignment}") if p.is_dir() or p.is_symlink()
    )


def notebook_names(assignment: str, root: Path = COURSE_ROOT) -> list[str]:
    return sorted(p.stem for p in (Path(root) / "solutions" / assignment).glob("*.ipynb"))


def submitted_notebooks(root: Path, student: str, assignment: str) -> list[str]:
    """The file names of the notebooks in ``submitted/<student>/<assignment>/`` (those nbgrader reads), sorted."""
    folder = Path(root) / "submitted" / student / assignment
    return sorted(path.name for path in folder.glob("*.ipynb"))


def unsafe_in_submission(root: Path, student: str, assignment: str) -> list[tuple[str, str]]:
    """Whatever in ``submitted/<student>/<assignment>/`` is not a plain folder or file, at any depth, the
    student's and the assignment's folders included: (path relative to ``submitted/``, what it is).
    Nothing is followed (see :func:`autograder.exchange.unsafe_entries`)."""
    base = Path(root) / "submitted"
    own = exchange.unsafe_entries(base / student, base, hard_links=False)
    if own and own[0][0] == student:  # the student's folder itself is a link, or not a folder
        return own[:1]
    return exchange.unsafe_entries(base / student / assignment, base, hard_links=False)


def refusals(assignment: str, students: list[str], root: Path) -> dict[str, str]:
    """The students whose submission is refused (it scores 0, and nbgrader is not given it), with why.

    A submission is refused when the course's collect (:class:`autograder.exchange.SafeCollect`)
    refused it; when ``submitted/<student>/<assignment>/`` holds anything but plain folders and files
    (nbgrader would read what a link points at, or wait on a named pipe); when the exchange, as
    ``nbgrader collect`` finds it from ``root``, holds such a thing in any of the student's
    submissions of the assignment, whatever collected them (a collect that follows links may already
    have copied a link's target); or when it holds none of the assignment's notebooks by name
    (:func:`misnamed`: nbgrader would stop on it with a traceback, and a notebook of another name is
    never graded in its place).
    """
    inbound = exchange.exchange_settings(root).inbound
    names = notebook_names(assignment, root)
    refused = {}
    for student in students:
        reason = (
            exchange.refusal_reason(Path(root) / "submitted" / student / assignment)
            or _unsafe_reason(root, student, assignment)
            or _unsafe_in_exchange_reason(inbound, student, assignment)
            or misnamed(names, submitted_notebooks(root, student, assignment))
        )
        if reason:
            refused[student] = f"refused: {reason}"
    return refused


def _unsafe_reason(root: Path, student: str, assignment: str) -> str | None:
    """Why the submission in ``submitted/`` is refused for holding something but plain files and folders, or None."""
    found = unsafe_in_submission(root, student, assignment)
    if not found:
        return None
    return (
        f"the submission holds {exchange.describe(found)}; a submission must be plain files and folders (nbgrader "
        "would read what a link points at, or wait on a pipe): submit the notebook file itself"
    )


def _unsafe_in_exchange_reason(inbound: Path | None, student: str, assignment: str) -> str | None:
    """Why the student's submissions in the exchange (``inbound``, None where it is not found) refuse the
    collected one, or None."""
    if inbound is None:
        return None
    found = [
        entry
        for folder in exchange.submissions_in_exchange(inbound, student, assignment)
        for entry in exchange.unsafe_entries(folder, inbound)
    ]
    if not found:
        return None
    return (
        f"the submission in the exchange ({inbound}) holds {exchange.describe(found)}; a collect that reads "
        "through it copies what a link points at, so what was collected is not graded"
    )


def names_list(names: list[str], most: int = 3) -> str:
    """File names of a submission as text for the summary and a feedback page: cleaned, cut, at most ``most``."""
    shown = ", ".join(clean_text(name, 80) for name in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def misnamed(names: list[str], present: list[str]) -> str | None:
    """Why a submission holding the notebooks ``present`` (file names) is refused when it holds none of the
    assignment's notebooks ``names`` (their names without .ipynb), or None: what was found, and what it
    must be named. Grading reads each notebook by its name only and never guesses which file is meant."""
    wanted = [f"{name}.ipynb" for name in names]
    if set(wanted) & set(present):
        return None
    expected = " and ".join(wanted)
    if not present:
        return f"missing {expected}: the submission holds no notebook; submit {expected}"
    if len(present) == 1:
        found = f"the submission holds {names_list(present)} instead: rename it {expected}"
    else:
        found = (
            f"the submission holds {len(present)} other notebooks instead ({names_list(present)}): "
            f"keep the one with the work and rename it {expected}"
        )
    return f"missing {expected}, the only name grading reads; {found}"
