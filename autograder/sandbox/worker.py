"""The process that runs a student's code, inside the sandbox.

It is started by :mod:`autograder.sandbox.process` (through :mod:`autograder.sandbox.launcher` and
bubblewrap) and speaks the messages of :mod:`autograder.sandbox.wire`: requests on its standard input,
replies on its standard output. Once its own start-up is done, before any student code runs, it sends
:class:`~autograder.sandbox.wire.Ready`. Before any student code runs, it moves those two channels to
private file descriptors and points the student's ``print`` (fd 1 and 2) at the output pipe that the
grader drains and truncates. It never sees a reference solution, a hidden test or an expected value:
it runs the notebook's own cells, then calls the student's functions on the inputs it is sent and
returns what they return.

Requests, and what it answers:

* :class:`~autograder.sandbox.wire.RunCells`: run each cell (IPython syntax, magics allowed). For each
  it sends ``CellStart`` and then ``CellDone`` (the cell's error, ``"Type: message"``, or None); finally
  ``CellsDone`` (how many processes the cells left running).
* :class:`~autograder.sandbox.wire.Call`: call the student's object ``name`` (or a handle from an earlier
  reply, or its attribute ``attr``), the random generators seeded with ``seed`` first if it is given;
  reply ``Returned`` (the value, and the array arguments as they are after the call, so the grader sees
  in-place changes) or ``Raised`` (the error, and the function whose own frame raised it). Values that
  are not plain data (a module the student's class built, a bound method) stay here and are returned as
  handles. A fixture that the grader holds arrives as a proxy: its public attributes, and methods whose
  calls are sent to the grader as a stand-in's are (``Callback``), answered and counted there.
  With ``trace``, the Triton kernels the call launches are recorded (:mod:`autograder.sandbox.launch_log`) and
  sent with the value, for the grader to run again where this process cannot reach.
* :class:`~autograder.sandbox.wire.GetAttr`: an attribute of a handle; reply ``Returned`` or ``Raised``.
* :class:`~autograder.sandbox.wire.StandIn`: put the grader's stand-ins in place of the notebook's objects
  of these names (and of every other name bound to the same object), after putting back those of the
  last one; reply ``Returned`` with the value None. A stand-in computes nothing here: a call of it, while
  a request is served, sends a ``Callback`` and waits for the grader's ``CallbackResult``, whose values
  it returns (or whose error it raises); a call larger than the grader takes in one message
  (``message_bytes``) raises an error in the student's code instead, before its arrays are encoded. A
  stand-in module holds real parameters and buffers, laid out as the grader's answer to ``construct``
  says, and sends them with every ``forward``, with the random generator's state, which comes back
  advanced as if the module had run here.

Every reply carries its request's ``seq``. The grader checks every message against its declaration and
what it expects at that point, and ends the conversation at the first that does not fit, so a message
forged by student code only fails that student's work.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import time
import traceback

from autograder.sandbox import wire
from autograder.sandbox.stand_ins import Grader, StandIns


def _private_channels():
    """Return (requests, replies) on new fds; fd 0 reads nothing, fds 1 and 2 go to the output pipe."""
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    return requests, replies


def _seed_everything(seed: int = 0) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _warm_up() -> None:
    """Load what torch loads on its first operation on the "meta" device: its meta kernels and sympy, hundreds of
    modules (8 s on a quiet 2-core machine), a cost of the grader's device checks, not of the student's code, which
    must not count against the time limit of the call that first passes the device."""
    import torch

    positions = torch.arange(4, device="meta")
    (positions[:, None] - positions[None, :] < 2).tril().any()
    torch.ones(2, 3, device="meta").softmax(-1) @ torch.ones(3, 2, device="meta")


def _shell():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(colors="nocolor")
    # Magics that only make sense in a notebook front end do nothing here.
    for name in ("matplotlib", "load_ext", "reload_ext", "autoreload"):
        shell.register_magic_function(lambda line="", cell=None: None, "line", name)
    return shell


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def _error(result) -> str | None:
    exc = result.error_before_exec or result.error_in_exec
    return None if exc is None else _describe(exc)


def main() -> None:
    requests, replies = _private_channels()
    # torch (through the values) after the channels are private: what importing it prints goes to the output
    from autograder.sandbox import values

    serve(requests, replies, values)


def serve(requests, replies, values) -> None:
    """Answer the grader's requests on ``requests`` (replies on ``replies``) until it closes them: a fresh
    worker's whole life, or that of one forked by :mod:`autograder.sandbox.forkserver`."""
    _seed_everything()
    shell = _shell()
    handles = _Handles()
    grader = Grader(requests, replies, values)
    stand_ins = StandIns(grader, values)
    wire.send(replies, wire.Ready())
    while True:
        request = wire.receive(requests, wire.FromGraderMessage)
        if request is None:
            return
        if isinstance(request, wire.RunCells):
            for index, source in enumerate(request.cells):
                wire.send(replies, wire.CellStart(index))
                error = _error(shell.run_cell(source, store_history=False)) if source is not None else None
                sys.stdout.flush()
                sys.stderr.flush()
                wire.send(replies, wire.CellDone(index, error))
            wire.send(replies, wire.CellsDone(_other_processes()))
            continue
        grader.serving = request.seq
        if isinstance(request, (wire.Call, wire.GetAttr)):
            if isinstance(request, wire.Call) and request.seed is not None:
                _seed_everything(request.seed)
            wire.send(replies, _call(shell.user_ns, request, values, handles, stand_ins))
        elif isinstance(request, wire.StandIn):
            grader.message_bytes = request.message_bytes
            stand_ins.install(shell.user_ns, request.functions, request.modules)
            wire.send(replies, wire.Returned(request.seq, None))
        elif isinstance(request, wire.WarmUp):
            _warm_up()
            wire.send(replies, wire.Returned(request.seq, None))
        else:  # a CallbackResult, while no stand-in waits for one
            wire.send(replies, wire.Raised(request.seq, "ProtocolError", f"an unexpected {wire.kind(request)!r}"))
        grader.serving = None


