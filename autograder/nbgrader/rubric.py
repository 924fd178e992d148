"""The rubric beside each written answer in nbgrader's formgrader (``ShowRubric``).

The formgrader shows a submission as the autograded notebook, rendered by an ``HTMLExporter`` with
nbgrader's configuration (its *formgrade* template): each written answer in a panel with the field for its
score and a comment box. ``nbgrader_config.py`` gives that exporter this preprocessor, which puts a cell
holding the answer's rubric, read from the instructor notebook (``solutions/<assignment>/<notebook>.ipynb``),
right below each written answer. Only the page is changed: the autograded notebook on disk, the gradebook
and the student's feedback never hold the rubric (the feedback's exporter runs without it, and it acts only
on the formgrader's pages, which name a submission).
"""

from __future__ import annotations

import os
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_markdown_cell

from attention_course.tooling import notebooks

RUBRIC_CELL = "autograder_rubric"  # the metadata key that marks the cells this preprocessor adds


def rubrics(path: Path) -> dict[str, str]:
    """grade_id -> the rubric of each written answer of the instructor notebook at ``path``."""
    nb = notebooks.read(path)
    return {gid: notebooks.cell_text(cell).strip() for gid, cell in notebooks.written_cells(nb).items()}


def rubric_cell(grade_id: str, text: str, source: str):
    """The cell shown below the written answer ``grade_id``: ``text`` (its rubric, or why there is none), quoted,
    under a heading that says where it comes from and that the student never sees it."""
    quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in text.splitlines())
    cell = new_markdown_cell(
        f"**Rubric for `{grade_id}`** (from `{source}`; shown to you in the formgrader only, never in the "
        f"student's feedback)\n\n{quoted}"
    )
    cell.metadata[RUBRIC_CELL] = grade_id
    return cell


class ShowRubric(Preprocessor):
    """Below each written answer of a submission that the formgrader shows, its rubric (:func:`rubric_cell`)."""

    def preprocess(self, nb, resources):
        assignment, notebook = resources.get("assignment_id"), resources.get("notebook_id")
        if not (assignment and notebook and "submission_id" in resources):  # not the formgrader's page
            return nb, resources
        course = self.config.get("CourseDirectory", {})
        root = Path(course.get("root") or os.getcwd())
        source = Path(course.get("source_directory") or "source") / assignment / f"{notebook}.ipynb"
        try:
            found = rubrics(root / source)
        except Exception as error:  # no instructor notebook here, or not one that nbformat reads
            found, missing = {}, f"No rubric: the instructor notebook {source} could not be read ({error})."
        else:
            missing = f"No rubric: the instructor notebook {source} has no written answer of this grade id."
        cells = []
        for cell in nb.cells:
            cells.append(cell)
            if notebooks.is_written(cell):
                grade_id = notebooks.cell_id(cell)
                cells.append(rubric_cell(grade_id, found.get(grade_id, missing), source.as_posix()))
        nb.cells = cells
        return nb, resources
