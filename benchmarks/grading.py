"""Seconds per notebook: plain nbgrader against the course's sandboxed grading, in one run.

    python -m benchmarks.grading            # 8 correct submissions of ch02, JOBS 1 and 2 (make bench-grading)
    python -m benchmarks.grading 40 --jobs 1 2 4
    python -m benchmarks.grading 16 --jobs 2 --assignment ch03_multi_head --sandboxed-only --cli

Both pipelines grade the same submissions end to end, as `make grade` does
(gradebook, autograde, feedback, CSV): "plain nbgrader" executes each notebook
in a Jupyter kernel with the tests beside the student's code; "sandboxed" runs
the student's code under bubblewrap and the tests in the grader. Every
submission must get full marks in both, or the figures are not printed. With ``--cli``
the sandboxed runs time the command that ``make grade`` runs (``python -m
autograder.cli.grade``, its start-up included) instead of calling it in this process.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.classroom import fill, make_course, submit
from autograder.cli import grade
from benchmarks import figures

ASSIGNMENT = "ch02_scaled_dot_product"


def run(n: int, *, plain: bool, jobs: int, folder: Path, assignment: str = ASSIGNMENT, cli: bool = False) -> float:
    course = make_course(folder, plain=plain)
    notebook = fill(assignment)
    for i in range(n):
        submit(course, f"student{i:03d}", assignment, notebook)
    started = time.perf_counter()
    if cli:
        command = [sys.executable, "-m", "autograder.cli.grade", assignment, "--root", str(course), "--jobs", str(jobs)]
        subprocess.run(command, check=True, capture_output=True)
        seconds = time.perf_counter() - started
        with (course / "grades" / f"{assignment}.csv").open() as f:
            rows = list(csv.DictReader(f))
        wrong = [row["student"] for row in rows if row["score"] != row["max_score"]]
        results = rows
    else:
        results = grade.grade(assignment, root=course, quiet=True, jobs=jobs, sandbox=not plain)
        seconds = time.perf_counter() - started
        wrong = [r.student for r in results if r.score != r.max_score]
    if len(results) != n or wrong:
        raise SystemExit(f"{'plain' if plain else 'sandboxed'}: not every submission got full marks: {wrong}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", nargs="?", type=int, default=8, help="number of submissions (default 8)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="JOBS values for the sandboxed runs")
    parser.add_argument("--assignment", default=ASSIGNMENT, help=f"the assignment graded (default {ASSIGNMENT})")
    parser.add_argument("--sandboxed-only", action="store_true", help="leave out plain nbgrader")
    parser.add_argument("--cli", action="store_true", help="time the sandboxed runs as make grade runs them")
    parser.add_argument("--no-record", action="store_true", help="print the figures without recording them")
    args = parser.parse_args()
    if args.n < 1 or min(args.jobs) < 1:
        parser.error("n and every --jobs value must be at least 1")
    print(
        f"{args.n} correct submissions of {args.assignment}; {os.cpu_count()} CPU cores, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if not args.sandboxed_only:
            plain = run(args.n, plain=True, jobs=1, folder=Path(tmp) / "plain", assignment=args.assignment)
            rows.append(("plain nbgrader (kernel)", 1, plain))
        for jobs in args.jobs:
            seconds = run(
                args.n,
                plain=False,
                jobs=jobs,
                folder=Path(tmp) / f"sandboxed{jobs}",
                assignment=args.assignment,
                cli=args.cli,
            )
            rows.append((f"{'make grade' if args.cli else 'sandboxed'}, JOBS={jobs}", jobs, seconds))
    base = None if args.sandboxed_only else rows[0][2] / args.n
    print(f"{'pipeline':<26} {'total s':>8} {'s/notebook':>11} {'vs plain':>9}")
    recorded = []
    for name, _, seconds in rows:
        per = seconds / args.n
        versus = "" if base is None else f"{base / per:.2f}x"
        print(f"{name:<26} {seconds:>8.1f} {per:>11.2f} {versus:>9}")
        recorded.append(
            {"pipeline": name, "seconds": round(seconds, 1), "per_notebook": round(per, 2), "vs_plain": versus}
        )
    if not args.no_record:
        command = " ".join(["python -m benchmarks.grading", *sys.argv[1:]])
        figures.record("grading", command, {"n": args.n, "assignment": args.assignment, "rows": recorded})


if __name__ == "__main__":
    main()
