"""The ways a sandbox fails: the student's (timed out, died, broke the protocol) or the grader's (could not start).

A :class:`SandboxError` is scored as the student's; :class:`SandboxUnavailable` comes before any student code
ran and is never scored.
"""

from __future__ import annotations


class SandboxError(Exception):
    """The student's process failed: it timed out, died or broke the protocol. Scored as the student's."""

    def __init__(self, message: str, cell: int | None = None):
        super().__init__(message)
        self.cell = cell


class SandboxTimeout(SandboxError):
    pass


class SandboxDied(SandboxError):
    """The student's process ended. ``own``: of the student's code's doing (it exited, a fault or limit of its own
    ended it); else a signal from outside, or an end that could not be read, which a fresh sandbox tries again."""

    own = True


class SandboxProtocolError(SandboxDied):
    """The process sent something the grader did not ask for, or in a form it does not accept."""


class SandboxUnavailable(RuntimeError):
    """The sandbox could not be started, before any student code ran: the grader's failure, not the
    student's. The message says what went wrong, for the instructor."""


class SandboxLost(BaseException):
    """The grader could not give the student's code its due: the host kept its process from a CPU past a limit's
    backstop, or something outside the sandbox ended it, again in a fresh one. Not graded, never scored. Not an
    ``Exception``: no check's handler of what the student's code raised may take it for the student's; the
    notebook's grading ends with it (:mod:`autograder.grading.notebook`)."""
