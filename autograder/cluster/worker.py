"""A grading host's side of the cluster: the worker's grader (:class:`GradingHost`) and its task (:func:`grade`).

``make grade-worker`` starts a Dask worker with a :class:`GradingHost`: when the worker starts, it makes one
:class:`~autograder.grading.grader.Grader` (one zygote) that every notebook of the worker's life is graded
through, and checks with the preflight that its sandbox works; a worker whose sandbox does not work refuses
every notebook, with why. :func:`grade` is what the instructor's side sends: one notebook's bytes and what its
report must be graded from (the digests of :class:`~autograder.grading.saved.Inputs`). The worker computes the
digests of its own checkout; where they differ (another commit, another environment, other tests), it refuses
the notebook and says which differ, and grades nothing. Student code runs in the worker's sandbox, which has no
network: it never reaches Dask.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from distributed import get_worker
from distributed.diagnostics.plugin import WorkerPlugin

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.grading.saved import Class, Inputs
from autograder.release import course
from autograder.sandbox.limits import Limits

PLUGIN = "attention-course-grading-host"  # the plugin's name on a worker
TOPIC = "attention-course-grading"  # the events a worker logs (a notebook started), which the instructor follows
RESOURCE = "notebooks"  # a worker's notebooks at once (make grade-worker JOBS=N), one taken by each task


DIFFERENT = {
    "notebook": "the notebook's bytes (changed on the way)",
    "assignment": "the assignment's tests, reference or released notebook",
    "grader": "the grader's code (another commit, or files changed)",
    "environment": "the pinned packages, Python, the sandbox's limits or the release",
}


def differences(inputs: Inputs, expected: Inputs) -> str:
    """What differs between a worker's digests and the instructor's, in words ('' where nothing does)."""
    return "; ".join(words for name, words in DIFFERENT.items() if getattr(inputs, name) != getattr(expected, name))


class GradingHost(WorkerPlugin):
    """The worker's grader, made when the worker starts and closed when it stops; :attr:`problem` says why its
    sandbox does not work (None where it does)."""

    name = PLUGIN

    def __init__(self):
        self.grader = None
        self.problem: str | None = "the grading host is starting"
        self._classes: dict[tuple, Class] = {}
        self._lock: threading.Lock | None = None  # made where the worker runs (the plugin is sent pickled)

    async def setup(self, worker) -> None:
        self._lock = threading.Lock()
        await asyncio.get_running_loop().run_in_executor(None, self._start)

    def _start(self) -> None:
        from autograder.grading.grader import Grader
        from autograder.grading.notebook import preflight  # torch: imported where notebooks are graded

        self.grader = Grader(spawn=True)
        with self.grader:
            self.problem = preflight(course.release(COURSE_ROOT), grader=self.grader)

    def teardown(self, worker) -> None:
        if self.grader is not None:
            self.grader.close()

    def inputs(self, assignment: str, notebook: str, path: Path, release: course.Release, limits: Limits) -> Inputs:
        """The digests of grading ``path`` here (this checkout's code, notebooks and environment)."""
        key = (assignment, release, limits)
        with self._lock:
            if key not in self._classes:
                self._classes[key] = Class(assignment, COURSE_ROOT, release, limits)
            shared = self._classes[key]
        return shared.inputs(notebook, path)


def grade(assignment: str, notebook: str, data: bytes, expected: dict, release: list, limits: dict) -> dict:
    """Grade the submitted notebook ``notebook`` of ``assignment`` (its bytes ``data``) on this worker, under
    ``release`` (edition, released assignments) and ``limits`` (:class:`~autograder.sandbox.limits.Limits`'s
    fields). ``expected``: the instructor's digests of what it must be graded from. Returns the report (JSON),
    this worker's digests, its name and host and the seconds it took; or, where this worker must not grade it,
    ``refused``: why, with nothing graded."""
    started = time.monotonic()
    worker = get_worker()
    where = {"worker": str(worker.name), "address": worker.address, "host": socket.gethostname()}
    host = worker.plugins.get(PLUGIN)
    if not isinstance(host, GradingHost):
        return {**where, "refused": "the worker has no course grader (start it with make grade-worker)"}
    if host.problem:
        return {**where, "refused": f"its sandbox does not work: {host.problem}"}
    if assignment not in course.assignments(COURSE_ROOT) or notebook != Path(notebook).name:
        return {**where, "refused": f"its checkout has no notebook {notebook!r} of {assignment!r}"}
    worker.log_event(TOPIC, {"started": worker.get_current_task(), **where})
    edition, released = release
    settings, bounds = course.Release(edition, frozenset(released)), Limits(**limits)
    folder = Path(tempfile.mkdtemp(prefix="notebook-"))  # mode 0700: this worker's own
    try:
        path = folder / f"{notebook}.ipynb"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        inputs = host.inputs(assignment, notebook, path, settings, bounds)
        differs = differences(inputs, Inputs(**expected))
        if differs:
            return {**where, "refused": f"it would grade from other inputs than the instructor's: {differs}",
                    "inputs": asdict(inputs)}  # fmt: skip
        from autograder.grading.notebook import grade_notebook  # torch: imported where notebooks are graded

        report = grade_notebook(
            assignment, path, notebook=notebook, release=settings, grader=host.grader, limits=bounds
        )
        return {**where, "report": report.to_json(), "inputs": asdict(inputs), "seconds": time.monotonic() - started}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
