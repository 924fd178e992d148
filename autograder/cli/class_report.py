"""``make class-report`` and ``make term-report``: what the class got wrong, written again from what grading saved.

    make class-report ASSIGNMENT=ch03_multi_head   # grades/ch03_multi_head-report.html, -anonymous.html, .json, CSVs
    make term-report                               # grades/term-report.html, -anonymous.html, .json

``make grade`` and ``make grades`` write the class report themselves; this writes it again without grading
anything (after the instructor grades written answers in formgrader, say), from ``grades/<assignment>.csv``, the
gradebook and the grader's reports (:mod:`autograder.grading.class_report`). The term report gathers the class
reports of every assignment graded. The instructor's copy names the students; the ``-anonymous`` copy names none,
to show the class. Exits 2 where the class was never graded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignment", nargs="?", help="the assignment, e.g. ch03_multi_head (omit with --term)")
    parser.add_argument("--term", action="store_true", help="the term's report, over every assignment graded")
    parser.add_argument("--root", type=Path, default=COURSE_ROOT, help="the course folder (default: this repository)")
    args = parser.parse_args(argv)
    from autograder.grading import class_pages, class_report

    folder = args.root / "grades"
    if args.term:
        if args.assignment:
            parser.error("--term takes no assignment: it reads every one graded")
        report = class_report.term(args.root)
        written = class_pages.write_term(report, folder)
        print(f"{len(report.assignments)} assignment(s) graded, {len(report.students)} student(s)")
    else:
        if not args.assignment:
            parser.error("the assignment is missing: make class-report ASSIGNMENT=ch03_multi_head")
        if args.assignment not in course.assignments(args.root):
            parser.error(f"no assignment {args.assignment!r} under {args.root / 'solutions'}")
        if not (folder / f"{args.assignment}.csv").is_file():
            print(
                f"error: no {folder / (args.assignment + '.csv')}: grade the class first "
                f"(make grade ASSIGNMENT={args.assignment})",
                file=sys.stderr,
            )
            return 2
        report = class_report.build(args.assignment, args.root)
        written = class_pages.write_class(report, folder)
        most = report.most_lost(3)
        print(f"{args.assignment}: {len(report.scores)} graded, mean {report.mean or 0:.2f} / {report.max_score:g}")
        for item in most:
            top = f": most often {item.causes[0].words} ({item.causes[0].count})" if item.causes else ""
            print(f"  most lost: {item.grade_id}, {len(item.partial) + len(item.zero)} of {item.graded}{top}")
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
