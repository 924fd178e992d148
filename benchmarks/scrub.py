"""What a record keeps of a command and of what it printed: no machine's paths.

Every record of :mod:`benchmarks.figures` passes through :func:`scrubbed` as it is written (and ``make figures``
scrubs the records it finds), so that README.md, the book and ``benchmarks/figures.json`` show a command as
anyone would type it:

- a folder given to an option that names one (``--out /tmp/t24/train``) is named for what it is (``--out OUT``),
  there and wherever the record quotes it (``"out": "OUT"`` in a program's JSON line);
- a file given by a path in a command (``--record /root/run/record.json``) by its name alone (:func:`shown_command`);
- a path in the repository, relative to it (``benchmarks/figures.py``); one in a home folder from ``~``; one in a
  temporary folder from ``TMP`` (the folder that ``tempfile`` made left out: ``/tmp/tmpab12cd/course/x`` is
  ``TMP/course/x``), and a random temporary folder's name (``tmpab12cd34``) wherever it stands as ``TMP``; any
  other absolute path under a machine's own folders (:data:`MACHINE_ROOTS`) by its name.

``course_site.paths`` checks the built site, README.md and ``benchmarks/figures.json`` for what this leaves out.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from course_site import paths

ROOT = Path(__file__).resolve().parent.parent
# Options whose values are folders of the machine that ran the command: a record names them instead.
FOLDER_OPTIONS = {"--out": "OUT", "--out_dir": "OUT", "--nanogpt": "NANOGPT", "--code": "CODE"}
# The top folders of a machine's own paths (users' homes, temporary folders, work areas): a path under one of
# them is never recorded. Paths such as /usr/lib or /dev/null are the same on every machine and left as they are.
MACHINE_ROOTS = ("tmp", "var/tmp", "var/folders", "private", "root", "home", "Users", "work", "mnt", "scratch")
# An absolute path in running text: starts after a space, a quote, a bracket or "=" (not after a word, a dot, a
# colon or a slash: "1400/1500", "it/s", "https://..."), and runs to a space, a quote, a colon or a closing
# bracket (a full stop after it ends the sentence, not the path).
_PATH = re.compile(r"(?<![\w.:/~\-+])/[^\s\"'`,;:()\[\]{}<>|]*[^\s\"'`,;:()\[\]{}<>|.]")
# A random temporary folder's name wherever it stands (a path relative to it, a message): the one pattern that
# the site's check (course_site.paths) looks for.
_RANDOM = re.compile(paths.RANDOM_TMP)
_OPTION = re.compile(r"(?P<option>--[\w-]+)(?:=|\s+)(?P<value>[^\s\"'`,;]+)")


def _temporary_roots() -> list[str]:
    return sorted({tempfile.gettempdir().rstrip("/"), "/tmp", "/var/tmp"}, key=len, reverse=True)


def named_folders(texts: Iterable[str]) -> dict[str, str]:
    """The absolute folders given to :data:`FOLDER_OPTIONS` in ``texts`` (commands), each with its name:
    ``{"/tmp/t24/train": "OUT"}``."""
    found = {}
    for text in texts:
        for match in _OPTION.finditer(text):
            value = match["value"].rstrip("/")
            if match["option"] in FOLDER_OPTIONS and value.startswith("/") and len(value) > 1:
                found[value] = FOLDER_OPTIONS[match["option"]]
    return found


def _path(path: str, folders: dict[str, str]) -> str:
    """One absolute path, as a record shows it."""

    def under(root: str) -> str | None:
        root = root.rstrip("/")
        if path == root:
            return ""
        return path[len(root) + 1 :] if path.startswith(root + "/") else None

    for folder in sorted(folders, key=len, reverse=True):
        if (rest := under(folder)) is not None:
            return folders[folder] + (f"/{rest}" if rest else "")
    if (rest := under(str(ROOT))) is not None:
        return rest or "."
    for home in sorted({str(Path.home()), "/root"}, key=len, reverse=True):
        if home != "/" and (rest := under(home)) is not None:
            return "~" + (f"/{rest}" if rest else "")
    home = re.match(r"/(?:home|Users)/[^/]+(?:/(?P<rest>.*))?$", path)
    if home:
        return "~" + (f"/{home['rest']}" if home["rest"] else "")
    for temporary in _temporary_roots():
        if (rest := under(temporary)) is not None:
            return "TMP" + (f"/{rest.split('/', 1)[1]}" if "/" in rest else "")
    if any(under(f"/{top}") is not None for top in MACHINE_ROOTS):
        return Path(path).name or "."
    return path


def text(value: str, folders: dict[str, str] | None = None) -> str:
    """``value`` with every machine's path in it scrubbed (the ``folders`` of :func:`named_folders` named)."""
    folders = {**named_folders([value]), **(folders or {})}
    return _RANDOM.sub("TMP", _PATH.sub(lambda match: _path(match.group(0), folders), value))


def _strings(value) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def scrubbed(value, folders: dict[str, str] | None = None):
    """``value`` (a record: a command, figures, any JSON) with every string scrubbed by :func:`text`; a folder
    named in any of its commands is named wherever the record quotes it."""
    folders = {**named_folders(_strings(value)), **(folders or {})}

    def walk(item):
        if isinstance(item, str):
            return text(item, folders)
        if isinstance(item, dict):
            return {walk(key): walk(inner) for key, inner in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(inner) for inner in item]
        return item

    return walk(value)


def machine_paths(value) -> list[str]:
    """The machine's paths that ``value`` still holds (what :func:`scrubbed` would change), for a check."""
    found = []
    for string in _strings(value):
        found += [match.group(0) for match in _PATH.finditer(string) if _path(match.group(0), {}) != match.group(0)]
        found += [match.group(0) for match in _RANDOM.finditer(_PATH.sub("", string))]
    return found


def shown_command(program: str, argv: Sequence[str]) -> str:
    """``program`` (``python -m benchmarks.gpu``) with ``argv`` as a record shows it: a folder given to an option
    of :data:`FOLDER_OPTIONS` named for what it is (``--out OUT``), a file given by a path by its name alone, any
    other path scrubbed by :func:`text`."""
    parts = []
    for before, part in zip(["", *argv], argv):
        if before in FOLDER_OPTIONS:
            part = FOLDER_OPTIONS[before]
        elif "=" in part and part.split("=", 1)[0] in FOLDER_OPTIONS:
            part = f"{part.split('=', 1)[0]}={FOLDER_OPTIONS[part.split('=', 1)[0]]}"
        elif "/" in part and Path(part).suffix and " " not in part:
            part = Path(part).name
        else:
            part = text(part)
        parts.append(part)
    return " ".join([program, shlex.join(parts)]).rstrip()
