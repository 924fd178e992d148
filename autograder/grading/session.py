"""The student's program in a sandbox, restarted when a cell hangs, and the proxies that test cells call.

The program runs in a :class:`Session`, restarted when a cell hangs or dies; the proxies stand in the
test cells for the student's functions and objects (:class:`Remote`, :class:`RemoteObject`): calls go
to the sandbox by value, results come back as plain data."""

from __future__ import annotations

import functools
import inspect
import keyword
import time
from collections.abc import Callable

import numpy as np
import torch

from attention_course.tooling import syntax
from autograder.calls import global_rng, standins
from autograder.grading import timings
from autograder.grading.report import Report
from autograder.sandbox import values, wire
from autograder.sandbox.errors import SandboxDied, SandboxError, SandboxLost, SandboxTimeout, SandboxUnavailable
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import Sandbox
from autograder.text.terminal import clean_text

MAX_RESTARTS = 5
UNBOUNDED = (
    "the memory of a call could not be bounded on this grader (no memory cgroup, and no right to limit the "
    "sandbox's processes), so how much memory it held was not graded"
)
MAX_MESSAGE_CHARS = 2000  # of one test's message, one cell's error, one note


class Session:
    """The student's program running in a sandbox, restarted when it hangs or dies."""

    def __init__(
        self,
        program: list[str],
        where: list[int],
        report: Report,
        limits: Limits,
        deadline: float,
        sandboxes: Callable[[], Sandbox],
        runners: Callable[[], Sandbox] | None = None,
    ):
        """``sandboxes`` starts a sandbox for the program (a fresh one each time it is called); ``runners`` one of the
        grader's own, where the student's kernels are run again (:meth:`replay`); None: in this process, for the
        course's own notebooks only (a warm pool's, whose worker holds the server a runner would wait for)."""
        self.program, self.where, self.report = program, where, report
        self.limits, self.deadline = limits, deadline
        self.sandboxes = sandboxes
        self.runners = runners
        self.runner: Sandbox | None = None
        self.skipped: set[int] = set()
        self.retried: set[int] = set()  # cells run again after their sandbox died of something not their own
        self.sandbox: Sandbox | None = None
        self.restarts = 0
        self.generation = 0  # counts the sandboxes started; objects from an earlier one are gone
        self.stuck: dict[str, tuple[type, str]] = {}  # item -> (the error, why) that refuses its calls
        self.refusals: set[str] = set()  # the errors the grader's stand-ins answered during the last request

    def start(self) -> Sandbox:
        while self.sandbox is None:
            if self.restarts > MAX_RESTARTS or time.monotonic() > self.deadline:
                raise SandboxError("grading stopped: the notebook used up its time and restarts")
            self.restarts += 1
            started = time.monotonic()
            sandbox = self.sandboxes()
            labels = [self.report.cell_name(index) if index >= 0 else "the setup cell" for index in self.where]
            try:
                errors = sandbox.run_cells(
                    [None if i in self.skipped else code for i, code in enumerate(self.program)], labels
                )
            except SandboxError as exc:
                _count_start(sandbox, started)
                self._keep_output(sandbox)
                if exc.cell is None:
                    self.report.notes.append(f"the notebook could not start: {exc}")
                    raise
                if isinstance(exc, SandboxDied) and not exc.own and exc.cell not in self.retried:
                    self.retried.add(exc.cell)  # not the student's code's doing: run again once with the cell
                    continue
                self.skipped.add(exc.cell)
                if self.where[exc.cell] >= 0:
                    self.report.skipped.append(self.where[exc.cell])
                self._cell_error(exc.cell, f"{exc}; the cell was skipped and the notebook run again without it")
                continue
            except BaseException:
                sandbox.close()
                raise
            _count_start(sandbox, started)
            for i, error in enumerate(errors):
                if error and i not in self.skipped:
                    self._cell_error(i, error)
            self.sandbox = sandbox
            self.generation += 1
        return self.sandbox

    def _cell_error(self, i: int, message: str) -> None:
        message = clean_text(message, MAX_MESSAGE_CHARS)
        index = self.where[i]
        if index >= 0:
            self.report.cell_errors.setdefault(index, message)
        else:
            self.report.notes.append(f"setup: {message}")

    def _keep_output(self, sandbox: Sandbox) -> None:
        if not self.report.output:
            text = bytes(sandbox.output).decode(errors="replace")
            if sandbox.output_dropped:
                text += f"\n[... {sandbox.output_dropped} more bytes of output dropped]"
                self.report.notes.append(
                    f"output cut to {len(sandbox.output) // 1024} KiB ({sandbox.output_dropped} bytes dropped)"
                )
            self.report.output = text

    def request(
        self,
        item: str,
        label: str,
        target: str | int,
        *,
        attr: str | None = None,
        args=(),
        kwargs=None,
        generation: int | None = None,
        getattr_only: bool = False,
    ) -> wire.Reply:
        """One request to the student's process; ``item`` is the graded item it belongs to. Where its sandbox died
        and the student's code did not end it (a signal from outside, an end that could not be read), the request
        is made again in a fresh sandbox; where that dies too, or the request's objects were lost with the first,
        the notebook is not graded (:class:`SandboxLost`: the grader's failure, never a score)."""
        ask = functools.partial(
            self._request, item, label, target, attr, args, kwargs, generation=generation, getattr_only=getattr_only
        )
        first = None
        while True:
            try:
                return ask()
            except SandboxDied as exc:
                if exc.own:
                    raise
                if first is not None or generation is not None:
                    lost = "again in a fresh sandbox" if first else "what it was called on was lost with it"
                    raise SandboxLost(f"{item}: {first or exc}, and {lost}") from None
                first = exc
            self.stuck.pop(item, None)
            note = f"{item}: graded again in a fresh sandbox, as its process ended but not by the student's code"
            self.report.notes += [] if note in self.report.notes else [note]

    def _request(
        self, item: str, label: str, target: str | int, attr, args, kwargs, *, generation, getattr_only
    ) -> wire.Reply:
        if item in self.stuck:
            refusal, why = self.stuck[item]
            raise refusal(why)
        sandbox = self.start()
        if generation is not None and generation != self.generation:
            raise SandboxError(f"{label}: this object was lost when the notebook was restarted after a failure")
        timeout = max(0.1, self.deadline - time.monotonic())
        scope = standins.current()  # the check calling: the stand-ins of its item, and the call's seed
        self.refusals = set()
        callbacks = None if scope is None else functools.partial(_noting_refusals, scope.answer, self.refusals)
        decoded = sandbox.decoding_seconds
        try:
            sandbox.stand_in(*(scope.kinds() if scope else ((), ())), timeout=timeout)
            if _passes_meta(args, kwargs) and not sandbox.warm:
                with timings.phase("warm-up"):
                    sandbox.warm_up(timeout=timeout)
            if getattr_only:
                return sandbox.getattr(int(target), str(attr), timeout=timeout, label=label, callbacks=callbacks)
            reply = sandbox.call(
                target,
                [values.encode(a) for a in args],
                {k: values.encode(v) for k, v in (kwargs or {}).items()},
                timeout=timeout,
                attr=attr,
                label=label,
                seed=None if scope is None else scope.seed,
                callbacks=callbacks,
                memory_mb=None if scope is None else scope.memory_mb,
                trace=scope is not None and scope.trace,
            )
            if sandbox.unbounded and UNBOUNDED not in self.report.notes:
                self.report.notes.append(UNBOUNDED)
            if scope is not None and scope.trace:
                scope.traced, scope.replayer = _trace_of(reply), self.replay
                scope.source = "\n".join(piece for piece in self.program if piece)
            return reply
        except SandboxError as exc:
            self._keep_output(sandbox)
            self._closed(sandbox)
            self.sandbox = None
            note = clean_text(f"{item}: {exc}", MAX_MESSAGE_CHARS)
            if note not in self.report.notes:
                self.report.notes.append(note)
            # An item that hung or killed its process is not called again: each call would cost a
            # restart, and the restarts of one notebook are few (the other items need them).
            if isinstance(exc, SandboxTimeout):
                why = f"an earlier call of {item} did not finish within {self.limits.call_timeout:g} s"
                self.stuck[item] = (SandboxTimeout, why)
            elif isinstance(exc, SandboxDied):
                self.stuck[item] = (SandboxDied, f"an earlier call of {item} stopped the process running it")
            raise
        except BaseException:
            self._closed(sandbox)
            self.sandbox = None
            raise
        finally:  # the grader's decoding of the messages that came, on the notebook's time
            timings.add("decoding", sandbox.decoding_seconds - decoded)

    def result(self, reply: wire.Reply, item: str, args=(), kwargs=None):
        """The value of a reply, as plain data here; objects that stay in the sandbox become RemoteObjects."""
        if isinstance(reply, wire.Raised):
            exc = _student_exception(reply.error_type, reply.error)
            exc.raised_in = reply.raised_in  # the student's function whose own code raised it
            # a stand-in's error that the student's code let through word for word: the grader's text (quoted_error)
            exc.grader_wrote = reply.error in self.refusals
            raise exc
        # The arguments as they are after the call: an array argument whose state is missing or does
        # not fit fails the call (the worker always reports it; only tampering with it would not).
        after = list(reply.args_after or [])
        after += [None] * (len(args) - len(after))
        pairs = [
            *zip(args, after),
            *(((kwargs or {}).get(key), (reply.kwargs_after or {}).get(key)) for key in (kwargs or {})),
        ]
        for original, state in pairs:
            if isinstance(original, (np.ndarray, torch.Tensor)) and not _copy_back(original, state):
                raise TypeError(f"the state of {item}'s arguments after the call could not be read back")
        generation = self.generation
        try:
            with timings.phase("decoding"):
                return values.decode(
                    reply.value, resolve=lambda number, kind: RemoteObject(self, number, kind, item, generation)
                )
        except (wire.WireError, ValueError, KeyError, TypeError) as exc:
            raise TypeError(
                f"{item} returned something that is not a tensor, array, number or object ({exc})"
            ) from None

    def replay(self, program: str, request: dict) -> dict:
        """The student's kernels (``program``, read as Triton code alone) run again on ``request``'s launches by
        :func:`autograder.sandbox.replay.replay`, in a sandbox of the grader's where none of the student's other code
        runs, started once for the notebook: what it returns, or ``{"error": why}`` where the replay stopped or the
        kernels made its sandbox fail (the student's doing). A sandbox that cannot start is the grader's failure."""
        if self.runners is None:
            from autograder.sandbox import replay

            # kernels run here one at a time (Triton's interpreter keeps one program's state), and while they are
            # read and rewritten as syntax trees no other grading thread parses (attention_course.tooling.syntax)
            with global_rng.LOCK, syntax.held():
                return replay.replay(program, request)
        timeout = min(self.limits.call_timeout, max(0.1, self.deadline - time.monotonic()))
        try:
            if self.runner is None:
                runner = self.runners()
                try:
                    errors = runner.run_cells([REPLAY_SETUP], ["the grader's replay of the kernels"])
                except SandboxError as exc:
                    runner.close()
                    raise SandboxUnavailable(f"the sandbox that replays the kernels could not start: {exc}") from None
                if errors[0]:
                    runner.close()
                    raise SandboxUnavailable(f"the sandbox that replays the kernels could not start: {errors[0]}")
                self.runner = runner
            reply = self.runner.call(
                "replay", [values.encode(program), values.encode(request)], {}, timeout=timeout, label="the replay"
            )
        except SandboxError as exc:
            if self.runner is not None:
                self.runner.close()
                self.runner = None
            return {"error": clean_text(f"the kernels' replay stopped: {exc}", 300)}
        if isinstance(reply, wire.Raised):  # its type only: the message could quote what the kernels computed
            return {"error": clean_text(f"{reply.error_type} raised while the kernels were set up", 120)}
        try:
            result = values.decode(reply.value)
        except (wire.WireError, ValueError, KeyError, TypeError):
            result = None
        return result if isinstance(result, dict) else {"error": "the kernels' replay answered with something else"}

    def _closed(self, sandbox: Sandbox) -> None:
        """Close ``sandbox`` (once closed, none of its processes runs: :meth:`Sandbox.close` checks), and say what
        became of the processes its cells left running, as it was checked."""
        sandbox.close()
        if not sandbox.background:
            return
        left = f"the notebook's cells left {sandbox.background} other process(es) running"
        if sandbox.left:
            note = f"{left}; {len(sandbox.left)} of the sandbox's processes could not be stopped (the grader's failure)"
        else:
            note = f"{left}; they were stopped"
        if note not in self.report.notes:
            self.report.notes.append(note)

    def close(self) -> None:
        if self.sandbox is not None:
            self._keep_output(self.sandbox)
            self._closed(self.sandbox)
            self.sandbox = None
        if self.runner is not None:
            self.runner.close()
            self.runner = None


