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
    pass


class SandboxProtocolError(SandboxDied):
    """The process sent something the grader did not ask for, or in a form it does not accept."""


class SandboxUnavailable(RuntimeError):
    """The sandbox could not be started, before any student code ran: the grader's failure, not the
    student's. The message says what went wrong, for the instructor."""
