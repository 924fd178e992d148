"""The cgroups of one sandbox: a process cap, a CPU quota and a memory cap, and its memory measured.

Where the grader may create cgroups (v1 or v2), each sandbox gets one with a process cap (``pids.max``), a CPU
quota (``cpus`` CPUs, so that spinning background processes cannot starve a student graded beside them) and a
memory cap that also counts the in-memory file systems. Without cgroups (an unprivileged grader with no
delegated cgroup) the resource limits remain and the CPU quota is not enforced.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from autograder.sandbox.limits import Limits


class Cgroups:
    """The cgroups of one sandbox: processes, CPU and memory, in cgroup v2 or the v1 hierarchies.

    Each controller that the grader may not use is left out (see :attr:`capped`); nothing fails.
    """

    ROOT = Path("/sys/fs/cgroup")
    PERIOD_US = 100_000

    def __init__(self, limits: Limits):
        self.paths: list[Path] = []
        self.procs: list[str] = []
        self.capped: list[str] = []
        name = f"attention-grader-{uuid.uuid4().hex[:12]}"
        memory = str(limits.memory_mb * 2**20)
        quota = str(max(1000, int(self.PERIOD_US * limits.cpus)))
        if (self.ROOT / "cgroup.controllers").is_file():  # v2: one hierarchy
            self._make(
                self.ROOT / name,
                {
                    "pids": {"pids.max": str(limits.processes)},
                    "cpu": {"cpu.max": f"{quota} {self.PERIOD_US}"},
                    "memory": {"memory.max": memory, "memory.swap.max": "0"},
                },
            )
            return
        for controller, settings in (
            ("pids", {"pids.max": str(limits.processes)}),
            ("cpu", {"cpu.cfs_period_us": str(self.PERIOD_US), "cpu.cfs_quota_us": quota}),
            ("memory", {"memory.limit_in_bytes": memory}),
        ):
            if (self.ROOT / controller / "cgroup.procs").is_file():
                self._make(self.ROOT / controller / name, {controller: settings})

    def _make(self, path: Path, controllers: dict[str, dict[str, str]]) -> None:
        try:
            path.mkdir()
        except OSError:
            return
        applied = []
        for controller, settings in controllers.items():
            try:
                for key, value in settings.items():
                    if (path / key).exists() or not key.endswith("swap.max"):
                        (path / key).write_text(value)
                applied.append(controller)
            except OSError:
                continue
        if not applied:
            self._remove(path)
            return
        self.paths.append(path)
        self.procs.append(str(path / "cgroup.procs"))
        self.capped += applied

    def memory_now(self) -> int | None:
        """The bytes the sandbox holds now (its processes and in-memory files together); None where this
        grader has no memory cgroup."""
        for path in self.paths:
            for name in ("memory.usage_in_bytes", "memory.current"):  # v1, v2
                with contextlib.suppress(OSError, ValueError):
                    return int((path / name).read_text())
        return None

    def memory_peak(self) -> Callable[[], int] | None:
        """Start measuring the sandbox's peak memory (its processes and in-memory files together): a
        function that gives the most it has held at once since, in bytes; None where this grader has no
        memory cgroup whose peak it may reset."""
        memory = next((path for path in self.paths if (path / "memory.usage_in_bytes").is_file()), None)
        if memory is not None:  # v1: max_usage_in_bytes, reset (to the usage now) by writing 0
            try:
                (memory / "memory.max_usage_in_bytes").write_text("0")
            except OSError:
                return None
            return lambda: int((memory / "memory.max_usage_in_bytes").read_text())
        memory = next((path for path in self.paths if (path / "memory.peak").is_file()), None)
        if memory is None:
            return None
        try:  # v2: memory.peak, whose reset (Linux 6.12 and later) holds for the file it was written to
            peak = open(memory / "memory.peak", "r+")  # noqa: SIM115 (read after the call, then closed)
            peak.write("reset\n")
            peak.flush()
        except OSError:
            return None

        def read() -> int:
            with peak:
                peak.seek(0)
                return int(peak.read())

        return read

    @staticmethod
    def _remove(path: Path) -> bool:
        for _ in range(100):
            try:
                path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.02)
        return False

    def remove(self) -> None:
        self.paths = [path for path in self.paths if not self._remove(path)]
