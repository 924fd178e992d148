"""How long a cold `make book` takes: every chapter executed, none from the cache.

    python -m benchmarks.book              # make bench-book: build into a temporary folder, print and record
    python -m benchmarks.book --jobs 1     # the chapters one after another (make bench-book BOOK_JOBS=1)

Builds the book as ``make book`` does in a temporary clone of HEAD, whose execution cache is empty
(the repository's ``_build`` is left alone): the chapters executed into the cache ``--jobs`` at a
time (``python -m course_site.execute``, whose lines it shows as they come), then ``jupyter-book
build -W -n --keep-going``, which finds every chapter there. It prints the seconds each chapter's
code took (the ``[book] executed <chapter> in <seconds> s`` lines), the time of the execution and of
the whole build; then builds again in the same clone with nothing changed (what a later ``make book`` takes:
every chapter from the cache) and times that too. The venv is the repository's own, already installed: its
installation is not counted (``make bench-suite`` times a venv created from nothing). The load average over the
builds is sampled every 10 s. The figures are recorded for the pages (:mod:`benchmarks.figures`, block
``book-build``) with :data:`SETTING`, what the time includes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import figures
from benchmarks.suite import LoadAverage

ROOT = figures.ROOT
# What the recorded times include, in the words the pages give them (benchmarks.figures).
SETTING = (
    "in a fresh clone of HEAD",
    "every chapter executed, none from the cache",
    "the venv already installed, its installation not counted",
)
DEFAULT_JOBS = int(os.environ.get("BOOK_JOBS", 2))  # as make book: `make bench-book BOOK_JOBS=1`
# course_site.execute's line for a page it executed, and myst-nb's for a page the build executed itself.
EXECUTED = re.compile(r"^\[book\] executed (?P<page>[A-Za-z0-9_]+) in (?P<seconds>[0-9.]+) s$", re.M)
BUILD_EXECUTED = re.compile(r"book/(?P<page>[A-Za-z0-9_]+)\.md: Executed notebook in (?P<seconds>[0-9.]+) seconds")


@dataclass
class ColdBuild:
    seconds: float  # the whole of it: execution and build
    execute_seconds: float  # the chapters executed into the cache
    jobs: int
    chapters: dict[str, float]  # seconds of each executed chapter
    executed_by_build: list[str]  # chapters that the build executed itself (none, when the cache keys match)
    log: str
    rebuild_seconds: float | None = None  # a second build in the same clone, nothing changed


def executed_chapters(output: str) -> dict[str, float]:
    """Seconds of each page from ``course_site.execute``'s lines."""
    return {m["page"]: float(m["seconds"]) for m in EXECUTED.finditer(output)}


def _shown(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``command``, showing its lines as they come: (exit status, output)."""
    lines = []
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as run:
        for line in run.stdout:
            if line.startswith("[book]"):
                print(line, end="", flush=True)
            lines.append(line)
    return run.returncode, "".join(lines)


def clone_head(folder: Path) -> Path:
    """A clone of HEAD under ``folder``, with the local MathJax that ``make book`` fetches (untracked)."""
    clone = folder / "course"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(ROOT), str(clone)], check=True)
    shutil.copytree(ROOT / "book" / "_static" / "mathjax", clone / "book" / "_static" / "mathjax")
    return clone


def timed_build(clone: Path, jobs: int = DEFAULT_JOBS, rebuild: bool = True) -> ColdBuild:
    """Build the book in ``clone`` as ``make book`` does (with ``BOOK_JOBS=jobs``), timed; with ``rebuild``, then
    again with nothing changed, timed too."""
    env = {**os.environ, "PYTHONPATH": str(clone), "PYTHONUNBUFFERED": "1"}  # the kernels import the clone's packages
    execute = [sys.executable, "-m", "course_site.execute", "--jobs", str(jobs), "."]
    build = [str(Path(sys.executable).with_name("jupyter-book")), "build", "-W", "-n", "--keep-going", "."]
    started = time.perf_counter()
    status, executed = _shown(execute, clone, env)
    execute_seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"the chapters did not execute (exit {status}):\n{executed[-4000:]}")
    run = subprocess.run(build, cwd=clone, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    log = re.sub(r"\033\[[0-9;]*m", "", run.stdout + run.stderr)
    if run.returncode != 0:
        raise SystemExit(f"the book did not build:\n{log[-4000:]}")
    by_build = {m["page"]: float(m["seconds"]) for m in BUILD_EXECUTED.finditer(log)}
    chapters = {**executed_chapters(executed), **by_build}
    cold = ColdBuild(seconds, execute_seconds, jobs, chapters, sorted(by_build), executed + log)
    if rebuild:  # what a later `make book` takes with nothing changed: the same two commands, the cache full
        started = time.perf_counter()
        status, again = _shown(execute, clone, env)
        run = subprocess.run(build, cwd=clone, capture_output=True, text=True, env=env) if status == 0 else None
        if run is None or run.returncode != 0:
            raise SystemExit(f"the second build failed:\n{(again + (run.stdout + run.stderr if run else ''))[-4000:]}")
        cold.rebuild_seconds = time.perf_counter() - started
    return cold


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--jobs",
        type=int,
        default=DEFAULT_JOBS,
        help=f"chapters executed at a time (default: BOOK_JOBS or 2: {DEFAULT_JOBS})",
    )
    parser.add_argument("--no-record", action="store_true", help="print the figures without recording them")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, LoadAverage() as load:
        cold = timed_build(clone_head(Path(tmp)), args.jobs)
    for page, page_seconds in sorted(cold.chapters.items(), key=lambda item: -item[1]):
        print(f"{page:<28} {page_seconds:8.1f} s")
    print(f"{'executing, ' + str(cold.jobs) + ' at a time':<28} {cold.execute_seconds:8.1f} s")
    print(f"{'the whole build':<28} {cold.seconds:8.1f} s ({len(cold.chapters)} pages executed)")
    print(f"{'again, nothing changed':<28} {cold.rebuild_seconds:8.1f} s")
    print(f"load average over the builds: {load.mean:.2f} on average, {load.peak:.2f} at most")
    if cold.executed_by_build:
        print(f"The build executed {', '.join(cold.executed_by_build)} itself: their outputs were not in the cache")
    if not args.no_record:
        figures.record(
            "book-build",
            "make bench-book" + (f" BOOK_JOBS={cold.jobs}" if cold.jobs != 2 else ""),
            {
                "total_seconds": round(cold.seconds, 1),
                "execute_seconds": round(cold.execute_seconds, 1),
                "jobs": cold.jobs,
                "chapters": cold.chapters,
                "rebuild_seconds": round(cold.rebuild_seconds, 1),
                "load_mean": round(load.mean, 2),
                "load_peak": round(load.peak, 2),
                "setting": list(SETTING),
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
