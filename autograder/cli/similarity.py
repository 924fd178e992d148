"""Similar submissions of one assignment, found with copydetect (``make similarity ASSIGNMENT=...``).

    python -m autograder.cli.similarity ch03_multi_head [--root COURSE] [--threshold 0.8] [--display 0.65]

What is compared, how, and the thresholds measured on this course's items: :mod:`autograder.similarity.report`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course
from autograder.similarity.report import DISPLAY_THRESHOLD, THRESHOLD, SimilarityError, similarity, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("assignment", help="the assignment's folder name, e.g. ch03_multi_head")
    parser.add_argument("--root", type=Path, default=COURSE_ROOT, help="the course folder (default: this repository)")
    parser.add_argument(
        "--threshold",
        type=float,
        default=THRESHOLD,
        help=f"flag a pair when one side's share reaches this (default {THRESHOLD})",
    )
    parser.add_argument(
        "--display",
        type=float,
        default=DISPLAY_THRESHOLD,
        help=f"list a pair when one side's share is above this (default {DISPLAY_THRESHOLD})",
    )
    args = parser.parse_args(argv)
    for name in ("threshold", "display"):
        if not 0 <= getattr(args, name) <= 1:
            parser.error(f"--{name} must be between 0 and 1, got {getattr(args, name)}")
    if args.assignment not in course.assignments(args.root):
        parser.error(f"no assignment {args.assignment!r} under {args.root / 'solutions'}")
    try:
        report = similarity(args.assignment, args.root, threshold=args.threshold, display=args.display)
    except SimilarityError as error:
        print(f"similarity: {error}", file=sys.stderr)
        return 1
    print(summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
