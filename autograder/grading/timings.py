"""Where one notebook's grading spends its time: seconds per phase, added up while it is graded.

:func:`grade_notebook <autograder.grading.notebook.grade_notebook>` records into its report's ``phases``
(:func:`recording`); code anywhere below it in ``grading/`` marks a phase with :func:`phase` (the sandbox's
warm-up, for one), which records nothing where no notebook is being graded. The checks' diagnosis, below
``grading/``, keeps its seconds on the notebook's record of known mistakes
(:attr:`autograder.api.items.KnownMistakes.seconds`), which the grading adds as the ``diagnosis`` phase. The
record is per thread of execution (a context variable), so that notebooks graded side by side in threads keep
their own.

The phases: ``reading`` (the instructor's and the student's notebooks), ``start-up`` (sandboxes started,
until their worker is ready; a notebook restarted after a hung cell starts more than one), ``cells`` (the
student's cells), ``warm-up`` (torch's meta-device kernels, loaded before the first call that needs
them), ``tests`` (the test cells, diagnosis included; each cell's own seconds are on its result),
``diagnosis`` (naming the known mistake that explains a failure) and ``decoding`` (the grader's decoding of the
sandbox's messages and of the values in them, part of the cells' and the tests' seconds: work that a student's
replies ask of the grader's own process, bounded by :data:`autograder.sandbox.wire.MAX_VALUES`).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

PHASES = ("reading", "start-up", "cells", "warm-up", "tests", "diagnosis", "decoding")

_CURRENT: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("grading_phases", default=None)


@contextlib.contextmanager
def recording(into: dict[str, float]) -> Iterator[dict[str, float]]:
    """Add the seconds of the phases marked inside to ``into`` (the report of the notebook being graded)."""
    token = _CURRENT.set(into)
    try:
        yield into
    finally:
        _CURRENT.reset(token)


def add(name: str, seconds: float) -> None:
    """Add ``seconds`` to phase ``name`` of the notebook being graded (nothing where none is)."""
    into = _CURRENT.get()
    if into is not None:
        into[name] = round(into.get(name, 0.0) + seconds, 3)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as phase ``name`` of the notebook being graded."""
    started = time.monotonic()
    try:
        yield
    finally:
        add(name, time.monotonic() - started)
