"""Running nbgrader's command line from Python, from the course root.

nbgrader runs in a subprocess, and what it prints can quote a submission: a traceback that holds a
cell's source, a warning that names what a notebook holds. So none of it reaches the instructor's
terminal as it is. Each line of its output (stdout and stderr alike) goes through the grader's one
filter, :func:`autograder.text.terminal.clean_text` (no escape sequence, no control character),
is cut to ``MAX_LINE_CHARS`` characters, and is **relayed prefixed**: every row it takes on the
terminal starts with ``nbgrader: `` (on a terminal, a line wider than it is folded by this module,
each row prefixed, so that the terminal never wraps one onto a row of its own; into a file or a
pipe, each line is written whole). A line of nbgrader's therefore never passes for one of the
grader's own (its phases, progress and summary), however a student words it. After ``MAX_LINES``
lines, the rest of a command's output is counted, not shown. Output that a caller captures
(``quiet``) is cleaned the same way, without the prefix.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import unicodedata
from pathlib import Path
from typing import TextIO

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course
from autograder.text.terminal import clean_text

PREFIX = "nbgrader: "
MAX_LINE_CHARS = 1000  # of one line of nbgrader's output, relayed or kept
MAX_LINES = 300  # relayed to the terminal per command; the rest is counted
MAX_KEPT_LINES = 20_000  # kept per stream for the caller


def environment() -> dict:
    """The environment for nbgrader: the venv's bin first on PATH (its gradebook runs `alembic`)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("MPLBACKEND", "Agg")
    return env


def _columns(char: str) -> int:
    """How many terminal columns ``char`` may take, counted high: wide and ambiguous ones as two."""
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in "WFA" else 1


def relayed(line: str, width: int | None) -> list[str]:
    """The rows that show one line of nbgrader's output: cleaned, cut to ``MAX_LINE_CHARS``, each row
    ``PREFIX`` and at most ``width`` columns in all (``None``: one row, however long)."""
    text = clean_text(line.rstrip("\n"), MAX_LINE_CHARS).replace("\n", " ").expandtabs(8)
    if width is None:
        return [f"{PREFIX}{text.rstrip()}"]
    room = max(20, width - len(PREFIX) - 1)  # one column spare, for a character counted too narrow
    rows, row, used = [], [], 0
    for char in text:
        size = _columns(char)
        if used + size > room:
            rows.append("".join(row))
            row, used = [], 0
        row.append(char)
        used += size
    rows.append("".join(row))
    return [f"{PREFIX}{row.rstrip()}" for row in rows]


def _terminal_width(stream: TextIO) -> int | None:
    """The width of the terminal that ``stream`` writes to, or None if it is not a terminal."""
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else None
    except (AttributeError, OSError, ValueError):
        return None


def _lines(pipe):
    """The lines of a byte stream, decoded; of a line longer than ``MAX_LINE_CHARS`` the rest is read
    and dropped, so that one line of any length costs bounded memory."""
    most = 4 * MAX_LINE_CHARS + 4  # bytes: MAX_LINE_CHARS characters of UTF-8
    while True:
        line = pipe.readline(most)
        if not line:
            return
        rest = line
        while not rest.endswith(b"\n"):
            rest = pipe.readline(1 << 16)
            if not rest:
                break
        yield line.decode("utf-8", "replace")


