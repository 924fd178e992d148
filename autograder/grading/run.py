"""One grading of a class by ``make grade``: what its phases read and what each leaves for the next (:class:`Run`).

:mod:`autograder.grading.phases` runs the phases, each a function of one run.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from autograder.grading import kept
from autograder.grading.sandboxed import Precomputed, Remote
from autograder.grading.saved import Saved
from autograder.release import course
from autograder.sandbox.limits import Limits


class GradingUnavailable(SystemExit):
    """Grading cannot start (the preflight failed): nothing was scored. Its one argument, the message,
    says what to fix; :func:`autograder.cli.grade.main` prints it as one ``error:`` line and exits with
    status 2 (a caller that does not catch it exits with the message, as for any SystemExit)."""

    def __init__(self, message: str):
        super().__init__(message)


@dataclass
class Run:
    """One grading of a class: what its phases read, and what each phase leaves for the next."""

    assignment: str
    root: Path
    students: list[str]
    settings: course.Release
    quiet: bool
    jobs: int
    feedback_seconds: float
    allow_released: bool
    not_listed: list[str] = field(default_factory=list)  # with a submission, not on the class list: never graded
    keys: kept.Keys | None = None  # the keys of phases 1, 4 and 5 (grading/kept)
    saved: Saved | None = None  # the grader's saved records
    tests_recorded: bool = False  # phase 1 ran, or its record shows that nothing it records changed
    states: dict[str, str | None] = field(default_factory=dict)  # phases 4, 5: each submission in the gradebook
    autograded: set[str] = field(default_factory=set)  # phase 4: the students given to nbgrader autograde
    again: bool = False  # grade every notebook, its saved report fitting or not (--again)
    limits: Limits = field(default_factory=Limits)  # the sandbox's, for every notebook (--cell-timeout, ...)
    found: Precomputed | None = None  # phases 2 and 3: notes, the refused, the not graded, nothing answered
    excluded: list[str] = field(default_factory=list)  # phase 4: the students not given to nbgrader
    refused_by_nbgrader: dict[str, str] = field(default_factory=dict)  # phase 4: student -> nbgrader's error
    feedback_notes: dict[str, list[str]] = field(default_factory=dict)  # phase 5
    stopped: dict[str, str] = field(default_factory=dict)  # phase 5: student -> the notebook stopped on
    remote: Remote | None = None  # phase 3's graders on other machines (make grade CLUSTER=...), or None: here

    @property
    def env(self) -> dict:
        """The environment of nbgrader's processes: the same release as this grading's."""
        return course.environment(self.settings)

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)
