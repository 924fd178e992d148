"""Running a command as an unprivileged user (``nobody``), from a test that runs as root.

The folders the command needs may sit behind a folder an unprivileged user cannot search: the
course's Python under ``/root`` (a pyenv installation, mode 0700), or a clone of the course made
in ``mktemp -d``'s folder (mode 0700). :func:`run_as` therefore runs the command in a private mount
namespace (``unshare --mount --propagation private``) where each such folder is covered by a small
tmpfs of mode 0755 that holds only the folders the command needs, bound back from the host (each is
bound aside first, since the tmpfs hides it). Nothing else behind that folder is reachable, and
nothing changes on the host: the mounts vanish with the namespace.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NOBODY = 65534

REPOSITORY = Path(__file__).resolve().parents[2]


def available() -> str | None:
    """None where :func:`run_as` can work here, else why not."""
    if os.geteuid() != 0:
        return "the tests do not run as root"
    missing = [tool for tool in ("unshare", "setpriv", "mount") if shutil.which(tool) is None]
    return f"missing: {', '.join(missing)}" if missing else None


def _searchable(folder: Path, uid: int) -> bool:
    """Whether ``uid`` (with no groups) may search ``folder``: its owner, or anyone may."""
    info = folder.stat()
    return info.st_uid == uid or bool(info.st_mode & stat.S_IXOTH)


def unsearchable(path: Path, uid: int = NOBODY) -> str | None:
    """Why ``uid`` (with no groups) cannot search ``path`` itself, or None where it can."""
    if _searchable(Path(path), uid):
        return None
    return f"{path} is not searchable by uid {uid} (mode {stat.S_IMODE(Path(path).stat().st_mode):o})"


def python_top() -> Path | None:
    """The folder right under /root that holds this Python (e.g. /root/.pyenv), or None."""
    for prefix in (Path(sys.base_prefix).resolve(), Path(sys.executable).resolve()):
        parts = prefix.parts
        if len(parts) > 2 and parts[:2] == ("/", "root"):
            return Path("/root") / parts[2]
    return None


def hidden_behind(path: Path, uid: int = NOBODY) -> Path | None:
    """The outermost folder above ``path`` that ``uid`` cannot search, or None."""
    return next((folder for folder in reversed(Path(path).resolve().parents) if not _searchable(folder, uid)), None)


def exposing(paths, uid: int = NOBODY) -> str:
    """The shell lines that, in a private mount namespace, make each of ``paths`` reachable by ``uid``."""
    covers: dict[Path, list[Path]] = {}
    for path in dict.fromkeys(Path(p).resolve() for p in paths):
        cover = hidden_behind(path, uid)
        if cover is not None:
            covers.setdefault(cover, []).append(path)
    lines = []
    for number, (cover, inside) in enumerate(covers.items()):
        asides = [f'"$aside/{number}.{k}"' for k in range(len(inside))]
        for path, aside in zip(inside, asides):
            lines += [f"mkdir {aside}", f"mount --bind {shlex.quote(str(path))} {aside}"]
        lines.append(f"mount -t tmpfs -o mode=0755,size=1m attention-cover {shlex.quote(str(cover))}")
        for path, aside in zip(inside, asides):
            target = shlex.quote(str(path))
            lines += [f"mkdir -p {target}", f"mount --bind {aside} {target}", f"umount {aside}"]
    return "\n".join(lines)


def home(uid: int = NOBODY) -> Path:
    """A fresh folder under /tmp that ``uid`` owns (its HOME and TMPDIR for the run)."""
    folder = Path(tempfile.mkdtemp(prefix="attention-nobody-", dir="/tmp"))
    os.chown(folder, uid, uid)
    folder.chmod(0o755)
    return folder


def run_as(
    command: list[str],
    *,
    uid: int = NOBODY,
    env: dict | None = None,
    cwd: Path | None = None,
    timeout: float = 600,
    observe=None,
    reach=(),
) -> subprocess.CompletedProcess:
    """Run ``command`` as ``uid`` (its gid the same, no supplementary groups); see the module docstring.

    The command can reach this repository, this Python and each folder of ``reach``, whatever folder
    above them it could not search on the host.

    ``observe(pid)``, if given, is called about twice a second while the command runs, with the pid of
    the process that started it (its descendants are the command and what it starts).
    """
    top = python_top()
    needed = [REPOSITORY, *reach] + ([top] if top is not None else [])
    blocked = [why for why in map(unsearchable, needed) if why]
    assert not blocked, f"{blocked}: a folder the command needs must be searchable by others (clone with umask 022)"
    mounts = exposing(needed, uid)
    aside = None
    if not mounts:
        launch = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *command]
    else:
        aside = Path(tempfile.mkdtemp(prefix="attention-aside-", dir="/tmp"))  # /tmp: never behind a cover
        become = f'exec setpriv --reuid={uid} --regid={uid} --clear-groups -- "$@"'
        script = f'set -eu\numask 022\naside="$1"; shift\n{mounts}\n{become}\n'
        launch = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", str(aside)]
        launch += command
    try:
        with subprocess.Popen(
            launch, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as running:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    out, err = running.communicate(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() > deadline:
                        running.kill()
                        raise
                    if observe is not None:
                        observe(running.pid)
        return subprocess.CompletedProcess(launch, running.returncode, out, err)
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
