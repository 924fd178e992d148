"""The feedback's test cells without hidden tests (``HideHiddenTests``), a failed check's message wrapped.

nbgrader's own feedback shows each test cell as it ran, hidden tests included, and a failing hidden
test's traceback quotes the hidden code. :class:`HideHiddenTests` leaves, for each test cell, the
visible tests, a one-line placeholder where the hidden tests were, and the failing check's message
without the traceback.
"""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import is_grade
from traitlets import List

from attention_course.tooling.notebooks import without_hidden_tests
from autograder.api.items import shown_lines
from autograder.text.terminal import clean_text

PLACEHOLDER = "# Hidden tests ran here; their result is shown below."
FEEDBACK_WIDTH = 100  # characters of a failed check's message lines in the feedback


class HideHiddenTests(NbGraderPreprocessor):
    """Replace hidden test code with a placeholder and tracebacks in test cells with their last line."""

    # The feedback exporter configures this on every preprocessor it runs.
    display_data_priority = List(
        ["text/html", "application/pdf", "text/latex", "image/svg+xml", "image/png", "image/jpeg", "text/plain"]
    ).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code":
            return cell, resources
        cell.source = without_hidden_tests(cell.source, PLACEHOLDER)
        if is_grade(cell):
            for output in cell.get("outputs", []):
                if output.output_type == "error":  # wrapped as Jupyter shows it: a page never scrolls sideways
                    shown = shown_lines(clean_text(f"{output.ename}: {output.evalue}", 4000), FEEDBACK_WIDTH)
                    output.traceback = ["\n".join(shown)]
                elif output.output_type == "stream":  # a question's parts (apply_report), wrapped the same way
                    output.text = "\n".join(shown_lines(clean_text(output.text, 4000), FEEDBACK_WIDTH))
        return cell, resources
