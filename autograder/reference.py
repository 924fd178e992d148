"""The reference solutions, read from the instructor's notebooks.

The solution cells of ``solutions/<assignment>/<assignment>.ipynb`` are the one
source of truth for each graded item: the exercise is generated from them, and
the hidden tests compare students' work with what they compute. Students'
copies of the course have no ``solutions/`` folder, so hidden tests can run only
where the instructor grades.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from autograder import notebooks


class ReferenceUnavailable(RuntimeError):
    """The instructor's solutions are not on this machine."""


def solutions_root() -> Path:
    return Path(os.environ.get("AUTOGRADER_COURSE_ROOT", notebooks.COURSE_ROOT))


@functools.lru_cache(maxsize=None)
def load(assignment: str) -> dict:
    """Run the setup and solution cells of the assignment's solution notebook; return its namespace."""
    try:
        path = notebooks.assignment_notebook(assignment, "solutions", solutions_root())
    except FileNotFoundError as exc:
        raise ReferenceUnavailable(
            f"the reference solution of {assignment!r} is not available here ({exc}); "
            "hidden tests run only where the course's solutions/ folder is"
        ) from None
    code = compile(notebooks.reference_source(notebooks.read(path)), str(path), "exec")
    namespace = {"__name__": f"autograder.reference.{assignment}"}
    exec(code, namespace)
    return namespace


def get(assignment: str, name: str):
    """The reference implementation of one graded item."""
    namespace = load(assignment)
    if name not in namespace:
        raise ReferenceUnavailable(f"the solution notebook of {assignment!r} defines no {name!r}")
    return namespace[name]
