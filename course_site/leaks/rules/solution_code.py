"""The rule of solution code: the code of an unreleased reference solution, however renamed or laid out."""

from __future__ import annotations

from collections.abc import Iterator

from course_site.leaks.published import TextFile
from course_site.leaks.regions import assignment_of
from course_site.leaks.report import Problem


def find(file: TextFile) -> Iterator[Problem]:
    """Each unreleased solution region whose code ``file`` holds (:attr:`TextFile.code_hits`), with the
    share found; nothing in a known file."""
    if file.known:
        return
    for (notebook, item), share in sorted(file.code_hits.items()):
        yield Problem(
            file.rel,
            f"{share:.0%} of the code of a reference solution of {notebook}, cell {item} "
            "(compared with names, comments and layout ignored)",
            assignment_of(notebook),
            item,
            share,
        )
