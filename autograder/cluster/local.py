"""A cluster on this machine, its members on 127.0.0.1 (:class:`LocalCluster`): for the tests and the benchmark.

Each member is started as an instructor starts it on a host (``python -m autograder.cli.cluster``: the scheduler,
then each grading worker with its preflight), as a process of its own, its output in a log of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT

STARTING = 240.0  # the most that a member may take to start on a busy host


class LocalCluster:
    """A scheduler on 127.0.0.1 (any free port) with the certificates in ``certs``; workers added by
    :meth:`workers`; every member stopped by :meth:`close`. ``folder`` holds each member's log."""

    def __init__(self, folder: Path, certs: Path, allowed_failures: int = 1):
        self.folder, self.certs = Path(folder), Path(certs)
        self.processes: list[subprocess.Popen] = []
        self.scheduler = self._start(
            "scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0",
                          "--scheduler-file", str(self.folder / "scheduler.json"),
                          "--allowed-failures", str(allowed_failures)],
        )  # fmt: skip
        self.address = self._wait("scheduler", "scheduler at ").removeprefix("scheduler at ")

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def workers(self, *names: str, jobs: int = 1, preload: str = "", env: dict | None = None) -> None:
        """Start a grading worker of each name (``jobs`` notebooks at once, Dask's ``preload`` module, more
        ``env``), then wait until each has joined."""
        for name in names:
            options = ["--preload", preload] if preload else []
            self._start(
                name,
                ["worker", self.address, "--jobs", str(jobs), "--name", name, "--host", "127.0.0.1", *options],
                env,
            )
        for name in names:
            self._wait(name, f"grading worker {name} at ")

    def _start(self, log: str, args: list[str], env: dict | None = None) -> subprocess.Popen:
        with open(self.folder / f"{log}.log", "w") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "autograder.cli.cluster", "--certs", str(self.certs), *args],
                stdout=out, stderr=subprocess.STDOUT, cwd=COURSE_ROOT, env={**os.environ, **(env or {})},
                start_new_session=True,
            )  # fmt: skip
        self.processes.append(process)
        return process

    def _wait(self, log: str, line: str) -> str:
        """The first line of the member's log that starts with ``line``, once it is written."""
        path = self.folder / f"{log}.log"
        deadline = time.monotonic() + STARTING
        while time.monotonic() < deadline:
            found = [row for row in path.read_text().splitlines() if row.startswith(line)]
            if found:
                return found[0]
            if any(p.poll() is not None for p in self.processes):
                raise RuntimeError(f"a member of the cluster stopped; {log}'s log:\n{path.read_text()[-3000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"{log} did not start within {STARTING:g} s:\n{path.read_text()[-3000:]}")

    def stop_scheduler(self) -> None:
        """Kill the scheduler (as a machine lost)."""
        os.killpg(self.scheduler.pid, signal.SIGKILL)
        self.scheduler.wait()

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
