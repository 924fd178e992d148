"""The reference solutions of the graded items: one module per assignment,
``attention_course.solutions.<assignment>``, e.g. ``attention_course.solutions.ch03_multi_head``.

Where the course's ``solutions/`` folder is (the instructor's repository), each module is built,
when first imported, from the solution cells of ``solutions/<assignment>/<assignment>.ipynb``,
the one source of every graded item (:func:`autograder.reference.module_source`). In a student's
copy of the course (the student repository, its Colab install, the grading sandbox) the module of
an assignment is a file in this folder, written only once the instructor has released that
chapter's solutions; until then, importing it fails.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys


class _NotebookLoader(importlib.abc.Loader):
    def __init__(self, assignment: str):
        self.assignment = assignment

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        from autograder import reference

        source = reference.module_source(self.assignment)
        exec(compile(source, module.__spec__.origin, "exec"), module.__dict__)


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
        try:
            from autograder import course

            notebook = course.notebook_path(assignment, "solutions")
        except (ImportError, FileNotFoundError):
            return None
        return importlib.util.spec_from_loader(fullname, _NotebookLoader(assignment), origin=str(notebook))


if not any(isinstance(finder, _NotebookFinder) for finder in sys.meta_path):
    sys.meta_path.append(_NotebookFinder())
