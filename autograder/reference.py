"""The reference solutions, read from the instructor's notebooks: the one source of each graded item.

The solution cells of ``solutions/<assignment>/<assignment>.ipynb`` define every graded item.
:func:`module_source` turns them into the source of a Python module (the setup cell's imports,
then each solution cell without its ``### BEGIN/END SOLUTION`` markers), and that module is
importable as ``attention_course.solutions.<assignment>``: built from the notebook where the
course's ``solutions/`` folder is, or a file that the student export writes once the chapter is
released (:mod:`autograder.packages`). The hidden tests compare students' work with it, the book
runs it and shows it in its solution blocks, and later chapters build on it.
"""

from __future__ import annotations

import ast
import importlib
import threading
from pathlib import Path

from autograder import course, notebooks

PACKAGE = "attention_course.solutions"
HEADER = '''"""The reference solution of {assignment}, built from solutions/{assignment}/{assignment}.ipynb.

Generated: the instructor notebook is the one source. Do not edit.
"""
'''


class ReferenceUnavailable(RuntimeError):
    """The instructor's solutions are not on this machine."""


def solutions_root() -> Path:
    return course.course_root()


def _setup_code(source: str) -> str:
    """A setup cell without the lines that only the test cells need (``from autograder import *``,
    the ``ASSIGNMENT`` name) and the comments just above them."""
    tree = ast.parse(source)
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
    """The Python source of the reference module of ``assignment``."""
    try:
        path = course.notebook_path(assignment, "solutions", root)
    except FileNotFoundError as exc:
        raise ReferenceUnavailable(
            f"the reference solution of {assignment!r} is not available here ({exc}); "
            "hidden tests run only where the course's solutions/ folder is"
        ) from None
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


def load(assignment: str):
    """The reference module of ``assignment`` (``attention_course.solutions.<assignment>``)."""
    try:
        return importlib.import_module(f"{PACKAGE}.{assignment}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{PACKAGE}.{assignment}":
            raise
        raise ReferenceUnavailable(
            f"the reference solution of {assignment!r} is not available here; hidden tests run only where "
            "the course's solutions/ folder is"
        ) from None


def get(assignment: str, name: str):
    """The reference implementation of one graded item."""
    module = load(assignment)
    if not hasattr(module, name):
        raise ReferenceUnavailable(f"the solution notebook of {assignment!r} defines no {name!r}")
    return getattr(module, name)


def defining(assignment: str, name: str):
    """The reference of the graded item ``name`` as ``assignment`` sees it: its own, or that of the
    earliest chapter before it that defines ``name`` (chapter 6 builds on chapter 3's
    ``MultiHeadAttention``)."""
    names = course.assignments()
    earlier = names[: names.index(assignment) + 1] if assignment in names else [assignment]
    for candidate in [assignment, *earlier[:-1]]:
        try:
            return get(candidate, name)
        except ReferenceUnavailable:
            continue
    raise ReferenceUnavailable(f"no solution notebook up to {assignment!r} defines {name!r}")


def item_source(assignment: str, name: str, root: Path | None = None) -> str:
    """The code of the solution cell that defines ``name`` (markers removed), as the book shows it."""
    nb = notebooks.read(course.notebook_path(assignment, "solutions", root))
    for cell in nb.cells:
        if notebooks.is_solution(cell) and name in notebooks.defined_names(cell.source):
            return notebooks.solution_body(cell).strip()
    raise ReferenceUnavailable(f"no solution cell of {assignment!r} defines {name!r}")


_VARIANTS: dict[tuple, object] = {}
_VARIANTS_LOCK = threading.Lock()


def variant(assignment: str, name: str, replacements: tuple[tuple[str, str], ...]):
    """The reference item ``name`` with ``replacements`` ((old, new) pieces of its code) made: a
    known mistake, for the grader to recognise in a student's values. Each ``old`` must be there."""
    key = (assignment, name, tuple(map(tuple, replacements)))
    with _VARIANTS_LOCK:
        if key in _VARIANTS:
            return _VARIANTS[key]
        code = item_source(assignment, name)
        for old, new in key[2]:
            if old not in code:
                raise ValueError(f"{assignment}/{name}: {old!r} is not in the reference solution")
            code = code.replace(old, new)
        namespace = dict(vars(load(assignment)))
        exec(compile(code, f"<{assignment}/{name}, a known mistake>", "exec"), namespace)
        _VARIANTS[key] = namespace[name]
        return _VARIANTS[key]
