"""A root grader's zygote: it loads once what every worker loads, then forks each student's worker into their sandbox.

A sandbox's start-up costs about a second of CPU, most of it ``import torch``; a class of students pays it once
per notebook, on machines whose cores are already busy grading. The zygote pays it once per class. It is started
by :class:`autograder.sandbox.spawn.Zygote` on the host, as root, through :mod:`autograder.sandbox.launcher`, in
a mount namespace of its own where the course's packages lie where a sandbox sees them
(:data:`autograder.sandbox.bwrap.PACKAGES_MOUNT`) and its folder is the sandbox's home, with the sandbox's
environment: so every path its modules hold (a lazy import, a traceback) is the sandbox's. It imports what a
worker imports (:func:`autograder.sandbox.forkserver._load`), runs no student code, and says ``Ready``.

Each request is one packet on its standard input (a Unix socket): a JSON object (``holder``: the host pid of a
sandbox's first process, a "holder" that bubblewrap started for this student as for any sandbox, with its own
pool uid, cgroups, in-memory file systems and namespaces, and that runs nothing; ``uid``, ``cgroups``,
``limits``: the sandbox's, as the launcher has them), with three file descriptors: the worker's requests (read),
replies (write) and output (write). For each, the zygote forks a child that

1. joins the sandbox's cgroups, then, while still root on the host, its mount, cgroup, IPC, UTS, network, PID and
   user namespaces (``setns``, as ``nsenter`` does), and forks the worker (the only way into a PID namespace);
   it stays outside, waits for the worker and ends with its status (``128 + signal`` where a signal ended it);
2. the worker, inside: a process group of its own, the parent-death signal, the launcher's resource limits, no
   capability left in its bounding set, the sandbox's uid and gid, no capability at all, ``no_new_privs``, the
   process limit, and every file descriptor closed but its three; then it serves as a fresh worker does
   (:func:`autograder.sandbox.worker.serve_forked`).

It answers ``Forked`` with the worker's host pid, or ``NotForked`` with why, and ``Exited`` when a worker's child
of step 1 ends. It stops when the grader closes the socket. Killing the holder ends its PID namespace, and with
it the worker and everything it started: closing the sandbox does that.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import traceback

from autograder.sandbox import forkserver, launcher, wire, worker

FDS = 3  # requests, replies, output
HOME = "/home/student"
# the namespaces a worker joins, in order: the mount namespace first, while the child is root on the host (the
# sandbox's mounts may belong to another user namespace than its processes), the user namespace last
NAMESPACES = {
    "mnt": 0x00020000,
    "cgroup": 0x02000000,
    "ipc": 0x08000000,
    "uts": 0x04000000,
    "net": 0x40000000,
    "pid": 0x20000000,
    "user": 0x10000000,
}
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def main() -> None:
    listener = forkserver.Listener(_load)
    control, replies, values = listener.control, listener.replies, listener.values
    workers: dict[int, int] = {}  # the pid of each child of step 1 -> its worker's
    wire.send(replies, wire.Ready())
    while True:
        requested = listener.wait()
        _report_exits(replies, workers)
        if not requested:
            continue
        data, fds, _, _ = socket.recv_fds(control, 65536, FDS)
        if not data or len(fds) != FDS:  # the grader closed the socket, or sent what it never sends
            os._exit(0)  # at once: tearing torch's interpreter down takes a second, and frees nothing of use
        said_read, said_write = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            os.close(said_read)
            _child(json.loads(data), fds, said_write, values)
        os.close(said_write)
        for fd in fds:
            os.close(fd)
        said = _read_all(said_read)
        if said.startswith(b"pid "):
            workers[pid] = int(said[4:])
            wire.send(replies, wire.Forked(workers[pid]))
        else:
            wire.send(replies, wire.NotForked(said.decode(errors="replace")[-2000:] or "the child said nothing"))


def _load():
    """What a worker imports (:func:`autograder.sandbox.forkserver._load`), leaving the environment as it was: what
    loading sets (torch's compile cache, named for root) is not the workers'."""
    environ = dict(os.environ)
    values = forkserver._load()
    os.environ.clear()
    os.environ.update(environ)
    return values


def _read_all(fd: int) -> bytes:
    """What the child writes on ``fd`` before it closes it (a few bytes), read to the end."""
    chunks = []
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(4096):
            chunks.append(chunk)
    return b"".join(chunks)


def _report_exits(replies, workers: dict[int, int]) -> None:
    for pid, status in worker.reaped():
        spawned = workers.pop(pid, None)
        if spawned is not None:  # a child that failed before its worker started was answered NotForked
            wire.send(replies, wire.Exited(spawned, max(-128, min(255, os.waitstatus_to_exitcode(status)))))


def _child(request: dict, fds: list[int], said: int, values) -> None:
    """Step 1 (see the module), in the zygote's child; never returns."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "the parent-death signal")
        _close_all_but((*fds, said))
        for path in request["cgroups"]:
            with open(path, "w") as f:
                f.write(str(os.getpid()))
        holder = int(request["holder"])
        namespaces = {name: os.open(f"/proc/{holder}/ns/{name}", os.O_RDONLY) for name in NAMESPACES}
        os.setgroups([])
        for name, flag in NAMESPACES.items():
            _check(_libc.setns(namespaces[name], flag), f"joining the sandbox's {name} namespace")
            os.close(namespaces[name])
        os.chdir(HOME)
        child = os.fork()
    except BaseException:
        os.write(said, traceback.format_exc().encode()[-2000:])
        os._exit(launcher.LAUNCH_FAILED)
    if child == 0:
        _worker(request, fds, said, values)
    os.write(said, f"pid {child}".encode())
    os.close(said)
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


def _close_all_but(keep: tuple[int, ...]) -> None:
    """Close every file descriptor above 2 but ``keep``."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _worker(request: dict, fds: list[int], said: int, values) -> None:
    """Step 2 (see the module), in the sandbox; never returns."""
    try:
        os.close(said)
        os.setpgid(0, 0)  # a process group of its own, which the grader kills whole
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "the parent-death signal")
        limits, uid = request["limits"], int(request["uid"])
        launcher.set_limits(limits)
        for capability in range(64):  # past the last capability the kernel knows, EINVAL: nothing to drop
            _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        _check(_libc.capset(ctypes.byref(_CapHeader(CAPABILITY_VERSION_3, 0)), (_CapData * 2)()), "capset")
        _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing the ambient capabilities")
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")  # as a fresh worker is, for its own /proc
        launcher.limit_processes(limits)
        _refuse_privileges()
    except BaseException:
        traceback.print_exc(file=os.fdopen(fds[2], "w", closefd=False))
        os._exit(launcher.LAUNCH_FAILED)
    worker.serve_forked(fds, values)


def _refuse_privileges() -> None:
    """Raise unless this process is unprivileged: not root, and no capability in any of its sets."""
    if 0 in os.getresuid() or 0 in os.getresgid():
        raise PermissionError("still root after dropping privileges")
    with open("/proc/self/status") as f:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    caps = {name: status[name] for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    if any(int(value, 16) for value in caps.values()):
        raise PermissionError(f"capabilities left after dropping privileges: {caps}")
    if status.get("NoNewPrivs", "").strip() != "1":
        raise PermissionError("no_new_privs is not set")


if __name__ == "__main__":
    main()
