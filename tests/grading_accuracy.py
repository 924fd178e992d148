"""How right the grader is: correct answers at full marks, wrong answers caught in their own item.

    make grading-accuracy                  # every assignment
    make grading-accuracy ARGS="ch03_multi_head --jobs 2"
    make grading-accuracy ARGS="--whole"   # every notebook graded whole, each in a sandbox of its own
    make grading-accuracy ARGS="ch06_transformer --timings"   # and where its grading spends its time

Grades, in the sandbox and as in a term (this assignment's solutions not released, the earlier
ones released), every wrong answer of ``tests/buggy/<assignment>.py`` (one notebook each) and every
correct answer of ``tests/correct/<assignment>.py`` (the k-th answer of each item in notebook k),
and prints per assignment:

- correct answers at full marks, out of all;
- wrong answers that lose points in their own item, out of all;
- wrong answers whose hint names their cause;
- the wrong answers that also cost points in another item (a cascade), with those items (looked for in the
  notebooks graded whole: the first wrong answer of each item, or every one with ``--whole``);
- each answer that falls short: a correct one that lost points, a wrong one that kept them, and a wrong
  one whose hints do not name its cause (with the hints it got);
- with ``--timings``, where the assignment's catalogue spends its time: the seconds of each test cell added up
  over every notebook that ran it (a test cell's own seconds, its diagnosis included), and of each phase.

``make test`` asserts all of this (tests/test_catalogue.py); this script prints it as figures.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from autograder.grading.classroom import fill
from autograder.grading.notebook import Report, grade_notebook
from autograder.release import course
from autograder.sandbox.pool import WarmPool
from tests.correct import notebooks as correct_notebooks


def _term_for(assignment: str) -> course.Release:
    names = course.assignments()
    return course.Release("term", set(names[: names.index(assignment)]))


def graded(assignment: str, jobs: int, whole: bool = False, store=None) -> list[tuple[str, object, Report]]:
    """``("bug", Bug, report)`` for every wrong answer and ``("correct", {item: Answer}, report)`` for every
    notebook of correct answers of ``assignment``, each graded on its own in the sandbox as in a term
    (:func:`grade_notebook`, which `make grade` runs for every submission), ``jobs`` at a time.

    By default each notebook runs in a worker forked from a warm sandbox (:class:`WarmPool`: these are the
    course's own notebooks), and a wrong answer is graded on its own item's test cells only (``only``),
    but for the first wrong answer of each item, graded whole, as every notebook of correct answers is:
    each item is graded on its own code (the grader's stand-ins take the place of the items it uses), and
    ``tests/test_catalogue.py`` proves statically that a wrong answer changes nothing but its own item's code.
    ``whole``: every notebook graded whole, each in a sandbox of its own, as `make grade` grades a
    submission (`make test-exhaustive`). ``store``: the test run's ``Grader``, which holds its reports
    (tests/support/reports.py), where a notebook graded already is read instead."""
    bugs = importlib.import_module(f"tests.buggy.{assignment}")
    correct = correct_notebooks(importlib.import_module(f"tests.correct.{assignment}").ANSWERS)
    release = _term_for(assignment)
    firsts = {bug.item: bug for bug in reversed(bugs.BUGS)}
    work = [
        ("bug", bug, fill(assignment, {bug.item: bug.code}), None if whole or firsts[bug.item] is bug else {bug.item})
        for bug in bugs.BUGS
    ]
    work += [
        ("correct", answers, fill(assignment, {item: a.code for item, a in answers.items()}), None)
        for answers in correct
    ]
    with contextlib.ExitStack() as stack:
        warm = None if whole else stack.enter_context(WarmPool(jobs, release=release))

        def grade(job):
            kind, what, nb, only = job
            return kind, what, grade_notebook(assignment, nb, release=release, only=only, pool=warm, grader=store)

        with ThreadPoolExecutor(max_workers=jobs) as threads:
            return list(threads.map(grade, work))


def measure(assignment: str, jobs: int, whole: bool = False) -> dict:
    bugs = importlib.import_module(f"tests.buggy.{assignment}")
    figures = {"correct": 0, "correct_total": 0, "caught": 0, "named": 0, "bugs": 0, "cascades": [], "missed": []}
    figures |= {"cells": {}, "phases": {}}  # grade_id -> [seconds, gradings]; phase -> seconds
    for kind, what, report in graded(assignment, jobs, whole):
        for gid, test in report.tests.items():
            spent = figures["cells"].setdefault(gid, [0.0, 0])
            spent[0], spent[1] = spent[0] + test.seconds, spent[1] + 1
        for name, seconds in report.phases.items():
            figures["phases"][name] = figures["phases"].get(name, 0.0) + seconds
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


def print_timings(figures: dict) -> None:
    """Each test cell's seconds over the catalogue, the costliest first, then each phase's (all notebooks' own
    seconds added up: with ``--jobs 2``, about twice the wall-clock time)."""
    for gid, (seconds, gradings) in sorted(figures["cells"].items(), key=lambda kv: -kv[1][0]):
        print(f"    {gid:<40} {seconds:8.1f} s in {gradings:>3} gradings ({seconds / gradings:.2f} s each)")
    phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in sorted(figures["phases"].items()))
    print(f"    phases: {phases}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="assignments (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks graded at once")
    parser.add_argument("--whole", action="store_true", help="every notebook graded whole, in a sandbox of its own")
    parser.add_argument("--timings", action="store_true", help="also the seconds of each test cell and phase")
    args = parser.parse_args(argv)
    names = args.assignments or course.assignments()
    unknown = sorted(set(names) - set(course.assignments()))
    if unknown:
        parser.error(f"no such assignment: {', '.join(unknown)}")
    started = time.monotonic()
    print(f"{'assignment':<26} {'correct at full marks':>22} {'wrong caught':>13} {'cause named':>12}  cascades")
    for name in names:
        f = measure(name, args.jobs, args.whole)
        print(
            f"{name:<26} {f['correct']:>11} of {f['correct_total']:<8} {f['caught']:>5} of {f['bugs']:<5} "
            f"{f['named']:>4} of {f['bugs']:<5}  {len(f['cascades'])}"
        )
        for line in f["cascades"]:
            print(f"    cascade: {line}")
        for line in f["missed"]:
            print(f"    {line}")
        if args.timings:
            print_timings(f)
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