class Remote:
    """Stands in for a student's function or class in the test cells: calls it in the sandbox, by value."""

    __remote__ = True  # what the checks call runs in the sandbox

    def __init__(self, session: Session, name: str, signature: inspect.Signature | None):
        self._session, self.__name__, self.__qualname__ = session, name, name
        if signature is not None:
            self.__signature__ = signature

    def __shared_as__(self) -> tuple:
        """Who answers its calls: the student's object of this name in the session's sandbox now (every test cell
        has a proxy of its own; one started again after a failure runs the student's cells anew)."""
        return (id(self._session), self.__name__, self._session.generation)

    def __call__(self, *args, **kwargs):
        reply = self._session.request(self.__name__, self.__name__, self.__name__, args=args, kwargs=kwargs)
        return self._session.result(reply, self.__name__, args, kwargs)


class RemoteObject:
    """An object that the student's code made and that stays in the sandbox (a module, a method).

    Attribute access and calls go to the sandbox; what comes back is plain data or
    another RemoteObject. Passing it to the student's code passes the object itself.
    """

    __remote__ = True

    def __init__(self, session: Session, number: int, kind: str, item: str, generation: int):
        self.__dict__.update(
            _session=session, _number=number, _kind=kind or "object", _item=item, _generation=generation
        )

    @property
    def __wire_handle__(self) -> int:
        if self._generation != self._session.generation:
            raise SandboxError(f"{self._item}: this object was lost when the notebook was restarted after a failure")
        return self._number

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        reply = self._session.request(
            self._item, f"{self._item}.{attr}", self._number, attr=attr, generation=self._generation, getattr_only=True
        )
        return self._session.result(reply, self._item)

    def __setattr__(self, attr: str, value):
        raise AttributeError(f"cannot set {attr} on an object in the sandbox")

    def __call__(self, *args, **kwargs):
        reply = self._session.request(
            self._item,
            f"{self._item} ({self._kind})",
            self._number,
            args=args,
            kwargs=kwargs,
            generation=self._generation,
        )
        return self._session.result(reply, self._item, args, kwargs)

    def __repr__(self) -> str:
        return f"<{self._kind} of {self._item}, in the sandbox>"


