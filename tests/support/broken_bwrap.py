"""A stand-in for a broken bubblewrap installation, to put first on the grader's PATH.

The sandbox finds ``bwrap`` on PATH when it starts one, so a folder made by :func:`install`
and put first on PATH makes every later sandbox start through it: the first ``passes`` runs
go to the real bwrap, and every later one fails before the worker can start, as a broken
installation (or a host that stopped allowing user namespaces) would.

The script runs as the sandbox's uid, not as root: the folder and the script are readable and
executable by everyone, and its count of runs is writable by everyone.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

MESSAGE = "bwrap: cannot set up the sandbox (a broken installation, simulated by the tests)"

_SCRIPT = """#!/bin/sh
count="{count}"
runs=$(($(cat "$count") + 1))
echo "$runs" > "$count"
if [ "$runs" -le {passes} ]; then
    exec "{real}" "$@"
fi
echo "{message}" >&2
exit 1
"""


class BrokenBwrap:
    def __init__(self, folder: Path):
        self.folder = folder

    @property
    def runs(self) -> int:
        return int((self.folder / "runs").read_text().strip() or 0)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def install(passes: int = 0) -> BrokenBwrap:
    """A folder under /tmp holding a ``bwrap`` that passes its first ``passes`` runs to the real one."""
    real = shutil.which("bwrap")
    if real is None:
        raise RuntimeError("bubblewrap is not installed here")
    folder = Path(tempfile.mkdtemp(prefix="attention-broken-bwrap-", dir="/tmp"))
    folder.chmod(0o755)
    count = folder / "runs"
    count.write_text("0\n")
    count.chmod(0o666)
    script = folder / "bwrap"
    script.write_text(_SCRIPT.format(count=count, passes=passes, real=real, message=MESSAGE))
    script.chmod(0o755)
    return BrokenBwrap(folder)
