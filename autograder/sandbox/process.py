"""Running a student's code in a sandbox, from the trusted grader.

:class:`Sandbox` starts :mod:`autograder.sandbox.worker` under bubblewrap (``bwrap``), through
:mod:`autograder.sandbox.launcher` (which joins the cgroups, binds, sets the limits and drops the uid):

- **never as root.** A grader that runs as root (in CI, in a container) gives every sandbox a
  uid of its own (:data:`UIDS`, one per sandbox at a time across every grader process on the
  machine, held by a lock file in a folder only root may write), and drops to it before bwrap starts;
  bwrap then makes an unprivileged user namespace, so the student's uid 0 inside maps to that
  uid outside, never to root, and ``/proc/sys`` and the like are read-only. What the sandbox
  must see of the host (the Python installation, which may live under ``/root``) is bound, while
  still root, into a private mount namespace of the launcher, at places the uid may read.
- new PID, network, IPC, UTS, mount and user namespaces (no network at all), every capability
  dropped, no nested user namespaces, a read-only view of the Python installation and of the
  course's two packages as students get them (:mod:`autograder.packages`: no reference solution
  of a chapter that is not released) and nothing else of the course: no ``solutions/``, no
  gradebook, no other student. Its home, ``/tmp`` and ``/dev/shm`` are private, size-capped
  in-memory file systems.
- **limits**: resource limits on address space, CPU seconds, file size, core files and (for an
  unprivileged uid) processes, and, where the grader may create cgroups (v1 or v2), a cgroup
  per sandbox with a process cap (``pids.max``), a CPU quota (``cpus`` CPUs, so that spinning
  background processes cannot starve a student graded beside them) and a memory cap that also
  counts the in-memory file systems. Without cgroups (an unprivileged grader with no delegated
  cgroup) the resource limits remain and the CPU quota is not enforced: grade with ``JOBS=1``
  there (the instructor guide says so).

The worker speaks :mod:`autograder.sandbox.wire` on a private pair of pipes. Every message it sends is
size-capped, checked against its declaration and against what the grader expects before it is used; anything else
(forged, malformed, oversized, out of order) ends the conversation as the student's failure,
never the grader's. Every wait on the sandbox has a deadline. Until the worker says it is ready
(before any student code runs) a failure is the grader's: :class:`SandboxUnavailable`, never
scored. Closing the sandbox kills it and, through its PID namespace, every process it started,
and removes its cgroups and temporary folders.

Without bubblewrap (``isolation="none"``) the worker is still a separate process with the same
limits, but it runs as the grader's user and can read what the grader can read: use that only
for your own notebooks.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import math
import os
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import msgspec

from autograder import course
from autograder.packages import sandbox_packages
from autograder.sandbox import launcher, wire
from autograder.terminal import clean_text

PACKAGES_MOUNT = "/opt/course-packages"  # where the students' packages are, inside the sandbox
WORKER = "autograder.sandbox.worker"  # the sandbox's program (a module), unless a fork server is asked for
UIDS = range(61000, 62000)  # host uids for sandboxes when the grader runs as root
MAX_CALLBACKS = 512  # calls of the grader's stand-ins during one call of the student's code
# What the notebook's own objects may hold (beyond what the sandbox held before any of the student's code ran)
# and still leave a call with a memory budget all of it: memory held before the call counts past this.
NOTEBOOK_MB = 128
THP = "/sys/kernel/mm/transparent_hugepage"  # bound read-only: whether and how large huge pages come


@dataclass(frozen=True)
class Limits:
    """Resource limits for one submission's sandbox."""

    cell_timeout: float = 30.0  # seconds for one notebook cell
    call_timeout: float = 20.0  # seconds for one call of a graded function
    startup_timeout: float = 120.0  # seconds for the worker to start, before any student code
    memory_mb: int = 4096  # address space of the worker; and, with cgroups, memory of the whole sandbox
    cpu_seconds: int = 900  # CPU time of the worker, in total
    cpus: float = 1.0  # CPUs the sandbox may use at once (a cgroup quota)
    processes: int = 64  # processes and threads in the sandbox
    output_kb: int = 256  # student output kept (the rest is counted and dropped)
    file_mb: int = 64  # largest file the student's code may write
    tmpfs_mb: int = 128  # size of each in-memory file system: /tmp, /home, /dev/shm
    message_kb: int = 8192  # largest message the grader accepts from the sandbox