REPLAY_SETUP = "from autograder.sandbox.replay import replay\n"


def _trace_of(reply: wire.Reply):
    """The record of the Triton kernels a call launched (:mod:`autograder.sandbox.launch_log`), as plain data, or
    None where none came or it cannot be read."""
    if not isinstance(reply, wire.Returned) or reply.trace is None:
        return None
    try:
        return values.decode(reply.trace)
    except (wire.WireError, ValueError, KeyError, TypeError):
        return None


def _count_start(sandbox: Sandbox, started: float) -> None:
    """The phases of a sandbox asked for at ``started``: its start-up, then the notebook's cells (and the decoding of
    the messages that came meanwhile)."""
    timings.add("start-up", sandbox.startup_seconds)
    timings.add("cells", time.monotonic() - started - sandbox.startup_seconds)
    timings.add("decoding", sandbox.decoding_seconds)


def _passes_meta(args, kwargs) -> bool:
    """Whether a call passes the "meta" device (as a name, a torch.device or a tensor on it): its first operation
    there loads torch's meta kernels, which the sandbox does beforehand (Sandbox.warm_up)."""

    def meta(value) -> bool:
        if isinstance(value, str):
            return value == "meta"
        if isinstance(value, torch.device):
            return value.type == "meta"
        return isinstance(value, torch.Tensor) and value.is_meta

    return any(meta(v) for v in (*args, *(kwargs or {}).values()))


