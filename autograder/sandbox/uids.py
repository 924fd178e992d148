"""Host uids for a root grader's sandboxes: one per sandbox at a time, locked across every grader process.

A grader that runs as root (in CI, in a container) gives every sandbox a uid of its own from :data:`UIDS`, taken
from :data:`POOL`, and drops to it before bubblewrap starts (:mod:`autograder.sandbox.launcher`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import stat
import threading
import time
from pathlib import Path

from autograder.sandbox.errors import SandboxUnavailable

UIDS = range(61000, 62000)  # host uids for sandboxes when the grader runs as root


class _UidPool:
    """Host uids for sandboxes, one per sandbox at a time on the whole machine.

    RLIMIT_NPROC counts the processes of a host uid, whoever started them, so two sandboxes that
    share a uid share one process limit: a sandbox holding many processes would starve the other
    of forks. Every grader process on the machine (two ``make grade`` at once, ``pytest -n 2``)
    therefore takes a uid by holding an exclusive ``flock`` on that uid's lock file in
    :attr:`FOLDERS` (the first that is usable): a folder that root owns and no one else may write,
    which a sandbox (that sees no ``/run`` and no host ``/tmp``, and runs as another uid) can
    neither reach nor change. The kernel releases a lock when its holder's file descriptor closes,
    so a grader that dies gives its uids back without anyone cleaning up; the files themselves
    stay (removing one could let two graders lock two different files for the same uid). A uid
    that some process still runs as (a sandbox that outlived its grader, or a grader that does not
    take these locks) is skipped as well.
    """

    FOLDERS = (Path("/run/attention-grader/uids"), Path("/tmp/attention-grader-uids"))

    def __init__(self, uids: range, folders: tuple[Path, ...] | None = None):
        self._uids = uids
        self._folders = self.FOLDERS if folders is None else folders
        self._held: dict[int, int] = {}  # uid -> the descriptor that holds its lock
        self._lock = threading.Lock()

    def take(self) -> int:
        folder = self._folder()
        running = _uids_of_processes()
        with self._lock:
            for uid in self._uids:
                if uid in self._held or uid in running:
                    continue
                descriptor = self._open_lock(folder, uid)
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # another grader process holds it
                    os.close(descriptor)
                    continue
                except OSError:
                    os.close(descriptor)
                    raise
                self._held[uid] = descriptor
                return uid
        raise SandboxUnavailable(
            f"every sandbox uid ({self._uids.start}-{self._uids.stop - 1}) is in use by this or another grader "
            f"process (locks in {folder}); grade fewer notebooks at once"
        )

    def give_back(self, uid: int) -> None:
        with self._lock:
            descriptor = self._held.pop(uid, None)
        if descriptor is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(descriptor, fcntl.LOCK_UN)  # for every copy of the descriptor, a forked child's too
            os.close(descriptor)

    def _folder(self) -> Path:
        """The first folder of :attr:`FOLDERS` that is, or can be made, safe for the locks."""
        problems = []
        for folder in self._folders:
            try:
                return _private_folder(folder)
            except OSError as error:
                where = f" ({error.filename})" if error.filename else ""
                problems.append(f"{folder}: {error.strerror or error}{where}")
        raise SandboxUnavailable(
            "no folder for the sandbox uids' locks (they keep two grader processes from giving two sandboxes "
            "one uid): " + "; ".join(problems)
        )

    @staticmethod
    def _open_lock(folder: Path, uid: int) -> int:
        path = folder / f"{uid}.lock"
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        except OSError as error:  # ELOOP: a symbolic link, never followed
            raise SandboxUnavailable(f"cannot open the sandbox uid lock {path}: {error.strerror}; remove it") from None
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            os.close(descriptor)
            raise SandboxUnavailable(f"the sandbox uid lock {path} is not a plain file of this user's; remove it")
        return descriptor


def _private_folder(folder: Path) -> Path:
    """``folder``, made (with its parents) where it is missing, once it is checked: it and every folder
    above it must be a real folder (not a symbolic link) of root's or this user's, that no group or other
    user may write; an ancestor that others may write must be sticky (``/tmp``), so that they cannot
    move what is in it. Else an OSError that says which folder and what is wrong."""
    for path in [*reversed(folder.parents), folder]:
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o700)
            info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode):
            raise OSError(errno.ENOTDIR, f"{path} is not a folder (a symbolic link or a file)")
        if info.st_uid not in (0, os.geteuid()):
            raise OSError(errno.EPERM, f"{path} belongs to uid {info.st_uid}, not to root")
        if info.st_mode & 0o022 and (path == folder or not info.st_mode & stat.S_ISVTX):
            raise OSError(errno.EPERM, f"{path} may be written by other users (mode {stat.S_IMODE(info.st_mode):o})")
    return folder


def end_processes(uid: int, timeout: float = 10.0) -> list[int]:
    """Kill every process that runs as ``uid`` (a sandbox's own: nothing else on the machine runs as it), until
    none is left; the pids still running after ``timeout`` s (none, unless the kernel could not end them)."""
    deadline = time.monotonic() + timeout
    while True:
        running = _processes_of(uid)
        for pid in running:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.02)


def _processes_of(uid: int) -> list[int]:
    """The processes (not zombies) whose real uid is ``uid``, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/status", "rb") as f:
                    fields = dict(line.split(b":", 1) for line in f if b":" in line)
                if int(fields[b"Uid"].split()[0]) == uid and fields[b"State"].split()[0] not in (b"Z", b"X"):
                    found.append(int(entry))
    return found


def _uids_of_processes() -> set[int]:
    """The real uids of the processes running now (from /proc; empty where there is none)."""
    found = set()
    try:
        pids = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"Uid:"):
                        found.add(int(line.split()[1]))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return found


POOL = _UidPool(UIDS)  # this grader process's: every sandbox takes its uid here
