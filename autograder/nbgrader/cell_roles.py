"""Cells' nbgrader metadata made the instructor's, or removed, before nbgrader reads it (``InstructorCellRoles``).

:class:`InstructorCellRoles` runs first when ``nbgrader autograde`` sanitises a submission: every
cell's nbgrader metadata becomes the instructor's (from the gradebook) or none, so that nbgrader
never refuses a notebook over metadata a student wrote, and its log never quotes a cell because of
it.
"""

from __future__ import annotations

import copy

from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.grading.source import roles as graded_roles


def instructor_metadata(notebook) -> dict[str, dict]:
    """grade_id -> the nbgrader metadata of that cell of the instructor's notebook, as the gradebook
    records it (``notebook``: the gradebook's Notebook)."""
    grade = {cell.name: cell.max_score for cell in notebook.grade_cells}
    task = {cell.name: cell.max_score for cell in notebook.task_cells}
    solution = {cell.name for cell in notebook.solution_cells}
    roles = {}
    for cell in notebook.source_cells:
        meta = {
            "schema_version": 3,
            "grade": cell.name in grade,
            "solution": cell.name in solution,
            "locked": bool(cell.locked),
            "task": cell.name in task,
            "grade_id": cell.name,
            "cell_type": cell.cell_type,
        }
        if cell.name in grade or cell.name in task:
            meta["points"] = grade.get(cell.name, task.get(cell.name))
        roles[cell.name] = meta
    return roles


def give_instructor_roles(nb, roles: dict[str, dict]) -> int:
    """Give each cell of ``nb`` that holds one of the instructor's grade_ids the nbgrader metadata and the type of
    the instructor's cell, and every other cell (one whose grade_id is not the instructor's, or that has none,
    and each later copy of a cell, which Jupyter's copy and paste makes with the same grade_id) no nbgrader
    metadata at all: :func:`autograder.grading.source.roles` decides which. Returns how many cells changed.

    A cell's role is the instructor's to decide, and the grader already decides it so: its program
    (:func:`autograder.grading.source.student_program`) reads the cells' roles with the same function, and
    runs the instructor's setup and test cells, found by grade_id, and everything else as the student's code,
    whatever else the metadata says. Left as the student wrote it, that metadata is an instruction to
    nbgrader: ``"task": true`` on a code cell, a missing or malformed grade_id, an unknown schema version each
    make nbgrader refuse the notebook (it quotes the cell's source in its log on the way) or stop grading the
    class, and a grade_id that two cells hold (a copied cell) makes it empty one and then fail on it
    (``KeyError: 'grade_id'``). Made the instructor's, nbgrader grades the notebook as the sandbox did: the
    first copy of a cell keeps its role, the others are the student's own cells (an answer cell's copies
    all run, top to bottom), and the program the grader runs is the same before and after, so the report
    made before ``nbgrader autograde`` is still the one used.
    """
    kinds = {grade_id: meta["cell_type"] for grade_id, meta in roles.items()}
    changed = 0
    for cell, role in zip(nb.cells, graded_roles(nb, kinds)):
        metadata = cell.get("metadata")
        if role.grade_id is None:
            if isinstance(metadata, dict) and "nbgrader" in metadata:
                del metadata["nbgrader"]
                changed += 1
            continue
        wanted = roles[role.grade_id]
        changed += _role(metadata["nbgrader"]) != _role(wanted) or cell.cell_type != role.cell_type
        # Replaced even when the role is the same: the other keys (a checksum) are nbgrader's to recompute,
        # and a malformed one would fail its validation.
        metadata["nbgrader"] = copy.deepcopy(wanted)
        _retype(cell, role.cell_type)
    return changed


def _retype(cell, cell_type: str) -> None:
    """The cell made a ``cell_type`` cell, its source kept (as nbgrader's ``OverwriteCells`` does, which then
    finds nothing to change), with no key that a cell of that type may not have."""
    if cell.cell_type == cell_type:
        return
    cell.cell_type = cell_type
    if cell_type == "code":
        cell.pop("attachments", None)
        cell.outputs, cell.execution_count = [], None
    else:
        cell.pop("outputs", None)
        cell.pop("execution_count", None)


def _role(meta: dict) -> tuple:
    return (
        *(bool(meta.get(key, False)) for key in ("grade", "solution", "locked", "task")),
        meta.get("points"),
        meta.get("schema_version"),
    )


class InstructorCellRoles(NbGraderPreprocessor):
    """Every cell's nbgrader metadata made the instructor's, or removed (see :func:`give_instructor_roles`).

    The first of ``Autograde.sanitize_preprocessors``: before nbgrader's own steps read a grade_id
    (``DeduplicateIds`` fails on a grade cell without one) or validate the metadata
    (``CheckCellMetadata``)."""

    _roles: dict[tuple[str, str, str], dict] = {}  # one nbgrader process grades a class: read them once

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        key = (info["db_url"], info["assignment"], info["notebook"])
        if key not in self._roles:
            with Gradebook(info["db_url"]) as gradebook:
                self._roles[key] = instructor_metadata(gradebook.find_notebook(info["notebook"], info["assignment"]))
        changed = give_instructor_roles(nb, self._roles[key])
        if changed:
            self.log.info(
                "%s/%s: the nbgrader metadata of %d cell(s) was not the instructor's; the instructor's is used",
                info["student"],
                info["assignment"],
                changed,
            )
        return nb, resources