def _copy_back(original, after) -> bool:
    """Apply the sandbox's in-place changes of an array argument to the grader's copy; False when
    ``after`` is not that argument's state (missing, another kind, another shape)."""
    if after is None:
        return False
    try:
        with timings.phase("decoding"):
            changed = values.decode(after)
    except Exception:
        return False
    if isinstance(original, torch.Tensor) and isinstance(changed, torch.Tensor) and changed.shape == original.shape:
        original.copy_(changed.to(original.dtype))
        return True
    if isinstance(original, np.ndarray) and isinstance(changed, np.ndarray) and changed.shape == original.shape:
        original[...] = changed
        return True
    return False


def _noting_refusals(answer: Callable[[dict], dict], refusals: set[str], callback: dict) -> dict:
    """The stand-ins' ``answer`` to ``callback``; an error it answers with is added to ``refusals``."""
    answered = answer(callback)
    if not answered.get("ok"):
        refusals.add(clean_text(str(answered.get("error")), MAX_MESSAGE_CHARS))
    return answered


def _student_exception(name: str, message: str) -> Exception:
    import builtins

    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        try:
            return cls(message)
        except Exception:
            pass
    safe = name if name.isidentifier() and not keyword.iskeyword(name) and len(name) <= 80 else "Exception"
    return type(safe, (Exception,), {})(message)
