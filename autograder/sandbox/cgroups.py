"""The cgroups of one sandbox: a process cap, a CPU quota and a memory cap, its memory and CPU measured, and its end.

Where the grader may create cgroups (v1 or v2), each sandbox gets one with a process cap (``pids.max``), a CPU
quota (``cpus`` CPUs, so that spinning background processes cannot starve a student graded beside them) and a
memory cap that also counts the in-memory file systems. Without cgroups (an unprivileged grader with no
delegated cgroup) the resource limits remain and the CPU quota is not enforced.

Every process of the sandbox is in them, and none can leave (its uid may not write the host's cgroup files), so
:meth:`Cgroups.kill` ends them all, whatever the student's code did to its processes (a daemon, a traced init): v2's
``cgroup.kill``, or else each process killed while the group is frozen (v2's ``cgroup.freeze``, v1's freezer),
until none is left. Under v1 the sandbox also gets a group in the hybrid v2 hierarchy where the host has one (or
in v1's freezer where it has not), for that alone. The v2 group also says how long the sandbox's processes waited
for a CPU that the host's other work held (:meth:`Cgroups.waited`, its CPU pressure).
"""

from __future__ import annotations

import contextlib
import os
import signal
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
        for hierarchy in ("unified", "freezer"):  # to end the sandbox whole (kill), and measure (waited)
            if (self.ROOT / hierarchy / "cgroup.procs").is_file():
                self._make(self.ROOT / hierarchy / name, {hierarchy: {}})
                break

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
        if not applied or not (path / "cgroup.procs").is_file():
            self._remove(path)
            return
        self.paths.append(path)
        self.procs.append(str(path / "cgroup.procs"))
        self.capped += [controller for controller in applied if controller not in ("unified", "freezer")]

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

    def waited(self) -> float | None:
        """Seconds in all that the sandbox's processes were ready to run and waited for a CPU (v2's CPU pressure,
        ``some``: at least one of them waiting); None where no cgroup of the sandbox measures it."""
        for path in self.paths:
            with contextlib.suppress(OSError, ValueError, IndexError):
                for line in (path / "cpu.pressure").read_text().splitlines():
                    if line.startswith("some "):
                        return int(line.rsplit("total=", 1)[1]) / 1e6
        return None

    def used(self) -> float | None:
        """Seconds of CPU the sandbox's processes used in all (v2's ``cpu.stat``, v1's ``cpuacct.usage``); None
        where no cgroup of the sandbox counts it."""
        for path in self.paths:
            with contextlib.suppress(OSError, ValueError, IndexError):
                for line in (path / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
            with contextlib.suppress(OSError, ValueError):
                return int((path / "cpuacct.usage").read_text()) / 1e9
        return None

    def oom_kills(self) -> int:
        """How many of the sandbox's processes the kernel killed for its memory cap."""
        for path in self.paths:
            for name in ("memory.events", "memory.oom_control"):  # v2, v1
                with contextlib.suppress(OSError, ValueError, IndexError):
                    for line in (path / name).read_text().splitlines():
                        if line.startswith("oom_kill "):
                            return int(line.split()[1])
        return 0

    def pids(self) -> list[int]:
        """The processes in the sandbox's cgroups now."""
        found: set[int] = set()
        for path in self.paths:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(pid) for pid in (path / "cgroup.procs").read_text().split())
        return sorted(found)

    def kill(self, timeout: float = 10.0) -> list[int]:
        """Kill every process in the sandbox's cgroups, and wait until none is left: the pids still there after
        ``timeout`` s (none, unless the kernel could not end them)."""
        deadline = time.monotonic() + timeout
        while True:
            for path in self.paths:  # v2: the kernel kills them all at once, new ones included
                with contextlib.suppress(OSError):
                    (path / "cgroup.kill").write_text("1")
            with self._frozen():  # elsewhere: none forks while each is killed
                for pid in self.pids():
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            left = self.pids()
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.02)

    @contextlib.contextmanager
    def _frozen(self):
        """The sandbox's processes frozen while the block runs (where a cgroup of it can freeze them), thawed
        after: a killed process ends once thawed."""
        frozen = []
        for path in self.paths:
            for name, freeze, thaw in (("cgroup.freeze", "1", "0"), ("freezer.state", "FROZEN", "THAWED")):
                with contextlib.suppress(OSError):
                    (path / name).write_text(freeze)
                    frozen.append((path / name, thaw))
        try:
            yield
        finally:
            for file, thaw in frozen:
                with contextlib.suppress(OSError):
                    file.write_text(thaw)

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
