"""Seconds per notebook: plain nbgrader against the course's ``make grade``, first and again, in one run.

    python -m benchmarks.grading             # 16 correct notebooks of ch03 and of ch11, JOBS 2 (make bench-grading)
    python -m benchmarks.grading 3 --assignments ch03_multi_head     # a quick run: 3 notebooks, chapter 3 only
    python -m benchmarks.grading 16 --assignments ch03_multi_head --compare 7766174

For each class (``--assignments``, N correct notebooks each) ``make grade``'s command (``python -m
autograder.cli.grade``, its start-up included) grades three times, as an instructor meets it: the first grade,
again with nothing changed (every saved report serves: :mod:`autograder.grading.saved`), and again with one
notebook changed (that one runs); plain nbgrader, which executes each notebook in a Jupyter kernel with the
tests beside the student's code, grades the first class once, end to end as well (gradebook, autograde,
feedback, CSV). Every submission must get full marks, or the figures are not printed. Each first grade's six
phases are timed from when each phase's line comes, and the grading reports' own phases per notebook (reading,
sandbox start-up, the student's cells, the test cells, ...) are averaged: where a notebook's time goes. The
figures are recorded with the load average while they were measured. With ``--compare COMMIT`` it runs that
command of this checkout and of COMMIT's code (a git worktree, in the same environment) side by side, in turns,
``--rounds`` times each, and prints the median seconds of every phase of both; nothing is recorded.
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
        wrong = below_full_marks(course, assignment, [row["student"] for row in rows])
        results = rows
    else:
        results = grade.grade(assignment, root=course, quiet=True, jobs=jobs, sandbox=not plain)
        seconds = time.perf_counter() - started
        wrong = below_full_marks(course, assignment, [r.student for r in results])
    if len(results) != n or wrong:
        raise SystemExit(f"{'plain' if plain else 'sandboxed'}: not every submission got full marks: {wrong}")
    return seconds


def below_full_marks(course: Path, assignment: str, students: list[str]) -> list[str]:
    """The students whose score, from the gradebook, is below full marks, the written answers that await the
    instructor (every correct notebook's, written in) left out."""
    from autograder.grading.gradesheet import collect

    return [r.student for r in collect(assignment, students, course) if r.score != r.max_score - r.awaiting_points]


PHASE = re.compile(r"^\[(\d)/6\]")


def cpu_ticks() -> tuple[int, int]:
    """The machine's CPU time so far, in clock ticks of all its cores: (all, idle), from /proc/stat."""
    with open("/proc/stat") as f:
        ticks = [int(t) for t in f.readline().split()[1:]]
    return sum(ticks), ticks[3] + ticks[4]  # idle and waiting for I/O


def busy(start: tuple[int, int], end: tuple[int, int]) -> float:
    """The share of the machine's cores busy between two :func:`cpu_ticks` (0 to 1)."""
    total, idle = end[0] - start[0], end[1] - start[1]
    return 1 - idle / total if total > 0 else 0.0


def cli_phases(
    course: Path, assignment: str, jobs: int, code: Path, isolated: Path | None = None, cores: dict | None = None
) -> dict[str, float]:
    """Seconds of each phase of ``make grade``'s command run on ``code``'s packages (a checkout, from which it
    runs: ``python -m`` puts the working folder first on the search path) for the class in ``course``, timed by
    when each phase's line comes on its standard error; ``whole``: the command. ``isolated``: a folder of a
    sitecustomize module put on the search path after ``code``. ``cores``, if given, gets the share of the
    machine's cores busy in each phase and in the whole (from /proc/stat: every process's, the grader's and its
    sandboxes' above all): whether a phase waits on something or on the CPU."""
    command = [sys.executable, "-m", "autograder.cli.grade", assignment, "--root", str(course), "--jobs", str(jobs)]
    path = os.pathsep.join(str(folder) for folder in (code, isolated) if folder)
    env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
    started, first = time.perf_counter(), cpu_ticks()
    marks: list[tuple[str, float, tuple[int, int]]] = []
    with subprocess.Popen(
        command, cwd=code, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    ) as run:
        for line in run.stderr:
            found = PHASE.match(line)
            if found:
                marks.append((f"[{found.group(1)}/6]", time.perf_counter(), cpu_ticks()))
    ended, last = time.perf_counter(), cpu_ticks()
    if run.returncode != 0:
        raise SystemExit(f"make grade's command failed on {code} (exit {run.returncode})")
    with (course / "grades" / f"{assignment}.csv").open() as f:
        wrong = below_full_marks(course, assignment, [row["student"] for row in csv.DictReader(f)])
    if wrong:
        raise SystemExit(f"{code}: not every submission got full marks: {wrong}")
    ends = [(at, ticks) for _, at, ticks in marks[1:]] + [(ended, last)]
    phases = {name: at_end - at for (name, at, _), (at_end, _) in zip(marks, ends)}
    phases["whole"] = ended - started
    if cores is not None:
        cores.update({name: busy(ticks, ticks_end) for (name, _, ticks), (_, ticks_end) in zip(marks, ends)})
        cores["whole"] = busy(first, last)
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


ASSIGNMENTS = ["ch03_multi_head", "ch11_flash_attention"]
RUNS = ("first grade", "again, nothing changed", "again, one notebook changed")


def change_one(course: Path, assignment: str) -> None:
    """The first student's notebook changed as a student might change it, and still right: a code cell added."""
    import nbformat

    path = course / "submitted" / "student000" / assignment / f"{assignment}.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("checked_again = True  # one more cell, written after submitting"))
    nbformat.write(nb, str(path))


def grade_again_and_again(n: int, assignment: str, jobs: int, folder: Path) -> tuple[list[tuple], dict, dict]:
    """``make grade``'s command on a class of ``n`` correct notebooks three times: the first grade, again with
    nothing changed, again with one notebook changed. The rows (name, seconds); each run's six phases (seconds,
    from when each phase's line comes); the first grade's reports' phases (mean seconds per notebook); and the
    share of the machine's cores busy in each phase of the first grade."""
    course = make_course(folder)
    notebook = fill(assignment)
    for i in range(n):
        submit(course, f"student{i:03d}", assignment, notebook)
    rows, phases, reports, cores = [], {}, {}, {}
    for kind in RUNS:
        if kind == RUNS[2]:
            change_one(course, assignment)
        phases[kind] = cli_phases(course, assignment, jobs, figures.ROOT, cores=cores if kind == RUNS[0] else None)
        if kind == RUNS[0]:
            reports = report_phases(course, assignment)
        rows.append((f"{assignment}: make grade JOBS={jobs}, {kind}", phases[kind]["whole"]))
    return rows, phases, reports, cores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", nargs="?", type=int, default=16, help="notebooks in each class (default 16)")
    parser.add_argument("--jobs", type=int, default=2, help="make grade's JOBS (default 2)")
    parser.add_argument(
        "--assignments",
        nargs="+",
        default=ASSIGNMENTS,
        help=f"the classes graded by make grade (default {' '.join(ASSIGNMENTS)}); plain nbgrader grades the first",
    )
    parser.add_argument("--no-plain", action="store_true", help="leave out plain nbgrader")
    parser.add_argument("--no-record", action="store_true", help="print the figures without recording them")
    parser.add_argument("--compare", metavar="COMMIT", help="make grade's phases here and at COMMIT, side by side")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side with --compare (default 3)")
    args = parser.parse_args()
    if args.n < 1 or args.jobs < 1 or args.rounds < 1:
        parser.error(f"n, --jobs and --rounds must be at least 1, got {args.n}, {args.jobs}, {args.rounds}")
    unknown = [a for a in args.assignments if a not in _all_assignments()]
    if unknown:
        parser.error(f"--assignments: no assignment {', '.join(unknown)} in solutions/")
    if args.compare:
        compare(args.compare, args.n, args.jobs, args.assignments[0], args.rounds)
        return
    from benchmarks.suite import LoadAverage

    print(
        f"{args.n} correct submissions of each of {', '.join(args.assignments)}; {os.cpu_count()} CPU cores, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
        flush=True,
    )
    rows, profile = [], {}
    with tempfile.TemporaryDirectory() as tmp, LoadAverage(every=5.0) as load:
        if not args.no_plain:
            plain = run(args.n, plain=True, jobs=1, folder=Path(tmp) / "plain", assignment=args.assignments[0])
            rows.append((f"{args.assignments[0]}: plain nbgrader (kernel)", plain))
        for assignment in args.assignments:
            found, phases, reports, cores = grade_again_and_again(args.n, assignment, args.jobs, Path(tmp) / assignment)
            rows += found
            profile[assignment] = {
                "make_grade": {k: round(v, 2) for k, v in phases[RUNS[0]].items()},
                "cores_busy": {k: round(v, 3) for k, v in cores.items()},
                "core_seconds": round(cores["whole"] * phases[RUNS[0]]["whole"] * (os.cpu_count() or 1), 1),
                "make_grade_again": {k: round(v, 2) for k, v in phases[RUNS[1]].items()},
                "per_notebook": {k: round(v, 3) for k, v in reports.items()},
            }
    base = None if args.no_plain else rows[0][1] / args.n
    print(f"{'pipeline':<62} {'total s':>8} {'s/notebook':>11} {'vs plain':>9}")
    recorded = []
    for name, seconds in rows:
        per = seconds / args.n
        versus = "" if base is None else f"{base / per:.2f}x"
        print(f"{name:<62} {seconds:>8.1f} {per:>11.2f} {versus:>9}")
        recorded.append(
            {"pipeline": name, "seconds": round(seconds, 1), "per_notebook": round(per, 2), "vs_plain": versus}
        )
    for assignment, found in profile.items():
        print(f"\n{assignment}, the first grade: make grade's phases (seconds, the whole class)")
        print("  " + ", ".join(f"{k} {v:.1f}" for k, v in found["make_grade"].items()))
        print(
            f"  the machine's {os.cpu_count()} cores busy (%): "
            + ", ".join(f"{k} {100 * v:.0f}" for k, v in found["cores_busy"].items())
            + f"; {found['core_seconds']:.1f} core-seconds in all, {found['core_seconds'] / args.n:.2f} a notebook"
        )
        print("  again, nothing changed: " + ", ".join(f"{k} {v:.1f}" for k, v in found["make_grade_again"].items()))
        print("  each notebook's grading, by phase (mean seconds): ")
        print("  " + ", ".join(f"{k} {v:.2f}" for k, v in found["per_notebook"].items()))
    print(f"\nload average while measuring: {load.mean:.1f} ({load.peak:.1f} at most)")
    if not args.no_record:
        command = " ".join(["python -m benchmarks.grading", *sys.argv[1:]])
        figure = {
            "n": args.n,
            "assignments": args.assignments,
            "jobs": args.jobs,
            "rows": recorded,
            "profile": profile,
            "load_mean": round(load.mean, 2),
            "load_peak": round(load.peak, 2),
        }
        figures.record("grading", command, figure)


def _all_assignments() -> list[str]:
    from autograder.release import course

    return list(course.assignments())


if __name__ == "__main__":
    main()
