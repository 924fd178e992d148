"""Make student submissions from the released exercise, as a student would fill it in."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from autograder import course, notebooks


def solution_bodies(assignment: str) -> dict[str, str]:
    """grade_id -> the reference code of each solution cell, without the solution markers."""
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    return {notebooks.cell_id(c): notebooks.solution_body(c) for c in nb.cells if notebooks.is_solution(c)}


def released(assignment: str):
    return notebooks.read(course.notebook_path(assignment, "exercises"))


def fill(assignment: str, answers: dict[str, str] | None = None, *, blank: bool = False):
    """The released notebook with every solution cell answered.

    Cells are answered with the reference code unless ``answers`` gives other
    code for their grade_id; ``blank=True`` leaves the unanswered cells as released.
    """
    nb = copy.deepcopy(released(assignment))
    reference = {} if blank else solution_bodies(assignment)
    for cell in nb.cells:
        if notebooks.is_solution(cell):
            code = (answers or {}).get(notebooks.cell_id(cell), reference.get(notebooks.cell_id(cell)))
            if code is not None:
                cell.source = code
    return nb


def submit(course: Path, student: str, assignment: str, nb) -> Path:
    """Write ``nb`` where nbgrader collects it: ``submitted/<student>/<assignment>/<assignment>.ipynb``."""
    folder = Path(course) / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{assignment}.ipynb"
    nbformat.write(nb, str(path))
    return path