class Running:
    """An nbgrader command under way, in a session of its own; its output is relayed to ``relay`` (as
    described above) or only kept, as it comes."""

    def __init__(self, command: list[str], cwd: Path, env: dict, relay: TextIO | None):
        self.command, self.relay = command, relay
        self.kept: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.relayed = self.withheld = 0
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # stopped with everything it started (stop())
        )
        self._readers = [
            threading.Thread(target=self._read, args=(name, pipe), daemon=True)
            for name, pipe in (("stdout", self.process.stdout), ("stderr", self.process.stderr))
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, name: str, pipe) -> None:
        for line in _lines(pipe):
            text = clean_text(line.rstrip("\n"), MAX_LINE_CHARS)
            with self._lock:
                if len(self.kept[name]) < MAX_KEPT_LINES:
                    self.kept[name].append(text)
                if self.relay is None or not text.strip():  # a blank line shows nothing
                    continue
                if self.relayed < MAX_LINES:
                    self.relayed += 1
                    rows = relayed(text, _terminal_width(self.relay))
                    self.relay.write("".join(f"{row}\n" for row in rows))
                    self.relay.flush()
                else:
                    self.withheld += 1

    def poll(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        """Kill the command and whatever it started (its session), unless it has been waited for already."""
        if self.process.returncode is None:  # not reaped: its process group id cannot name another's yet
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> subprocess.CompletedProcess:
        """Wait for the command (killing it if this is interrupted); its exit status and cleaned output."""
        try:
            code = self.process.wait(timeout)
        except BaseException:
            self.stop()
            self.process.wait()
            raise
        for reader in self._readers:
            reader.join(timeout=10)
        if any(reader.is_alive() for reader in self._readers):  # something it started still holds its output
            with contextlib.suppress(ProcessLookupError):  # the group outlives its leader: its id is not reused
                os.killpg(self.process.pid, signal.SIGKILL)
            for reader in self._readers:
                reader.join()
        if self.withheld and self.relay is not None:
            self.relay.write(f"{PREFIX}({self.withheld} more line(s) of nbgrader's output not shown)\n")
            self.relay.flush()
            self.withheld = 0
        return subprocess.CompletedProcess(
            self.command, code, "\n".join(self.kept["stdout"]), "\n".join(self.kept["stderr"])
        )


def start(
    *args: str,
    root: Path = COURSE_ROOT,
    quiet: bool = False,
    log_level: str | None = None,
    env: dict | None = None,
) -> Running:
    """Start ``nbgrader ARGS...`` in ``root`` (where nbgrader_config.py is); see :func:`run`."""
    command = [sys.executable, "-m", "nbgrader", *args, f"--log-level={log_level or ('WARN' if quiet else 'INFO')}"]
    return Running(command, Path(root).resolve(), {**environment(), **(env or {})}, relay=None if quiet else sys.stderr)


def run(
    *args: str,
    root: Path = COURSE_ROOT,
    check: bool = True,
    quiet: bool = False,
    log_level: str | None = None,
    env: dict | None = None,
) -> subprocess.CompletedProcess:
    """``nbgrader ARGS...`` in ``root`` (where nbgrader_config.py is), to its end.

    Its output, cleaned, is returned in the result (``stdout``, ``stderr``); unless ``quiet`` it is
    also relayed to stderr as it comes, each row prefixed (see the module's docstring).
    ``log_level`` sets nbgrader's; ``env`` adds environment variables; ``check`` raises
    :class:`subprocess.CalledProcessError` if it fails.
    """
    result = start(*args, root=root, quiet=quiet, log_level=log_level, env=env).wait()
    if check and result.returncode:
        raise subprocess.CalledProcessError(result.returncode, result.args, result.stdout, result.stderr)
    return result


def generate(
    assignments: list[str] | None = None,
    *,
    into: Path | None = None,
    db_url: str | None = None,
    root: Path = COURSE_ROOT,
    quiet: bool = False,
) -> None:
    """Run ``nbgrader generate_assignment`` for each assignment, into the folder ``into`` (default exercises/)."""
    for name in assignments or course.assignments(root):
        args = ["generate_assignment", name, "--force"]
        if into is not None:
            args.append(f"--CourseDirectory.release_directory={into}")
        if db_url is not None:
            args.append(f"--CourseDirectory.db_url={db_url}")
        result = run(*args, root=root, check=False, quiet=quiet)
        if result.returncode != 0:
            detail = (result.stdout or "") + (result.stderr or "") if quiet else ""
            raise RuntimeError(f"nbgrader generate_assignment {name} failed\n{detail}")
