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


def graded(n: int, assignment: str, folder: Path, cluster: LocalCluster | None) -> float:
    """Seconds that make grade's command takes over a fresh class of ``n`` correct notebooks, here or on ``cluster``."""
    course = make_course(folder)
    notebook = fill(assignment)
    for i in range(n):
        submit(course, f"student{i:03d}", assignment, notebook)
    command = [sys.executable, "-m", "autograder.cli.grade", assignment, "--root", str(course), "--jobs", "2"]
    if cluster is not None:
        command += ["--cluster", cluster.address, "--certs", str(cluster.certs)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"make grade failed ({done.returncode}):\n{done.stderr[-3000:]}")
    with (course / "grades" / f"{assignment}.csv").open() as f:
        students = [row["student"] for row in csv.DictReader(f)]
    wrong = below_full_marks(course, assignment, students)
    if len(students) != n or wrong:
        raise SystemExit(f"{assignment}: {len(students)} of {n} graded; below full marks: {wrong}")
    return seconds


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
                times: dict[str, list[float]] = {"here": [], "cluster": []}
                for k in range(args.rounds):
                    for side in ("here", "cluster"):
                        folder = Path(tmp) / f"{assignment}-{side}-{k}"
                        times[side].append(graded(args.n, assignment, folder, cluster if side == "cluster" else None))
                        print(f"  {assignment}, {side}, round {k + 1}: {times[side][-1]:.1f} s", flush=True)
                here, there = statistics.median(times["here"]), statistics.median(times["cluster"])
                rows.append({"assignment": assignment, "here": round(here, 1), "cluster": round(there, 1),
                             "here_per_notebook": round(here / args.n, 2),
                             "cluster_per_notebook": round(there / args.n, 2),
                             "overhead_per_task": round((there - here) / args.n, 3),
                             "overhead": round(there / here - 1, 3)})  # fmt: skip
    print(f"\n{'class':<24} {'here s':>8} {'cluster s':>10} {'s/nb here':>10} {'s/nb cluster':>13} {'per task':>9}")
    for row in rows:
        print(
            f"{row['assignment']:<24} {row['here']:>8.1f} {row['cluster']:>10.1f} {row['here_per_notebook']:>10.2f} "
            f"{row['cluster_per_notebook']:>13.2f} {row['overhead_per_task']:>+8.3f}s ({100 * row['overhead']:+.1f}%)"
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
