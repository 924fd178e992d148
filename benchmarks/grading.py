"""Seconds per notebook: plain nbgrader against the course's sandboxed grading, in one run.

    python -m benchmarks.grading            # 8 correct submissions of ch02, JOBS 1 and 2 (make bench-grading)
    python -m benchmarks.grading 40 --jobs 1 2 4
    python -m benchmarks.grading 16 --jobs 2 --assignment ch03_multi_head --sandboxed-only --cli
    python -m benchmarks.grading 16 --jobs 2 --assignment ch03_multi_head --compare 7766174

Both pipelines grade the same submissions end to end, as `make grade` does
(gradebook, autograde, feedback, CSV): "plain nbgrader" executes each notebook
in a Jupyter kernel with the tests beside the student's code; "sandboxed" runs
the student's code under bubblewrap and the tests in the grader. Every
submission must get full marks in both, or the figures are not printed. With ``--cli``
the sandboxed runs time the command that ``make grade`` runs (``python -m
autograder.cli.grade``, its start-up included) instead of calling it in this process, and each of its six
phases (from the time each phase's line comes). With ``--compare COMMIT`` it runs that command of this
checkout and of COMMIT's code (a git worktree, in the same environment) side by side, in turns, ``--rounds``
times each, and prints the median seconds of every phase of both; nothing is recorded. The grading reports'
own phases (sandbox start-up, the student's cells, the test cells) are printed where the code writes them.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.cli import grade
from autograder.grading.classroom import fill, make_course, submit
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


PHASE = re.compile(r"^\[(\d)/6\]")


def cli_phases(course: Path, assignment: str, jobs: int, code: Path, isolated: Path | None = None) -> dict[str, float]:
    """Seconds of each phase of ``make grade``'s command run on ``code``'s packages (a checkout, from which it
    runs: ``python -m`` puts the working folder first on the search path) for the class in ``course``, timed by
    when each phase's line comes on its standard error; ``whole``: the command. ``isolated``: a folder of a
    sitecustomize module put on the search path after ``code``."""
    command = [sys.executable, "-m", "autograder.cli.grade", assignment, "--root", str(course), "--jobs", str(jobs)]
    path = os.pathsep.join(str(folder) for folder in (code, isolated) if folder)
    env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    marks: list[tuple[str, float]] = []
    with subprocess.Popen(
        command, cwd=code, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    ) as run:
        for line in run.stderr:
            found = PHASE.match(line)
            if found:
                marks.append((f"[{found.group(1)}/6]", time.perf_counter()))
    ended = time.perf_counter()
    if run.returncode != 0:
        raise SystemExit(f"make grade's command failed on {code} (exit {run.returncode})")
    with (course / "grades" / f"{assignment}.csv").open() as f:
        wrong = [row["student"] for row in csv.DictReader(f) if row["score"] != row["max_score"]]
    if wrong:
        raise SystemExit(f"{code}: not every submission got full marks: {wrong}")
    ends = [at for _, at in marks[1:]] + [ended]
    phases = {name: at_end - at for (name, at), at_end in zip(marks, ends)}
    phases["whole"] = ended - started
    return phases


def report_phases(course: Path, assignment: str) -> dict[str, float]:
    """The mean seconds per notebook of each phase that the grading reports record (none for older code)."""
    totals: dict[str, list[float]] = {}
    for path in (course / "grades" / "reports" / assignment).glob("*/*.json"):
        report = json.loads(path.read_text())
        for name, seconds in {**report.get("phases", {}), "report": report["seconds"]}.items():
            totals.setdefault(name, []).append(seconds)
    return {name: statistics.mean(seconds) for name, seconds in totals.items()}


# A class of n reference submissions made by a checkout's own code: autograder.grading.classroom, or in older
# checkouts autograder.classroom, or before it the tests' helpers.
CLASS = """
import sys
from pathlib import Path
try:
    from autograder.grading.classroom import fill, make_course, submit
