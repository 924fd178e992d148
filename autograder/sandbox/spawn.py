"""Students' sandboxes whose workers come from a zygote: each student's sandbox is their own, its worker forked.

A fresh sandbox spends about a second of CPU importing torch and the course's packages before the student's
first cell runs. Where the grader runs as root (``make grade`` in CI, a container), :class:`Zygote` starts
:mod:`autograder.sandbox.zygote` once, which imports all of it, and :meth:`Zygote.sandbox` gives each notebook a
:class:`SpawnedSandbox`:

1. a :class:`Holder`: a sandbox started exactly as a fresh one is (:class:`~autograder.sandbox.process.Sandbox`:
   the launcher, a pool uid of its own, cgroups, limits, bubblewrap's namespaces, in-memory file systems and
   mounts), whose first process is the PID namespace's init and runs nothing: it reaps what is left to it, and
   ends with the namespace when the grader closes it;
2. a worker the zygote forks into it: it joins the holder's cgroups and namespaces, drops to the holder's uid,
   keeps no capability, and serves as a fresh worker does.

The student's code therefore runs with the same uid, limits, cgroups, mounts and namespaces as in a fresh sandbox
(``tests/test_spawn.py`` holds the two alike), and nothing of another student's: each sandbox has its own holder.
What the worker has of the zygote is what a fresh worker would import itself. Closing a :class:`SpawnedSandbox`
kills its worker and its holder, and with the holder its PID namespace and everything in it.

A zygote that cannot start or stops, or a worker it forked that does not say ``Ready`` (before any of the student's
code runs), is :class:`ZygoteUnavailable`: the grader's failure, never the student's.
:meth:`autograder.grading.grader.Grader.sandboxes` then starts fresh sandboxes instead, and ``make grade`` says why.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from autograder.sandbox import launcher, wire
from autograder.sandbox.address_space import descendants, host_pid
from autograder.sandbox.bwrap import PACKAGES_MOUNT, environment
from autograder.sandbox.errors import SandboxError, SandboxUnavailable
from autograder.sandbox.limits import Limits
from autograder.sandbox.pool import ForkedProcess
from autograder.sandbox.process import Sandbox
from autograder.sandbox.zygote import HOME

ZYGOTE = "autograder.sandbox.zygote"
# The holder: PID 1 of the sandbox's namespace, as the sandbox's uid, not dumpable (as a fresh sandbox's init,
# autograder.sandbox.bwrap.INIT: the worker, which runs as that uid, can neither trace it nor open its descriptors).
# It says it is running once bubblewrap has set the sandbox up, reaps the processes left to it, and ends (with its
# namespace) when its input closes or bubblewrap is killed (its parent-death signal).
HOLD = """\
import ctypes, os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
if ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    sys.exit("the sandbox's holder could not make itself undumpable")
def reap(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
signal.signal(signal.SIGCHLD, reap)
os.write(1, b"holding\\n")
while os.read(0, 1):
    pass
"""


class ZygoteUnavailable(SandboxUnavailable):
    """The zygote did not start, stopped, or could not fork a worker: the grader's failure."""


class Holder(Sandbox):
    """A student's sandbox, started as a fresh one is, whose first process holds it and runs nothing."""

    _arguments = ["-I", "-S", "-c", HOLD]

    def _attach(self, process, schema) -> None:
        """Wait until the holder runs (the sandbox is set up); :attr:`pid`: the host pid of the sandbox's init."""
        self.process = process
        self.output, self.output_dropped, self.background = bytearray(), 0, 0
        threading.Thread(target=self._drain_output, daemon=True).start()
        deadline = time.monotonic() + self.limits.startup_timeout
        said = b""
        while not said.endswith(b"\n") and len(said) < 64:
            if not select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
                self.close()
                raise SandboxUnavailable(f"the sandbox did not start within {self.limits.startup_timeout:g} s")
            chunk = os.read(process.stdout.fileno(), 64)
            if not chunk:
                code = process.wait()
                self.close()
                told = self._launcher_said()
                raise SandboxUnavailable(f"the sandbox exited with status {code} before it was ready{told}")
            said += chunk
        if said != b"holding\n":
            self.close()
            raise SandboxUnavailable(f"the sandbox's holder said {said[:64]!r}")
        try:
            self.pid = host_pid(process.pid, 1)
        except OSError as error:
            self.close()
            raise SandboxUnavailable(f"the sandbox's holder is not running: {error}") from None
        self.ready = True

    @property
    def uid(self) -> int | None:
        return self._uid


class SpawnedSandbox(Sandbox):
    """A worker the zygote forked into ``holder``: used as a :class:`~autograder.sandbox.process.Sandbox` is, its
    memory measured by the holder's cgroups; closing it kills the worker, then the holder."""

    def __init__(self, limits: Limits, holder: Holder, process: ForkedProcess, started: float):
        self._prepare(limits)
        self._cgroups = holder._cgroups
        self._holder = holder
        self.warm = True  # the zygote loaded torch's meta-device kernels
        self._attach(process, wire.FromWorkerMessage)
        self._started = started

    def _processes(self) -> list[int]:
        """The worker and what it started, and the holder and what was left to it: the sandbox's processes."""
        pids = [self.process.pid, *descendants(self.process.pid)]
        return [*pids, self._holder.pid, *(pid for pid in descendants(self._holder.pid) if pid not in pids)]

    def close(self) -> None:
        # the holder first: its PID namespace ends, and with it every process the student's code started, which
        # may hold the output pipe that the worker's own closing then reads to its end
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._holder.process.pid, signal.SIGKILL)
        super().close()

    def _release(self) -> list[int]:
        self._holder.close()  # its cgroups killed whole, and whatever runs as its uid: the worker's child outside too
        return self._holder.left


