"""Seconds per notebook: ``make grade`` here against ``make grade CLUSTER=...`` with two workers on this machine.

    python -m benchmarks.grading_cluster    # 16 correct notebooks of ch03 and ch11 (make bench-grading-cluster)
    python -m benchmarks.grading_cluster 4 --assignments ch03_multi_head --rounds 1   # a quick run

The same class is graded by ``make grade``'s command (``python -m autograder.cli.grade``, its start-up included)
with ``--jobs 2`` on this machine, and with ``--cluster`` on a scheduler and two grading workers of one notebook
each on 127.0.0.1 (:class:`autograder.cluster.local.LocalCluster`, started once before any timing: a term starts
its workers once), in turns, ``--rounds`` times each, each time in a fresh course folder (every notebook graded).
Both grade two notebooks at once on the same cores, so what the cluster adds is its own: the overhead per task is
the difference of the medians, over the notebooks. Every submission must get full marks, or nothing is printed.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.cluster import certificates
from autograder.cluster.local import LocalCluster
from autograder.grading.classroom import fill, make_course, submit
from benchmarks import figures
from benchmarks.grading import below_full_marks

ASSIGNMENTS = ["ch03_multi_head", "ch11_flash_attention"]


def graded(n: int, assignment: str, folder: Path, cluster: LocalCluster | None) -> tuple[float, float]:
    """Seconds that make grade's command takes over a fresh class of ``n`` correct notebooks, here or on
    ``cluster``: the whole command, and its phase 3 (from its line "[3/6]" to "[4/6]"), where the notebooks are
    graded."""
    course = make_course(folder)
    notebook = fill(assignment)
    for i in range(n):
        submit(course, f"student{i:03d}", assignment, notebook)
    command = [sys.executable, "-m", "autograder.cli.grade", assignment, "--root", str(course), "--jobs", "2"]
    if cluster is not None:
        command += ["--cluster", cluster.address, "--certs", str(cluster.certs)]
    marks = {}
    started = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env) as run:
        for line in run.stderr:
            for phase in ("[3/6]", "[4/6]"):
                if line.startswith(phase):
                    marks[phase] = time.perf_counter()
    seconds = time.perf_counter() - started
    if run.returncode or len(marks) != 2:
        raise SystemExit(f"make grade failed on {assignment} ({run.returncode})")
    with (course / "grades" / f"{assignment}.csv").open() as f:
        students = [row["student"] for row in csv.DictReader(f)]
    wrong = below_full_marks(course, assignment, students)
    if len(students) != n or wrong:
        raise SystemExit(f"{assignment}: {len(students)} of {n} graded; below full marks: {wrong}")
    return seconds, marks["[4/6]"] - marks["[3/6]"]


def _row(assignment: str, n: int, times: dict[str, list[tuple[float, float]]]) -> dict:
    """The medians of each side: seconds a notebook (the whole command), phase 3's seconds, and what the cluster
    adds to each notebook's grading in phase 3 (its share of phase 3 here)."""
    here, there = (statistics.median(whole for whole, _ in times[side]) for side in ("here", "cluster"))
    here3, there3 = (statistics.median(phase3 for _, phase3 in times[side]) for side in ("here", "cluster"))
    return {
        "assignment": assignment,
        "here_per_notebook": round(here / n, 2),
        "cluster_per_notebook": round(there / n, 2),
        "phase3_here": round(here3, 1),
        "phase3_cluster": round(there3, 1),
        "overhead_per_task": round((there3 - here3) / n, 3),
        "overhead": round(there3 / here3 - 1, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", nargs="?", type=int, default=16, help="notebooks in each class (default 16)")
    parser.add_argument("--assignments", nargs="+", default=ASSIGNMENTS, help=f"default {' '.join(ASSIGNMENTS)}")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side, in turns (default 2)")
    parser.add_argument("--no-record", action="store_true", help="print the figures without recording them")
    args = parser.parse_args()
    if args.n < 1 or args.rounds < 1:
        parser.error(f"n and --rounds must be at least 1, got {args.n}, {args.rounds}")
    from benchmarks.suite import LoadAverage

    print(f"{args.n} correct submissions of each of {', '.join(args.assignments)}; {os.cpu_count()} CPU cores, "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}", flush=True)  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp, LoadAverage(every=5.0) as load:
        certs = certificates.make(Path(tmp) / "certs")[0].parent
        with LocalCluster(Path(tmp), certs) as cluster:
            started = time.perf_counter()
            cluster.workers("first", "second")
            joined = time.perf_counter() - started
            for assignment in args.assignments:
                times: dict[str, list[tuple[float, float]]] = {"here": [], "cluster": []}
                for k in range(args.rounds):
                    for side in ("here", "cluster"):
                        folder = Path(tmp) / f"{assignment}-{side}-{k}"
                        times[side].append(graded(args.n, assignment, folder, cluster if side == "cluster" else None))
                        whole, phase3 = times[side][-1]
                        print(
                            f"  {assignment}, {side}, round {k + 1}: {whole:.1f} s, phase 3 {phase3:.1f} s", flush=True
                        )
                rows.append(_row(assignment, args.n, times))
    print(f"\n{'class':<24} {'s/nb here':>10} {'s/nb cluster':>13} {'phase 3 here':>13} {'phase 3 cluster':>16} "
          f"{'per task':>9}")  # fmt: skip
    for row in rows:
        print(
            f"{row['assignment']:<24} {row['here_per_notebook']:>10.2f} {row['cluster_per_notebook']:>13.2f} "
            f"{row['phase3_here']:>13.1f} {row['phase3_cluster']:>16.1f} "
            f"{row['overhead_per_task']:>+8.3f}s ({100 * row['overhead']:+.1f}% of phase 3)"
        )
    print(f"two workers joined in {joined:.1f} s (once per term)")
    print(f"load average while measuring: {load.mean:.1f} ({load.peak:.1f} at most)")
    if not args.no_record:
        command = " ".join(["python -m benchmarks.grading_cluster", *sys.argv[1:]])
        figures.record("grading-cluster", command, {"n": args.n, "rounds": args.rounds, "rows": rows,
                       "workers_joined_seconds": round(joined, 1), "load_mean": round(load.mean, 2),
                       "load_peak": round(load.peak, 2)})  # fmt: skip


if __name__ == "__main__":
    main()
