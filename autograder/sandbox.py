"""Running a student's code in a sandbox, from the trusted grader.

:class:`Sandbox` starts :mod:`autograder.worker` under bubblewrap (``bwrap``):
new user, PID, network, IPC and UTS namespaces (no network at all), every
capability dropped, a read-only view of the Python installation and of the
course's two packages as students get them (:mod:`autograder.packages`: no
reference solution of a chapter that is not released) and nothing else of the
course: no ``solutions/``, no gradebook, no other student.
Its home and ``/tmp`` are empty and private. Resource limits: address space
(memory), CPU seconds, file size, and the number of processes (an ``RLIMIT_NPROC``
for unprivileged graders and a cgroup ``pids.max`` where the grader may create
one). The student's output goes to a pipe that is drained and truncated here.
Closing the sandbox kills it and, through its PID namespace, every process it
started.

Without bubblewrap (``isolation="none"``) the worker is still a separate
process with the same limits, but it can read what the grader's user can read:
use that only for your own notebooks.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from autograder import wire

PACKAGES_MOUNT = "/opt/course-packages"  # where the students' packages are, inside the sandbox

# Runs first in the new process (no threads yet, unlike the grader): join the
# cgroup, set the resource limits, then become the sandbox. Inherited by all it starts.
_LAUNCHER = """
import json, os, resource, sys
limits, procs, command = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3:]
if procs:
    try:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    except OSError:
        pass
mb = 2 ** 20
resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] * mb,) * 2)
resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 5))
resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_mb"] * mb,) * 2)
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
if os.getuid() != 0:  # root is exempt from RLIMIT_NPROC; the cgroup covers it
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"],) * 2)
os.execvpe(command[0], command, os.environ)
"""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one submission's sandbox."""

    cell_timeout: float = 30.0  # seconds for one notebook cell
    call_timeout: float = 20.0  # seconds for one call of a graded function
    memory_mb: int = 4096  # address space of the worker
    cpu_seconds: int = 900  # CPU time of the worker, in total
    processes: int = 64  # processes and threads in the sandbox
    output_kb: int = 256  # student output kept (the rest is counted and dropped)
    file_mb: int = 64  # largest file the student's code may write (in its private /tmp)


class SandboxError(Exception):
    """The student's process stopped answering: it timed out or died."""

    def __init__(self, message: str, cell: int | None = None):
        super().__init__(message)
        self.cell = cell


class SandboxTimeout(SandboxError):
    pass


class SandboxDied(SandboxError):
    pass


def bwrap_available() -> bool:
    return shutil.which("bwrap") is not None


def _bwrap_command(python: str, packages: Path) -> list[str]:
    prefixes = sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()})
    command = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
               "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
               "--tmpfs", "/tmp", "--tmpfs", "/dev/shm", "--tmpfs", "/home"]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = Path("/") / link
        if target.is_symlink():
            command += ["--symlink", os.readlink(target), str(target)]
        elif target.is_dir():
            command += ["--ro-bind", str(target), str(target)]
    for etc in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group",
                "nsswitch.conf", "alternatives", "fonts"):
        command += ["--ro-bind-try", f"/etc/{etc}", f"/etc/{etc}"]
    for path in prefixes:
        command += ["--ro-bind", str(path), str(path)]
    command += ["--ro-bind", str(packages), PACKAGES_MOUNT]
    command += ["--dir", "/home/student", "--chdir", "/home/student"]
    return [*command, python, "-m", "autograder.worker"]


def _environment(home: str) -> dict:
    return {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": home,
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "TORCH_NUM_THREADS": "1",
    }


class _PidsCgroup:
    """A cgroup capping the number of processes (v1 ``pids`` hierarchy, or v2 with the pids
    controller); a no-op where the grader may not create one."""

    def __init__(self, limit: int):
        self.path = None
        name = f"attention-grader-{uuid.uuid4().hex[:12]}"
        for base in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
            if not (base / "cgroup.procs").exists():
                continue
            path = base / name
            try:
                path.mkdir()
                (path / "pids.max").write_text(str(limit))
            except OSError:
                try:
                    path.rmdir()
                except OSError:
                    pass
                continue
            self.path = path
            return

    def remove(self) -> None:
        if self.path is None:
            return
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.02)


