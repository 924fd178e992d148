"""Grade a whole class on one assignment (``make grade ASSIGNMENT=... JOBS=N``).

    python -m autograder.grade ch02_scaled_dot_product --jobs 4

1. records the assignment's test cells in the gradebook (as ``make exercises`` does);
2. grades every ``submitted/<student>/<assignment>/`` in a sandbox, ``--jobs`` at a
   time, with a progress bar, leaving a report per notebook in ``grades/reports/``;
3. ``nbgrader autograde``, which takes the scores from those reports (one process
   writes the gradebook, so it stays consistent);
4. ``nbgrader generate_feedback`` into ``feedback/<student>/<assignment>/``;
5. writes ``grades/<assignment>.csv`` (one row per student, one column per test
   cell) and prints a summary table with each student's failed tests and notes.
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

from autograder import _nbgrader, course, release
from autograder.grader import Report, grade_notebook
from autograder.notebooks import COURSE_ROOT
from autograder.sandboxed import report_path


@dataclass
class Result:
    student: str
    score: float | None = None
    max_score: float = 0.0
    tests: dict[str, tuple[float, float]] = field(default_factory=dict)  # grade_id -> (score, max)
    note: str = ""

    @property
    def failed(self) -> list[str]:
        return [name for name, (score, most) in self.tests.items() if score < most]


def submitted_students(assignment: str, root: Path = COURSE_ROOT) -> list[str]:
    return sorted(p.parent.name for p in (Path(root) / "submitted").glob(f"*/{assignment}") if p.is_dir())


def db_url(root: Path) -> str:
    return f"sqlite:///{Path(root).resolve() / 'gradebook.db'}"


def notebook_names(assignment: str, root: Path = COURSE_ROOT) -> list[str]:
    return sorted(p.stem for p in (Path(root) / "solutions" / assignment).glob("*.ipynb"))


def precompute(assignment: str, students: list[str], root: Path, jobs: int, progress: bool = True,
               isolation: str = "bwrap", settings: course.Release | None = None) -> dict[str, list[str]]:
    """Grade every submitted notebook in a sandbox, ``jobs`` at a time; save the reports. Returns notes."""
    names = notebook_names(assignment, root)
    notes: dict[str, list[str]] = {student: [] for student in students}
    work = []
    for student in students:
        folder = Path(root) / "submitted" / student / assignment
        found = sorted(p.name for p in folder.glob("*.ipynb"))
        for name in names:
            path = folder / f"{name}.ipynb"
            if path.is_file():
                work.append((student, name, path))
            else:
                others = f" (found: {', '.join(found)}; rename it and grade again)" if found else ""
                notes[student].append(f"missing {name}.ipynb{others}")

    def run(student: str, name: str, path: Path) -> tuple[str, Report]:
        report = grade_notebook(assignment, path, notebook=name, isolation=isolation,
                                release=settings or course.release(root))
        target = report_path(root, assignment, student, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(report.to_json())
        return student, report

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run, *job) for job in work]
        bar = tqdm(as_completed(futures), total=len(futures), desc=f"grading {assignment}", unit="notebook",
                   disable=not progress, file=sys.stderr)
        for future in bar:
            student, report = future.result()
            notes[student] += report.notes
            notes[student] += [error.splitlines()[0][:160] if "skipped" in error
                               else f"cell {i + 1}: {error.splitlines()[0][:120]}"
                               for i, error in sorted(report.cell_errors.items())
                               if "skipped" in error or error.startswith(("MemoryError", "BlockingIOError"))]
    return notes


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
                result.max_score = sum(cell.max_score for nb in gradebook.find_assignment(assignment).notebooks
                                       for cell in nb.grade_cells)
                results.append(result)
                continue
            result.score, result.max_score = submission.score, submission.max_score
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    if grade.max_score:
                        result.tests[grade.name] = (grade.score or 0.0, grade.max_score)
            results.append(result)
    return results


def write_csv(path: Path, results: list[Result]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tests = sorted({name for r in results for name in r.tests})
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "score", "max_score", *tests, "note"])
        for r in results:
            writer.writerow([r.student, "" if r.score is None else r.score, r.max_score,
                             *[r.tests.get(t, ("", ""))[0] for t in tests], r.note])


def summary(assignment: str, results: list[Result]) -> str:
    width = max([7, *(len(r.student) for r in results)])
    lines = [f"Grades for {assignment}: {len(results)} submission(s)",
             f"{'student':<{width}}  {'score':>11}  failed tests / notes"]
    for r in results:
        score = "-" if r.score is None else f"{r.score:g} / {r.max_score:g}"
        notes = ", ".join(filter(None, [", ".join(r.failed), r.note])) or "all passed"
        lines.append(f"{r.student:<{width}}  {score:>11}  {notes}")
    graded = [r for r in results if r.score is not None]
    if graded:
        mean = sum(r.score for r in graded) / len(graded)
        full = sum(r.score == r.max_score for r in graded)
        lines.append(f"mean {mean:.2f} / {graded[0].max_score:g}; full marks: {full} of {len(graded)}")
    return "\n".join(lines)


def grade(assignment: str, root: Path = COURSE_ROOT, quiet: bool = False, jobs: int = 1,
          sandbox: bool = True, settings: course.Release | None = None) -> list[Result]:
    """Grade every submission of ``assignment`` under ``root``; see the module's docstring.

    ``sandbox=False`` skips the parallel sandboxed pass and leaves execution to
    whatever ``nbgrader autograde`` is configured with (for comparisons). ``settings``: the
    release whose packages the sandbox offers (default: the course's ``term.yml`` and
    environment); nbgrader's own run is given the same.
    """
    root = Path(root)
    settings = settings or course.release(root)
    env = course.environment(settings)
    students = submitted_students(assignment, root)
    if not students:
        raise SystemExit(f"nothing to grade: no folder submitted/<student>/{assignment}/ under {root}")
    with tempfile.TemporaryDirectory() as tmp:  # the test cells go into the gradebook; exercises/ is left alone
        release.generate([assignment], release_dir=Path(tmp), db_url=db_url(root), root=root, quiet=True)
    notes = precompute(assignment, students, root, jobs, progress=not quiet, settings=settings) if sandbox else {}
    # nbgrader warns about every test cell with hidden tests (its checksum changes on release),
    # so only its errors are shown; the summary lists what each student lost.
    _nbgrader.run("autograde", assignment, "--force", root=root, check=False, quiet=quiet, log_level="ERROR",
                  env=env)
    _nbgrader.run("generate_feedback", assignment, "--force", root=root, check=False, quiet=quiet,
                  log_level="ERROR", env=env)
    results = collect(assignment, students, root)
    for result in results:
        result.note = "; ".join(filter(None, [result.note, *notes.get(result.student, [])]))
    write_csv(root / "grades" / f"{assignment}.csv", results)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignment", help="the assignment's folder name, e.g. ch02_scaled_dot_product")
    parser.add_argument("--root", type=Path, default=COURSE_ROOT, help="the course folder (default: this repository)")
    parser.add_argument("--jobs", "-j", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                        help="notebooks graded at once (default: half the CPU cores)")
    parser.add_argument("--allow-released", action="store_true",
                        help="grade even though the term's settings release this assignment's solutions")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.assignment not in _nbgrader.assignments(args.root):
        parser.error(f"no assignment {args.assignment!r} under {args.root / 'solutions'}")
    try:
        settings = course.release(args.root)
    except course.SettingsError as error:
        parser.error(str(error))
    if settings.edition == "open":
        print(f"note: grading in {settings.describe()}; a submission may import every reference solution. "
              "For a graded class, run a term (term.yml, see the instructor guide's 'Running a term').",
              file=sys.stderr)
    elif settings.is_released(args.assignment) and not args.allow_released:
        parser.error(f"the solutions of {args.assignment} are released ({settings.describe()}), so a submission "
                     f"could import them: grade before the release, or name the releases without it for this "
                     f"command (RELEASED=\"...\"), or pass --allow-released")
    results = grade(args.assignment, args.root, jobs=args.jobs, settings=settings)
    print()
    print(summary(args.assignment, results))
    print(f"\nFeedback: {args.root / 'feedback'}/<student>/{args.assignment}/")
    print(f"Grades:   {args.root / 'grades' / (args.assignment + '.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
