"""The files a leak check reads: a folder walked, the repository's own files, their bytes and digests."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path, PurePosixPath

# Folders whose files are never public sources.
PRIVATE_DIRS = frozenset(
    {
        "solutions",
        "tests",
        "submitted",
        "autograded",
        "feedback",
        "grades",
        "_build",
        ".venv",
        "__pycache__",
        ".ipynb_checkpoints",
        ".pytest_cache",
        "runs",
    }
)


def posix(path: Path) -> str:
    return PurePosixPath(*path.parts).as_posix()


def walk(directory: Path):
    """Every file under ``directory`` (links to files included), as (path, relative posix path); not
    the files of a virtual environment (a folder holding ``pyvenv.cfg``: ``make venv`` in the student
    repository, never published) or of git's own folder."""
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(
            name for name in dirnames if name != ".git" and not (Path(dirpath) / name / "pyvenv.cfg").is_file()
        )
        for name in sorted(filenames):
            path = Path(dirpath) / name
            yield path, posix(path.relative_to(directory))


def source_files(root: Path) -> list[str]:
    """The repository's files that are not ignored (tracked or not), or all of them outside git."""
    try:
        result = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        result = None
    if result is not None and result.returncode == 0:
        return [name for name in result.stdout.split("\0") if name]
    return [
        rel
        for _, rel in walk(root)
        if not any(part in PRIVATE_DIRS or part.startswith(".") for part in PurePosixPath(rel).parts)
    ]


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return None if is_binary(data) else data.decode("utf-8", errors="replace")
