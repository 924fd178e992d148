"""nbgrader preprocessors for the feedback students read.

nbgrader's own feedback shows each test cell as it ran, hidden tests included,
and a failing hidden test's traceback quotes the hidden code. This preprocessor
(enabled in ``nbgrader_config.py``) leaves, for each test cell, the visible
tests, a one-line placeholder where the hidden tests were, and the failing
check's message without the traceback.
"""

from __future__ import annotations

import re

from nbgrader.preprocessors import ClearHiddenTests
from nbgrader.utils import is_grade
from traitlets import List

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PLACEHOLDER = "# Hidden tests ran here; their result is shown below."


class HideHiddenTests(ClearHiddenTests):
    """Replace hidden test code with a placeholder and tracebacks in test cells with their last line."""

    # The feedback exporter configures this on every preprocessor it runs.
    display_data_priority = List(
        ["text/html", "application/pdf", "text/latex", "image/svg+xml", "image/png", "image/jpeg", "text/plain"]
    ).tag(config=True)

    def _remove_hidden_test_region(self, cell) -> bool:
        lines, kept, inside, removed = cell.source.split("\n"), [], False, False
        for line in lines:
            if self.begin_test_delimeter in line:
                inside = removed = True
                kept.append(line[: len(line) - len(line.lstrip())] + PLACEHOLDER)
            elif self.end_test_delimeter in line:
                inside = False
            elif not inside:
                kept.append(line)
        cell.source = "\n".join(kept)
        return removed

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code":
            return cell, resources
        self._remove_hidden_test_region(cell)
        if is_grade(cell):
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    message = ANSI.sub("", f"{output.ename}: {output.evalue}")
                    output.traceback = [message]
        return cell, resources
