"""The student's markdown sanitised, the course's shown as written (``SanitizeStudentHTML``)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbconvert.preprocessors.sanitize import SanitizeHTML

from autograder.release import course


class SanitizeStudentHTML(SanitizeHTML):
    """nbconvert's :class:`SanitizeHTML`, for what the student wrote: a markdown cell identical to one of
    the released notebook's (the course's own text) is left as written, so that its code spans are not
    escaped twice (``->`` shown as ``-&gt;``); every other markdown or raw cell is sanitised, and so are
    outputs, each without its metadata: nbconvert's template loads the file that an image output's
    ``metadata.filenames`` names, and puts an HTML output marked ``isolated`` in a frame. Markdown's own
    images are not HTML until they are rendered: the pages' filters show them as text
    (:mod:`autograder.nbgrader.inert`)."""

    def preprocess(self, nb, resources):
        assignment = (resources.get("nbgrader") or {}).get("assignment")
        self._course_text = _released_markdown(assignment) if assignment else frozenset()
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "markdown" and cell.source in self._course_text:
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)

    def sanitize_code_outputs(self, outputs):
        for output in outputs:
            if "metadata" in output:
                output.metadata = {}
        return super().sanitize_code_outputs(outputs)


def _released_markdown(assignment: str) -> frozenset[str]:
    """The markdown cells' sources of ``assignment``'s released notebook (under the current folder, the
    course's, as nbgrader runs)."""
    try:
        nb = nbformat.read(str(course.notebook_path(assignment, "exercises", Path.cwd())), as_version=4)
    except (OSError, ValueError):
        return frozenset()
    return frozenset(cell.source for cell in nb.cells if cell.cell_type == "markdown")
