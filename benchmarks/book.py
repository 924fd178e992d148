"""How long a cold `make book` takes: every chapter executed, none from the cache.

    python -m benchmarks.book            # make bench-book: build into a temporary folder, print and record

Builds the book as ``make book`` does (``jupyter-book build -W -n --keep-going``) in a temporary
clone of HEAD, whose execution cache is empty (the repository's ``_build`` is left alone), and
prints the seconds each chapter's code took (myst-nb's "Executed notebook in" lines) and the whole
build. The figures are recorded for the pages (:mod:`benchmarks.figures`, block ``book-build``).
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
from pathlib import Path

from benchmarks import figures

ROOT = figures.ROOT
EXECUTED = re.compile(r"book/(?P<page>[A-Za-z0-9_]+)\.md: Executed notebook in (?P<seconds>[0-9.]+) seconds")


def cold_build(folder: Path) -> tuple[float, dict[str, float], str]:
    """Build the book as ``make book`` does in a clone of HEAD under ``folder``, whose execution cache is
    empty: (seconds in all, seconds per executed page, the build's log)."""
    clone = folder / "course"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(ROOT), str(clone)], check=True)
    shutil.copytree(ROOT / "book" / "_static" / "mathjax", clone / "book" / "_static" / "mathjax")
    command = [str(Path(sys.executable).with_name("jupyter-book")), "build", "-W", "-n", "--keep-going", "."]
    env = {**os.environ, "PYTHONPATH": str(clone)}  # the kernels import the clone's packages
    started = time.perf_counter()
    run = subprocess.run(command, cwd=clone, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    log = re.sub(r"\033\[[0-9;]*m", "", run.stdout + run.stderr)
    if run.returncode != 0:
        raise SystemExit(f"the book did not build:\n{log[-4000:]}")
    pages = {m["page"]: float(m["seconds"]) for m in EXECUTED.finditer(log)}
    return seconds, pages, log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-record", action="store_true", help="print the figures without recording them")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        seconds, pages, _ = cold_build(Path(tmp))
    for page, page_seconds in sorted(pages.items(), key=lambda item: -item[1]):
        print(f"{page:<28} {page_seconds:8.1f} s")
    print(f"{'the whole build':<28} {seconds:8.1f} s ({len(pages)} pages executed)")
    if not args.no_record:
        figures.record("book-build", "make bench-book", {"total_seconds": round(seconds, 1), "chapters": pages})
    return 0


if __name__ == "__main__":
    sys.exit(main())
