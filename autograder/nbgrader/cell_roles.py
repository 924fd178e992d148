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
        }
        if cell.name in grade or cell.name in task:
            meta["points"] = grade.get(cell.name, task.get(cell.name))
        roles[cell.name] = meta
    return roles


def give_instructor_roles(nb, roles: dict[str, dict]) -> int:
    """Give each cell of ``nb`` the nbgrader metadata of the instructor's cell whose grade_id it holds,
    and a cell whose grade_id is not the instructor's (or that has none) no nbgrader metadata at all.
    Returns how many cells' metadata changed.

    A cell's role is the instructor's to decide, and the grader already decides it so: its program
    (:func:`autograder.grading.source.student_program`) runs the instructor's setup and test cells,
    found by grade_id, and everything else as the student's code, whatever else the metadata says.
    Left as the student wrote it, that metadata is an instruction to nbgrader: ``"task": true`` on a
    code cell, a duplicated, missing or malformed grade_id, an unknown schema version each make
    nbgrader refuse the notebook (it quotes the cell's source in its log on the way) or stop grading
    the class. Made the instructor's, nbgrader grades the notebook as the sandbox did, and the
    program the grader runs is the same before and after (the grade_ids it reads are kept), so the
    report made before ``nbgrader autograde`` is still the one used.
    """
    changed = 0
    for cell in nb.cells:
        metadata = cell.get("metadata")
        if not isinstance(metadata, dict) or "nbgrader" not in metadata:
            continue
        meta = metadata["nbgrader"]
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        wanted = roles.get(grade_id) if isinstance(grade_id, str) else None
        if wanted is None:
            del metadata["nbgrader"]
            changed += 1
            continue
        changed += _role(meta) != _role(wanted)
        # Replaced even when the role is the same: the other keys (a checksum, the cell's type when
        # released) are nbgrader's to recompute, and a malformed one would fail its validation.
        metadata["nbgrader"] = copy.deepcopy(wanted)
    return changed


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
