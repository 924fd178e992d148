"""Grade a whole class on one assignment (``make grade ASSIGNMENT=... JOBS=N``).

    python -m autograder.cli.grade ch02_scaled_dot_product --jobs 4

1. records the assignment's test cells in the gradebook (as ``make exercises`` does), in the
   background while phases 2 and 3 run (nothing before phase 4 reads the gradebook); not again where
   nothing it records changed since and the gradebook holds them (:mod:`autograder.grading.kept`);
2. checks that the sandbox works at all, with a program known to be right (the
   preflight): if it does not, it stops with what to fix, and no student is scored;
3. grades every ``submitted/<student>/<assignment>/`` of a student on the class list
   (``c.SafeCollect.class_list`` in ``nbgrader_config.py``; every student where it names none) in a
   sandbox, ``--jobs`` at a time, with a progress bar, leaving a report per notebook in ``grades/reports/``;
   a cell that runs past ``--cell-timeout`` seconds, or a call of a graded function past ``--call-timeout``, is
   stopped, and the notebook's grading goes on (the sandbox's other limits: :class:`~autograder.sandbox.limits.Limits`).
   A submission is refused (it scores nothing, and nbgrader is not given it) when the course's
   collect refused it, or when it holds anything but plain folders and files (a symbolic or hard
   link, a named pipe, ...) in ``submitted/`` or, where the exchange is found, in any of the
   student's submissions there, or when it holds no notebook of the assignment's name (a renamed
   one is never graded in its place: the summary says what was found and what it must be named; see
   :func:`autograder.grading.submissions.refusals`); one that the grader could not grade (its own
   failure) is marked "not graded", never scored. A notebook that answers nothing (its code as
   released) is noted "nothing answered" (:func:`autograder.grading.sandboxed.nothing_answered`).
   A notebook graded before whose inputs are unchanged (its bytes, the assignment's instructor and
   released notebooks, the grader's code, the pinned environment) is not run again: its saved report
   serves (:mod:`autograder.grading.saved`); one line per student says which was done and why, and
   ``--again`` runs every notebook;
4. ``nbgrader autograde``, which takes the scores from those reports (one process
   writes the gradebook, so it stays consistent). A notebook that nbgrader refuses all the
   same (one it cannot read, say) is reported as refused, with nbgrader's reason, and scores 0;
   one it leaves without a score and without naming an error (it stopped before it) is "not
   graded". A student whose notebooks, reports handed to nbgrader and grader are unchanged since their last
   autograde is not given to nbgrader again: their scores stand (:mod:`autograder.grading.kept`). Then
   ``term.yml``'s due date, late policy and extensions are written into the gradebook with each submission's
   collected time and late penalty (:mod:`autograder.grading.lateness`; a bad deadline stops the command before
   phase 1, its key named);
5. ``nbgrader generate_feedback`` into ``feedback/<student>/<assignment>/``, each notebook
   within ``--feedback-seconds`` (:func:`autograder.grading.feedback.write_feedback`): one that
   takes longer is stopped, the class goes on, and that student's feedback is a page saying so.
   ``--jobs`` processes share the class (each its own students; they only read the gradebook). A student's
   feedback is written again only where what it shows changed: their autograded notebooks, or their scores
   and comments in the gradebook (a score given by hand in formgrader), or its page (``--again``: all);
6. writes ``grades/<assignment>.csv`` (one row per student, one column per test
   cell, in the notebook's order) and prints a summary table with each student's
   failed tests and notes (how late, "late by 6 h 41 min: -10%"; for a notebook that answers nothing, "nothing
   answered" in place of
   every test; a written answer left as released, "left blank: 0 of N points"), then counts that say
   what they count over the graded submissions, a refused one apart (every test passed, full marks and those
   that await only written answers, the late, the written
   answers awaiting grading or left blank: :func:`autograder.grading.gradesheet.class_counts`). A
   refused notebook gets a feedback page of the course's that says why (for a misnamed one, what to
   rename it). The summary then names the class list and lists what counts
   for nobody: a submitted folder of a student not on it, and each folder of the assignment in the
   exchange that the course's collect does not collect, with why (owned by another account than the
   student it names, or not on the class list; :func:`autograder.grading.submissions.class_of`).

Every phase says what it is doing. No text from a submission reaches the terminal without
going through :func:`autograder.text.terminal.clean_text` (no escape sequence, no control
character); nbgrader's own output is relayed with each row prefixed ``nbgrader: ``
(:mod:`autograder.grading.run_nbgrader`), so that none of it passes for the grader's own lines.

The phases are :func:`autograder.grading.phases.grade`'s; this command reads its arguments, makes the
one :class:`~autograder.grading.grader.Grader` that grades, and prints the summary
(:mod:`autograder.grading.gradesheet`). torch and nbgrader's gradebook are imported where they are first
needed, so that phase 1's nbgrader process starts before this one spends seconds importing them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.cluster.certificates import FOLDER as CERTIFICATES
from autograder.grading import deadlines
from autograder.grading.feedback import FEEDBACK_SECONDS
from autograder.grading.grader import Grader
from autograder.grading.gradesheet import summary
from autograder.grading.phases import EXPORT, GradingUnavailable, grade, refresh
from autograder.grading.source import unreleased_prerequisites_note
from autograder.grading.submissions import class_of
from autograder.release import course
from autograder.sandbox.limits import Limits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignment", help="the assignment's folder name, e.g. ch02_scaled_dot_product")
    parser.add_argument("--root", type=Path, default=COURSE_ROOT, help="the course folder (default: this repository)")
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=max(1, (os.cpu_count() or 2) // 2),
        help="notebooks graded at once (default: half the CPU cores)",
    )
    parser.add_argument(
        "--feedback-seconds",
        type=float,
        default=FEEDBACK_SECONDS,
        help=f"the most that writing one notebook's feedback may take (default: {FEEDBACK_SECONDS:g})",
    )
    for name, default, what in (
        ("--cell-timeout", Limits().cell_timeout, "one notebook cell"),
        ("--call-timeout", Limits().call_timeout, "one call of a graded function by a test"),
    ):
        parser.add_argument(
            name,
            type=float,
            default=default,
            metavar="SECONDS",
            help=f"the most that {what} may take in the sandbox; past it, it is stopped and the notebook's grading "
            f"goes on (default: {default:g}). A saved report serves only a grading with the same limits",
        )
    parser.add_argument(
        "--csv-only",
        action="store_true",
        help="grade nothing: bring every output up to date from the gradebook, with the written answers' scores "
        "given since in formgrader (make grades): the late penalties, the feedback whose scores changed, "
        "grades/<assignment>.csv and grades/all.csv (nbgrader export's)",
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="run every notebook again, even one whose saved report still fits it (nothing graded changed since)",
    )
    parser.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="grade the notebooks on the workers of the scheduler at ADDRESS (tls://host:port; make grade "
        "CLUSTER=...): see autograder.cli.cluster",
    )
    parser.add_argument(
        "--certs",
        type=Path,
        default=None,
        help="with --cluster: the folder of the cluster's certificates (default: grades/.cluster of the course folder)",
    )
    parser.add_argument(
        "--notebook-deadline",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --cluster: the most a worker may take over one notebook once it started it, past which the "
        "notebook is not graded (default: the sandbox's own backstop)",
    )
    parser.add_argument(
        course.ALLOW_RELEASED,
        action="store_true",
        help="grade even though the term's settings release this assignment's solutions",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if not args.feedback_seconds > 0:
        parser.error(f"--feedback-seconds must be more than 0, got {args.feedback_seconds}")
    for name in ("cell_timeout", "call_timeout"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be more than 0 seconds, got {getattr(args, name):g}")
    if args.assignment not in course.assignments(args.root):
        parser.error(f"no assignment {args.assignment!r} under {args.root / 'solutions'}")
    try:  # every deadline of term.yml read before anything is graded: a bad one named, nothing scored
        deadlines.check_all(args.root)
    except course.SettingsError as error:
        parser.error(str(error))
    if args.csv_only:
        try:
            results = refresh(args.assignment, args.root, jobs=args.jobs, feedback_seconds=args.feedback_seconds)
        except GradingUnavailable as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(summary(args.assignment, results))
        print(f"\nFeedback: {args.root / 'feedback'}/<student>/{args.assignment}/")
        print(f"Grades:   {args.root / 'grades' / (args.assignment + '.csv')}")
        print(f"Report:   {args.root / 'grades' / (args.assignment + '-report.html')} (what the class got wrong)")
        print(f"Export:   {args.root / 'grades' / EXPORT}")
        return 0
    try:
        settings = course.release(args.root)
    except course.SettingsError as error:
        parser.error(str(error))
    note = course.open_edition_note(settings)
    if note:
        print(f"note: {note}", file=sys.stderr)
    refusal = course.grading_refusal(args.assignment, settings, args.allow_released)
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    prerequisites = unreleased_prerequisites_note(args.assignment, settings)
    if prerequisites:
        print(f"note: {prerequisites}", file=sys.stderr)
    remote = None
    grader = Grader(spawn=True)
    try:
        if args.cluster:
            from autograder.cluster.client import Cluster  # Dask: imported where a cluster grades

            remote = Cluster(args.cluster, args.certs or args.root / CERTIFICATES, args.notebook_deadline)
            print(f"cluster: {remote.connect()}", file=sys.stderr)
        results = grade(
            args.assignment,
            args.root,
            jobs=args.jobs,
            settings=settings,
            feedback_seconds=args.feedback_seconds,
            allow_released=args.allow_released,
            grader=grader,
            again=args.again,
            limits=Limits(cell_timeout=args.cell_timeout, call_timeout=args.call_timeout),
            remote=remote,
        )
    except GradingUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        grader.close()
        if remote is not None:
            remote.close()
    print()
    print(summary(args.assignment, results))
    print("\n".join(class_of(args.assignment, args.root).summary()))
    if remote is not None:
        print("\n".join(remote.summary()))
    print(f"\nFeedback: {args.root / 'feedback'}/<student>/{args.assignment}/")
    print(f"Grades:   {args.root / 'grades' / (args.assignment + '.csv')}")
    print(f"Report:   {args.root / 'grades' / (args.assignment + '-report.html')} (what the class got wrong)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
