"""Finding a class's submissions of an assignment, and refusing those that cannot be graded safely or by name.

A submission is ``submitted/<student>/<assignment>/``, graded when the student is on the class list
(every student, where none is given: :func:`class_of`). It is refused (it scores nothing, and nbgrader is
not given it) when the course's collect refused it, when it holds anything but plain folders and files
(in ``submitted/`` or in the student's submissions in the exchange), or when it holds no notebook of
the assignment's name (:func:`refusals`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder import exchange
from autograder.text.terminal import clean_text


def submitted_students(assignment: str, root: Path = COURSE_ROOT) -> list[str]:
    return sorted(
        p.parent.name for p in (Path(root) / "submitted").glob(f"*/{assignment}") if p.is_dir() or p.is_symlink()
    )


@dataclass
class Class:
    """Whose submissions of an assignment ``make grade`` grades, and what it leaves out (its summary lists it)."""

    assignment: str
    students: list[str]  # with submitted/<student>/<assignment>/, on the class list (all, where none is given)
    class_list: Path | None  # the class list (c.SafeCollect.class_list); None: none is given
    not_listed: list[str] = field(default_factory=list)  # with submitted/<student>/<assignment>/, not on it
    in_exchange: list[tuple[str, str]] = field(default_factory=list)  # (folder in the exchange, why it is nobody's)

    def summary(self) -> list[str]:
        """The summary's lines on the class list, and on every folder that counts for nobody of the class."""
        if self.class_list is None:
            lines = ["Class list: none given (c.SafeCollect.class_list), so every student with a submission was graded"]
        else:
            lines = [f"Class list: {self.class_list}"]
        left_out = [
            *(f"  submitted/{name}/{self.assignment}/: {name} is not on the class list" for name in self.not_listed),
            *(f"  {folder} in the exchange: {why}" for folder, why in self.in_exchange),
        ]
        if left_out:
            lines.append(f"Not collected or graded, for anyone ({len(left_out)}):")
        return [clean_text(line, 400).replace("\n", " ") for line in [*lines, *left_out]]


def class_of(assignment: str, root: Path = COURSE_ROOT) -> Class:
    """The students whose ``submitted/<student>/<assignment>/`` is graded: those on the class list that
    ``nbgrader_config.py`` names (``c.SafeCollect.class_list``), or all where it names none; and what counts
    for nobody: a submitted folder of a student not on the list, and each folder of the assignment in the
    exchange (as ``nbgrader collect`` finds it from ``root``) that the course's collect does not collect:
    owned by another account than the student it names (where nbgrader's ``check_owner`` is on), or of a
    student not on the list. Raises :class:`autograder.exchange.ClassListError` for a class list that does
    not read as one."""
    settings = exchange.exchange_settings(root)
    listed = None if settings.class_list is None else exchange.read_class_list(settings.class_list)
    found = Class(assignment, [], settings.class_list)
    for student in submitted_students(assignment, root):
        (found.not_listed if exchange.not_on_list(student, listed) else found.students).append(student)
    for folder, student in exchange.folders_in_exchange(settings.inbound, assignment) if settings.inbound else []:
        foreign = exchange.foreign_owner(folder, student) if settings.check_owner else None
        why = foreign or exchange.not_on_list(student, listed)
        if why:
            found.in_exchange.append((folder.name, why))
    return found


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
    submissions of the assignment (those their account owns, where nbgrader's ``check_owner`` is on: a
    folder another student put there under their name is never theirs), whatever collected them (a
    collect that follows links may already have copied a link's target); or when it holds none of the
    assignment's notebooks by name
    (:func:`misnamed`: nbgrader would stop on it with a traceback, and a notebook of another name is
    never graded in its place).
    """
    settings = exchange.exchange_settings(root)
    names = notebook_names(assignment, root)
    refused = {}
    for student in students:
        reason = (
            exchange.refusal_reason(Path(root) / "submitted" / student / assignment)
            or _unsafe_reason(root, student, assignment)
            or _unsafe_in_exchange_reason(settings, student, assignment)
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


def _unsafe_in_exchange_reason(settings: exchange.ExchangeSettings, student: str, assignment: str) -> str | None:
    """Why the student's submissions in the exchange (none where it is not found; only those their account
    owns, where ``check_owner`` is on) refuse the collected one, or None."""
    inbound = settings.inbound
    if inbound is None:
        return None
    found = [
        entry
        for folder in exchange.submissions_in_exchange(inbound, student, assignment)
        if not (settings.check_owner and exchange.foreign_owner(folder, student))
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
