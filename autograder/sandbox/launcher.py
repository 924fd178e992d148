"""The first program of every sandbox: it sets the sandbox's process up, then becomes bubblewrap.

:class:`~autograder.sandbox.process.Sandbox` runs it on the host, as the grader's user, with
:func:`command_line`: ``python -I -S launcher.py CONFIG COMMAND...``. In the new process (which has no
threads yet, unlike the grader) it

1. joins the sandbox's cgroups (``config["cgroups"]``: their ``cgroup.procs`` files);
2. as root, binds what the sandbox must see of the host (``config["stage"]``: (host path, staging
   point) pairs) at places the sandbox's uid may read, in a private mount namespace of its own;
3. sets the resource limits (``config["limits"]``: :class:`~autograder.sandbox.limits.Limits` as a dict);
4. as root, drops to the sandbox's uid (``config["uid"]``), and refuses to go on if it is still root;
   an unprivileged process also gets its process limit (root is exempt from RLIMIT_NPROC: the cgroup
   covers it);
5. becomes ``COMMAND`` (an absolute path: no lookup), which inherits all of it, with the same
   environment.

The zygote (:mod:`autograder.sandbox.zygote`) is started by it too, with none of those steps but one of its own,
``config["view"]``: the sandbox's view of the course's packages, in a private mount namespace (:func:`view`).

A step that fails ends it with status :data:`LAUNCH_FAILED`, and a line on standard error that says
which step (the grader shows it: the sandbox could not start, the grader's failure, never scored).

It is run by path with ``-I -S`` (no site-packages, no ``PYTHON*`` variables, not its own folder on
``sys.path``), so it imports only the standard library and nothing of the course, and every module it
needs is imported before it drops privileges: the Python installation may live where the sandbox's
uid cannot read (``/root``).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
import warnings  # noqa: F401 (imported while it can be read, for whatever warns after the uid drop)

LAUNCH_FAILED = 125  # the exit status when it could not set the sandbox up
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 1, 2, 4, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MB = 2**20


class LaunchError(Exception):
    """A step of the set-up failed; the message says which."""


def command_line(python: str, config: dict, command: list[str]) -> list[str]:
    """The command that runs this launcher with ``python``: set up as ``config`` says, then ``command``."""
    return [python, "-I", "-S", os.path.abspath(__file__), json.dumps(config), *command]


def join_cgroups(procs: list[str], pid: int) -> None:
    for path in procs:
        try:
            with open(path, "w") as f:
                f.write(str(pid))
        except OSError as error:
            raise LaunchError(f"cannot join the cgroup {path}: {error}") from None


def _private_mounts():
    """Enter a new mount namespace whose mounts are private; libc, to mount in it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
    if libc.unshare(CLONE_NEWNS) != 0:
        raise LaunchError(f"unshare(CLONE_NEWNS): {os.strerror(ctypes.get_errno())}")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise LaunchError(f"making the mounts private: {os.strerror(ctypes.get_errno())}")
    return libc


def stage(binds: list[list[str]]) -> None:
    """Bind each (source, target) pair, recursively, in a new mount namespace whose mounts are private
    (so that nothing of it reaches the host's, and it ends with this process and its children)."""
    libc = _private_mounts()
    for source, target in binds:
        if libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None) != 0:
            raise LaunchError(f"binding {source}: {os.strerror(ctypes.get_errno())}")


def view(spec: dict) -> None:
    """In a new mount namespace whose mounts are private: an in-memory file system at each of ``spec["tmpfs"]``,
    then each of ``spec["binds"]`` (source, target) bound read-only, its target's folders made (a source is
    opened first, so that one the in-memory file systems hide is bound all the same: the Python installation,
    bound back where it was), and ``spec["chdir"]`` made and entered: the paths a sandbox's processes see, for a
    process that stays on the host."""
    libc = _private_mounts()
    # opened in the new namespace (a bind's source must be one of its mounts), before anything hides them
    sources = [(os.open(source, os.O_PATH | os.O_CLOEXEC), source, target) for source, target in spec["binds"]]
    for folder in spec["tmpfs"]:
        os.makedirs(folder, exist_ok=True)
        if libc.mount(b"tmpfs", folder.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=16m") != 0:
            raise LaunchError(f"an in-memory file system at {folder}: {os.strerror(ctypes.get_errno())}")
    for fd, source, target in sources:
        os.makedirs(target, mode=0o755, exist_ok=True)
        if libc.mount(f"/proc/self/fd/{fd}".encode(), target.encode(), None, MS_BIND | MS_REC, None) != 0:
            raise LaunchError(f"binding {source}: {os.strerror(ctypes.get_errno())}")
        flags = MS_BIND | MS_REC | MS_REMOUNT | MS_RDONLY
        if libc.mount(b"none", target.encode(), None, flags, None) != 0:
            raise LaunchError(f"making {target} read-only: {os.strerror(ctypes.get_errno())}")
        os.close(fd)
    os.makedirs(spec["chdir"], mode=0o755, exist_ok=True)
    os.chdir(spec["chdir"])


def set_limits(limits: dict) -> None:
    """Address space, CPU seconds (the hard limit 5 s past the soft one, which sends SIGXCPU first),
    file size; no core files."""
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] * MB,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_mb"] * MB,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def drop_privileges(uid: int) -> None:
    """Become ``uid`` (and its gid), with no supplementary group; never go on as root."""
    try:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    except OSError as error:
        raise LaunchError(f"dropping to uid {uid}: {error}") from None
    if os.getuid() == 0 or os.geteuid() == 0:
        raise LaunchError("still root after dropping privileges")


def limit_processes(limits: dict) -> None:
    if os.getuid() != 0:  # root is exempt from RLIMIT_NPROC; the cgroup covers it
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"],) * 2)


def set_up(config: dict) -> None:
    if "view" in config:  # the zygote's: its view, and nothing else (it stays root, on the host)
        try:
            view(config["view"])
        except OSError as error:
            raise LaunchError(f"making the packages' view: {error}") from None
        return
    join_cgroups(config["cgroups"], os.getpid())
    if config["stage"]:
        stage(config["stage"])
    try:
        set_limits(config["limits"])
    except (OSError, ValueError) as error:
        raise LaunchError(f"setting the resource limits: {error}") from None
    if config["uid"] is not None:
        drop_privileges(config["uid"])
    try:
        limit_processes(config["limits"])
    except (OSError, ValueError) as error:
        raise LaunchError(f"setting the process limit: {error}") from None


def main(argv: list[str]) -> None:
    config, command = json.loads(argv[1]), argv[2:]
    try:
        set_up(config)
    except LaunchError as error:
        sys.stderr.write(f"sandbox launcher: {error}\n")
        sys.stderr.flush()
        os._exit(LAUNCH_FAILED)
    os.execve(command[0], command, os.environ)  # an absolute path: no lookup, no import


if __name__ == "__main__":
    main(sys.argv)
