"""What a sandbox sees of the host, and the bubblewrap command line and environment its program starts with.

The sandbox gets new PID, network, IPC, UTS, mount and user namespaces (no network at all), every capability
dropped, no nested user namespaces, a read-only view of ``/usr``, of the Python installation and of the course's
two packages as students get them (at :data:`PACKAGES_MOUNT`), and nothing else of the course. Its home, ``/tmp``
and ``/dev/shm`` are private, size-capped in-memory file systems.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from autograder.sandbox.limits import Limits

PACKAGES_MOUNT = "/opt/course-packages"  # where the students' packages are, inside the sandbox
WORKER = "autograder.sandbox.worker"  # the sandbox's program (a module), unless a fork server is asked for
THP = "/sys/kernel/mm/transparent_hugepage"  # bound read-only: whether and how large huge pages come
# The sandbox's init, PID 1 of its namespace (in place of bubblewrap's, which the student's uid could trace): not
# dumpable, so that the student's code, which runs as its uid, can neither trace it, nor read or write its memory,
# nor open its descriptors (and so never clear its parent-death signal, which ends it, and with it the namespace,
# when the grader kills bubblewrap). It starts the sandbox's program (its arguments) and ends with that program's
# status (``128 + signal`` where a signal ended it, as bubblewrap's says), and with it every process of the
# sandbox. Its interrupt is the kernel's default: for an init, nothing from inside its namespace.
INIT = """\
import ctypes, os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
if ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    sys.exit("the sandbox's init could not make itself undumpable")
program = os.fork()
if program == 0:
    os.execv(sys.argv[1], sys.argv[1:])
for fd in (0, 1, 2):
    os.close(fd)
while True:
    pid, status = os.wait()
    if pid == program:
        code = os.waitstatus_to_exitcode(status)
        os._exit(128 - code if code < 0 else code)
"""


def bwrap_available() -> bool:
    return shutil.which("bwrap") is not None


def mounts(packages: Path) -> list[tuple[str, str]]:
    """(host path, path in the sandbox) of what the sandbox sees besides /usr and /etc."""
    prefixes = sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()})
    return [*((str(p), str(p)) for p in prefixes), (str(Path(packages).resolve()), PACKAGES_MOUNT)]


def bwrap_command(
    python: str, binds: list[tuple[str, str]], limits: Limits, program: str = WORKER, arguments: list[str] | None = None
) -> list[str]:
    """The command line that runs ``python -m program`` under bubblewrap, started by the sandbox's init
    (:data:`INIT`), with ``binds`` (host path, path in the sandbox) read-only besides the system's own files.
    ``arguments``: Python's for a first process that is itself the sandbox's init (PID 1), in place of
    :data:`INIT` and the program (a zygote's holder: :mod:`autograder.sandbox.spawn`)."""
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
    if arguments is not None:
        return [*command, "--as-pid-1", python, *arguments]
    return [*command, "--as-pid-1", python, "-I", "-S", "-c", INIT, python, "-m", program]


def environment(home: str) -> dict:
    """The whole environment of the sandbox's program, whose home is ``home``."""
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
        # Triton in its interpreter, as chapter 11's setup asks (attention_course.kernels.interpreter.load_triton):
        # a process chooses once, when triton is first imported, and a warm sandbox's start-up imports it before any
        # notebook runs (torch's meta kernels do).
        "TRITON_INTERPRET": "1",
        # glibc raises its mmap threshold each time a mapped block is freed (up to 32 MiB): blocks of
        # scores computed and freed in a loop then come from the heap, which keeps what it was given, and
        # a blockwise answer that holds 68 MiB at once measured 240 MiB. A fixed threshold maps every
        # block of 128 KiB and more on its own and gives it back when freed, so a memory budget measures
        # what the student's code holds, not what the allocator kept. Huge pages for those blocks, where
        # the kernel gives them on request (THP, read from /sys, bound in), keep their page faults from
        # making such a loop three times slower.
        "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=131072:glibc.malloc.hugetlb=1",
    }
