"""The address space of a sandbox's processes: what each holds, and a call's memory budget enforced on it.

The processes are found below the one the grader started (:func:`descendants`). The budget is for a call that no
memory cgroup measures; it is set with RLIMIT_AS from outside, on processes the sandbox's code cannot exempt
(their children inherit it), which takes the sandbox's uid (an unprivileged grader's own) or CAP_SYS_RESOURCE.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable


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


def host_pid(root: int, namespace_pid: int) -> int:
    """The pid, as this process sees it, of the process below ``root`` whose pid in its own PID namespace is
    ``namespace_pid`` (the last of its ``NSpid``); ProcessLookupError if there is none."""
    for pid in descendants(root):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("NSpid:") and int(line.split()[-1]) == namespace_pid:
                        return pid
    raise ProcessLookupError(f"no process {namespace_pid} below process {root}")


def address_space(pid: int) -> int:
    """The bytes of address space that process ``pid`` holds now (VmSize)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no VmSize for process {pid}")


@contextlib.contextmanager
def budget(processes: Callable[[], list[int]], megabytes: int, ceiling: int, launch: int):
    """While the block runs, each of the ``processes()`` may grow its address space by at most ``megabytes``
    MiB, and to at most ``ceiling`` bytes; afterwards the sandbox's own limit (``launch`` bytes) holds again.
    Yields whether any process was bounded (a grader with neither the sandbox's uid nor CAP_SYS_RESOURCE
    cannot bound the call)."""
    bounded = False
    for pid in processes():
        with contextlib.suppress(OSError, ValueError):
            soft = min(launch, ceiling, address_space(pid) + megabytes * 2**20)
            resource.prlimit(pid, resource.RLIMIT_AS, (soft, launch))
            bounded = True
    try:
        yield bounded
    finally:
        for pid in processes():
            with contextlib.suppress(OSError, ValueError):
                resource.prlimit(pid, resource.RLIMIT_AS, (launch, launch))
