"""What grading leaves on the host: processes, cgroups and temporary folders of sandboxes.

:class:`Watch` is set up around one grading run (a class, a notebook) in this process:

- it makes this process a *child subreaper*, so that a process which the sandbox's launcher
  or bwrap leaves behind stays a descendant of this process (it is not handed to the host's
  init, where it could no longer be told from the processes of other runs on the machine);
- it gives the run a temporary folder of its own (``tempfile.tempdir`` here and ``TMPDIR``
  for the programs it starts, nbgrader among them), so that the sandboxes' staging and home
  folders of this run are told apart from those of other runs;
- it records every :class:`~autograder.sandbox.process.Sandbox` started in this process: its launcher's
  pid, its cgroups and its host uid.

:meth:`Watch.leftovers` then says what is still there. Other people's grading runs on the same
machine are never counted.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.sandbox import process as sandbox_module
from autograder.sandbox.uids import UIDS

CGROUP_ROOT = Path("/sys/fs/cgroup")
PR_SET_CHILD_SUBREAPER = 36
TEMP_PREFIXES = ("attention-stage-", "attention-grader-")


@dataclass
class Process:
    pid: int
    ppid: int
    state: str
    uid: int
    command: str

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def process(pid: int) -> Process | None:
    """A process as /proc says it is now; None when it has gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return Process(pid, int(fields["PPid"]), fields["State"].split()[0], int(fields["Uid"].split()[0]), command[:300])


def processes() -> list[Process]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = process(int(entry))
            if info is not None:
                found.append(info)
    return found


def descendants(pid: int | None = None) -> list[Process]:
    """Every process below ``pid`` (default: this one), live or not."""
    root = os.getpid() if pid is None else pid
    table = processes()
    children: dict[int, list[Process]] = {}
    for info in table:
        children.setdefault(info.ppid, []).append(info)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


def cgroup_folders() -> set[Path]:
    """The cgroups of sandboxes on this machine: ``attention-grader-*`` in cgroup v2's one hierarchy
    or in each v1 controller's folder."""
    return {*CGROUP_ROOT.glob("attention-grader-*"), *CGROUP_ROOT.glob("*/attention-grader-*")}


def cgroup_members(folder: Path) -> list[int]:
    try:
        return [int(line) for line in (folder / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def sandbox_uid(uid: int) -> bool:
    return uid in UIDS


@dataclass
class Started:
    """One sandbox this process started."""

    pid: int
    uid: int | None
    cgroups: list[Path]
    folders: list[str] = field(default_factory=list)


class Watch:
    """Watches one grading run in this process; see the module's docstring."""

    def __init__(self):
        self.started: list[Started] = []
        self.folder: Path | None = None

    def __enter__(self) -> Watch:
        libc = ctypes.CDLL(None, use_errno=True)
        self._subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        # Under /tmp and traversable: the sandbox's uid must reach its staging folder through it.
        self.folder = Path(tempfile.mkdtemp(prefix="attention-watch-", dir="/tmp"))
        self.folder.chmod(0o711)
        self._saved_tempdir, self._saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
        tempfile.tempdir = str(self.folder)
        os.environ["TMPDIR"] = str(self.folder)
        original = self._original_init = sandbox_module.Sandbox.__init__
        watch = self

        def recording_init(sandbox, *args, **kwargs):
            original(sandbox, *args, **kwargs)
            watch.started.append(
                Started(
                    sandbox.process.pid,
                    sandbox._uid,
                    list(sandbox._cgroups.paths),
                    [str(f) for f in (sandbox._stage, sandbox._home) if f],
                )
            )

        sandbox_module.Sandbox.__init__ = recording_init
        return self

    def __exit__(self, *exc) -> None:
        sandbox_module.Sandbox.__init__ = self._original_init
        tempfile.tempdir = self._saved_tempdir
        if self._saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = self._saved_env
        self.reap()
        if self._subreaper:
            ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        shutil.rmtree(self.folder, ignore_errors=True)

    @staticmethod
    def reap() -> None:
        """Collect the exit status of orphans handed to this process (a subreaper), so no zombie stays."""
        for info in descendants():
            if info.ppid == os.getpid() and not info.alive:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(info.pid, os.WNOHANG)

    def leftovers(self, settle: float = 15.0) -> dict[str, list[str]]:
        """What the run left: live processes below this one, cgroups of its sandboxes, its sandboxes'
        temporary folders. A process killed a moment ago may still be exiting: up to ``settle``
        seconds are given for that."""
        deadline = time.monotonic() + settle
        while True:
            self.reap()
            left = {
                "processes": [
                    f"pid {p.pid} (uid {p.uid}, state {p.state}): {p.command}"
                    for p in descendants()
                    if p.alive and p.pid != os.getpid()
                ],
                "cgroups": sorted(str(path) for s in self.started for path in s.cgroups if path.exists()),
                "temporary folders": sorted(
                    str(path) for prefix in TEMP_PREFIXES for path in self.folder.glob(f"{prefix}*")
                ),
                "sandbox folders": sorted(
                    folder for s in self.started for folder in s.folders if Path(folder).exists()
                ),
            }
            if not any(left.values()) or time.monotonic() > deadline:
                return left
            time.sleep(0.5)

    def uids(self) -> list[int | None]:
        return [s.uid for s in self.started]
