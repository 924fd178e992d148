"""What a leak check reports: each problem it finds, the counts of what it read, and the error that stops it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autograder.release import course


class PublishError(Exception):
    """A problem with the arguments or the sources that stops publishing or checking."""


@dataclass(frozen=True)
class Problem:
    path: str  # relative to the checked folder
    reason: str
    assignment: str = ""  # for a solution or a hidden test: where it comes from
    item: str = ""  # the cell's grade_id
    share: float | None = None  # for solution code: the share of the region found

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class LeakReport:
    """What :func:`course_site.leaks.scan` found; ``ok`` when nothing."""

    directory: Path
    problems: list[Problem] = field(default_factory=list)
    files: int = 0  # text files scanned
    binary: int = 0  # binary files (compared with solutions/ only)
    secrets: int = 0  # secret lines looked for
    notebooks: int = 0  # solution notebooks they come from
    regions: int = 0  # solution regions of unreleased assignments compared as code
    known: int = 0  # text files identical to a public source or a third-party asset (markers only)
    unchecked: list[str] = field(default_factory=list)  # "assignment/item" too short or public to tell
    marker_exempt: list[str] = field(default_factory=list)
    has_solutions: bool = True
    release: course.Release | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems
