"""How right the grader is: correct answers at full marks, wrong answers caught in their own item.

    make grading-accuracy                  # every assignment
    make grading-accuracy ARGS="ch03_multi_head --jobs 2"

Grades, in the sandbox and as in a term (this assignment's solutions not released, the earlier
ones released), every wrong answer of ``tests/buggy/<assignment>.py`` (one notebook each) and every
correct answer of ``tests/correct/<assignment>.py`` (the k-th answer of each item in notebook k),
and prints per assignment:

- correct answers at full marks, out of all;
- wrong answers that lose points in their own item, out of all;
- wrong answers whose hint names their cause;
- the wrong answers that also cost points in another item (a cascade), with those items;
- each answer that falls short: a correct one that lost points, a wrong one that kept them, and a wrong
  one whose hints do not name its cause (with the hints it got).

``make test`` asserts all of this (tests/test_catalogue.py); this script prints it as figures.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from autograder import course
from autograder.classroom import fill
from autograder.grading.notebook import Report, grade_notebook
from tests.correct import notebooks as correct_notebooks


def _term_for(assignment: str) -> course.Release:
    names = course.assignments()
    return course.Release("term", set(names[: names.index(assignment)]))


def graded(assignment: str, jobs: int) -> list[tuple[str, object, Report]]:
    """``("bug", Bug, report)`` for every wrong answer and ``("correct", {item: Answer}, report)`` for every
    notebook of correct answers of ``assignment``, each graded on its own in the sandbox as in a term
    (:func:`grade_notebook`, which `make grade` runs for every submission), ``jobs`` at a time."""
    bugs = importlib.import_module(f"tests.buggy.{assignment}")
    correct = correct_notebooks(importlib.import_module(f"tests.correct.{assignment}").ANSWERS)
    release = _term_for(assignment)
    work = [("bug", bug, fill(assignment, {bug.item: bug.code})) for bug in bugs.BUGS]
    work += [
        ("correct", answers, fill(assignment, {item: a.code for item, a in answers.items()})) for answers in correct
    ]

    def grade(job):
        kind, what, nb = job
        return kind, what, grade_notebook(assignment, nb, release=release)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(grade, work))


def measure(assignment: str, jobs: int) -> dict:
    bugs = importlib.import_module(f"tests.buggy.{assignment}")
    figures = {"correct": 0, "correct_total": 0, "caught": 0, "named": 0, "bugs": 0, "cascades": [], "missed": []}
    for kind, what, report in graded(assignment, jobs):
        failed = {gid: test for gid, test in report.tests.items() if not test.passed}
        if kind == "correct":
            figures["correct_total"] += len(what)
            wrongly = [item for item in what if set(failed) & set(bugs.TESTS[item])]
            figures["correct"] += len(what) - len(wrongly)
            figures["missed"] += [f"correct answer {what[item].name} ({item}) lost points" for item in wrongly]
            continue
        figures["bugs"] += 1
        own = set(bugs.TESTS[what.item])
        if set(failed) & own:
            figures["caught"] += 1
        else:
            figures["missed"].append(f"wrong answer {what.name} ({what.item}) kept its points")
        if any(what.cause.lower() in test.message.lower() for gid, test in failed.items() if gid in own):
            figures["named"] += 1
        elif set(failed) & own:
            hints = sorted({test.message.rpartition("hint: ")[2][:160] for gid, test in failed.items() if gid in own})
            figures["missed"].append(f"wrong answer {what.name} ({what.item}): no hint names {what.cause!r}: {hints}")
        elsewhere = sorted(set(failed) - own)
        if elsewhere:
            figures["cascades"].append(f"{what.name} ({what.item}) -> {', '.join(elsewhere)}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="assignments (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks graded at once")
    args = parser.parse_args(argv)
    names = args.assignments or course.assignments()
    unknown = sorted(set(names) - set(course.assignments()))
    if unknown:
        parser.error(f"no such assignment: {', '.join(unknown)}")
    started = time.monotonic()
    print(f"{'assignment':<26} {'correct at full marks':>22} {'wrong caught':>13} {'cause named':>12}  cascades")
    for name in names:
        f = measure(name, args.jobs)
        print(
            f"{name:<26} {f['correct']:>11} of {f['correct_total']:<8} {f['caught']:>5} of {f['bugs']:<5} "
            f"{f['named']:>4} of {f['bugs']:<5}  {len(f['cascades'])}"
        )
        for line in f["cascades"]:
            print(f"    cascade: {line}")
        for line in f["missed"]:
            print(f"    {line}")
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
