"""The feedback's markdown and raw cells cut to length, with a note (``LimitMarkdown``).

:class:`LimitMarkdown` runs first when ``nbgrader generate_feedback`` writes a student's feedback: it
cuts markdown and raw cells too long to show, says so at the top of the feedback, and tells ``make
grade`` (through the file named by ``AUTOGRADER_FEEDBACK_PROGRESS``) which notebook it is writing, so
that a notebook whose feedback takes too long is stopped (:func:`autograder.grading.feedback.write_feedback`).
"""

from __future__ import annotations

import json
import os

from nbformat.v4 import new_markdown_cell
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer

from autograder.grading.feedback import FEEDBACK_PROGRESS


def announce_feedback(student: str, notebook: str, cut: int) -> None:
    """Tell ``make grade`` (the file named by ``AUTOGRADER_FEEDBACK_PROGRESS``, if set) that the feedback on a
    student's notebook is being written, and how many of its cells were cut."""
    path = os.environ.get(FEEDBACK_PROGRESS)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"student": student, "notebook": notebook, "cut": cut}) + "\n")


CUT_NOTE = (
    "**Note from the grader:** {count} markdown or raw cell(s) of this notebook were too long to show "
    "in full in this feedback, and are shown cut (each to {cell:,} characters, {total:,} in all). "
    "Your work was graded as you submitted it; only this page is shortened."
)


class LimitMarkdown(NbGraderPreprocessor):
    """Markdown and raw cells cut to ``max_cell_chars`` each and ``max_total_chars`` in all, with a note.

    The first of ``GenerateFeedback.preprocessors``. nbconvert renders a markdown cell in time that
    grows faster than its length on some inputs; a cut cell is followed by a cell of the course's
    saying how long it was, and the feedback starts with a note (``CUT_NOTE``). It also announces
    the notebook (:func:`announce_feedback`), so that ``make grade`` can time each one."""

    max_cell_chars = Integer(20_000, help="the most characters of one markdown or raw cell shown").tag(config=True)
    max_total_chars = Integer(200_000, help="the most characters of markdown and raw cells shown in all").tag(
        config=True
    )

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        cells, shown, cut = [], 0, 0
        for cell in nb.cells:
            cells.append(cell)
            if cell.cell_type not in ("markdown", "raw"):
                continue
            room = max(0, min(self.max_cell_chars, self.max_total_chars - shown))
            length = len(cell.source)
            if length > room:
                cell.source = cell.source[:room]
                cut += 1
                cells.append(
                    new_markdown_cell(
                        f"*[The grader cut the cell above: it holds {length:,} characters, "
                        f"and the first {room:,} are shown.]*"
                    )
                )
            shown += len(cell.source)
        if cut:
            note = CUT_NOTE.format(count=cut, cell=self.max_cell_chars, total=self.max_total_chars)
            nb.cells = [new_markdown_cell(note), *cells]
        announce_feedback(str(info.get("student", "")), str(info.get("notebook", "")), cut)
        return nb, resources
