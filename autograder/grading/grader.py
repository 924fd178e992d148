"""A grading run's own state: the settings while it grades, its sandbox's packages and its store of reports.

``make grade``, ``make check`` and the tests each make one :class:`Grader` and grade through it
(:func:`autograder.grading.notebook.grade_notebook` takes it as ``grader=``, and reads a report from its store
where it has one; a grading given none grades with one of its own, :func:`default`, on the process's shared
packages). This module grades nothing itself: it holds what the gradings share. What
grading changes for the process is changed while a grading runs and put back after it, never when a
module is imported:

- torch's threads: one, for each thread while it grades. The grader's own computations (inputs,
  references, stand-ins) are small: a pool of threads for them only spins against the sandboxes beside
  it (two threads made grading a chapter 6 notebook take twice as long on two cores). Under OpenMP
  (PyTorch's CPU builds) the count is each thread's own, so each thread that enters sets its own and
  gets it back when it leaves, and when the last grading ends, the count from before the first is set
  again (a thread started later takes the count set last);
- the warnings of the reference solutions and their known mistakes (an overflow that a mistake makes on
  purpose), which the grader runs: no concern of the instructor's terminal. Warnings' filters are the
  process's, shared by its threads, so they are ignored from the first grading that starts to the last
  that ends (:func:`warnings.catch_warnings`, entered and left once for all of them).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from autograder.grading.report import Report
from autograder.release import course, packages
from autograder.sandbox.limits import Limits

if TYPE_CHECKING:
    from autograder.sandbox.process import Sandbox

QUIET_MODULES = r"attention_course\.solutions\."  # the modules whose warnings grading does not show


class Store(Protocol):
    """Where a :class:`Grader` keeps reports by key (:func:`autograder.grading.source.submission_key`)."""

    def report(self, key: str, grade: Callable[[], Report]) -> Report:
        """The report stored under ``key``, or ``grade()``'s, stored unless the notebook was not graded."""


class _Settings:
    """The settings that grading changes, entered by each grading and left after it (see the module)."""

    def __init__(self):
        self._lock = threading.Lock()  # every change of the settings is made under it
        self._gradings = 0  # gradings running in the process
        self._before = 0  # torch's threads before the first of them: what a thread started after they end gets
        self._warnings: warnings.catch_warnings | None = None
        self._threads = threading.local()  # each thread's count before it entered, and how deep it is

    def enter(self) -> None:
        import torch  # imported by the first grading, not by make grade's start (see autograder.cli.grade)

        with self._lock:
            if self._gradings == 0:
                self._before = torch.get_num_threads()
                self._warnings = warnings.catch_warnings()
                self._warnings.__enter__()
                warnings.filterwarnings("ignore", module=QUIET_MODULES)
            self._gradings += 1
            depth = getattr(self._threads, "depth", 0)
            if depth == 0:
                self._threads.before = torch.get_num_threads()
                torch.set_num_threads(1)
            self._threads.depth = depth + 1

    def leave(self) -> None:
        import torch

        with self._lock:
            self._threads.depth -= 1
            if self._threads.depth == 0:
                torch.set_num_threads(self._threads.before)
            self._gradings -= 1
            if self._gradings == 0:
                # A thread's count is its own, but each thread started later takes the last one set: the
                # process's from before grading (a thread started during it found one, not its own, before).
                torch.set_num_threads(self._before)
                self._warnings.__exit__(None, None, None)
                self._warnings = None


_SETTINGS = _Settings()  # the process's: torch's threads and warnings' filters are the process's too


class Grader:
    """Grades notebooks with its own packages for the sandbox (each release's written once) and, where it has
    one, a store of reports (a notebook graded already is read from it); ``with grader:`` holds grading's
    settings (see the module) until it ends, for every grading it does on the way. With ``spawn`` (a class
    graded: ``make grade``), a grader that runs as root forks its students' workers from a zygote into
    sandboxes of their own (:mod:`autograder.sandbox.spawn`), which :meth:`close` stops."""

    def __init__(
        self,
        store: Store | None = None,
        sandbox_packages: packages.SandboxPackages | None = None,
        *,
        spawn: bool = False,
    ):
        self.store = store
        self._own_packages = sandbox_packages is None
        self._packages = packages.SandboxPackages() if sandbox_packages is None else sandbox_packages
        self.spawn = spawn
        self._zygotes: dict = {}  # (limits, packages folder) -> its Zygote, or why it could not be used
        self._zygotes_lock = threading.Lock()

    def packages(self, release: course.Release) -> Path:
        """The folder of the students' packages under ``release`` that this grader's sandboxes mount."""
        return self._packages.folder(release)

    def sandboxes(self, limits: Limits, isolation: str, release: course.Release) -> Callable[[], Sandbox]:
        """What starts a sandbox for a student's notebook: a fresh :class:`~autograder.sandbox.process.Sandbox`,
        or, with ``spawn``, as root, under bubblewrap, one whose worker the zygote forks (started by the first
        call); where the zygote cannot be used (the grader's failure), fresh sandboxes from then on."""
        from autograder.sandbox.process import Sandbox

        folder = self.packages(release)

        def fresh() -> Sandbox:
            return Sandbox(limits, isolation, folder)

        if not self.spawn or isolation != "bwrap" or os.geteuid() != 0:
            return fresh

        def spawned() -> Sandbox:
            from autograder.sandbox.spawn import ZygoteUnavailable

            zygote = self.zygote(limits, folder)
            if zygote is not None:
                try:
                    return zygote.sandbox()
                except ZygoteUnavailable as error:
                    with self._zygotes_lock:
                        self._zygotes[(limits, folder)] = str(error)
                    zygote.close()
            return fresh()

        return spawned

    def zygote(self, limits: Limits, folder: Path):
        """The zygote of sandboxes with ``limits`` mounting ``folder`` (started here if it is not yet), or None
        where it could not be used."""
        from autograder.sandbox.spawn import Zygote, ZygoteUnavailable

        with self._zygotes_lock:
            zygote = self._zygotes.get((limits, folder))
            if zygote is None:
                try:
                    zygote = self._zygotes[(limits, folder)] = Zygote(limits, folder)
                except ZygoteUnavailable as error:
                    zygote = self._zygotes[(limits, folder)] = str(error)
        return None if isinstance(zygote, str) else zygote

    def unspawned(self) -> dict:
        """(limits, packages folder) -> why its zygote could not be used: nothing where every one could."""
        return {key: why for key, why in self._zygotes.items() if isinstance(why, str)}

    def __enter__(self) -> Grader:
        _SETTINGS.enter()
        return self

    def __exit__(self, *exc) -> None:
        _SETTINGS.leave()

    def close(self) -> None:
        """Stop its zygotes, and remove the packages' folders it wrote (every sandbox that mounts one must have
        ended)."""
        with self._zygotes_lock:
            zygotes = [z for z in self._zygotes.values() if not isinstance(z, str)]
            self._zygotes = {key: why for key, why in self._zygotes.items() if isinstance(why, str)}
        for zygote in zygotes:
            zygote.close()
        if self._own_packages:
            self._packages.close()


def default() -> Grader:
    """The grader of a grading that is given none: no store, and the process's shared packages."""
    return Grader(sandbox_packages=packages.shared())
