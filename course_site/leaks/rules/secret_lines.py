"""The rule of secret lines: a hidden-test line, or an unreleased solution's line, that no public source shows."""

from __future__ import annotations

from collections.abc import Iterator

from course_site.leaks.published import TextFile
from course_site.leaks.regions import Secret, assignment_of
from course_site.leaks.report import Problem


def find(file: TextFile) -> Iterator[Problem]:
    """The secret lines that ``file`` holds, one problem per cell they come from (not the solution
    cells whose code :mod:`~course_site.leaks.rules.solution_code` reports); nothing in a known file."""
    if file.known:
        return
    hits: dict[tuple[str, str, str], list[Secret]] = {}
    for secret, inner in zip(file.secrets.lines, file.secrets.line_words):
        if not inner <= file.words:
            continue  # a word of the line is missing: the line is not there
        if any(secret.text in view for view in file.views):
            hits.setdefault((secret.notebook, secret.cell, secret.kind), []).append(secret)
    for (notebook, cell, kind), lines in hits.items():
        if kind == "reference-solution" and (notebook, cell) in file.code_hits:
            continue  # reported by the rule of solution code
        count = f"{len(lines)} {kind} lines" if len(lines) > 1 else f"a {kind} line"
        yield Problem(
            file.rel,
            f"{file.line_of(lines[0].text)}{count} of {notebook}, cell {cell}",
            assignment_of(notebook),
            cell,
        )
