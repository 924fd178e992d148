"""Running a command as an unprivileged user (``nobody``), from a test that runs as root.

The course's Python may live under ``/root`` (a pyenv installation), which is mode 0700: an
unprivileged user cannot reach it. :func:`run_as` therefore runs the command in a private mount
namespace (``unshare --mount --propagation private``), where ``/root`` is a small tmpfs of mode
0755 holding only that installation, bound back from the host (it is bound aside first, since the
tmpfs hides it). Nothing changes on the host: the mounts vanish with the namespace.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NOBODY = 65534

_SCRIPT = r"""
set -eu
top="$1"; aside="$2"; uid="$3"; shift 3
mount --bind "$top" "$aside"
mount -t tmpfs -o mode=0755,size=1m attention-root /root
mkdir -p "$top"
mount --bind "$aside" "$top"
umount "$aside"
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups -- "$@"
"""


def available() -> str | None:
    """None where :func:`run_as` can work here, else why not."""
    if os.geteuid() != 0:
        return "the tests do not run as root"
    missing = [tool for tool in ("unshare", "setpriv", "mount") if shutil.which(tool) is None]
    return f"missing: {', '.join(missing)}" if missing else None


def unreachable(path: Path, uid: int = NOBODY) -> str | None:
    """None where ``uid`` (with no groups) can reach ``path`` and read what is there, else why not."""
    for folder in [*reversed(Path(path).resolve().parents), Path(path).resolve()]:
        info = folder.stat()
        if info.st_uid != uid and not info.st_mode & stat.S_IXOTH:
            return f"{folder} is not searchable by uid {uid} (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def python_top() -> Path | None:
    """The folder right under /root that holds this Python (e.g. /root/.pyenv), or None."""
    for prefix in (Path(sys.base_prefix).resolve(), Path(sys.executable).resolve()):
        parts = prefix.parts
        if len(parts) > 2 and parts[:2] == ("/", "root"):
            return Path("/root") / parts[2]
    return None


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
) -> subprocess.CompletedProcess:
    """Run ``command`` as ``uid`` (its gid the same, no supplementary groups); see the module docstring.

    ``observe(pid)``, if given, is called about twice a second while the command runs, with the pid of
    the process that started it (its descendants are the command and what it starts).
    """
    top = python_top()
    aside = None
    if top is None:
        launch = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *command]
    else:
        aside = Path(tempfile.mkdtemp(prefix="attention-aside-"))
        launch = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            _SCRIPT,
            "sh",
            str(top),
            str(aside),
            str(uid),
            *command,
        ]
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
            aside.rmdir()
