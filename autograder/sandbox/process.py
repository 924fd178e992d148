"""Starting a submission's sandbox from the trusted grader: its program under bubblewrap, its uid, cgroups and limits.

:class:`Sandbox` starts :mod:`autograder.sandbox.worker` under bubblewrap (``bwrap``), through
:mod:`autograder.sandbox.launcher` (which joins the cgroups, binds, sets the limits and drops the uid):

- **never as root.** A grader that runs as root (in CI, in a container) gives every sandbox a
  uid of its own (:mod:`autograder.sandbox.uids`, one per sandbox at a time across every grader process on the
  machine, held by a lock file in a folder only root may write), and drops to it before bwrap starts;
  bwrap then makes an unprivileged user namespace, so the student's uid 0 inside maps to that
  uid outside, never to root, and ``/proc/sys`` and the like are read-only. What the sandbox
  must see of the host (the Python installation, which may live under ``/root``) is bound, while
  still root, into a private mount namespace of the launcher, at places the uid may read.
- new PID, network, IPC, UTS, mount and user namespaces (no network at all), every capability
  dropped, no nested user namespaces, a read-only view of the Python installation and of the
  course's two packages as students get them (:mod:`autograder.release.packages`: no reference solution
  of a chapter that is not released) and nothing else of the course: no ``solutions/``, no
  gradebook, no other student. Its home, ``/tmp`` and ``/dev/shm`` are private, size-capped
  in-memory file systems (:mod:`autograder.sandbox.bwrap`).
- **limits** (:mod:`autograder.sandbox.limits`): resource limits on address space, CPU seconds, file size, core
  files and (for an unprivileged uid) processes, and, where the grader may create cgroups (v1 or v2), a cgroup
  per sandbox with a process cap (``pids.max``), a CPU quota (``cpus`` CPUs, so that spinning
  background processes cannot starve a student graded beside them) and a memory cap that also
  counts the in-memory file systems (:mod:`autograder.sandbox.cgroups`). Without cgroups (an unprivileged
  grader with no delegated cgroup) the resource limits remain and the CPU quota is not enforced: grade with
  ``JOBS=1`` there (the instructor guide says so).

The worker speaks :mod:`autograder.sandbox.wire` on a private pair of pipes, every message checked
(:mod:`autograder.sandbox.channel`, :mod:`autograder.sandbox.client`). Until the worker says it is ready
(before any student code runs) a failure is the grader's: :class:`SandboxUnavailable`, never
scored. Closing the sandbox kills it and every process it started, whatever the student's code did to them
(their cgroups killed whole, and whatever still runs as the sandbox's uid), checks that none is left, and removes
its cgroups and temporary folders. The sandbox's first process (PID 1 of its namespace) is an init of the grader's
that the student's uid may not trace or steer (:data:`autograder.sandbox.bwrap.INIT`).

Without bubblewrap (``isolation="none"``) the worker is still a separate process with the same
limits, but it runs as the grader's user and can read what the grader can read: use that only
for your own notebooks.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from autograder.release import course
from autograder.release.packages import sandbox_packages
from autograder.sandbox import launcher, uids, wire
from autograder.sandbox.bwrap import PACKAGES_MOUNT, WORKER, bwrap_available, bwrap_command, environment, mounts
from autograder.sandbox.cgroups import Cgroups
from autograder.sandbox.client import Client
from autograder.sandbox.errors import SandboxUnavailable
from autograder.sandbox.limits import Limits


class Sandbox(Client):
    """One running worker. Use as a context manager; ``close()`` kills everything it started."""

    _arguments: list[str] | None = None  # Python's, in place of ``-m program`` (see bwrap_command)

    def __init__(
        self,
        limits: Limits = Limits(),  # noqa: B008 (frozen: one default, never changed)
        isolation: str = "bwrap",
        packages: Path | None = None,
        *,
        program: str = WORKER,
        stdin: int = subprocess.PIPE,
    ):
        """``packages``: a folder of the students' packages (default: those of the term's release).
        ``program`` and ``stdin``: another first program for the sandbox (a module) and its standard input:
        :class:`autograder.sandbox.pool.WarmPool`'s fork server, on a socket."""
        if isolation not in ("bwrap", "none"):
            raise ValueError(f"isolation must be 'bwrap' or 'none', got {isolation!r}")
        if isolation == "bwrap" and not bwrap_available():
            raise SandboxUnavailable(
                "bubblewrap (bwrap) is not installed: `make sandbox` (or `apt-get install "
                "bubblewrap`), or grade with isolation='none' on a machine you trust the code on"
            )
        self._prepare(limits)
        if packages is None:
            packages = sandbox_packages(course.release())
        self._cgroups = Cgroups(limits)
        stage = []
        try:
            if isolation == "bwrap":
                binds = mounts(Path(packages))
                if os.geteuid() == 0:
                    self._uid = uids.POOL.take()
                    self._stage = tempfile.mkdtemp(prefix="attention-stage-")
                    os.chmod(self._stage, 0o711)
                    staged = []
                    for index, (source, target) in enumerate(binds):
                        point = Path(self._stage) / str(index)
                        point.mkdir(mode=0o755)
                        stage.append((source, str(point)))
                        staged.append((str(point), target))
                    binds = staged
                command = bwrap_command(sys.executable, binds, limits, program, self._arguments)
                env = environment("/home/student")
                env["AUTOGRADER_PID_NAMESPACE"] = "1"
                env["PYTHONPATH"] = PACKAGES_MOUNT
                cwd = None
            else:
                self._home = tempfile.mkdtemp(prefix="attention-grader-")
                command, env, cwd = (
                    [sys.executable, "-m", program],
                    environment(self._home),
                    self._home,
                )
                env["PYTHONPATH"] = str(packages)
            config = {"limits": asdict(limits), "cgroups": self._cgroups.procs, "stage": stage, "uid": self._uid}
            launch = launcher.command_line(sys.executable, config, command)
            process = subprocess.Popen(
                launch,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except BaseException:
            self._release()
            raise
        schema = wire.FromWorkerMessage if program == WORKER else wire.FromForkServerMessage
        self._attach(process, schema)

    def _prepare(self, limits: Limits) -> None:
        """The state of a sandbox before its process starts."""
        super()._prepare(limits)
        self._home = self._stage = None
        self._uid = None

    def _release(self) -> list[int]:
        """Every process of the sandbox killed (its cgroups whole, then whatever still runs as its uid: nothing
        else on the machine does), whatever the student's code did to them, and checked; its cgroups, folders and
        uid given back. The processes still running after that (none, unless the kernel could not end them)."""
        left = set(self._cgroups.kill())
        if self._uid is not None:
            left.update(uids.end_processes(self._uid))
        self._cgroups.remove()
        if self._home:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None
        if self._stage:
            for child in Path(self._stage).iterdir():
                with contextlib.suppress(OSError):
                    child.rmdir()  # only mount points, empty outside the launcher's mount namespace
            with contextlib.suppress(OSError):
                Path(self._stage).rmdir()
            self._stage = None
        if self._uid is not None:
            if not left:  # else held by this grader for good: no other sandbox gets a uid that something runs as
                uids.POOL.give_back(self._uid)
            self._uid = None
        return sorted(left)
