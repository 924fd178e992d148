"""What ``make book`` says while a page of the book runs: the code cell it is at, every 30 s.

:mod:`course_site.execute`'s workers run a :class:`Progress` beside each page: every :data:`PROGRESS_SECONDS` it
names the cell and the time since the page started, so that a long chapter on a busy machine is not taken for a
hang."""

from __future__ import annotations

import sys
import threading
import time

from nbformat import NotebookNode

# How often, in seconds, a page being executed says which cell it is at.
PROGRESS_SECONDS = 30.0


def _say(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


def _elapsed(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60} s"


class Progress:
    """Which code cell of a page its worker is executing, said every ``every`` seconds by a thread of the
    worker's own (a context manager: the thread runs while the page does), as
    ``[book] ch06_transformer: cell 12/80 (3 min 10 s)``: the cell's place among the page's code cells that run (those
    with code) and the time since the page started. nbclient calls :meth:`cell_started` (its ``on_cell_execute``
    hook) as each code cell starts; nothing is added to the notebook or its cells."""

    def __init__(self, name: str, notebook: NotebookNode, every: float = PROGRESS_SECONDS, say=None):
        if not every > 0:
            raise ValueError(f"every: expected a number of seconds above 0, got {every!r}")
        self.name, self.every = name, every
        self.say = say or _say
        code = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code" and cell.source.strip()]
        self.places = {index: place for place, index in enumerate(code, 1)}  # cell index -> place among code cells
        self.cell = 0  # the code cell running (its place), 0 before the first
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tell, name=f"progress of {name}", daemon=True)

    def cell_started(self, cell=None, cell_index: int = 0, **_) -> None:
        self.cell = self.places.get(cell_index, self.cell)

    def line(self) -> str:
        return f"[book] {self.name}: cell {self.cell}/{len(self.places)} ({_elapsed(time.monotonic() - self.started)})"

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