class SandboxError(Exception):
    """The student's process failed: it timed out, died or broke the protocol. Scored as the student's."""

    def __init__(self, message: str, cell: int | None = None):
        super().__init__(message)
        self.cell = cell


class SandboxTimeout(SandboxError):
    pass


class SandboxDied(SandboxError):
    pass


class SandboxProtocolError(SandboxDied):
    """The process sent something the grader did not ask for, or in a form it does not accept."""


class SandboxUnavailable(RuntimeError):
    """The sandbox could not be started, before any student code ran: the grader's failure, not the
    student's. The message says what went wrong, for the instructor."""


def bwrap_available() -> bool:
    return shutil.which("bwrap") is not None


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


_UID_POOL = _UidPool(UIDS)


def _mounts(packages: Path) -> list[tuple[str, str]]:
    """(host path, path in the sandbox) of what the sandbox sees besides /usr and /etc."""
    prefixes = sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()})
    return [*((str(p), str(p)) for p in prefixes), (str(Path(packages).resolve()), PACKAGES_MOUNT)]


def _bwrap_command(python: str, binds: list[tuple[str, str]], limits: Limits, program: str = WORKER) -> list[str]:
    size = str(limits.tmpfs_mb * 2**20)
    command = [
        shutil.which("bwrap"),
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/usr",
        "/usr",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
        "--size",
        size,
        "--tmpfs",
        "/dev/shm",
        "--size",
        size,
        "--tmpfs",
        "/home",
    ]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = Path("/") / link
        if target.is_symlink():
            command += ["--symlink", os.readlink(target), str(target)]
        elif target.is_dir():
            command += ["--ro-bind", str(target), str(target)]
    for etc in (
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "localtime",
        "passwd",
        "group",
        "nsswitch.conf",
        "alternatives",
        "fonts",
    ):
        command += ["--ro-bind-try", f"/etc/{etc}", f"/etc/{etc}"]
    command += ["--ro-bind-try", THP, THP]
    for source, target in binds:
        command += ["--ro-bind", source, target]
    command += ["--dir", "/home/student", "--chdir", "/home/student"]
    return [*command, python, "-m", program]


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
        # glibc raises its mmap threshold each time a mapped block is freed (up to 32 MiB): blocks of
        # scores computed and freed in a loop then come from the heap, which keeps what it was given, and
        # a blockwise answer that holds 68 MiB at once measured 240 MiB. A fixed threshold maps every
        # block of 128 KiB and more on its own and gives it back when freed, so a memory budget measures
        # what the student's code holds, not what the allocator kept. Huge pages for those blocks, where
        # the kernel gives them on request (THP, read from /sys, bound in), keep their page faults from
        # making such a loop three times slower.
        "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=131072:glibc.malloc.hugetlb=1",
    }


class _Cgroups:
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


