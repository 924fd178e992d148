"""Grade a whole class on one assignment (``make grade ASSIGNMENT=... JOBS=N``).

    python -m autograder.cli.grade ch02_scaled_dot_product --jobs 4

1. records the assignment's test cells in the gradebook (as ``make exercises`` does);
2. checks that the sandbox works at all, with a program known to be right (the
   preflight): if it does not, it stops with what to fix, and no student is scored;
3. grades every ``submitted/<student>/<assignment>/`` in a sandbox, ``--jobs`` at a
   time, with a progress bar, leaving a report per notebook in ``grades/reports/``.
   A submission is refused (it scores nothing, and nbgrader is not given it) when the course's
   collect refused it, or when it holds anything but plain folders and files (a symbolic or hard
   link, a named pipe, ...) in ``submitted/`` or, where the exchange is found, in any of the
   student's submissions there (see :func:`refusals`); one that the grader could not grade (its
   own failure) is marked "not graded", never scored;
4. ``nbgrader autograde``, which takes the scores from those reports (one process
   writes the gradebook, so it stays consistent);
5. ``nbgrader generate_feedback`` into ``feedback/<student>/<assignment>/``;
6. writes ``grades/<assignment>.csv`` (one row per student, one column per test
   cell, in the notebook's order) and prints a summary table with each student's
   failed tests and notes.

Every phase says what it is doing; no text from a submission reaches the terminal
without its control characters removed.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from tqdm import tqdm

from autograder import course, exchange
from autograder.cli import release, run_nbgrader
from autograder.course import COURSE_ROOT
from autograder.grading.notebook import grade_notebook, preflight
from autograder.grading.report import Report
from autograder.grading.source import Source
from autograder.nbgrader_plugins import report_path
from autograder.sandbox.process import clean_text


class GradingUnavailable(SystemExit):
    """Grading cannot start (the preflight failed): nothing was scored. Its one argument, the message,
    says what to fix; :func:`main` prints it as one ``error:`` line and exits with status 2 (a caller
    that does not catch it exits with the message, as for any SystemExit)."""

    def __init__(self, message: str):
        super().__init__(message)


@dataclass
class Result:
    student: str
    score: float | None = None  # None: not graded (the grader's failure), never a score
    max_score: float = 0.0
    tests: dict[str, tuple[float, float]] = field(default_factory=dict)  # grade_id -> (score, max)
    note: str = ""

    @property
    def failed(self) -> list[str]:
        return [name for name, (score, most) in self.tests.items() if score < most]


def submitted_students(assignment: str, root: Path = COURSE_ROOT) -> list[str]:
    return sorted(
        p.parent.name for p in (Path(root) / "submitted").glob(f"*/{assignment}") if p.is_dir() or p.is_symlink()
    )


def db_url(root: Path) -> str:
    return f"sqlite:///{Path(root).resolve() / 'gradebook.db'}"


def notebook_names(assignment: str, root: Path = COURSE_ROOT) -> list[str]:
    return sorted(p.stem for p in (Path(root) / "solutions" / assignment).glob("*.ipynb"))


def unsafe_in_submission(root: Path, student: str, assignment: str) -> list[tuple[str, str]]:
    """Whatever in ``submitted/<student>/<assignment>/`` is not a plain folder or file, at any depth, the
    student's and the assignment's folders included: (path relative to ``submitted/``, what it is).
    Nothing is followed (see :func:`autograder.exchange.unsafe_entries`)."""
    base = Path(root) / "submitted"
    own = exchange.unsafe_entries(base / student, base, hard_links=False)
    if own and own[0][0] == student:  # the student's folder itself is a link, or not a folder
        return own[:1]
    return exchange.unsafe_entries(base / student / assignment, base, hard_links=False)


def refusals(assignment: str, students: list[str], root: Path) -> dict[str, str]:
    """The students whose submission is refused (it scores 0, and nbgrader is not given it), with why.

    A submission is refused when the course's collect (:class:`autograder.exchange.SafeCollect`)
    refused it; when ``submitted/<student>/<assignment>/`` holds anything but plain folders and files
    (nbgrader would read what a link points at, or wait on a named pipe); or when the exchange, as
    ``nbgrader collect`` finds it from ``root``, holds such a thing in any of the student's
    submissions of the assignment, whatever collected them (a collect that follows links may already
    have copied a link's target).
    """
    inbound = exchange.exchange_settings(root).inbound
    refused = {}
    for student in students:
        reason = exchange.refusal_reason(Path(root) / "submitted" / student / assignment)
        if reason:
            refused[student] = f"refused: {reason}"
            continue
        found = unsafe_in_submission(root, student, assignment)
        if found:
            refused[student] = (
                f"refused: the submission holds {exchange.describe(found)}; a submission must be plain files "
                "and folders (nbgrader would read what a link points at, or wait on a pipe): submit the notebook "
                "file itself"
            )
            continue
        if inbound is None:
            continue
        found = [
            entry
            for folder in exchange.submissions_in_exchange(inbound, student, assignment)
            for entry in exchange.unsafe_entries(folder, inbound)
        ]
        if found:
            refused[student] = (
                f"refused: the submission in the exchange ({inbound}) holds {exchange.describe(found)}; a collect "
                "that reads through it copies what a link points at, so what was collected is not graded"
            )
    return refused


@dataclass
class Precomputed:
    """What the sandboxed pass found: notes per student, and the students that nbgrader must not grade."""

    notes: dict[str, list[str]]
    refused: dict[str, str] = field(default_factory=dict)  # student -> why (scored 0)
    not_graded: dict[str, str] = field(default_factory=dict)  # student -> why (the grader's failure)


def precompute(
    assignment: str,
    students: list[str],
    root: Path,
    jobs: int,
    progress: bool = True,
    isolation: str = "bwrap",
    settings: course.Release | None = None,
    refused: dict[str, str] | None = None,
) -> Precomputed:
    """Grade every submitted notebook in a sandbox, ``jobs`` at a time; save the reports. ``refused``:
    the students not to grade, with why (default: :func:`refusals`)."""
    names = notebook_names(assignment, root)
    refused = refusals(assignment, students, root) if refused is None else refused
    found = Precomputed({student: [] for student in students}, dict(refused))
    work = []
    for student in students:
        if student in found.refused:
            continue
        folder = Path(root) / "submitted" / student / assignment
        present = sorted(p.name for p in folder.glob("*.ipynb"))
        for name in names:
            path = folder / f"{name}.ipynb"
            if path.is_file():
                work.append((student, name, path))
            else:
                others = f" (found: {', '.join(present)}; rename it and grade again)" if present else ""
                found.notes[student].append(f"missing {name}.ipynb{others}")

    def run(student: str, name: str, path: Path) -> tuple[str, Report]:
        report = grade_notebook(
            assignment, path, notebook=name, isolation=isolation, release=settings or course.release(root)
        )
        target = report_path(root, assignment, student, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(report.to_json())
        return student, report

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run, *job) for job in work]
        bar = tqdm(
            as_completed(futures),
            total=len(futures),
            desc=f"grading {assignment}",
            unit="notebook",
            disable=not progress,
            file=sys.stderr,
        )
        for future in bar:
            student, report = future.result()
            if report.not_graded:
                found.not_graded[student] = report.not_graded
                continue
            found.notes[student] += report.notes
            found.notes[student] += [
                f"{report.cell_name(i)}: {report.cell_errors[i].splitlines()[0][:160]}"
                for i in sorted(report.cell_errors)
                if i in report.skipped or report.cell_errors[i].startswith(("MemoryError", "BlockingIOError"))
            ]
    return found


def collect(assignment: str, students: list[str], root: Path = COURSE_ROOT) -> list[Result]:
    """Each student's score and per-test scores, from the gradebook."""
    results = []
    with Gradebook(db_url(root)) as gradebook:
        for student in students:
            result = Result(student)
            try:
                submission = gradebook.find_submission(assignment, student)
            except MissingEntry:  # no notebook nbgrader could grade: nothing earned
                result.score = 0.0
                result.max_score = sum(
                    cell.max_score for nb in gradebook.find_assignment(assignment).notebooks for cell in nb.grade_cells
                )
                results.append(result)
                continue
            penalty = submission.late_submission_penalty or 0.0
            result.score, result.max_score = max(0.0, submission.score - penalty), submission.max_score
            if penalty:
                result.note = f"late: {penalty:g} points deducted"
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    if grade.max_score:
                        result.tests[grade.name] = (grade.score or 0.0, grade.max_score)
            results.append(result)
    return results


def test_order(assignment: str, root: Path = COURSE_ROOT) -> list[str]:
    """The grade_ids of the assignment's test cells, in the notebooks' order."""
    order = []
    with _course_root(root):
        for name in notebook_names(assignment, root):
            order += [gid for gid, _, _ in Source.load(assignment, name).tests]
    return order


class _course_root:
    """``AUTOGRADER_COURSE_ROOT`` set to ``root`` for a moment (Source reads the notebooks there)."""

    def __init__(self, root: Path):
        self.root = str(Path(root).resolve())

    def __enter__(self):
        self.saved = os.environ.get("AUTOGRADER_COURSE_ROOT")
        os.environ["AUTOGRADER_COURSE_ROOT"] = self.root

    def __exit__(self, *exc):
        if self.saved is None:
            os.environ.pop("AUTOGRADER_COURSE_ROOT", None)
        else:
            os.environ["AUTOGRADER_COURSE_ROOT"] = self.saved


def write_csv(path: Path, results: list[Result], order: list[str] | None = None) -> None:
    """One row per student; the test columns in ``order`` (the notebook's), others after them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    seen = {name for r in results for name in r.tests}
    tests = [name for name in (order or []) if name in seen] + sorted(seen - set(order or []))
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "score", "max_score", *tests, "note"])
        for r in results:
            writer.writerow(
                [
                    r.student,
                    "" if r.score is None else r.score,
                    r.max_score,
                    *[r.tests.get(t, ("", ""))[0] for t in tests],
                    r.note,
                ]
            )


def summary(assignment: str, results: list[Result]) -> str:
    width = max([7, *(len(clean_text(r.student, 80)) for r in results)])
    lines = [
        f"Grades for {assignment}: {len(results)} submission(s)",
        f"{'student':<{width}}  {'score':>11}  failed tests / notes",
    ]
    for r in results:
        score = "not graded" if r.score is None else f"{r.score:g} / {r.max_score:g}"
        notes = ", ".join(filter(None, [", ".join(r.failed), r.note])) or "all passed"
        notes = clean_text(notes, 1000).replace("\n", " ")
        lines.append(f"{clean_text(r.student, 80):<{width}}  {score:>11}  {notes}")
    graded = [r for r in results if r.score is not None]
    if graded:
        mean = sum(r.score for r in graded) / len(graded)
        full = sum(r.score == r.max_score for r in graded)
        lines.append(f"mean {mean:.2f} / {graded[0].max_score:g}; full marks: {full} of {len(graded)}")
    missing = len(results) - len(graded)
    if missing:
        lines.append(f"not graded: {missing} (the grader's failure, see the notes; grade them again once fixed)")
    return "\n".join(lines)


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def grade(
    assignment: str,
    root: Path = COURSE_ROOT,
    quiet: bool = False,
    jobs: int = 1,
    sandbox: bool = True,
    settings: course.Release | None = None,
) -> list[Result]:
    """Grade every submission of ``assignment`` under ``root``; see the module's docstring.

    ``sandbox=False`` skips the parallel sandboxed pass and leaves execution to
    whatever ``nbgrader autograde`` is configured with (for comparisons). ``settings``: the
    release whose packages the sandbox offers (default: the course's ``term.yml`` and
    environment); nbgrader's own run is given the same. Raises :class:`GradingUnavailable`
    when the sandbox does not work; then nothing is scored.
    """
    root = Path(root)
    settings = settings or course.release(root)
    env = course.environment(settings)
    students = submitted_students(assignment, root)
    if not students:
        raise SystemExit(f"nothing to grade: no folder submitted/<student>/{assignment}/ under {root}")
    _say(quiet, f"[1/6] recording the tests of {assignment} in the gradebook")
    with tempfile.TemporaryDirectory() as tmp:  # the test cells go into the gradebook; exercises/ is left alone
        release.generate([assignment], release_dir=Path(tmp), db_url=db_url(root), root=root, quiet=True)
    found = Precomputed({student: [] for student in students})
    if sandbox:
        _say(quiet, "[2/6] checking that the sandbox works (a program known to be right)")
        problem = preflight(settings)
        if problem:
            raise GradingUnavailable(f"grading cannot start, and nothing was scored: {problem}")
        refused = refusals(assignment, students, root)
        also = f" ({len(refused)} refused, see the summary)" if refused else ""
        _say(
            quiet, f"[3/6] grading {len(students) - len(refused)} submission(s) in the sandbox, {jobs} at a time{also}"
        )
        found = precompute(assignment, students, root, jobs, progress=not quiet, settings=settings, refused=refused)
    # nbgrader warns about every test cell with hidden tests (its checksum changes on release),
    # so only its errors are shown; the summary lists what each student lost. Refused and
    # not-graded submissions are not given to nbgrader: it would follow a link, or record a zero.
    excluded = sorted({*found.refused, *found.not_graded})
    exclude = [f"--CourseDirectory.student_id_exclude={','.join(excluded)}"] if excluded else []
    _say(quiet, "[4/6] recording the scores in the gradebook (nbgrader autograde)")
    run_nbgrader.run(
        "autograde", assignment, "--force", *exclude, root=root, check=False, quiet=quiet, log_level="ERROR", env=env
    )
    _say(quiet, "[5/6] writing each student's feedback (nbgrader generate_feedback)")
    run_nbgrader.run(
        "generate_feedback",
        assignment,
        "--force",
        *exclude,
        root=root,
        check=False,
        quiet=quiet,
        log_level="ERROR",
        env=env,
    )
    _say(quiet, f"[6/6] writing grades/{assignment}.csv")
    if found.refused:  # in the gradebook, with no submission: nbgrader's export lists them with 0
        with Gradebook(db_url(root)) as gradebook:
            for student in found.refused:
                gradebook.update_or_create_student(student)
    results = collect(assignment, students, root)
    for result in results:
        if result.student in found.not_graded:
            result.score, result.tests = None, {}
            result.note = f"not graded: {found.not_graded[result.student]}"
            continue
        if result.student in found.refused:
            result.score, result.tests = 0.0, {}
        extra = [found.refused.get(result.student, ""), *found.notes.get(result.student, [])]
        result.note = clean_text("; ".join(filter(None, [result.note, *extra])), 4000)
    write_csv(root / "grades" / f"{assignment}.csv", results, test_order(assignment, root))
    return results


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
        "--allow-released",
        action="store_true",
        help="grade even though the term's settings release this assignment's solutions",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.assignment not in course.assignments(args.root):
        parser.error(f"no assignment {args.assignment!r} under {args.root / 'solutions'}")
    try:
        settings = course.release(args.root)
    except course.SettingsError as error:
        parser.error(str(error))
    if settings.edition == "open":
        print(
            f"note: grading in {settings.describe()}; a submission may import every reference solution. "
            "For a graded class, run a term (term.yml, see the instructor guide's 'Running a term').",
            file=sys.stderr,
        )
    elif settings.is_released(args.assignment) and not args.allow_released:
        parser.error(
            f"the solutions of {args.assignment} are released ({settings.describe()}), so a submission "
            f"could import them: grade before the release, or name the releases without it for this "
            f'command (RELEASED="..."), or pass --allow-released'
        )
    try:
        results = grade(args.assignment, args.root, jobs=args.jobs, settings=settings)
    except GradingUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print()
    print(summary(args.assignment, results))
    print(f"\nFeedback: {args.root / 'feedback'}/<student>/{args.assignment}/")
    print(f"Grades:   {args.root / 'grades' / (args.assignment + '.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
