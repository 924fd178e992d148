"""`make book` executes the chapters that are not in the execution cache side by side
(course_site.execute), and the build then finds each of them there: tried on a two-page book."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache
from myst_nb.core.config import NbParserConfig
from myst_nb.core.execute import create_client
from myst_nb.core.read import read_myst_markdown_notebook

from attention_course.tooling.notebooks import COURSE_ROOT
from benchmarks import book as bench_book
from course_site import execute as book_execute
from course_site import progress as book_progress
from tests.support.myst import HEADER

WAIT = 60  # seconds that each page of the two-page book waits for the other's mark at most
CONFIG = """\
title: Two pages
only_build_toc_files: true
execute:
  execute_notebooks: cache
  cache: _build/.jupyter_cache
  timeout: 120
  allow_errors: false
sphinx:
  config:
    nb_execution_raise_on_error: true
"""


def write_book(folder: Path, pages: dict[str, list[str]]) -> Path:
    """A book of a first page without code and ``pages``, each its code cells."""
    (folder / "_config.yml").write_text(CONFIG)
    chapters = "".join(f"  - file: {name}\n" for name in pages)
    (folder / "_toc.yml").write_text(f"format: jb-book\nroot: intro\nchapters:\n{chapters}")
    (folder / "intro.md").write_text("# Two pages\n\nNo code here.\n")
    for name, cells in pages.items():
        body = "".join(f"\n```{{code-cell}} ipython3\n{cell}\n```\n" for cell in cells)
        (folder / f"{name}.md").write_text(f"{HEADER}\n# The page {name}\n{body}")
    return folder


def waits_for(name: str, other: str) -> str:
    """A cell that leaves its page's mark and waits for the other page's (a barrier of files in the page's
    folder, where the pages run): it prints "met" once the other page's mark is there, or "alone" where the
    other page had not started after WAIT seconds (one page after the other)."""
    return (
        f"import pathlib, time  # {name}\n\n"
        f'marks = pathlib.Path("marks")\n'
        f"marks.mkdir(exist_ok=True)\n"
        f'(marks / "{name}").touch()\n'
        f"deadline = time.monotonic() + {WAIT}\n"
        f'while not (marks / "{other}").exists() and time.monotonic() < deadline:\n'
        f"    time.sleep(0.05)\n"
        f'print("met" if (marks / "{other}").exists() else "alone")'
    )


def execute(book: Path, jobs: int, *options: str) -> subprocess.CompletedProcess:
    """``python -m course_site.execute --jobs N`` in the book's folder, as ``make book`` runs it."""
    env = {**os.environ, "PYTHONPATH": str(COURSE_ROOT)}
    command = [sys.executable, "-m", "course_site.execute", "--jobs", str(jobs), *options]
    return subprocess.run(command, cwd=book, env=env, capture_output=True, text=True, timeout=300)


class Messages:
    """A logger for myst-nb's execution client that keeps what it says."""

    def __init__(self):
        self.said: list[str] = []

    def _keep(self, message, *args, **kwargs):
        self.said.append(str(message))

    debug = info = warning = error = critical = _keep