class Zygote:
    """The zygote for sandboxes with ``limits`` and the students' ``packages`` (a folder); started at once, ready
    by the first :meth:`sandbox`. Use as a context manager; :meth:`close` stops it, and with it the workers it forked
    (their parent-death signal): close it after its sandboxes."""

    def __init__(self, limits: Limits, packages: Path):
        if os.geteuid() != 0:
            raise ZygoteUnavailable("a zygote joins its sandboxes' namespaces as root: this grader is not root")
        self.limits, self.packages = limits, Path(packages)
        self.spawned = 0  # workers forked
        self._lock = threading.Lock()  # one request at a time: each waits for its own answer
        self._answers: queue.Queue = queue.Queue()
        self._exits: dict[int, int] = {}
        self._changed = threading.Condition()
        self._ready = threading.Event()
        self._gone: str | None = None  # why it stopped, once it has
        self._output = bytearray()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = environment(HOME)
        env.update(AUTOGRADER_PID_NAMESPACE="1", PYTHONPATH=PACKAGES_MOUNT, PWD=HOME)  # PWD: as bubblewrap's
        tmpfs = sorted({str(Path(PACKAGES_MOUNT).parent), str(Path(HOME).parent), "/tmp"})  # its /tmp: not the host's
        hidden = [p for p in _prefixes() if any(p == t or p.startswith(t + "/") for t in tmpfs)]
        binds = [[str(self.packages.resolve()), PACKAGES_MOUNT], *([p, p] for p in hidden)]
        config = {"view": {"tmpfs": tmpfs, "binds": binds, "chdir": HOME}}
        try:
            self.process = subprocess.Popen(
                launcher.command_line(sys.executable, config, [sys.executable, "-m", ZYGOTE]),
                stdin=theirs.fileno(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as error:
            ours.close()
            raise ZygoteUnavailable(f"the zygote could not start: {error}") from None
        finally:
            theirs.close()
        self._control = ours
        threading.Thread(target=self._read, daemon=True, name="zygote messages").start()
        threading.Thread(target=self._drain, daemon=True, name="zygote output").start()

    def _read(self) -> None:
        inbox = wire.Inbox(self.process.stdout, wire.FromZygoteMessage)
        why = "it stopped"
        while True:
            try:
                message = inbox.next(time.monotonic() + 3600)
            except TimeoutError:
                continue
            except Exception as error:  # the zygote runs no student code: what it sends is the grader's own
                why = f"it sent what it never sends ({type(error).__name__})"
                break
            if message is None:
                break
            if isinstance(message, wire.Ready):
                self._ready.set()
            elif isinstance(message, wire.Exited):
                with self._changed:
                    self._exits[message.pid] = message.status
                    self._changed.notify_all()
            else:
                self._answers.put(message)
        self._stop(why)

    def _drain(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.process.stderr.read1(65536):
                self._output = (self._output + chunk)[-4000:]

    def _stop(self, why: str) -> None:
        with self._changed:
            if self._gone is None:
                time.sleep(0.1)  # its last words
                said = bytes(self._output).decode(errors="replace").strip()
                self._gone = why + (f"; it said: {said[-1500:]}" if said else "")
            self._changed.notify_all()
        self._ready.set()
        self._answers.put(None)

    def sandbox(self) -> SpawnedSandbox:
        """A new sandbox of its own (:class:`Holder`) with a worker forked into it, ready for a notebook's cells.
        :class:`ZygoteUnavailable` where the zygote cannot give one; the holder's own failure to start is
        :class:`~autograder.sandbox.errors.SandboxUnavailable`, as a fresh sandbox's is."""
        started = time.monotonic()
        if not self._ready.wait(self.limits.startup_timeout) or self._gone:
            self.close()
            raise ZygoteUnavailable(f"the zygote is not running: {self._gone or 'it did not start in time'}")
        holder = Holder(self.limits, "bwrap", self.packages)
        pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(3)]
        (requests_read, requests_write), (replies_read, replies_write), (output_read, output_write) = pipes
        theirs, ours = [requests_read, replies_write, output_write], [requests_write, replies_read, output_read]
        limits = asdict(self.limits)
        request = {"holder": holder.pid, "uid": holder.uid, "cgroups": holder._cgroups.procs, "limits": limits}
        try:
            with self._lock:
                try:
                    socket.send_fds(self._control, [json.dumps(request).encode()], theirs)
                except OSError as error:
                    raise ZygoteUnavailable(f"the zygote did not take a request: {error}") from None
                finally:
                    for fd in theirs:
                        os.close(fd)
                try:
                    answer = self._answers.get(timeout=self.limits.startup_timeout)
                except queue.Empty:
                    answer = None
            if isinstance(answer, wire.NotForked):
                raise ZygoteUnavailable(f"the zygote could not put a worker in the sandbox: {answer.why}")
            if not isinstance(answer, wire.Forked):
                self.close()
                raise ZygoteUnavailable(f"the zygote did not fork a worker: {self._gone or 'no answer in time'}")
        except BaseException:
            for fd in ours:
                os.close(fd)
            holder.close()
            raise
        streams = (os.fdopen(requests_write, "wb"), os.fdopen(replies_read, "rb", buffering=0))
        process = ForkedProcess(self, answer.pid, answer.pid, *streams, os.fdopen(output_read, "rb"))
        spawned = SpawnedSandbox(self.limits, holder, process, started)
        try:  # before any of the student's code runs: a worker that does not start is the zygote's failure
            spawned._wait_ready()
        except (SandboxUnavailable, SandboxError) as error:
            spawned.close()
            raise ZygoteUnavailable(f"a worker it forked did not start: {error}") from None
        self.spawned += 1
        return spawned

    def exit_status(self, pid: int, timeout: float) -> int | None:
        """How worker ``pid`` (a host pid) ended, as Popen's ``returncode``, waiting at most ``timeout`` s; None if
        not yet. Its child outside the sandbox reports ``128 + signal`` for a signal, as bubblewrap does."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while pid not in self._exits:
                left = deadline - time.monotonic()
                if self._gone is not None:  # its children died with it (their parent-death signal), and the workers
                    return self._exits.setdefault(pid, -9)
                if left <= 0:
                    return None
                self._changed.wait(left)
            return self._exits[pid]

    @property
    def alive(self) -> bool:
        return self._gone is None and self.process.poll() is None

    def close(self) -> None:
        """Stop the zygote: it ends when its socket closes; killed if it has not within a few seconds."""
        with contextlib.suppress(OSError):
            self._control.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, 9)
            self.process.wait()
        self._stop("it was closed")

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _prefixes() -> list[str]:
    """The Python installation's folders (a venv's, and the Python it was made from)."""
    return sorted({str(Path(sys.base_prefix).resolve()), str(Path(sys.prefix).resolve())})
