"""Warm sandboxes for trusted batches: one sandbox that has loaded torch once forks a fresh worker per notebook.

A sandbox's start-up (bubblewrap, then ``import torch``, NumPy, IPython and the course's packages, and torch's
meta-device kernels) costs seconds, more than grading a notebook of the course's own often does. Where every
notebook graded is the course's own (the catalogue of known mistakes and correct idioms, ``make
grading-accuracy``, the reference notebooks' checks), :class:`WarmPool` starts :mod:`autograder.sandbox.forkserver`
in a sandbox (the same bubblewrap, uid, cgroups and limits as a student's) and has it fork a worker for each
notebook: :meth:`WarmPool.sandbox` gives a :class:`ForkedSandbox`, which the grader uses as it uses a
:class:`~autograder.sandbox.process.Sandbox`, and whose :meth:`~ForkedSandbox.close` kills the worker and what it
started and gives the server back to the pool. Each server runs one worker at a time, so that a call's memory
is measured by the sandbox's memory cgroup as it is in a sandbox of its own; a pool of ``size`` servers grades
``size`` notebooks at once.

The workers of one server share its uid, its cgroups and the state of the sandbox's file systems (``/tmp``,
the home folder): a worker could leave something there for the next one, or reach the server. That is why
students' submissions never come here: ``make grade``, plain ``nbgrader autograde`` and ``make check`` of a
submission start a sandbox of their own for each notebook.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import subprocess
import threading
import time
from pathlib import Path

from autograder.release import course
from autograder.release.packages import sandbox_packages
from autograder.sandbox import forkserver, wire
from autograder.sandbox.address_space import host_pid
from autograder.sandbox.errors import SandboxUnavailable
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import Sandbox

FORK_SERVER = "autograder.sandbox.forkserver"
WAIT_FOR_FREE = 1200.0  # seconds; a notebook's whole grading takes at most 600 (grading.notebook.TOTAL_SECONDS)


class _Server:
    """One fork server in its sandbox: forks a worker, and says how each worker it forked ended."""

    def __init__(self, limits: Limits, isolation: str, packages: Path):
        self.limits = limits
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.sandbox = Sandbox(limits, isolation, packages, program=FORK_SERVER, stdin=theirs.fileno())
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.control = ours
        self.exits: dict[int, int] = {}  # sandbox pid -> exit status, of the workers that ended
        try:
            self.sandbox._wait_ready()
        except BaseException:
            self.close()
            raise

    @property
    def alive(self) -> bool:
        return self.sandbox.alive and not self.sandbox._closed

    def fork(self, on_close, started: float) -> ForkedSandbox:
        """A new worker, ready for a notebook's cells; ``on_close`` is called once it is closed. Its start-up
        is counted from ``started`` (a monotonic time: when it was asked for)."""
        requests_read, requests_write = os.pipe2(os.O_CLOEXEC)
        replies_read, replies_write = os.pipe2(os.O_CLOEXEC)
        output_read, output_write = os.pipe2(os.O_CLOEXEC)
        theirs = [requests_read, replies_write, output_write]
        try:
            socket.send_fds(self.control, [forkserver.REQUEST], theirs)
        except OSError as error:
            for fd in (*theirs, requests_write, replies_read, output_read):
                os.close(fd)
            self.close()
            raise SandboxUnavailable(f"the warm sandbox did not take a request: {error}") from None
        for fd in theirs:
            os.close(fd)
        try:
            pid = self._forked(time.monotonic() + self.limits.startup_timeout)
            try:
                found = host_pid(self.sandbox.process.pid, pid)
            except OSError:
                raise SandboxUnavailable(f"the warm sandbox's worker {pid} is not running") from None
        except BaseException:
            for fd in (requests_write, replies_read, output_read):
                os.close(fd)
            raise
        process = ForkedProcess(
            self,
            pid,
            found,
            os.fdopen(requests_write, "wb"),
            os.fdopen(replies_read, "rb", buffering=0),
            os.fdopen(output_read, "rb"),
        )
        child = ForkedSandbox(self, process, on_close)
        child._started = started
        return child

    def _forked(self, deadline: float) -> int:
        while True:
            message = self._next(deadline)
            if isinstance(message, wire.Forked):
                return message.pid
            if not isinstance(message, wire.Exited):  # Ready comes once, before any request
                self.close()
                raise SandboxUnavailable(f"the warm sandbox answered a fork with {wire.kind(message)!r}")

    def _next(self, deadline: float):
        try:
            message = self.sandbox._receive(deadline)
        except TimeoutError:
            self.close()
            raise SandboxUnavailable("the warm sandbox did not fork a worker in time") from None
        if message is None or isinstance(message, Exception):
            self.close()
            raise SandboxUnavailable(f"the warm sandbox stopped{self.sandbox._launcher_said()}")
        if isinstance(message, wire.Exited):
            self.exits[message.pid] = message.status
        return message

    def exit_status(self, pid: int, timeout: float) -> int | None:
        """How worker ``pid`` ended (as Popen's ``returncode``), waiting at most ``timeout`` s; None if not yet."""
        deadline = time.monotonic() + timeout
        while pid not in self.exits:
            try:
                message = self.sandbox._receive(deadline)
            except TimeoutError:
                return None
            if message is None or isinstance(message, Exception):  # the server is gone, and its workers with it
                return self.exits.setdefault(pid, -9)
            if isinstance(message, wire.Exited):
                self.exits[message.pid] = message.status
        return self.exits[pid]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.control.close()
        self.sandbox.close()


class ForkedProcess:
    """A forked worker as :class:`~autograder.sandbox.process.Sandbox` uses its process (a ``Popen``); ``server``
    (a fork server, or :class:`autograder.sandbox.spawn.Zygote`) says how it ended."""

    def __init__(self, server, sandbox_pid: int, pid: int, stdin, stdout, stderr):
        self.server, self.sandbox_pid, self.pid = server, sandbox_pid, pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_status(self.sandbox_pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.server.exit_status(self.sandbox_pid, 3600 if timeout is None else timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
        return self.returncode


class ForkedSandbox(Sandbox):
    """A worker forked by a warm sandbox's server: a :class:`~autograder.sandbox.process.Sandbox` whose process is
    that worker (its own process group), in the server's sandbox, cgroups and uid, with torch's meta-device
    kernels already loaded. Closing it kills the worker's process group and gives the server back."""

    def __init__(self, server: _Server, process: ForkedProcess, on_close):
        self._prepare(server.limits)
        self._cgroups = server.sandbox._cgroups  # the server's: measured here, removed with the server
        self.warm = True
        self._on_close = on_close
        self._attach(process, wire.FromWorkerMessage)

    def _release(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


class WarmPool:
    """``size`` warm sandboxes for the course's own notebooks under ``release`` (default: the term's), each
    forking a worker per notebook. Use as a context manager; :meth:`sandbox` waits for a free one."""

    def __init__(
        self,
        size: int = 1,
        limits: Limits | None = None,
        isolation: str = "bwrap",
        release: course.Release | None = None,
    ):
        if size < 1:
            raise ValueError(f"size must be at least 1, got {size}")
        self.limits, self.isolation = limits or Limits(), isolation
        self.release = release or course.release()
        self.packages = sandbox_packages(self.release)
        self._free: queue.Queue[_Server | None] = queue.Queue()
        self._servers: list[_Server] = []
        self._lock = threading.Lock()
        self._closed = False
        for _ in range(size):
            self._free.put(None)  # started when first needed

    def sandbox(self) -> ForkedSandbox:
        """A fresh worker (forked from a free server, started first if it is not running)."""
        started = time.monotonic()
        try:  # a worker never closed would hold its server for good: say so, rather than wait for ever
            server = self._free.get(timeout=WAIT_FOR_FREE)
        except queue.Empty:
            raise SandboxUnavailable(f"no warm sandbox came free in {WAIT_FOR_FREE:g} s") from None
        try:
            if server is None or not server.alive:
                server = self._start()
            return server.fork(lambda: self._free.put(server), started)
        except BaseException:
            self._free.put(None if server is None or not server.alive else server)
            raise

    def _start(self) -> _Server:
        server = _Server(self.limits, self.isolation, self.packages)
        with self._lock:
            if self._closed:
                server.close()
                raise SandboxUnavailable("the warm pool is closed")
            self._servers.append(server)
        return server

    def close(self) -> None:
        with self._lock:
            self._closed = True
            servers, self._servers = self._servers, []
        for server in servers:
            server.close()

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
