"""The grader's requests to a sandbox's worker: run the cells, call (within a memory budget), read, stand in.

Each reply is checked (:class:`~autograder.sandbox.channel.Channel`); a call may come with a memory budget,
counted from what the sandbox held before any of the student's code ran (:mod:`autograder.sandbox.limits`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from autograder.sandbox import address_space, wire
from autograder.sandbox.cgroups import Cgroups
from autograder.sandbox.channel import Channel
from autograder.sandbox.limits import NOTEBOOK_MB, Limits, budget_reply
from autograder.text.terminal import clean_text


class Client(Channel):
    """The requests of the grader to one sandbox's worker, over its channel; memory measured by ``_cgroups``."""

    _cgroups: Cgroups

    def _prepare(self, limits: Limits) -> None:
        super()._prepare(limits)
        # (functions, modules) in place; None before the first request, which says how large a call may be
        self.stand_ins: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        self.unbounded = False  # a call's memory budget could not be enforced (see call)
        # Before any of the student's code ran: (bytes the sandbox held, or None without a memory cgroup;
        # the largest address space of one of its processes). Memory budgets are counted from there (see call).
        self.baseline: tuple[int | None, int] | None = None
        self.warm = False  # the worker has loaded torch's meta-device kernels (see warm_up)
        self._oom_kills = 0  # the kernel's kills for the sandbox's memory cap, before any of the student's code ran

    def _cpu_clock(self) -> tuple[float, float] | None:
        waited, used = self._cgroups.waited(), self._cgroups.used()
        return None if waited is None or used is None else (waited, used)

    def _killed_for_its_limits(self) -> bool:
        used = self._cgroups.used()
        return self._cgroups.oom_kills() > self._oom_kills or (used is not None and used >= self.limits.cpu_seconds)

    def _note_baseline(self) -> None:
        """Once the worker is ready, before the first request that runs the student's code: what the sandbox
        holds (:attr:`baseline`)."""
        self._wait_ready()
        if self.baseline is None:
            spaces = []
            for pid in self._processes():
                with contextlib.suppress(OSError, ValueError):
                    spaces.append(address_space.address_space(pid))
            self.baseline = (self._cgroups.memory_now(), max(spaces, default=0))
            self._oom_kills = self._cgroups.oom_kills()

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
        trace: bool = False,
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

        With ``trace``, the reply also carries the record of the Triton kernels the call launched (``trace``).
        """
        name, handle = (target, None) if isinstance(target, str) else (None, int(target))
        seed = None if seed is None else int(seed)

        def request(seq: int) -> wire.Call:
            return wire.Call(
                seq, list(args), dict(kwargs), name=name, handle=handle, attr=attr, seed=seed, trace=bool(trace)
            )

        what = f"a call of {label or target}"
        self._note_baseline()
        if memory_mb is None:
            return self._request(request, timeout, what, len(args), set(kwargs), callbacks)
        start, peak = self._cgroups.memory_now(), self._cgroups.memory_peak()
        held = self.baseline[0]
        if peak is not None and start is not None and held is not None:
            reply = self._request(request, timeout, what, len(args), set(kwargs), callbacks)
            return budget_reply(reply, memory_mb, start, held, peak())
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
        with address_space.budget(self._processes, megabytes, ceiling, launch) as bounded:
            self.unbounded = self.unbounded or not bounded
            yield

    def _processes(self) -> list[int]:
        """The sandbox's processes: the one the grader started (the worker itself, without bubblewrap) and
        its descendants."""
        return [self.process.pid, *address_space.descendants(self.process.pid)]

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
        those of the last call): see :mod:`autograder.calls.standins`."""
        wanted = (tuple(functions), tuple(modules))
        if wanted == self.stand_ins:
            return

        def request(seq: int) -> wire.StandIn:
            return wire.StandIn(seq, list(functions), list(modules), self.limits.message_kb * 1024)

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
