"""Test cells as released, and the Colab cell an export rewrote, restored quietly (``RestoreTestCells``)."""

from __future__ import annotations

from nbgrader.preprocessors import OverwriteCells
from nbgrader.utils import is_grade, is_locked

from attention_course.tooling.notebooks import released_source
from autograder.release import colab


class RestoreTestCells(OverwriteCells):
    """nbgrader's ``OverwriteCells``, which puts the instructor's read-only cells back, without its
    warning about every test cell that holds hidden tests: such a cell, as released (hidden tests
    removed), is untouched, so it is restored quietly; so is the Colab set-up cell that a term's export
    wrote for the students' repository (:func:`autograder.release.colab.retarget`). A cell the student really
    changed is still reported, by nbgrader and in the grading report."""

    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        as_released = grade_id is not None and is_grade(cell) and is_locked(cell)
        set_up = grade_id == colab.GRADE_ID and colab.repository_of(cell.source) is not None
        if as_released or set_up:
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except Exception:  # nbgrader's own handling below reports it
                source_cell = None
            if source_cell is not None and (set_up or cell.source.strip() == released_source(source_cell.source)):
                cell.source = source_cell.source
        return super().preprocess_cell(cell, resources, cell_index)
