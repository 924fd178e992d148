"""The reference solutions of the graded items, one module per assignment.

Each is ``attention_course.solutions.<assignment>``, e.g. ``attention_course.solutions.ch03_multi_head``.

Where the course's ``solutions/`` folder is (the instructor's repository), each module is built,
when first imported, from the solution cells of ``solutions/<assignment>/<assignment>.ipynb``, the
one source of every graded item (:func:`module_source`: the setup cell's imports, then each
solution cell without its ``### BEGIN/END SOLUTION`` markers). In a student's copy of the course
(the student repository, its Colab install, the grading sandbox) the module of an assignment is a
file in this folder, written by :mod:`autograder.release.packages` only once the instructor has released
that chapter's solutions; until then, importing it fails.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.util
import linecache
import sys
from pathlib import Path

from attention_course.tooling import notebooks, syntax

HEADER = '''"""The reference solution of {assignment}, built from solutions/{assignment}/{assignment}.ipynb.

Generated: the instructor notebook is the one source. Do not edit.
"""
'''


def _notebook(assignment: str, root: Path | None = None) -> Path:
    return Path(root or notebooks.COURSE_ROOT) / "solutions" / assignment / f"{assignment}.ipynb"


def _setup_code(source: str) -> str:
    """A setup cell without the lines that only the test cells need (``from autograder import *``,
    the ``ASSIGNMENT`` name) and the comments just above them."""
    tree = syntax.parse(source)
    drop = set()
    for node in tree.body:
        imports_autograder = (
            isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "autograder"
        ) or (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "autograder" for a in node.names))
        names_assignment = isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "ASSIGNMENT" for t in node.targets
        )
        if imports_autograder or names_assignment:
            drop.update(range(node.lineno, node.end_lineno + 1))
    lines = source.splitlines()
    for number in sorted(drop):  # the comment lines directly above a dropped statement
        above = number - 1
        while above >= 1 and above not in drop and lines[above - 1].lstrip().startswith("#"):
            drop.add(above)
            above -= 1
    kept = [line for number, line in enumerate(lines, 1) if number not in drop]
    return "\n".join(kept).strip()


def module_source(assignment: str, root: Path | None = None) -> str:
    """The Python source of the reference module of ``assignment``, from the instructor notebook under
    ``root`` (default: this course); ``FileNotFoundError`` where there is none."""
    path = _notebook(assignment, root)
    if not path.is_file():
        raise FileNotFoundError(f"no instructor notebook of {assignment!r} at {path}")
    nb = notebooks.read(path)
    parts = [HEADER.format(assignment=assignment).strip()]
    for cell in nb.cells:
        if notebooks.is_setup(cell) and notebooks.cell_id(cell) != notebooks.COLAB_CELL:
            code = _setup_code(cell.source)
            if code:
                parts.append(code)
        elif notebooks.is_solution(cell):
            parts.append(notebooks.solution_body(cell).strip())
    return "\n\n\n".join(parts) + "\n"


class _NotebookLoader(importlib.abc.Loader):
    def __init__(self, assignment: str):
        self.assignment = assignment

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        source = module_source(self.assignment)
        register_source(source, module.__spec__.origin)
        exec(compile(source, module.__spec__.origin, "exec"), module.__dict__)


def register_source(source: str, filename: str) -> None:
    """Make ``source`` the lines that ``inspect`` and tracebacks read for code compiled as ``filename``: the module
    built from a notebook (whose file is the notebook's JSON), and code that exists only as a string. Triton reads a
    kernel's source this way to compile or interpret it."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)


class _NotebookFinder(importlib.abc.MetaPathFinder):
    """Finds ``attention_course.solutions.<assignment>`` in the instructor notebook, where there is one.

    It comes after Python's own finders, so a module file in this folder (a released chapter in a
    student's copy) is what gets imported where there is one.
    """

    def find_spec(self, fullname, path=None, target=None):
        prefix = __name__ + "."
        if not fullname.startswith(prefix) or "." in fullname[len(prefix) :]:
            return None
        assignment = fullname[len(prefix) :]
        notebook = _notebook(assignment)
        if not notebook.is_file():
            return None
        return importlib.util.spec_from_loader(fullname, _NotebookLoader(assignment), origin=str(notebook))


if not any(isinstance(finder, _NotebookFinder) for finder in sys.meta_path):
    sys.meta_path.append(_NotebookFinder())
