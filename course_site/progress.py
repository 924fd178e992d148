"""What ``make book`` says while a page of the book runs: the code cell it is at, every 30 s, and what it is doing.

:mod:`course_site.execute`'s workers run a :class:`Progress` beside each page: every :data:`PROGRESS_SECONDS` it
names the cell, the time since the page started, and the last line that the cell has shown so far (a training
loop's step or epoch, as its progress bar or its printed lines give it, :func:`latest_line`), so that a long
chapter on a busy machine is not taken for a hang, nor a cell that trains for minutes."""

from __future__ import annotations

import re
import sys
import threading
import time

from nbformat import NotebookNode

# How often, in seconds, a page being executed says which cell it is at.
PROGRESS_SECONDS = 30.0


# The longest report of a cell's last line, in characters (a longer line is cut, with "...").
LINE_LIMIT = 100
# A progress bar's bar (tqdm's: block characters between two "|"), which says nothing that its numbers do not.
_BAR = re.compile(r"\s*\|[\u2580-\u259f ]*\|\s*")


def latest_line(cell) -> str:
    """The last line that a running code cell has shown: of its last output that holds text (printed, or a display
    that the cell updates in place, as the course's ``train`` updates its bar), bars taken out; "" if none."""
    for output in reversed(list(cell.get("outputs", []) if cell is not None else [])):
        if output.get("output_type") == "stream":
            text = output.get("text", "")
        elif output.get("output_type") in ("display_data", "execute_result"):
            text = output.get("data", {}).get("text/plain", "")
        else:
            continue
        text = "".join(text) if isinstance(text, list) else str(text)
        lines = [line for line in re.split(r"[\r\n]", text) if line.strip()]
        if lines:
            line = " ".join(_BAR.sub(" ", lines[-1]).split())
            return line if len(line) <= LINE_LIMIT else line[: LINE_LIMIT - 3].rstrip() + "..."
    return ""


def _say(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


def _elapsed(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60} s"


class Progress:
    """Which code cell of a page its worker is executing, said every ``every`` seconds by a thread of the
    worker's own (a context manager: the thread runs while the page does), as
    ``[book] ch01_bahdanau: cell 12/44 (2 min 30 s): no attention: 46% 230/500 [01:10<01:20, loss=0.4321]``: the
    cell's place among the page's code cells that run (those with code), the time since the page started, and the
    last line the cell has shown (:func:`latest_line`; nothing where it has shown none). nbclient calls
    :meth:`cell_started` (its ``on_cell_execute`` hook) as each code cell starts, with the cell whose outputs it
    then fills as the kernel sends them; nothing is added to the notebook or its cells."""

    def __init__(self, name: str, notebook: NotebookNode, every: float = PROGRESS_SECONDS, say=None):
        if not every > 0:
            raise ValueError(f"every: expected a number of seconds above 0, got {every!r}")
        self.name, self.every = name, every
        self.say = say or _say
        code = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code" and cell.source.strip()]
        self.places = {index: place for place, index in enumerate(code, 1)}  # cell index -> place among code cells
        self.cell = 0  # the code cell running (its place), 0 before the first
        self.running = None  # that cell, whose outputs nbclient fills as it runs
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tell, name=f"progress of {name}", daemon=True)

    def cell_started(self, cell=None, cell_index: int = 0, **_) -> None:
        self.cell = self.places.get(cell_index, self.cell)
        self.running = cell

    def line(self) -> str:
        where = f"[book] {self.name}: cell {self.cell}/{len(self.places)} ({_elapsed(time.monotonic() - self.started)})"
        doing = latest_line(self.running)
        return f"{where}: {doing}" if doing else where

    def _tell(self) -> None:
        while not self._stop.wait(self.every):
            self.say(self.line())

    def __enter__(self) -> Progress:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
