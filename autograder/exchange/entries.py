"""What in a folder that students control is not a plain folder or file, found without following or opening anything.

:func:`unsafe_entries` is the check itself, for the course's collect
(:class:`autograder.exchange.collect.SafeCollect`) and for ``make grade`` (:mod:`autograder.cli.grade`),
which runs it on every submission it grades and, where it finds the exchange, on the students'
submissions there: whatever collected them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
}


def kind(mode: int) -> str:
    """What a file of this mode is, in words."""
    return _KINDS.get(stat.S_IFMT(mode), "a plain file" if stat.S_ISREG(mode) else "a folder")


def unsafe_entries(folder: Path, relative_to: Path | None = None, hard_links: bool = True) -> list[tuple[str, str]]:
    """Whatever in ``folder``, itself included, is not a plain folder or a plain file: (its path, relative
    to ``relative_to`` (default: ``folder``'s parent), and what it is), sorted by path.

    Nothing is followed or opened: a folder's entries are read (the kinds from the folder listing),
    and a plain file's status only when ``hard_links`` asks whether it has more than one link (a
    second name for a file elsewhere, which reading it would read). A folder that cannot be read is
    listed as such. A missing ``folder`` gives nothing.
    """
    folder = Path(folder)
    base = Path(relative_to) if relative_to is not None else folder.parent

    def name(path) -> str:
        return Path(path).relative_to(base).as_posix()

    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(info.st_mode):
        return [(name(folder), kind(info.st_mode))]
    found, todo = [], [folder]
    while todo:
        current = todo.pop()
        try:
            with os.scandir(current) as listing:
                entries = list(listing)
        except OSError as error:
            found.append((name(current), f"a folder that cannot be read ({error.strerror})"))
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    links = entry.stat(follow_symlinks=False).st_nlink if hard_links else 1
                    if links > 1:
                        found.append((name(entry.path), f"a file with {links} hard links"))
                else:
                    found.append((name(entry.path), kind(entry.stat(follow_symlinks=False).st_mode)))
            except FileNotFoundError:  # gone while being looked at: whatever replaced it is looked at when copied
                continue
    return sorted(found)


def describe(found: list[tuple[str, str]], most: int = 3) -> str:
    """``found`` (from :func:`unsafe_entries`) as text: 'a symbolic link (x/y.ipynb), a named pipe (x/z)'."""
    shown = ", ".join(f"{what} ({path})" for path, what in found[:most])
    return shown + (f" and {len(found) - most} more" if len(found) > most else "")
