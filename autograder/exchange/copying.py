"""Copying a folder that students control through file descriptors, following no link, each file checked once open."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from autograder.exchange.entries import kind

READ_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# A file is opened without following a link, and a fifo without waiting.
READ_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class Refused(Exception):
    """A submission that is not plain folders and files, or that changed into something else while it was
    being copied. The message says what and where, and follows "the submission": 'holds a named pipe
    (x/y)'."""


@dataclass
class Copied:
    """What :func:`copy_tree` copied: the newest status-change time of the copy's sources (ns)."""

    newest_change_ns: int
    files: int = 0
    skipped: tuple[str, ...] = ()


def copy_tree(source: Path, dest: Path, keep=None, shown: str | None = None) -> Copied:
    """Copy the folder ``source`` into ``dest`` (which must not exist) without following a link.

    Each folder and file is opened with ``O_NOFOLLOW`` (a file also ``O_NONBLOCK``, so that a named
    pipe cannot make it wait) and checked once open: a folder must be a folder, a file a plain file
    with one link, the same file (device and inode) that the listing showed. Anything else raises
    :class:`Refused`, and ``dest`` is removed. ``keep(relative_path, size)`` says whether a file is
    copied (default: all). The newest ctime is taken after each file has been read, so a change made
    while it was read is counted.
    """
    shown = shown or str(source)
    try:
        top = os.open(source, READ_FOLDER)
    except OSError as error:
        raise Refused(f"is not a folder that can be opened ({shown}: {error.strerror})") from None
    copied = Copied(0)
    skipped: list[str] = []
    try:
        _copy_folder(top, Path(dest), "", shown, keep, copied, skipped)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.close(top)
    copied.skipped = tuple(skipped)
    return copied


def _copy_folder(fd: int, dest: Path, relative: str, shown: str, keep, copied: Copied, skipped: list[str]) -> None:
    os.mkdir(dest, 0o755)
    for name in sorted(os.listdir(fd)):
        path = f"{relative}{name}"
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed meanwhile: not part of the submission
        if stat.S_ISDIR(info.st_mode):
            if keep is not None and not keep(path, None):
                skipped.append(f"{path}/")
                continue
            child = _open(name, fd, READ_FOLDER, f"{shown}/{path}")
            try:
                _same(child, info, f"{shown}/{path}", folder=True)
                _copy_folder(child, dest / name, f"{path}/", shown, keep, copied, skipped)
            finally:
                os.close(child)
        elif stat.S_ISREG(info.st_mode):
            if keep is not None and not keep(path, info.st_size):
                skipped.append(path)
                continue
            source = _open(name, fd, READ_FILE, f"{shown}/{path}")
            try:
                _same(source, info, f"{shown}/{path}", folder=False)
                with open(dest / name, "xb") as out:
                    while chunk := os.read(source, 1 << 20):
                        out.write(chunk)
                after = os.fstat(source)
                if after.st_nlink != 1:
                    raise Refused(f"holds a file with {after.st_nlink} hard links ({shown}/{path})")
                copied.newest_change_ns = max(copied.newest_change_ns, after.st_ctime_ns)
                copied.files += 1
            finally:
                os.close(source)
            os.chmod(dest / name, 0o644)
        else:
            raise Refused(f"holds {kind(info.st_mode)} ({shown}/{path})")
    copied.newest_change_ns = max(copied.newest_change_ns, os.fstat(fd).st_ctime_ns)


def _open(name: str, folder: int, flags: int, shown: str) -> int:
    try:
        return os.open(name, flags, dir_fd=folder)
    except OSError as error:  # ELOOP: swapped for a symbolic link since it was listed
        raise Refused(f"changed while it was collected ({shown}: {error.strerror})") from None


def _same(fd: int, listed: os.stat_result, shown: str, folder: bool) -> None:
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (listed.st_dev, listed.st_ino):
        raise Refused(f"changed while it was collected ({shown}: another file took its place)")
    if (folder and not stat.S_ISDIR(opened.st_mode)) or (not folder and not stat.S_ISREG(opened.st_mode)):
        raise Refused(f"holds {kind(opened.st_mode)} ({shown})")
    if not folder and opened.st_nlink != 1:
        raise Refused(f"holds a file with {opened.st_nlink} hard links ({shown})")
