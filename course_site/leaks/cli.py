"""The leak check's command line (`python -m course_site.leaks DIR`): the check run, its report printed."""

from __future__ import annotations

import sys
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from course_site.leaks.release import add_release_options, release_from_options
from course_site.leaks.report import LeakReport, PublishError
from course_site.leaks.scan import scan

DESCRIPTION = (
    "The leak check: does a folder about to be published (a built site, the student export) hold\n"
    "an answer that students must not see?"
)


def summary(report: LeakReport) -> str:
    if report.has_solutions:
        secrets = (
            f"{report.secrets} secret lines of {report.notebooks} solution notebooks and "
            f"{report.regions} solution regions compared as code"
        )
    else:
        secrets = "no solutions/ to take secrets from: markers and copies only"
    edition = f"; {report.release.describe()}" if report.release is not None else ""
    known = (
        f", {report.known} of them copies of public sources or third-party assets (markers only)"
        if report.known
        else ""
    )
    return (
        f"checked {report.files} text files{known} and {report.binary} binary files under "
        f"{report.directory} in {report.seconds:.1f} s ({secrets}{edition})"
    )


def print_report(report: LeakReport) -> None:
    print(summary(report))
    if not report.has_solutions:
        print(
            "note: the repository has no solutions/ folder (a student repository?): secrets are "
            "checked where the export is made, in the instructor's repository"
        )
    if report.unchecked:
        print(
            "note: too short or too public to be told from other code, compared line by line only: "
            + ", ".join(report.unchecked)
        )
    if report.marker_exempt:
        print("markers allowed (files that explain them): " + ", ".join(report.marker_exempt))
    if report.ok:
        print("OK: no solution, hidden test or nbgrader marker")
    else:
        print(f"FAIL: {len(report.problems)} problems", file=sys.stderr)
        for problem in report.problems:
            print(f"  {problem}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """``python -m course_site.leaks DIR``: 0 when DIR holds nothing to withhold, 1 when it does,
    2 for a bad argument or release setting."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m course_site.leaks", description=DESCRIPTION)
    parser.add_argument("directory", type=Path, metavar="DIR", help="a built site (_build/html) or an export")
    parser.add_argument(
        "--root", type=Path, default=COURSE_ROOT, help="the course repository, with solutions/ (default: %(default)s)"
    )
    add_release_options(parser)
    args = parser.parse_args(argv)
    try:
        report = scan(args.directory, args.root, release_from_options(args, args.root))
    except PublishError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print_report(report)
    return 0 if report.ok else 1
