"""The reference solutions, read from the instructor's notebooks: the one source of each graded item.

The solution cells of ``solutions/<assignment>/<assignment>.ipynb`` define every graded item, and
the module ``attention_course.solutions.<assignment>`` holds them (:mod:`attention_course.solutions`
builds it from the notebook where the course's ``solutions/`` folder is; the student export writes
it as a file once the chapter is released, :mod:`autograder.release.packages`). This module finds a graded
item's reference there, and its known-mistake variants. The hidden tests compare students' work with
it, the book runs it and shows it in its solution blocks, and later chapters build on it.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path

from attention_course import solutions
from attention_course.tooling import notebooks
from autograder.release import course

PACKAGE = "attention_course.solutions"


class ReferenceUnavailable(RuntimeError):
    """The instructor's solutions are not on this machine."""


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


def replaced(code: str, replacements, where: str) -> str:
    """``code`` (the reference answer ``where``, "assignment/item") with each ``(old, new)`` replacement made in
    turn; a ValueError where an ``old`` is not there."""
    for old, new in replacements:
        if old not in code:
            raise ValueError(f"{where}: {old!r} is not in the reference solution")
        code = code.replace(old, new)
    return code


_VARIANTS: dict[tuple, object] = {}
_VARIANTS_LOCK = threading.Lock()


def variant(assignment: str, name: str, replacements: tuple[tuple[str, str], ...]):
    """The reference item ``name`` with ``replacements`` ((old, new) pieces of its code) made: a
    known mistake, for the grader to recognise in a student's values. Each ``old`` must be there."""
    key = (assignment, name, tuple(map(tuple, replacements)))
    with _VARIANTS_LOCK:
        if key in _VARIANTS:
            return _VARIANTS[key]
        code = replaced(item_source(assignment, name), key[2], f"{assignment}/{name}")
        namespace = dict(vars(load(assignment)))
        # a name of its own, under which a Triton kernel in it reads its source (when it first runs)
        filename = f"<{assignment}/{name}, known mistake {len(_VARIANTS) + 1}>"
        solutions.register_source(code, filename)
        exec(compile(code, filename, "exec"), namespace)
        _VARIANTS[key] = namespace[name]
        return _VARIANTS[key]