class Sandbox:
    """One running worker. Use as a context manager; ``close()`` kills everything it started."""

    def __init__(self, limits: Limits = Limits(), isolation: str = "bwrap", packages: Path | None = None):
        """``packages``: a folder of the students' packages (default: those of the term's release)."""
        if isolation not in ("bwrap", "none"):
            raise ValueError(f"isolation must be 'bwrap' or 'none', got {isolation!r}")
        if isolation == "bwrap" and not bwrap_available():
            raise RuntimeError("bubblewrap (bwrap) is not installed: `apt-get install bubblewrap`, "
                               "or grade with isolation='none' on a machine you trust the code on")
        self.limits = limits
        self._home = None
        if packages is None:
            from autograder import course
            from autograder.packages import sandbox_packages

            packages = sandbox_packages(course.release())
        if isolation == "bwrap":
            command, env = _bwrap_command(sys.executable, Path(packages)), _environment("/home/student")
            env["AUTOGRADER_PID_NAMESPACE"] = "1"
            env["PYTHONPATH"] = PACKAGES_MOUNT
            cwd = None
        else:
            self._home = tempfile.mkdtemp(prefix="attention-grader-")
            command, env, cwd = [sys.executable, "-m", "autograder.worker"], _environment(self._home), self._home
            env["PYTHONPATH"] = str(packages)
        self._cgroup = _PidsCgroup(limits.processes)
        procs = str(self._cgroup.path / "cgroup.procs") if self._cgroup.path else ""
        launch = [sys.executable, "-S", "-c", _LAUNCHER, json.dumps(asdict(limits)), procs, *command]
        self.process = subprocess.Popen(launch, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
        self._messages: queue.Queue = queue.Queue()
        self.output = bytearray()
        self.output_dropped = 0
        self.background = 0  # processes the notebook's cells left running
        threading.Thread(target=self._read_messages, daemon=True).start()
        threading.Thread(target=self._drain_output, daemon=True).start()

    def _read_messages(self) -> None:
        try:
            while True:
                message = wire.receive(self.process.stdout)
                self._messages.put(message)
                if message is None:
                    return
        except Exception:  # a malformed message ends the conversation
            self._messages.put(None)

    def _drain_output(self) -> None:
        keep = self.limits.output_kb * 1024
        while True:
            chunk = self.process.stderr.read1(65536)
            if not chunk:
                return
            room = keep - len(self.output)
            self.output += chunk[:max(room, 0)]
            self.output_dropped += max(len(chunk) - max(room, 0), 0)

    def _next(self, deadline: float, what: str, cell: int | None = None) -> dict:
        try:
            message = self._messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            self.close()
            raise SandboxTimeout(f"{what} did not finish within its time limit", cell) from None
        if message is None:
            code = self.process.wait()
            self.close()
            signal_number = -code if code < 0 else code - 128 if code > 128 else 0  # bwrap reports 128 + signal
            how = (f"was killed by signal {signal_number} ({_signal_name(signal_number)})"
                   if signal_number else f"exited with status {code}")
            raise SandboxDied(f"the process running your code {how} during {what}", cell)
        return message

    def run_cells(self, cells: list[str | None], labels: list[str] | None = None) -> list[str | None]:
        """Run the notebook's cells in order; return each cell's error (or None).

        ``None`` in place of a source skips that cell; ``labels`` name the cells in
        messages. Raises :class:`SandboxError` (with ``.cell``, an index into
        ``cells``) if a cell hangs past ``cell_timeout`` or kills the process.
        """
        self._send({"op": "run_cells", "cells": cells})
        errors: list[str | None] = [None] * len(cells)
        current, deadline = None, time.monotonic() + self.limits.cell_timeout
        while True:
            what = ("the notebook's start-up" if current is None
                    else labels[current] if labels else f"cell {current + 1}")
            message = self._next(deadline, what, current)
            event = message.get("event")
            if event == "cell_start":
                current, deadline = int(message["index"]), time.monotonic() + self.limits.cell_timeout
            elif event == "cell_done":
                errors[int(message["index"])] = message.get("error")
            elif event == "cells_done":
                self.background = int(message.get("others") or 0)
                return errors

    def call(self, target: str | int, args: list, kwargs: dict, timeout: float | None = None,
             attr: str | None = None, label: str | None = None) -> dict:
        """Call the student's object (a name, or a handle number), or its attribute ``attr``.

        The reply is described in :mod:`autograder.worker`.
        """
        request = {"op": "call", "attr": attr, "args": [wire.encode(a) for a in args],
                   "kwargs": {k: wire.encode(v) for k, v in kwargs.items()}}
        request["name" if isinstance(target, str) else "handle"] = target
        return self._request(request, timeout, f"a call of {label or target}")

    def getattr(self, handle: int, attr: str, timeout: float | None = None, label: str | None = None) -> dict:
        """An attribute of an object that stays in the sandbox."""
        return self._request({"op": "getattr", "handle": handle, "attr": attr}, timeout, label or f".{attr}")

    def _request(self, request: dict, timeout: float | None, what: str) -> dict:
        self._send(request)
        limit = self.limits.call_timeout if timeout is None else min(timeout, self.limits.call_timeout)
        return self._next(time.monotonic() + limit, what)

    def _send(self, message: dict) -> None:
        try:
            wire.send(self.process.stdin, message)
        except (BrokenPipeError, OSError, ValueError):
            self.close()
            raise SandboxDied("the process running your code had already stopped") from None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except Exception:
                pass
        self._cgroup.remove()
        if self._home:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