class Sandbox:
    """One running worker. Use as a context manager; ``close()`` kills everything it started."""

    def __init__(
        self,
        limits: Limits = Limits(),
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
        self._cgroups = _Cgroups(limits)
        stage = []
        try:
            if isolation == "bwrap":
                binds = _mounts(Path(packages))
                if os.geteuid() == 0:
                    self._uid = _UID_POOL.take()
                    self._stage = tempfile.mkdtemp(prefix="attention-stage-")
                    os.chmod(self._stage, 0o711)
                    staged = []
                    for index, (source, target) in enumerate(binds):
                        point = Path(self._stage) / str(index)
                        point.mkdir(mode=0o755)
                        stage.append((source, str(point)))
                        staged.append((str(point), target))
                    binds = staged
                command, env = _bwrap_command(sys.executable, binds, limits, program), _environment("/home/student")
                env["AUTOGRADER_PID_NAMESPACE"] = "1"
                env["PYTHONPATH"] = PACKAGES_MOUNT
                cwd = None
            else:
                self._home = tempfile.mkdtemp(prefix="attention-grader-")
                command, env, cwd = (
                    [sys.executable, "-m", program],
                    _environment(self._home),
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
        self.limits = limits
        self._home = self._stage = None
        self._uid = None
        self._closed = False
        self._close_lock = threading.Lock()
        self._sequence = 0
        self.ready = False
        self.stand_ins: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # (functions, modules) in place
        self.unbounded = False  # a call's memory budget could not be enforced (see call)
        # Before any of the student's code ran: (bytes the sandbox held, or None without a memory cgroup;
        # the largest address space of one of its processes). Memory budgets are counted from there (see call).
        self.baseline: tuple[int | None, int] | None = None
        self.warm = False  # the worker has loaded torch's meta-device kernels (see warm_up)
        self.startup_seconds = 0.0  # from the start of its process until the worker was ready
        self._started = time.monotonic()

    def _attach(self, process, schema) -> None:
        """Talk to ``process`` (its standard input, output and error), whose messages are of ``schema``.
        Requests are written and messages read by the grader's own thread, each by a deadline; only the
        student's output (standard error) is read by a thread of its own."""
        self.process = process
        self._inbox = wire.Inbox(process.stdout, schema, self.limits.message_kb * 1024)
        if process.stdin is not None:  # a fork server's requests come on a socket instead
            os.set_blocking(process.stdin.fileno(), False)
            self._writes = select.poll()
            self._writes.register(process.stdin.fileno(), select.POLLOUT)
        self.output = bytearray()
        self.output_dropped = 0
        self.background = 0  # processes the notebook's cells left running
        threading.Thread(target=self._drain_output, daemon=True).start()

    # ------------------------------------------------------------------ the channel

    def _receive(self, deadline: float):
        """The process's next message by ``deadline`` (a monotonic time): a message, None once its output has
        ended (or the sandbox is closed), or a :class:`SandboxProtocolError` for what is not a message of its
        kind; :class:`TimeoutError` if none came in time."""
        if self._closed:
            return None
        try:
            return self._inbox.next(deadline)
        except TimeoutError:
            raise
        except wire.MessageError as error:  # a message of the wrong form: named, with what is wrong with it
            return SandboxProtocolError(
                f"the process running your code broke the grading protocol (an unexpected {error.kind!r} "
                f"message); {error.detail}"
            )
        except Exception as error:  # an oversized message, or one that is not one, ends the conversation
            return SandboxProtocolError(
                f"the process running your code sent a malformed message ({type(error).__name__})"
            )

    def _drain_output(self) -> None:
        keep = self.limits.output_kb * 1024
        while True:
            try:
                chunk = self.process.stderr.read1(65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            room = keep - len(self.output)
            self.output += chunk[: max(room, 0)]
            self.output_dropped += max(len(chunk) - max(room, 0), 0)

    def _next(self, deadline: float, what: str, cell: int | None = None) -> wire.FromWorker:
        try:
            message = self._receive(deadline)
        except TimeoutError:
            self.close()
            if not self.ready:
                raise SandboxUnavailable(
                    f"the sandbox did not start within {self.limits.startup_timeout:g} s{self._launcher_said()}"
                ) from None
            raise SandboxTimeout(f"{what} did not finish within its time limit", cell) from None
        if isinstance(message, SandboxProtocolError):
            self.close()
            raise SandboxProtocolError(str(message), cell)
        if message is None:
            try:
                code = self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = -signal.SIGKILL
            self.close()
            if not self.ready:
                raise SandboxUnavailable(
                    f"the sandbox exited with status {code} before it was ready{self._launcher_said()}"
                )
            signal_number = -code if code < 0 else code - 128 if code > 128 else 0  # bwrap reports 128 + signal
            how = (
                f"was killed by signal {signal_number} ({_signal_name(signal_number)})"
                if signal_number
                else f"exited with status {code}"
            )
            raise SandboxDied(f"the process running your code {how} during {what}", cell)
        return message

    def _launcher_said(self) -> str:
        time.sleep(0.1)  # let the output thread take the last of it
        text = bytes(self.output[-2000:]).decode(errors="replace").strip()
        return f"; it said: {text}" if text else ""

    def _protocol_error(self, what: str, cell: int | None = None) -> SandboxProtocolError:
        self.close()
        return SandboxProtocolError(f"the process running your code broke the grading protocol ({what})", cell)

    def _wait_ready(self) -> None:
        if self.ready:
            return
        message = self._next(time.monotonic() + self.limits.startup_timeout, "the start-up")
        if not isinstance(message, wire.Ready):
            self.close()
            raise SandboxUnavailable(f"the sandbox's worker did not start as expected{self._launcher_said()}")
        self.ready = True
        self.startup_seconds = time.monotonic() - self._started

    def _note_baseline(self) -> None:
        """Once the worker is ready, before the first request that runs the student's code: what the sandbox
        holds (:attr:`baseline`)."""
        self._wait_ready()
        if self.baseline is None:
            spaces = []
            for pid in self._processes():
                with contextlib.suppress(OSError, ValueError):
                    spaces.append(_address_space(pid))
            self.baseline = (self._cgroups.memory_now(), max(spaces, default=0))

    def run_cells(self, cells: list[str | None], labels: list[str] | None = None) -> list[str | None]:
        """Run the notebook's cells in order; return each cell's error (or None).

        ``None`` in place of a source skips that cell; ``labels`` name the cells in
        messages. Raises :class:`SandboxError` (with ``.cell``, an index into
        ``cells``) if a cell hangs past ``cell_timeout``, kills the process or breaks the
        protocol, and :class:`SandboxUnavailable` if the sandbox cannot start.
        """
        self._note_baseline()
        self._send(wire.RunCells(cells), self.limits.startup_timeout)
        errors: list[str | None] = [None] * len(cells)
        current, deadline, expected = None, time.monotonic() + self.limits.cell_timeout, 0
        while True:
            what = (
                "the notebook's start-up" if current is None else labels[current] if labels else f"cell {current + 1}"
            )
            message = self._next(deadline, what, current)
            if isinstance(message, wire.CellStart) and message.index == expected:
                current, deadline = message.index, time.monotonic() + self.limits.cell_timeout
            elif isinstance(message, wire.CellDone) and current is not None and message.index == current:
                errors[current] = None if message.error is None else clean_text(message.error, 2000)
                current, expected = None, expected + 1
            elif isinstance(message, wire.CellsDone) and expected == len(cells):
                self.background = message.others
                return errors
            else:
                raise self._protocol_error(f"an unexpected {wire.kind(message)!r} message", current)

    def call(
        self,
        target: str | int,
        args: list[wire.Value],
        kwargs: dict[str, wire.Value],
        timeout: float | None = None,
        attr: str | None = None,
        label: str | None = None,
        seed: int | None = None,
        callbacks: Callable[[dict], dict] | None = None,
        memory_mb: int | None = None,
    ) -> wire.Reply:
        """Call the student's object (a name, or a handle number), or its attribute ``attr``, the
        random generators seeded with ``seed`` first (if given), with ``args`` and ``kwargs`` encoded
        (:func:`autograder.sandbox.values.encode`): the sandbox's channel carries plain data only.

        The reply is described in :mod:`autograder.sandbox.worker`; it is checked here. The stand-ins'
        calls that come while the grader waits for it go to ``callbacks`` (a callback message in, the
        answer out, as plain data); without ``callbacks`` they are refused.

        With ``memory_mb``, the call may hold at most that many MiB more than the sandbox held when the call
        started, and the sandbox at most that many beyond what it held before any of the student's code ran
        and :data:`NOTEBOOK_MB` for the notebook's objects: an absolute allowance, so that memory the student's
        code held before the call and frees during it does not count in its favour. That is measured by the
        sandbox's memory cgroup (a call past it gets a MemoryError reply), or else enforced on the address
        space of each of the sandbox's processes (:meth:`_address_space_budget`).
        """
        name, handle = (target, None) if isinstance(target, str) else (None, int(target))
        seed = None if seed is None else int(seed)

        def request(seq: int) -> wire.Call:
            return wire.Call(seq, list(args), dict(kwargs), name=name, handle=handle, attr=attr, seed=seed)

        what = f"a call of {label or target}"
        self._note_baseline()
        if memory_mb is None:
            return self._request(request, timeout, what, len(args), set(kwargs), callbacks)
        budget = memory_mb * 2**20
        start, peak = self._cgroups.memory_now(), self._cgroups.memory_peak()
        held = self.baseline[0]
        if peak is not None and start is not None and held is not None:
            reply = self._request(request, timeout, what, len(args), set(kwargs), callbacks)
            base = min(start, held + NOTEBOOK_MB * 2**20)
            used = peak() - base
            if used > budget:
                held_before = (
                    "its sandbox held when it started"
                    if base == start
                    else f"your notebook may keep before it ({NOTEBOOK_MB} MiB beyond the sandbox's start; it "
                    f"kept {(start - held) / 2**20:,.0f} MiB: del the large objects it keeps)"
                )
                return wire.Raised(
                    reply.seq,
                    "MemoryError",
                    f"the call held up to {used / 2**20:,.0f} MiB at once beyond what {held_before}; at most "
                    f"{memory_mb:,} MiB may be added",
                )
            return reply
        with self._address_space_budget(memory_mb):
            return self._request(request, timeout, what, len(args), set(kwargs), callbacks)

    @contextlib.contextmanager
    def _address_space_budget(self, megabytes: int):
        """Where no memory cgroup measures the call: while the block runs, each process of the sandbox may
        grow its address space by at most ``megabytes`` MiB, and to at most that many beyond the largest a
        process held before any of the student's code ran and :data:`NOTEBOOK_MB` (RLIMIT_AS, set from
        outside, on processes the sandbox's code cannot exempt: its children inherit it); afterwards the
        sandbox's own limit holds again. That takes the sandbox's uid (an unprivileged grader's own) or
        CAP_SYS_RESOURCE; a grader with neither cannot bound the call, and says so (:attr:`unbounded`)."""
        launch = self.limits.memory_mb * 2**20
        ceiling = self.baseline[1] + (NOTEBOOK_MB + megabytes) * 2**20
        bounded = False
        for pid in self._processes():
            with contextlib.suppress(OSError, ValueError):
                soft = min(launch, ceiling, _address_space(pid) + megabytes * 2**20)
                resource.prlimit(pid, resource.RLIMIT_AS, (soft, launch))
                bounded = True
        self.unbounded = self.unbounded or not bounded
        try:
            yield
        finally:
            for pid in self._processes():
                with contextlib.suppress(OSError, ValueError):
                    resource.prlimit(pid, resource.RLIMIT_AS, (launch, launch))

    def _processes(self) -> list[int]:
        """The sandbox's processes: the one the grader started (the worker itself, without bubblewrap) and
        its descendants."""
        return [self.process.pid, *descendants(self.process.pid)]

    def getattr(
        self,
        handle: int,
        attr: str,
        timeout: float | None = None,
        label: str | None = None,
        callbacks: Callable[[dict], dict] | None = None,
    ) -> wire.Reply:
        """An attribute of an object that stays in the sandbox."""

        def request(seq: int) -> wire.GetAttr:
            return wire.GetAttr(seq, int(handle), str(attr))

        return self._request(request, timeout, label or f".{attr}", 0, set(), callbacks)

    def stand_in(self, functions: list[str], modules: list[str], timeout: float | None = None) -> None:
        """Put the grader's stand-ins in place of the notebook's objects of these names (and put back
        those of the last call): see :mod:`autograder.standins`."""
        wanted = (tuple(functions), tuple(modules))
        if wanted == self.stand_ins:
            return

        def request(seq: int) -> wire.StandIn:
            return wire.StandIn(seq, list(functions), list(modules))

        reply = self._request(request, timeout, "putting the grader's stand-ins in place", 0, set())
        if not isinstance(reply, wire.Returned) or reply.value is not None or reply.args_after or reply.kwargs_after:
            raise self._protocol_error("a wrong reply to putting the stand-ins in place")
        self.stand_ins = wanted

    def warm_up(self, timeout: float | None = None) -> None:
        """Have the worker load what torch loads on its first operation on the "meta" device (seconds), once,
        within the start-up's time limit, so that the call that first passes that device is not charged for it."""
        if self.warm:
            return

        def request(seq: int) -> wire.WarmUp:
            return wire.WarmUp(seq)

        cap = self.limits.startup_timeout
        reply = self._request(request, timeout, "loading torch's meta-device kernels", 0, set(), cap=cap)
        if not isinstance(reply, wire.Returned) or reply.value is not None or reply.args_after or reply.kwargs_after:
            raise self._protocol_error("a wrong reply to loading torch's meta-device kernels")
        self.warm = True

    def _request(
        self,
        request: Callable[[int], wire.FromGrader],
        timeout: float | None,
        what: str,
        nargs: int,
        kwargs: set,
        callbacks: Callable[[dict], dict] | None = None,
        cap: float | None = None,
    ) -> wire.Reply:
        """Send ``request(seq)``, with the next number; answer the stand-ins' calls that come before the
        reply (at most :data:`MAX_CALLBACKS`) with ``callbacks``; the reply, checked. It may take ``timeout``
        seconds, and at most ``cap`` (by default the limit of a call of the student's code)."""
        cap = self.limits.call_timeout if cap is None else cap
        limit = cap if timeout is None else min(timeout, cap)
        deadline = time.monotonic() + limit
        self._sequence += 1
        self._send(request(self._sequence), limit)
        answered = 0
        while True:
            reply = self._next(deadline, what)
            if isinstance(reply, (wire.Returned, wire.Raised)):
                return self._checked_reply(reply, nargs, kwargs)
            if not isinstance(reply, wire.Callback) or reply.seq != self._sequence:
                raise self._protocol_error(f"an unexpected {wire.kind(reply)!r} message")
            answered += 1
            if answered > MAX_CALLBACKS:
                raise self._protocol_error(f"more than {MAX_CALLBACKS} calls of the grader's stand-ins in one call")
            if time.monotonic() > deadline:  # calls queued ahead arrive at once: none is answered past the deadline
                self.close()
                raise SandboxTimeout(f"{what} did not finish within its time limit")
            if callbacks is None:
                answer = {"ok": False, "error_type": "RuntimeError", "error": "no stand-ins are in use now"}
            else:
                answer = self._answered(callbacks, msgspec.structs.asdict(reply.callback), deadline, what)
            left = max(0.1, deadline - time.monotonic())
            self._send(wire.CallbackResult(self._sequence, **answer), left)

    def _answered(self, callbacks: Callable[[dict], dict], callback: dict, deadline: float, what: str) -> dict:
        """``callbacks(callback)``, computed by the grader in a thread of its own and waited for until
        ``deadline``: the call's deadline holds while the grader computes, too. Past it, the sandbox is
        closed and the call timed out; the answer, left to finish, is bounded in size by the stand-ins
        (:mod:`autograder.standins`) and sent nowhere."""
        outcome: list = []
        context = contextvars.copy_context()  # the check's stand-ins (standins.current) in the thread as well

        def answer() -> None:
            try:
                outcome.append((True, context.run(callbacks, callback)))
            except BaseException as exc:  # the grader's own failure: raised in the grader's thread
                outcome.append((False, exc))

        thread = threading.Thread(target=answer, name="stand-in answer", daemon=True)
        thread.start()
        thread.join(max(0.0, deadline - time.monotonic()))
        if not outcome:
            self.close()
            raise SandboxTimeout(f"{what} did not finish within its time limit")
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    def _checked_reply(self, reply: wire.Reply, nargs: int, kwargs: set) -> wire.Reply:
        """The reply, if it answers this request as a reply of the worker does (its form is checked as it
        is received); else the student broke the protocol. An error's texts come back cleaned."""
        if reply.seq != self._sequence:
            raise self._protocol_error("a reply to a request it was not sent")
        if isinstance(reply, wire.Returned):
            if (reply.args_after is not None and len(reply.args_after) > nargs) or (
                reply.kwargs_after is not None and not set(reply.kwargs_after) <= kwargs
            ):
                raise self._protocol_error("a reply of the wrong form")
            return reply
        return wire.Raised(
            reply.seq,
            clean_text(reply.error_type, 80),
            clean_text(reply.error, 2000),
            clean_text(reply.raised_in, 80),
        )

    def _send(self, message: wire.FromGrader, timeout: float) -> None:
        """Write a request; a process that does not read it within ``timeout`` is killed."""
        data = memoryview(wire.frame(message))
        deadline = time.monotonic() + max(0.1, timeout)
        while data:
            try:
                data = data[os.write(self.process.stdin.fileno(), data) :]
                continue
            except BlockingIOError:
                pass
            except (OSError, ValueError):  # the process has stopped (a broken pipe), or the sandbox is closed
                self.close()
                if not self.ready:
                    raise SandboxUnavailable(
                        f"the sandbox stopped before it was ready{self._launcher_said()}"
                    ) from None
                raise SandboxDied("the process running your code had already stopped") from None
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                if not self.ready:
                    raise SandboxUnavailable("the sandbox did not take its first request")
                raise SandboxTimeout("the process running your code stopped reading its requests")
            self._writes.poll(math.ceil(left * 1000))

    # ------------------------------------------------------------------ the end

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            with contextlib.suppress(Exception):
                stream.close()
        self._release()

    def _release(self) -> None:
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
            _UID_POOL.give_back(self._uid)
            self._uid = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def descendants(root: int) -> list[int]:
    """The processes below process ``root`` (its children, theirs, ...), from /proc, nearest first."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    parent = int(f.read().rsplit(b")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _address_space(pid: int) -> int:
    """The bytes of address space that process ``pid`` holds now (VmSize)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no VmSize for process {pid}")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