def as_myst_nb_renders(book: Path, name: str) -> tuple[list[str], object]:
    """Page ``name`` through myst-nb's own reader and execution client in cache mode, as the build opens it:
    (what the client said, the notebook it renders)."""
    path = book / f"{name}.md"
    notebook = read_myst_markdown_notebook(path.read_text(), add_source_map=True, path=str(path))
    config = NbParserConfig(execution_mode="cache", execution_cache_path=str(book / "_build" / ".jupyter_cache"))
    messages = Messages()
    with create_client(notebook, str(path), config, messages) as client:
        return messages.said, client.notebook


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The two-page book, executed with 2 jobs: (its folder, the run)."""
    book = write_book(
        tmp_path_factory.mktemp("book"),
        {"first": [waits_for("first", "second")], "second": [waits_for("second", "first")]},
    )
    return book, execute(book, jobs=2)


def test_the_executed_pages_are_where_myst_nb_looks_for_them(executed):
    book, run = executed
    assert run.returncode == 0, run.stdout + run.stderr
    for name in ("first", "second"):
        said, _ = as_myst_nb_renders(book, name)
        assert any("Using cached notebook" in line for line in said), said
        assert not any("Executing notebook" in line for line in said), said
    assert "[book] executing first ..." in run.stdout and "[book] executing second ..." in run.stdout
    assert set(bench_book.executed_chapters(run.stdout)) == {"first", "second"}  # what make bench-book reads


def test_the_kernels_say_nothing_in_the_build_log(executed):
    """The pages' kernels talk over sockets of the build's own: no kernel warns of unencrypted TCP (once per
    page, nine lines in a build of the book's)."""
    _, run = executed
    assert run.returncode == 0, run.stdout + run.stderr
    assert "WARNING" not in run.stdout + run.stderr, run.stderr


def test_the_two_pages_ran_at_the_same_time(executed):
    """Side by side, proven by a barrier, not by clocks: each page waits for the other's mark, which a page run
    after the other could only find once the first had given up waiting."""
    book, run = executed
    assert run.returncode == 0, run.stdout + run.stderr
    said = {name: as_myst_nb_renders(book, name)[1].cells[-1].outputs[0].text.strip() for name in ("first", "second")}
    assert said == {"first": "met", "second": "met"}, f"one page after the other, not side by side: {said}"


def test_a_second_run_finds_every_page_in_the_cache_and_executes_nothing(executed):
    book, run = executed
    assert run.returncode == 0, run.stdout + run.stderr
    again = execute(book, jobs=2)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines() == [
        "[book] first: code unchanged, outputs from the cache",
        "[book] second: code unchanged, outputs from the cache",
    ]


def test_a_page_that_raises_fails_the_run_with_its_name_and_error(tmp_path):
    book = write_book(tmp_path, {"fine": ["answer = 42"], "broken": ["numbers = [1, 2]", "numbers[0] / 0"]})
    run = execute(book, jobs=2)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "[book] broken failed after" in run.stderr and "ZeroDivisionError: division by zero" in run.stderr
    assert "numbers[0] / 0" in run.stderr  # the cell that raised
    assert "the book is not built: broken failed" in run.stderr
    assert "[book] executed fine in" in run.stdout  # the page beside it finished, and is kept
    said, _ = as_myst_nb_renders(book, "fine")
    assert any("Using cached notebook" in line for line in said), said


PROGRESS = re.compile(r"^\[book\] (?P<page>\w+): cell (?P<cell>\d+)/(?P<cells>\d+) \((?P<seconds>\d+) s\)$", re.M)


def test_a_page_says_which_cell_it_is_at_while_it_runs(tmp_path):
    """While a page runs, a line every --progress seconds names the code cell it is at among its code cells (a
    cell without code not counted) and the time since it started, between its executing and executed lines; the
    default, 30 s, is what make book runs with, and a page that ends sooner says nothing more."""
    cells = ["import time", "time.sleep(1.5)", "", "time.sleep(1.5)\nprint('done')"]
    book = write_book(tmp_path, {"slow": cells})
    run = execute(book, 1, "--progress", "0.4")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    said = [(int(m["cell"]), int(m["cells"]), int(m["seconds"])) for m in PROGRESS.finditer(run.stdout)]
    assert {m["page"] for m in PROGRESS.finditer(run.stdout)} == {"slow"}, run.stdout
    assert said and all(cells == 3 for _, cells, _ in said), run.stdout
    assert {2, 3} <= {cell for cell, _, _ in said}, run.stdout  # each sleeping cell named while it sleeps
    assert [cell for cell, _, _ in said] == sorted(cell for cell, _, _ in said)
    assert [seconds for _, _, seconds in said] == sorted(seconds for _, _, seconds in said) and said[-1][2] >= 2
    # a line about every 0.4 s while the page runs (3 s of sleep, longer on a loaded machine): at least 5, and
    # no more than the time it ran (the last line's whole seconds, plus the one begun) allows
    assert 5 <= len(said) <= (said[-1][2] + 1) / 0.4 + 2, run.stdout
    first, last = (
        lines.index("[book] executing slow ..."),
        next(i for i, line in enumerate(lines) if "executed slow" in line),
    )
    assert all(first < i < last for i, line in enumerate(lines) if PROGRESS.match(line)), run.stdout
    (tmp_path / "quiet").mkdir()
    again = execute(write_book(tmp_path / "quiet", {"quick": ["time = 1"]}), 1)
    assert again.returncode == 0 and not PROGRESS.search(again.stdout), again.stdout
    with pytest.raises(ValueError, match="every"):
        book_progress.Progress("slow", nbformat.v4.new_notebook(), every=0)
    progress = book_progress.Progress("ch06_transformer", notebook_of(80), every=30)
    progress.started -= 190
    progress.cell_started(cell_index=11)
    assert progress.line() == "[book] ch06_transformer: cell 12/80 (3 min 10 s)"
    refused = execute(book, 1, "--progress", "0")
    assert refused.returncode == 2 and "--progress must be" in refused.stderr, refused.stderr


def notebook_of(cells: int):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"x = {i}") for i in range(cells)])


def page_of(name: str, code: str) -> book_execute.Page:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    return book_execute.Page(name, Path(f"/book/{name}.md"), notebook, NbParserConfig(), None)


def test_pages_whose_time_is_unknown_start_first_then_the_longest_first():
    pages = [page_of("short", "x = 1"), page_of("long", "x = 1"), page_of("new", "x = 1"), page_of("new_big", "x = 12")]
    order = book_execute.execution_order(pages, {"short": 10.0, "long": 150.0})
    assert [page.name for page in order] == ["new_big", "new", "long", "short"]


def test_a_pages_time_is_its_last_run_in_the_cache_else_the_last_recorded_cold_build(executed, tmp_path):
    book, run = executed
    assert run.returncode == 0, run.stdout + run.stderr
    pages, _ = book_execute.book_pages(book)
    cache = get_cache(book / "_build" / ".jupyter_cache")
    printed = bench_book.executed_chapters(run.stdout)  # to 0.1 s
    assert book_execute.previous_seconds(cache, pages, book) == pytest.approx(printed, abs=0.06)
    record = tmp_path / book_execute.RECORDED_TIMES
    record.parent.mkdir()
    record.write_text('{"book-build": {"figures": {"chapters": {"ch01": 150.0, "first": 1.0}}}}')
    empty = get_cache(tmp_path / "cache")
    assert book_execute.previous_seconds(empty, [page_of("ch01", "x"), page_of("ch02", "x")], tmp_path) == {
        "ch01": 150.0
    }
    assert book_execute.previous_seconds(cache, pages, tmp_path)["first"] != 1.0  # the cache's own time wins


@pytest.mark.slow
def test_jupyter_book_renders_the_pages_from_the_cache_and_executes_none(executed):
    book, run = executed
    assert run.returncode == 0, run.stdout + run.stderr
    jupyter_book = str(Path(sys.executable).with_name("jupyter-book"))
    build = subprocess.run(
        [jupyter_book, "build", "-W", "-n", "--keep-going", "."], cwd=book, capture_output=True, text=True, timeout=600
    )
    log = build.stdout + build.stderr
    assert build.returncode == 0, log[-4000:]
    assert log.count("Using cached notebook") == 2, log[-4000:]
    assert "Executing notebook" not in log