def serve_forked(fds: list[int], values) -> None:
    """In a process forked to be a worker (by :mod:`autograder.sandbox.forkserver` or :mod:`autograder.sandbox.zygote`):
    serve on the three descriptors (requests, replies, output), as a fresh worker does; never returns."""
    status = 0
    try:
        requests_fd, replies_fd, output_fd = fds
        for fd in (requests_fd, replies_fd):  # as a fresh worker's channels: not inherited by what it runs
            os.set_inheritable(fd, False)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        serve(os.fdopen(requests_fd, "rb", buffering=0), os.fdopen(replies_fd, "wb"), values)
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


class _Handles:
    """Objects that stay in the sandbox, by number."""

    def __init__(self):
        self.objects: dict[int, object] = {}
        self.numbers: dict[int, int] = {}

    def number(self, obj) -> int:
        key = id(obj)
        if key not in self.numbers:
            self.numbers[key] = len(self.objects) + 1
            self.objects[self.numbers[key]] = obj
        return self.numbers[key]

    def get(self, number: int, type_name: str = ""):
        if number not in self.objects:
            raise LookupError(f"no object number {number} in this process")
        return self.objects[number]


def _call(
    namespace: dict, request: wire.Call | wire.GetAttr, values, handles: _Handles, stand_ins: StandIns
) -> wire.Reply:
    name = request.name if isinstance(request, wire.Call) else None
    if name is not None and name not in namespace:
        return wire.Raised(request.seq, "NameError", f"name {name!r} is not defined")
    try:
        target = namespace[name] if name is not None else handles.get(request.handle)
        if request.attr:
            target = getattr(target, request.attr)
        if isinstance(request, wire.GetAttr):
            return wire.Returned(request.seq, values.encode(target, make_handle=handles.number))
        held = stand_ins.held_fixture
        args = [values.decode(a, resolve=handles.get, held=held) for a in request.args]
        kwargs = {k: values.decode(v, resolve=handles.get, held=held) for k, v in request.kwargs.items()}
        trace = None
        if request.trace:
            from autograder.sandbox import launch_log

            with launch_log.recording() as log:
                value = target(*args, **kwargs)
            trace = values.encode(log.as_data())
        else:
            value = target(*args, **kwargs)
        return wire.Returned(
            request.seq,
            values.encode(value, make_handle=handles.number),
            args_after=[values.encode(a) if _is_array(a) else None for a in args],
            kwargs_after={k: values.encode(v) for k, v in kwargs.items() if _is_array(v)},
            trace=trace,
        )
    except BaseException as exc:  # the student's error, reported to the grader as data
        if isinstance(exc, (SystemExit, KeyboardInterrupt, GeneratorExit)):
            return wire.Raised(request.seq, type(exc).__name__, "the function tried to stop the process")
        origin = exc.__traceback__
        while origin is not None and origin.tb_next is not None:
            origin = origin.tb_next
        # the function whose frame raised it, e.g. an unfilled item's own stub
        raised_in = origin.tb_frame.f_code.co_name[:80] if origin is not None else ""
        return wire.Raised(request.seq, type(exc).__name__, str(exc)[:2000], raised_in)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _other_processes() -> int:
    """Processes besides this one and the sandbox's init, where the sandbox has its own PID namespace."""
    if os.environ.get("AUTOGRADER_PID_NAMESPACE") != "1":
        return 0
    # a child that the cells forked and that has just exited is not running: reap it, skip zombies,
    # and give a process that is on its way out a moment to finish before it is counted
    # not the sandbox's init, this process, nor its parent (init, or the fork server that forked it)
    ours = (1, os.getpid(), os.getppid())
    count = 0
    for _ in range(5):
        _reap_children()
        count = sum(1 for pid in _pids() if pid not in ours and _state(pid) not in ("Z", "X", ""))
        if not count:
            break
        time.sleep(0.05)
    return count


def reaped():
    """(pid, wait status) of each child of this process that has ended, reaped as it is given."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


def _reap_children() -> None:
    for _ in reaped():
        pass


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _state(pid: int) -> str:
    """The one-letter state of a process in /proc/<pid>/stat ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else ""


def _is_array(value) -> bool:
    import numpy as np
    import torch

    return isinstance(value, (np.ndarray, torch.Tensor))


if __name__ == "__main__":
    main()
