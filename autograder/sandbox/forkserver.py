"""A warm sandbox's first process: it loads once what every worker loads, then forks a worker per notebook.

For trusted batches only (the course's own notebooks: the catalogue of known mistakes and correct
idioms, the reference notebooks), started by :class:`autograder.sandbox.pool.WarmPool`; a student's submission
always gets a sandbox of its own (:class:`autograder.sandbox.process.Sandbox`).

It is started as a worker is (bubblewrap, the launcher's cgroups, limits and uid), with its standard input a
Unix socket of packets (the grader's requests) and its standard output a pipe (its messages,
:data:`autograder.sandbox.wire.FromForkServerMessage`). It imports torch, NumPy, IPython and the course's
packages and loads torch's meta-device kernels, then says ``Ready``. Each request is one packet, ``b"fork"``,
carrying three file descriptors: the new worker's requests (read), replies (write) and output (write). For
each it forks a child that becomes a worker on them (:func:`autograder.sandbox.worker.serve`: the same code as a
fresh sandbox's, from a process that has run nothing else) and answers ``Forked`` with the child's process id;
when a child ends, ``Exited`` with its status. It stops when the grader closes the socket; anything else on it
stops it at once.

A child is put in a process group of its own (which the grader kills whole) and is the first that the kernel's
out-of-memory killer picks in the sandbox's memory cgroup, before the server that the next notebooks need.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import traceback

from autograder.sandbox import wire, worker

REQUEST = b"fork"
FDS = 3  # requests, replies, output


def _load() -> object:
    """Import what a worker and the notebooks' setup cells import, and load torch's meta-device kernels: what
    every forked worker then has without paying for it. The values module, which the workers use."""
    import IPython.core.interactiveshell  # noqa: F401
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch.nn.functional  # noqa: F401

    import attention_course  # noqa: F401
    import autograder
    from autograder.sandbox import values

    for name in autograder.__all__:  # what `from autograder import *` imports, in every setup cell
        getattr(autograder, name)
    worker._warm_up()
    return values


class Listener:
    """A forking server's channels, set up before it forks anything: requests on the socket that was its standard
    input (``control``), its messages on the pipe that was its standard output (``replies``), what it prints on
    its output; and a wake-up pipe that a child's ending writes to. ``values``: what ``load()`` returned."""

    def __init__(self, load):
        self.control = socket.socket(fileno=os.dup(0))
        self.replies = os.fdopen(os.dup(1), "wb")
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(2, 1)  # what importing prints goes to the server's own output
        self.values = load()
        self.wakeup_read, self.wakeup_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self.wakeup_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wake-up byte is written

    def wait(self) -> bool:
        """Wait for a request or a child's ending; whether a request came."""
        readable, _, _ = select.select([self.control, self.wakeup_read], [], [])
        if self.wakeup_read in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(self.wakeup_read, 512):
                    pass
        return self.control in readable


def main() -> None:
    listener = Listener(_load)
    control, replies = listener.control, listener.replies
    wire.send(replies, wire.Ready())
    while True:
        requested = listener.wait()
        _report_exits(replies)
        if not requested:
            continue
        data, fds, _, _ = socket.recv_fds(control, 64, FDS)
        if data != REQUEST or len(fds) != FDS:
            for fd in fds:
                os.close(fd)
            return  # the grader closed the socket, or sent what it never sends
        pid = os.fork()
        if pid == 0:
            closing = (control, replies, listener.wakeup_read, listener.wakeup_write)
            _become_worker(fds, listener.values, closing)
        with contextlib.suppress(OSError):  # the child does the same: whichever runs first, it is done
            os.setpgid(pid, pid)
        for fd in fds:
            os.close(fd)
        wire.send(replies, wire.Forked(pid))


def _report_exits(replies) -> None:
    for pid, status in worker.reaped():
        wire.send(replies, wire.Exited(pid, max(-128, min(255, os.waitstatus_to_exitcode(status)))))


def _become_worker(fds: list[int], values, closing) -> None:
    """In the child: a worker on the three descriptors, as a fresh sandbox's would be; never returns."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control, server_replies, *pipes = closing
        control.close()
        server_replies.close()
        for fd in pipes:
            os.close(fd)
        os.setpgid(0, 0)
        with open("/proc/self/oom_score_adj", "w") as f:  # killed before the server, if memory runs out
            f.write("500")
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    worker.serve_forked(fds, values)


if __name__ == "__main__":
    main()