except ImportError:
    try:
        from autograder.classroom import fill, make_course, submit
    except ImportError:
        from tests.support.course import make_course
        from tests.support.submissions import fill, submit
folder, assignment, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
course = make_course(folder)
notebook = fill(assignment)
for i in range(n):
    submit(course, f"student{i:03d}", assignment, notebook)
"""


# The venv's editable install of the course finds any module that a checkout lacks in this one (COMMIT's
# autograder would take this checkout's classroom, and its nbgrader this checkout's plugins): each side's
# processes drop it as they start (sitecustomize runs after the venv's .pth files).
ISOLATED = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path_hooks[:] = [h for h in sys.path_hooks if not getattr(h, "__module__", "").startswith("__editable__")]
sys.path_importer_cache.clear()
"""


def compare(commit: str, n: int, jobs: int, assignment: str, rounds: int) -> None:
    """This checkout's make grade beside ``commit``'s, in turns; the median of each phase of each."""
    root = figures.ROOT
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        old = Path(tmp) / "old"
        isolated = Path(tmp) / "isolated"
        isolated.mkdir()
        (isolated / "sitecustomize.py").write_text(ISOLATED)
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(old), commit], cwd=root, check=True)
        try:
            sides = {commit: old, "this checkout": root}
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
            reports: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
            for r in range(rounds):
                for name in list(sides)[:: 1 if r % 2 == 0 else -1]:  # in turns, each first every other round
                    course = Path(tmp) / f"{r}-{len(runs[name])}-{name[:3]}"
                    path = os.pathsep.join([str(sides[name]), str(isolated)])
                    command = [sys.executable, "-c", CLASS, str(course), assignment, str(n)]
                    subprocess.run(command, cwd=sides[name], env={**os.environ, "PYTHONPATH": path}, check=True)
                    runs[name].append(cli_phases(course, assignment, jobs, sides[name], isolated))
                    reports[name].append(report_phases(course, assignment))
                    print(f"round {r + 1}, {name}: {runs[name][-1]['whole']:.1f} s", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=root, check=False)
    names = list(sides)
    print(f"\n{n} correct submissions of {assignment}, make grade JOBS={jobs}, median of {rounds} runs each")
    print(f"{'phase':<10} " + " ".join(f"{name:>16}" for name in names) + f" {'ratio':>8}")
    for phase in [*(f"[{k}/6]" for k in range(1, 7)), "whole"]:
        medians = [statistics.median(run.get(phase, float("nan")) for run in runs[name]) for name in names]
        print(f"{phase:<10} " + " ".join(f"{m:>15.1f}s" for m in medians) + f" {medians[0] / medians[1]:>7.2f}x")
    print("\nper notebook, from the grading reports (seconds; the mean of every report of every run):")
    for name in names:
        keys = sorted({key for found in reports[name] for key in found})
        shown = ", ".join(f"{key} {statistics.mean(f[key] for f in reports[name] if key in f):.2f}" for key in keys)
        print(f"  {name}: {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", nargs="?", type=int, default=8, help="number of submissions (default 8)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="JOBS values for the sandboxed runs")
    parser.add_argument("--assignment", default=ASSIGNMENT, help=f"the assignment graded (default {ASSIGNMENT})")
    parser.add_argument("--sandboxed-only", action="store_true", help="leave out plain nbgrader")
    parser.add_argument("--cli", action="store_true", help="time the sandboxed runs as make grade runs them")
    parser.add_argument("--no-record", action="store_true", help="print the figures without recording them")
    parser.add_argument("--compare", metavar="COMMIT", help="make grade's phases here and at COMMIT, side by side")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side with --compare (default 3)")
    args = parser.parse_args()
    if args.n < 1 or min(args.jobs) < 1 or args.rounds < 1:
        parser.error("n, --rounds and every --jobs value must be at least 1")
    if args.compare:
        compare(args.compare, args.n, args.jobs[0], args.assignment, args.rounds)
        return
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
