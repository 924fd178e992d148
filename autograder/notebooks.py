"""Reading nbgrader notebooks: which cells are setup, solutions and tests."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat

from autograder.course import COURSE_ROOT

COLAB_CELL = "colab_setup"  # the grade_id of the first cell of every notebook (course_site.colab)
SOLUTION_RE = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION[ \t]*$\n?", re.S | re.M)


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_solution(cell) -> bool:
    return cell.cell_type == "code" and bool(nbgrader_meta(cell).get("solution"))


def is_test(cell) -> bool:
    meta = nbgrader_meta(cell)
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def is_setup(cell) -> bool:
    """A read-only code cell that is neither a solution nor a test (imports, helpers)."""
    meta = nbgrader_meta(cell)
    return (
        cell.cell_type == "code"
        and bool(meta.get("locked"))
        and not meta.get("solution")
        and not meta.get("grade")
    )


def cell_id(cell) -> str | None:
    return nbgrader_meta(cell).get("grade_id")


def assignment_notebook(assignment: str, folder: str = "solutions", root: Path = COURSE_ROOT) -> Path:
    """The one notebook of an assignment: ``<root>/<folder>/<assignment>/<assignment>.ipynb``."""
    path = Path(root) / folder / assignment / f"{assignment}.ipynb"
    if not path.is_file():
        raise FileNotFoundError(f"no notebook for assignment {assignment!r} at {path}")
    return path


def read(path: Path):
    return nbformat.read(str(path), as_version=4)


def reference_source(nb) -> str:
    """The code that defines the reference solution: setup cells and solution cells, in order."""
    parts = [cell.source for cell in nb.cells if is_setup(cell) or is_solution(cell)]
    return "\n\n".join(parts) + "\n"


def defined_names(source: str) -> list[str]:
    """The functions and classes that a cell's code defines at its top level."""
    tree = ast.parse(source)
    return [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]


def solution_body(cell) -> str:
    """A solution cell's source with the ``### BEGIN/END SOLUTION`` markers removed."""
    return SOLUTION_RE.sub(lambda m: m.group(1), cell.source)
