"""The grader's end of the checked channel to a sandbox: every message sent and read by a deadline, and checked.

The worker speaks :mod:`autograder.sandbox.wire` on a private pair of pipes. Every message it sends is
size-capped, checked against its declaration and against what the grader expects before it is used; anything else
(forged, malformed, oversized, out of order) ends the conversation as the student's failure, never the grader's.
Every wait on the sandbox has a deadline. Until the worker says it is ready (before any student code runs) a
failure is the grader's: :class:`~autograder.sandbox.errors.SandboxUnavailable`, never scored. Closing the
channel kills the process and, through its PID namespace, every process it started.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable

import msgspec

from autograder.sandbox import wire
from autograder.sandbox.errors import (
    SandboxDied,
    SandboxLost,
    SandboxProtocolError,
    SandboxTimeout,
    SandboxUnavailable,
)
from autograder.sandbox.limits import Limits
from autograder.text.terminal import clean_text

MAX_CALLBACKS = 512  # calls of the grader's stand-ins during one call of the student's code
# A time limit's wall-clock backstop: a limit of L seconds, stretched by the host's contention (see
# Channel._stretched), ends at the latest BACKSTOP * L + BACKSTOP_SECONDS after it began, as the grader's failure.
BACKSTOP, BACKSTOP_SECONDS = 4.0, 60.0
WINDOWS = 32  # the time limits whose windows a channel keeps (the latest ones)
# The signals that a process's own code brings on itself (a fault, abort, its CPU or file-size limit): a worker that
# one of them ended died of the student's code, as one that exited with a status did.
OWN_SIGNALS = frozenset(
    int(s)
    for s in (
        signal.SIGSEGV,
        signal.SIGBUS,
        signal.SIGFPE,
        signal.SIGILL,
        signal.SIGABRT,
        signal.SIGSYS,
        signal.SIGTRAP,
        signal.SIGXCPU,
        signal.SIGXFSZ,
    )
)


class Channel:
    """The conversation with one sandbox's process; ``close()`` kills it and what it started."""

    def _prepare(self, limits: Limits) -> None:
        """The state of the channel before its process starts."""
        self.limits = limits
        self._closed = False
        self.left: list[int] = []  # the sandbox's processes still running once it was closed (see close)
        self._close_lock = threading.Lock()
        self._sequence = 0
        self.ready = False
        self.startup_seconds = 0.0  # from the start of its process until the worker was ready
        self._started = time.monotonic()
        # each time limit's window, by its deadline: (when it began, the sandbox's CPU clock then)
        self._windows: dict[float, tuple] = {}

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
        except wire.TooManyValues as error:  # what is too large, said: a reply of the student's own choosing
            return SandboxProtocolError(f"the process running your code sent {error}")
        except Exception as error:  # an oversized message, or one that is not one, ends the conversation
            return SandboxProtocolError(
                f"the process running your code sent a malformed message ({type(error).__name__})"
            )

    @property
    def decoding_seconds(self) -> float:
        """How long the grader took to decode this sandbox's messages, in all (``wire.Inbox.seconds``)."""
        inbox = getattr(self, "_inbox", None)  # none before the process has started
        return 0.0 if inbox is None else inbox.seconds

    def _drain_output(self) -> None:
        """Read the student's output (standard error) as it comes, keeping the first ``output_kb``; once the
        sandbox is closed, what is left to read without waiting, then the pipe is closed here. Never a blocking
        read: a process the student's code left may hold the pipe open, and closing a stream that a thread
        reads waits for that read."""
        keep = self.limits.output_kb * 1024
        try:
            fd = self.process.stderr.fileno()
            os.set_blocking(fd, False)
        except (OSError, ValueError):
            return
        poll = select.poll()
        poll.register(fd, select.POLLIN)
        try:
            while True:
                closed = self._closed
                try:
                    chunk = os.read(fd, 65536) if poll.poll(0 if closed else 250) else None
                except BlockingIOError:
                    chunk = None
                if chunk == b"" or (chunk is None and closed):
                    return
                if chunk:
                    room = keep - len(self.output)
                    self.output += chunk[: max(room, 0)]
                    self.output_dropped += max(len(chunk) - max(room, 0), 0)
        except (OSError, ValueError):
            return
        finally:
            with contextlib.suppress(Exception):
                self.process.stderr.close()

    def _cpu_clock(self) -> tuple[float, float] | None:
        """(seconds the sandbox's processes waited for a CPU, seconds of CPU they used), both counted since some
        fixed time; None where nothing measures them (see :class:`~autograder.sandbox.client.Client`)."""
        return None

    def _killed_for_its_limits(self) -> bool:
        """Whether the kernel killed one of the sandbox's processes for the sandbox's own limits (memory, CPU)."""
        return False

    def _window(self, deadline: float) -> tuple:
        window = self._windows.get(deadline)
        if window is None:
            while len(self._windows) >= WINDOWS:
                del self._windows[next(iter(self._windows))]
            window = self._windows[deadline] = (time.monotonic(), self._cpu_clock())
        return window

    def _stretched(self, deadline: float) -> tuple[float, float]:
        """(``deadline`` as it holds now, its backstop). A limit counts the student's time, not the host's: it is
        stretched by the time the host kept the sandbox's processes from a CPU: the seconds they waited, ready to
        run (their CPU pressure), at most the CPU the sandbox was due (its ``cpus`` for the time that passed) and
        did not use, so that the student's own processes, which use it, stretch nothing, nor does a process that
        sleeps. Where nothing measures that, the deadline as it was set. The grader's answers to the stand-ins'
        calls count as the student's code's time, as they did (issue 37): the student's code asked for them.
        The backstop: :data:`BACKSTOP` times the limit and :data:`BACKSTOP_SECONDS` past its start."""
        begun, clock = self._window(deadline)
        backstop = begun + BACKSTOP * max(0.0, deadline - begun) + BACKSTOP_SECONDS
        now, current = time.monotonic(), self._cpu_clock()
        host = 0.0
        if clock is not None and current is not None:
            waited, used = current[0] - clock[0], current[1] - clock[1]
            host = max(0.0, min(waited, self.limits.cpus * (now - begun) - used))
        return deadline + host, backstop

    def _next(self, deadline: float, what: str, cell: int | None = None) -> wire.FromWorker:
        self._window(deadline)
        until = deadline  # a stretched deadline is never earlier: measured only once this one has passed
        while True:
            try:
                message = self._receive(until)
                break
            except TimeoutError:
                stretched, backstop = self._stretched(deadline)
                until = min(stretched, backstop)
                if time.monotonic() < until:
                    continue
            self.close()
            if not self.ready:
                raise SandboxUnavailable(
                    f"the sandbox did not start within {self.limits.startup_timeout:g} s{self._launcher_said()}"
                ) from None
            if stretched > backstop:
                raise SandboxLost(
                    f"{what} was not given its time: the host's other work kept its process from a CPU until the "
                    f"limit's backstop ({backstop - self._window(deadline)[0]:.0f} s) had passed"
                ) from None
            raise SandboxTimeout(f"{what} did not finish within its time limit", cell) from None
        if isinstance(message, SandboxProtocolError):
            self.close()
            raise SandboxProtocolError(str(message), cell)
        if message is None:
            raise self._ended(what, cell)
        return message

    def _ended(self, what: str, cell: int | None = None) -> Exception:
        """The process has ended (its pipe closed): closed, and what to raise, with its exit status as it was."""
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None  # not made up: unknown, and so not the student's (see SandboxDied.own)
        own = self._killed_for_its_limits()
        self.close()
        if not self.ready:
            return SandboxUnavailable(
                f"the sandbox {'stopped' if code is None else f'exited with status {code}'} before it was ready"
                f"{self._launcher_said()}"
            )
        if code is None:
            how = "stopped, and how it ended could not be read"
        else:
            signal_number = -code if code < 0 else code - 128 if code > 128 else 0  # bwrap reports 128 + signal
            own = own or not signal_number or signal_number in OWN_SIGNALS
            how = (
                f"was killed by signal {signal_number} ({_signal_name(signal_number)})"
                if signal_number
                else f"exited with status {code}"
            )
        died = SandboxDied(f"the process running your code {how} during {what}", cell)
        died.own = own
        return died

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
            if time.monotonic() > min(self._stretched(deadline)):  # calls queued ahead arrive at once: none is
                self.close()  # answered past the deadline
                raise SandboxTimeout(f"{what} did not finish within its time limit")
            if callbacks is None:
                answer = {"ok": False, "error_type": "RuntimeError", "error": "no stand-ins are in use now"}
            else:
                answer = self._answered(callbacks, msgspec.structs.asdict(reply.callback), deadline, what)
            left = max(0.1, min(self._stretched(deadline)) - time.monotonic())
            self._send(wire.CallbackResult(self._sequence, **answer), left)

    def _answered(self, callbacks: Callable[[dict], dict], callback: dict, deadline: float, what: str) -> dict:
        """``callbacks(callback)``, computed by the grader in a thread of its own and waited for until
        ``deadline``: the call's deadline holds while the grader computes, too. Past it, the sandbox is
        closed and the call timed out; the answer, left to finish, is bounded in size by the stand-ins
        (:mod:`autograder.calls.standins`) and sent nowhere."""
        outcome: list = []
        context = contextvars.copy_context()  # the check's stand-ins (standins.current) in the thread as well

        def answer() -> None:
            try:
                outcome.append((True, context.run(callbacks, callback)))
            except BaseException as exc:  # the grader's own failure: raised in the grader's thread
                outcome.append((False, exc))

        thread = threading.Thread(target=answer, name="stand-in answer", daemon=True)
        thread.start()
        thread.join(max(0.0, min(self._stretched(deadline)) - time.monotonic()))
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
                raise self._ended(f"a request ({wire.kind(message)!r})") from None
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
        """Kill the process and everything it started (:meth:`_release`: the sandbox's processes, whatever they
        did, and what the sandbox holds); :attr:`left`: the sandbox's processes found running after that (none,
        once checked). Its exit status is kept as it was (a process that has not ended within a few seconds of
        its kill gets none). Nothing here waits on a pipe: the student's output is left to its reader, which
        closes it."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(Exception):
                stream.close()
        self.left = self._release() or []

    def _release(self) -> list[int] | None:
        """End what is left of the sandbox and give back what it holds besides its process, once it is closed:
        nothing here. The sandbox's processes still running after that, where it could check (see
        :attr:`left`)."""
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
