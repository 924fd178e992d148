"""A class to grade, made from this course: what the tests and the benchmarks grade.

:func:`make_course` makes a course folder elsewhere (this course's ``nbgrader_config.py``, with
``solutions/`` and ``exercises/`` linked), optionally configured for nbgrader's own in-kernel
execution (:data:`PLAIN_EXECUTION`) for side-by-side comparisons. :func:`fill` answers the released
notebook as a student would (with the reference's code or given answers) and :func:`submit` puts it
where nbgrader collects it. An instructor's tool: no copy that students get holds it
(:data:`autograder.release.packages.INSTRUCTOR_ONLY`).
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import nbformat

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course

# nbgrader's own way of executing submissions (a Jupyter kernel that runs the student's cells and the
# tests together), kept for side-by-side comparisons: the attack tests and benchmarks.grading grade
# with it as well as with the course's sandbox.
PLAIN_EXECUTION = """
c.Autograde.autograde_preprocessors = [
    "nbgrader.preprocessors.Execute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
c.Execute.timeout = 30
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(?i)warning"
"""


def make_course(folder: Path, *, plain: bool = False, root: Path = COURSE_ROOT) -> Path:
    """A course folder for grading elsewhere: this course's config, solutions/ and exercises/ linked.

    ``plain=True`` configures nbgrader's own in-kernel execution instead of the sandbox.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(root) / "nbgrader_config.py", folder / "nbgrader_config.py")
    if plain:
        with (folder / "nbgrader_config.py").open("a") as f:
            f.write(PLAIN_EXECUTION)
    for name in ("solutions", "exercises"):
        if not (folder / name).exists():
            (folder / name).symlink_to(Path(root).resolve() / name)
    return folder


def solution_bodies(assignment: str) -> dict[str, str]:
    """grade_id -> the reference code of each solution cell, without the solution markers."""
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    return {notebooks.cell_id(c): notebooks.solution_body(c) for c in nb.cells if notebooks.is_solution(c)}


def released(assignment: str):
    """The exercise notebook of ``assignment`` as students get it."""
    return notebooks.read(course.notebook_path(assignment, "exercises"))


WRITTEN_ANSWER = "My explanation, in a few sentences of my own."  # a written answer, which awaits the instructor


def fill(assignment: str, answers: dict[str, str] | None = None, *, blank: bool = False):
    """The released notebook with every solution cell answered, and every written answer written in.

    Cells are answered with the reference code (a written answer with ``WRITTEN_ANSWER``) unless ``answers``
    gives other code or text for their grade_id; ``blank=True`` leaves the unanswered cells as released.
    """
    nb = copy.deepcopy(released(assignment))
    reference = {} if blank else solution_bodies(assignment)
    for cell in nb.cells:
        if notebooks.is_solution(cell):
            code = (answers or {}).get(notebooks.cell_id(cell), reference.get(notebooks.cell_id(cell)))
            if code is not None:
                cell.source = code
        elif notebooks.is_written(cell) and not blank:  # graded by hand: any answer awaits the instructor
            cell.source = (answers or {}).get(notebooks.cell_id(cell), WRITTEN_ANSWER)
    return nb


def submit(course_folder: Path, student: str, assignment: str, nb) -> Path:
    """Write ``nb`` where nbgrader collects it: ``submitted/<student>/<assignment>/<assignment>.ipynb``."""
    folder = Path(course_folder) / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{assignment}.ipynb"
    nbformat.write(nb, str(path))
    return path
