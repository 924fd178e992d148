"""The cluster that grades a class on several machines: its certificates, its scheduler and its grading workers.

    python -m autograder.cli.cluster certs                       # make cluster-certs
    python -m autograder.cli.cluster scheduler --port 8786       # make grade-scheduler
    python -m autograder.cli.cluster worker tls://host:8786 -j 8 # make grade-worker SCHEDULER=... JOBS=8

Then ``make grade ASSIGNMENT=... CLUSTER=tls://host:8786`` grades phase 3 on the workers
(:mod:`autograder.cluster`). Every member speaks TLS with the certificates in ``--certs`` (default
``grades/.cluster``; :mod:`autograder.cluster.certificates`). A grading host is trusted: it holds the hidden
tests. Its worker first checks that its sandbox works (the preflight), and does not join where it does not.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.cluster import certificates
from autograder.cluster.worker import RESOURCE, GradingHost

ALLOWED_FAILURES = 2  # workers a notebook may stop before it is "not graded": tried on three
# Dask's HTTP servers (its dashboard, metrics, and a proxy to the workers') serve nothing, on this host only: the
# members speak to each other over TLS alone
NO_HTTP = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
LOCAL_ONLY = "127.0.0.1:0"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--certs", type=Path, default=COURSE_ROOT / certificates.FOLDER,
        help="the folder of the cluster's certificates (default: grades/.cluster of this repository)",
    )  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True)
    certs = commands.add_parser("certs", help="make the course's authority and a member's certificate")
    certs.add_argument("--days", type=int, default=365, help="how long they hold (default: 365 days)")
    certs.add_argument("--force", action="store_true", help="replace the certificates there")
    scheduler = commands.add_parser("scheduler", help="run the scheduler, which hands the workers the notebooks")
    scheduler.add_argument("--host", default="0.0.0.0", help="the address to listen on (default: every interface)")
    scheduler.add_argument("--port", type=int, default=8786, help="the port (default: 8786; 0: any free one)")
    scheduler.add_argument("--scheduler-file", type=Path, help="write the scheduler's address there (JSON)")
    scheduler.add_argument(
        "--allowed-failures", type=int, default=ALLOWED_FAILURES,
        help=f"workers a notebook may stop before it is not graded (default: {ALLOWED_FAILURES})",
    )  # fmt: skip
    worker = commands.add_parser("worker", help="grade notebooks on this host (root, the same commit, make venv)")
    worker.add_argument("scheduler", help="the scheduler's address, tls://host:port")
    worker.add_argument("--jobs", "-j", type=int, default=1, help="notebooks graded at once on this host")
    worker.add_argument("--name", default=socket.gethostname(), help="the worker's name (default: the host's)")
    worker.add_argument("--host", default=None, help="the address the worker listens on (default: Dask's choice)")
    worker.add_argument("--preload", action="append", default=[], help="a module Dask runs in the worker at start")
    args = parser.parse_args(argv)
    if args.command == "certs":
        try:
            written = certificates.make(args.certs, args.days, args.force)
        except (FileExistsError, ValueError) as error:
            parser.error(str(error))
        print("\n".join(f"wrote {path}" for path in written))
        print(f"Copy {args.certs} without {certificates.AUTHORITY_KEY} to each grading host.")
        return 0
    try:
        security = certificates.security(args.certs)
    except certificates.CertificatesMissing as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.command == "scheduler":
        return asyncio.run(_scheduler(args, security))
    if not args.scheduler.startswith("tls://"):
        parser.error(f"SCHEDULER must start with tls:// (the cluster speaks TLS only), got {args.scheduler!r}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    problem = _preflight()
    if problem:
        print(f"error: this host cannot grade, and joins no cluster: {problem}", file=sys.stderr)
        return 2
    return asyncio.run(_worker(args, security))


def _preflight() -> str | None:
    """Whether this host's sandbox works, as make grade's phase 2 asks (None where it does)."""
    from autograder.grading.grader import Grader
    from autograder.grading.notebook import preflight
    from autograder.release import course

    grader = Grader(spawn=True)
    try:
        with grader:
            return preflight(course.release(COURSE_ROOT), grader=grader)
    finally:
        grader.close()


async def _scheduler(args, security) -> int:
    import dask
    from distributed import Scheduler

    with dask.config.set({"distributed.scheduler.allowed-failures": args.allowed_failures, **NO_HTTP}):
        async with Scheduler(
            host=args.host, port=args.port, protocol="tls", security=security, dashboard=False,
            dashboard_address=LOCAL_ONLY,
            scheduler_file=str(args.scheduler_file) if args.scheduler_file else None,
        ) as scheduler:  # fmt: skip
            print(f"scheduler at {scheduler.address}", flush=True)
            await scheduler.finished()
    return 0


async def _worker(args, security) -> int:
    import dask
    from distributed import Nanny

    # Dask's memory watchdog off: the sandbox's cgroups bound each notebook, and a worker paused or restarted for
    # its memory would cost the notebooks it grades
    memory = {f"distributed.worker.memory.{name}": False for name in ("target", "spill", "pause", "terminate")}
    with dask.config.set({**memory, **NO_HTTP}):
        async with Nanny(
            args.scheduler, nthreads=args.jobs, resources={RESOURCE: args.jobs}, memory_limit=0, name=args.name,
            security=security, host=args.host, plugins={GradingHost()}, preload=args.preload,
            dashboard_address=LOCAL_ONLY, config={**memory, **NO_HTTP},
        ) as nanny:  # fmt: skip
            print(f"grading worker {args.name} at {nanny.worker_address}, {args.jobs} notebook(s) at once", flush=True)
            await nanny.finished()
    return 0


if __name__ == "__main__":
    sys.exit(main())
