"""Check a notebook against the hidden tests, as the instructor's grading would (``make check``).

    python -m autograder.cli.check exercises/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb

Runs the notebook in the same sandbox, with the same tests and limits, as
``make grade``, and prints each test's verdict and message and the score.
Needs the course's ``solutions/`` folder (a full clone of the repository).
Ends with a one-line verdict. Written answers (text cells the instructor grades by hand) are not checked
here: their rubrics are printed, as plain text, and the verdict names each one still as released (blank,
nbgrader's "YOUR ANSWER HERE", or the released notebook's text), never "Ready to submit" while one is.

A notebook named otherwise than ``<assignment>.ipynb`` (a browser's ``... (1).ipynb``, Colab's ``Copy of ...``),
which ``make grade`` refuses, is checked all the same, but the first line says that grading would not read it
under its name and what to rename it to, and the verdict is never "Ready to submit".

Exit status: 0 full marks on the tests, every written answer written, the notebook named as grading reads it;
1 a test failed, a written answer is still as released, or the notebook must be renamed (a notebook submitted
so loses its points as surely as one with a failed test, and this is the check students run before they
submit: it must not pass); 2 the notebook could not be checked
(a usage error, a file that is not a readable notebook, or the grader could not run it). ``make check``
prints the same and fails unless the status is 0.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from attention_course.tooling import notebooks
from autograder.grading.grader import Grader
from autograder.grading.notebook import grade_notebook
from autograder.grading.source import unreleased_prerequisites_note
from autograder.release import course
from autograder.release.reference import ReferenceUnavailable
from autograder.text.plain_text import plain_text
from autograder.text.unwritten import cell_error, not_written


def format_report(report, path: Path) -> str:
    """The check's report: notes, the cells that raised, each test's verdict and score with its failure's
    message; the tests in a row that fail because one item is not written yet (``TestResult.unwritten``) say so
    once, after the last of them, not in one identical message each."""
    lines = [f"{path.name}: hidden tests of {report.assignment} ({report.seconds:.1f} s)"]
    for note in report.notes:
        lines.append(f"  note: {note}")
    for index, error in sorted(report.cell_errors.items()):
        lines.append(f"  {report.cell_name(index)} raised {cell_error(error)}")
    width = max(len(gid) for gid in report.tests) if report.tests else 0
    tests = list(report.tests.values())
    unwritten = 0  # the tests so far in a row failed by the same item not written yet
    for k, test in enumerate(tests):
        verdict = "PASS" if test.passed else "PART" if test.partial else "FAIL"
        lines.append(f"  {verdict}  {test.grade_id:<{width}}  {test.score:g} / {test.points:g}")
        if test.passed:
            continue
        if not test.unwritten:
            lines += [f"        {line}" for line in test.message.splitlines()]
            continue
        unwritten += 1
        following = tests[k + 1] if k + 1 < len(tests) else None
        if following is None or following.passed or following.unwritten != test.unwritten:
            lines.append(f"        {not_written(test.unwritten, unwritten)}")
            unwritten = 0
    lines.append(f"Score: {report.score:g} / {report.max_score:g}")
    return "\n".join(lines)


def written_rubrics(assignment: str, answers: list[notebooks.WrittenAnswer] | None = None) -> str:
    """The assignment's written answers, which the instructor grades by hand and this check does not, each with
    its points, whether the notebook's is still to write or written (``answers``, where given), and its
    rubric as plain text (from the instructor notebook, which a students' copy holds once the chapter is
    released), so that a self-learner can grade their own; empty where it has none."""
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    written = list(notebooks.written_cells(nb).values())
    if not written:
        return ""
    states = {answer.grade_id: answer.answered for answer in answers or []}
    lines = ["Written answers: graded by hand by your instructor, not here. Their rubrics, to grade your own:"]
    for cell in written:
        points = notebooks.nbgrader_meta(cell).get("points", 0)
        gid = notebooks.cell_id(cell)
        state = {True: ": written, awaiting your instructor's grading", False: ": NOT WRITTEN yet"}.get(
            states.get(gid), ""
        )
        lines.append(f"  {gid} ({points:g} points){state}")
        lines += [f"        {line}".rstrip() for line in plain_text(notebooks.cell_text(cell)).splitlines()]
    return "\n".join(lines)


def written_answers(path: Path, assignment: str) -> list[notebooks.WrittenAnswer]:
    """The written answers of the notebook at ``path``, each answered or still as released (compared with the
    assignment's released notebook where this copy of the course has it); none where it cannot be read
    (the grader's report says why)."""
    try:
        nb = notebooks.read(path)
    except Exception:  # not a notebook: the report of the grading says so
        return []
    return notebooks.written_answers(nb, course.released_notebook(assignment))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path, help="the notebook to check")
    parser.add_argument(
        "--assignment",
        help="the assignment (default: the notebook's name, else the one its setup cell declares, else its folder's)",
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run without bubblewrap (a separate process only), where bwrap is not installed",
    )
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        parser.error(f"no notebook at {args.notebook}")
    known = course.assignments()
    # The notebook's name, the assignment its setup cell declares, its folder's: each one of the course's.
    names = course.assignment_names(args.notebook)
    assignment = args.assignment or next((name for name in names if name in known), None)
    if assignment not in known:
        withheld = names[0] if names else None  # an exercise of this copy, its hidden tests not here
        if withheld and not args.assignment:
            print(
                f"Verdict: not checked. The hidden tests of {withheld} are not here: they come with its "
                "solutions, once they are released. Until then, make validate runs its visible tests."
            )
            return 2
        parser.error(
            f"cannot tell the assignment of {args.notebook}; pass --assignment (make check ASSIGNMENT=...), "
            f"one of: {', '.join(known)}"
        )
    misnamed = course.not_graded_under(args.notebook, assignment)
    if misnamed:  # before anything else: a notebook of any other name scores 0, whatever its tests say here
        print(f"NOT GRADED UNDER THIS NAME: {misnamed}")
    try:
        prerequisites = unreleased_prerequisites_note(assignment, course.release())
    except course.SettingsError:
        prerequisites = None
    if prerequisites:
        print(f"note: {prerequisites}", file=sys.stderr)
    grader = Grader()
    try:
        report = grade_notebook(
            assignment, args.notebook, isolation="none" if args.no_sandbox else "bwrap", grader=grader
        )
    except ReferenceUnavailable as exc:
        parser.error(str(exc))
    except Exception as exc:  # the grader's own failure: never read as the student's score (exit 1)
        traceback.print_exc()
        print(f"Verdict: not checked. The grader failed: {type(exc).__name__}: {exc}")
        return 2
    finally:
        grader.close()
    print(format_report(report, args.notebook))
    written = written_answers(args.notebook, assignment)
    rubrics = written_rubrics(assignment, written)
    if rubrics:
        print(rubrics)
    print(verdict(report, written, renamed=None if misnamed is None else f"{assignment}.ipynb"))
    if report.not_graded or not report.tests or not_run(report):
        return 2
    unwritten = any(not answer.answered for answer in written)
    return 0 if report.score == report.max_score and not unwritten and not misnamed else 1


def not_run(report) -> str | None:
    """Why the notebook was not run at all (it could not be read, or the grader refuses to run it: every test
    failed before it ran, :func:`autograder.grading.notebook._refused`), or None."""
    if report.tests and all(
        not test.passed and test.message.startswith("no test ran: ") for test in report.tests.values()
    ):
        return next(iter(report.tests.values())).message.removeprefix("no test ran: ")
    return None


def verdict(report, written: list[notebooks.WrittenAnswer] = (), renamed: str | None = None) -> str:
    """The check's last line: not checked (and why), or the tests' score and what is left to do, naming
    ``written`` answers still as released and the name to give a notebook that grading would not read under its
    own (``renamed``, where it must be); "Ready to submit" only where nothing is."""
    if report.not_graded:
        return f"Verdict: not checked. The grader could not run the notebook: {report.not_graded}"
    if not report.tests:
        return "Verdict: not checked. No test of the assignment ran; is this the right notebook?"
    if not_run(report):
        return f"Verdict: not checked. The notebook was not run: {not_run(report)}"
    failed = sum(not test.passed for test in report.tests.values())
    todo = [answer for answer in written if not answer.answered]
    unwritten = f"{notebooks.written_named(todo)} {'is' if len(todo) == 1 else 'are'} still as released" if todo else ""
    rename = f"rename the notebook {renamed}, the only name grading reads" if renamed else ""
    if not failed and (todo or renamed):
        left = [f"{unwritten} ({notebooks.WRITTEN_PLACEHOLDER} or blank): write {'it' if len(todo) == 1 else 'them'}"]
        left = (left if todo else []) + ([rename] if renamed else [])
        return (
            f"Verdict: every test passes ({report.score:g} / {report.max_score:g}), but {'; and '.join(left)} "
            "before you submit. Not ready to submit."
        )
    if not failed and written:
        return (
            f"Verdict: every test passes ({report.score:g} / {report.max_score:g}); "
            f"{notebooks.written_named(list(written))} "
            f"await{'s' if len(written) == 1 else ''} your instructor's grading. Ready to submit."
        )
    if not failed:
        return f"Verdict: full marks ({report.score:g} / {report.max_score:g}). Ready to submit."
    tests = "test fails" if failed == 1 else "tests fail"
    return (
        f"Verdict: {report.score:g} / {report.max_score:g}; {failed} {tests}. "
        "Read each FAIL's (or PART's) message above, fix that item, and check again."
        + (f" And {unwritten}: write {'it' if len(todo) == 1 else 'them'} too." if todo else "")
        + (f" And {rename}." if renamed else "")
    )


if __name__ == "__main__":
    sys.exit(main())
