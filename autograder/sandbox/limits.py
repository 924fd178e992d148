"""What one submission's sandbox may use (:class:`Limits`), and a call's memory budget as its memory cgroup measures it.

A call given a budget of ``memory_mb`` MiB may hold at most that many more than the sandbox held when the call
started, and the sandbox at most that many beyond what it held before any of the student's code ran and
:data:`NOTEBOOK_MB` for the notebook's objects: an absolute allowance, so that memory the student's code held
before the call and frees during it does not count in its favour. :func:`budget_reply` gives that verdict where
the sandbox's memory cgroup measures the call; elsewhere :func:`autograder.sandbox.address_space.budget` enforces
it on each process's address space.
"""

from __future__ import annotations

from dataclasses import dataclass

from autograder.sandbox import wire

# What the notebook's own objects may hold (beyond what the sandbox held before any of the student's code ran)
# and still leave a call with a memory budget all of it: memory held before the call counts past this.
NOTEBOOK_MB = 128


@dataclass(frozen=True)
class Limits:
    """Resource limits for one submission's sandbox. Its time limits count the student's time: the time the host's
    other work keeps the sandbox from a CPU it is due stretches them, up to a backstop past which the notebook is
    not graded (:meth:`autograder.sandbox.channel.Channel._stretched`)."""

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


def budget_reply(reply: wire.Reply, memory_mb: int, start: int, held: int, peak: int) -> wire.Reply:
    """``reply``, the reply to a call with a budget of ``memory_mb`` MiB, or a MemoryError in its place where the
    call held more: ``start`` is what the sandbox held (bytes) when the call started, ``held`` what it held before
    any of the student's code ran, ``peak`` the most it held at once during the call."""
    budget = memory_mb * 2**20
    base = min(start, held + NOTEBOOK_MB * 2**20)
    used = peak - base
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
