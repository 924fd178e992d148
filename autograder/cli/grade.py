"""Grade a whole class on one assignment (``make grade ASSIGNMENT=... JOBS=N``).

    python -m autograder.cli.grade ch02_scaled_dot_product --jobs 4

1. records the assignment's test cells in the gradebook (as ``make exercises`` does), in the
   background while phases 2 and 3 run (nothing before phase 4 reads the gradebook);
2. checks that the sandbox works at all, with a program known to be right (the
   preflight): if it does not, it stops with what to fix, and no student is scored;
3. grades every ``submitted/<student>/<assignment>/`` in a sandbox, ``--jobs`` at a
   time, with a progress bar, leaving a report per notebook in ``grades/reports/``.
   A submission is refused (it scores nothing, and nbgrader is not given it) when the course's
   collect refused it, or when it holds anything but plain folders and files (a symbolic or hard
   link, a named pipe, ...) in ``submitted/`` or, where the exchange is found, in any of the
   student's submissions there, or when it holds no notebook of the assignment's name (a renamed
   one is never graded in its place: the summary says what was found and what it must be named; see
   :func:`refusals`); one that the grader could not grade (its own failure) is marked "not graded",
   never scored. A notebook that answers nothing (its code as released) is noted "nothing
   answered" (:func:`nothing_answered`);
4. ``nbgrader autograde``, which takes the scores from those reports (one process
   writes the gradebook, so it stays consistent). A notebook that nbgrader refuses all the
   same (one it cannot read, say) is reported as refused, with nbgrader's reason, and scores 0;
   one it leaves without a score and without naming an error (it stopped before it) is "not
   graded";
5. ``nbgrader generate_feedback`` into ``feedback/<student>/<assignment>/``, each notebook
   within ``--feedback-seconds`` (:func:`write_feedback`): one that takes longer is stopped, the
   class goes on, and that student's feedback is a page saying so. ``--jobs`` processes share
   the class (each its own students; they only read the gradebook);
6. writes ``grades/<assignment>.csv`` (one row per student, one column per test
   cell, in the notebook's order) and prints a summary table with each student's
   failed tests and notes (for a notebook that answers nothing, "nothing answered" in place of
   every test). A refused notebook gets a feedback page of the course's that says why (for a
   misnamed one, what to rename it).

Every phase says what it is doing. No text from a submission reaches the terminal without
going through :func:`autograder.terminal.clean_text` (no escape sequence, no control
character); nbgrader's own output is relayed with each row prefixed ``nbgrader: ``
(:mod:`autograder.cli.run_nbgrader`), so that none of it passes for the grader's own lines.

torch and nbgrader's gradebook are imported where they are first needed, so that phase 1's
nbgrader process starts before this one spends seconds importing them.
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from attention_course import notebooks
from attention_course.notebooks import COURSE_ROOT
from autograder import course, exchange
from autograder.cli import exercises, run_nbgrader
from autograder.grading.report import Report
from autograder.grading.source import MAX_NOTEBOOK_BYTES, Source, unanswered, unreleased_prerequisites_note
from autograder.nbgrader_plugins import FEEDBACK_PROGRESS, NotGraded, report_path
from autograder.terminal import clean_text

FEEDBACK_SECONDS = 60.0  # the most that writing one notebook's feedback may take
NBGRADER_START_SECONDS = 120.0  # nbgrader's start-up, before it writes the first notebook's feedback


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
    unanswered: bool = False  # every notebook as released (:func:`nothing_answered`): the note says so
    # the written answers, graded by hand (formgrader): grade_id -> (score, max); None: not graded yet
    written: dict[str, tuple[float | None, float]] = field(default_factory=dict)

    @property
    def failed(self) -> list[str]:
        return [name for name, (score, most) in self.tests.items() if score < most]

    @property
    def awaiting(self) -> list[str]:
        """The written answers that the instructor has not graded yet (an unanswered one scores 0 at once)."""
        return [name for name, (score, _) in self.written.items() if score is None]

    @property
    def awaiting_points(self) -> float:
        return sum(most for score, most in self.written.values() if score is None)


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
    (nbgrader would read what a link points at, or wait on a named pipe); when the exchange, as
    ``nbgrader collect`` finds it from ``root``, holds such a thing in any of the student's
    submissions of the assignment, whatever collected them (a collect that follows links may already
    have copied a link's target); or when it holds none of the assignment's notebooks by name
    (:func:`misnamed`: nbgrader would stop on it with a traceback, and a notebook of another name is
    never graded in its place).
    """
    inbound = exchange.exchange_settings(root).inbound
    names = notebook_names(assignment, root)
    refused = {}
    for student in students:
        reason = (
            exchange.refusal_reason(Path(root) / "submitted" / student / assignment)
            or _unsafe_reason(root, student, assignment)
            or _unsafe_in_exchange_reason(inbound, student, assignment)
            or misnamed(names, submitted_notebooks(root, student, assignment))
        )
        if reason:
            refused[student] = f"refused: {reason}"
    return refused


def _unsafe_reason(root: Path, student: str, assignment: str) -> str | None:
    """Why the submission in ``submitted/`` is refused for holding something but plain files and folders, or None."""
    found = unsafe_in_submission(root, student, assignment)
    if not found:
        return None
    return (
        f"the submission holds {exchange.describe(found)}; a submission must be plain files and folders (nbgrader "
        "would read what a link points at, or wait on a pipe): submit the notebook file itself"
    )


def _unsafe_in_exchange_reason(inbound: Path | None, student: str, assignment: str) -> str | None:
    """Why the student's submissions in the exchange (``inbound``, None where it is not found) refuse the
    collected one, or None."""
    if inbound is None:
        return None
    found = [
        entry
        for folder in exchange.submissions_in_exchange(inbound, student, assignment)
        for entry in exchange.unsafe_entries(folder, inbound)
    ]
    if not found:
        return None
    return (
        f"the submission in the exchange ({inbound}) holds {exchange.describe(found)}; a collect that reads "
        "through it copies what a link points at, so what was collected is not graded"
    )


def submitted_notebooks(root: Path, student: str, assignment: str) -> list[str]:
    """The file names of the notebooks in ``submitted/<student>/<assignment>/`` (those nbgrader reads), sorted."""
    folder = Path(root) / "submitted" / student / assignment
    return sorted(path.name for path in folder.glob("*.ipynb"))


def _names_list(names: list[str], most: int = 3) -> str:
    """File names of a submission as text for the summary and a feedback page: cleaned, cut, at most ``most``."""
    shown = ", ".join(clean_text(name, 80) for name in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def misnamed(names: list[str], present: list[str]) -> str | None:
    """Why a submission holding the notebooks ``present`` (file names) is refused when it holds none of the
    assignment's notebooks ``names`` (their names without .ipynb), or None: what was found, and what it
    must be named. Grading reads each notebook by its name only and never guesses which file is meant."""
    wanted = [f"{name}.ipynb" for name in names]
    if set(wanted) & set(present):
        return None
    expected = " and ".join(wanted)
    if not present:
        return f"missing {expected}: the submission holds no notebook; submit {expected}"
    if len(present) == 1:
        found = f"the submission holds {_names_list(present)} instead: rename it {expected}"
    else:
        found = (
            f"the submission holds {len(present)} other notebooks instead ({_names_list(present)}): "
            f"keep the one with the work and rename it {expected}"
        )
    return f"missing {expected}, the only name grading reads; {found}"


@dataclass
class Precomputed:
    """What the sandboxed pass found: notes per student, and the students that nbgrader must not grade."""

    notes: dict[str, list[str]]
    refused: dict[str, str] = field(default_factory=dict)  # student -> why (scored 0)
    not_graded: dict[str, str] = field(default_factory=dict)  # student -> why (the grader's failure)
    unanswered: dict[str, list[str]] = field(default_factory=dict)  # student -> notebooks with nothing answered


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
    from autograder.grading.notebook import grade_notebook

    names = notebook_names(assignment, root)
    refused = refusals(assignment, students, root) if refused is None else refused
    found = Precomputed({student: [] for student in students}, dict(refused))
    work = []
    for student in students:
        if student in found.refused:
            continue
        folder = Path(root) / "submitted" / student / assignment
        present = submitted_notebooks(root, student, assignment)
        for name in names:
            path = folder / f"{name}.ipynb"
            if path.is_file():
                work.append((student, name, path))
            else:  # another of the assignment's notebooks is there (none at all is refused: misnamed)
                others = f" (found: {_names_list(present)}; rename it and grade again)" if present else ""
                found.notes[student].append(f"missing {name}.ipynb{others}")
        others = [name for name in present if name.removesuffix(".ipynb") not in names]
        if others and student in {job[0] for job in work}:
            found.notes[student].append(
                f"ignored {_names_list(others)}: grading reads {' and '.join(f'{n}.ipynb' for n in names)} only"
            )

    def run(student: str, name: str, path: Path) -> tuple[str, str, Report]:
        report = grade_notebook(
            assignment, path, notebook=name, isolation=isolation, release=settings or course.release(root)
        )
        target = report_path(root, assignment, student, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(report.to_json())
        return student, name, report

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
            student, name, report = future.result()
            if report.not_graded:
                found.not_graded[student] = report.not_graded
                continue
            if report.tests and report.score == 0 and nothing_answered(assignment, name, student, root):
                found.unanswered.setdefault(student, []).append(name)
            found.notes[student] += report.notes
            found.notes[student] += [
                f"{report.cell_name(i)}: {report.cell_errors[i].splitlines()[0][:160]}"
                for i in sorted(report.cell_errors)
                if i in report.skipped or report.cell_errors[i].startswith(("MemoryError", "BlockingIOError"))
            ]
    return found


def nothing_answered(assignment: str, name: str, student: str, root: Path) -> bool:
    """Whether the student's notebook ``name`` answers nothing: its code is the released notebook's
    (``exercises/``), as :func:`autograder.grading.source.unanswered` compares them. False where either
    cannot be read (the grader's report says why), or the submission is larger than the grader reads."""
    submitted = Path(root) / "submitted" / student / assignment / f"{name}.ipynb"
    released = Path(root) / "exercises" / assignment / f"{name}.ipynb"
    try:
        if submitted.is_symlink() or submitted.stat().st_size > MAX_NOTEBOOK_BYTES:
            return False
        return unanswered(Source.load(assignment, name, root), notebooks.read(submitted), notebooks.read(released))
    except Exception:  # an unreadable notebook, or no released one: the report says what was graded
        return False


def collect(assignment: str, students: list[str], root: Path = COURSE_ROOT) -> list[Result]:
    """Each student's score and per-test scores, from the gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

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
                    if not grade.max_score:
                        continue
                    if grade.cell.cell_type == "markdown":  # a written answer: graded by hand
                        graded = grade.manual_score is not None or grade.auto_score is not None
                        result.written[grade.name] = (grade.score if graded else None, grade.max_score)
                    else:
                        result.tests[grade.name] = (grade.score or 0.0, grade.max_score)
            results.append(result)
    return results


def awaiting_note(result: Result) -> str:
    """The summary's note on a submission whose written answers are not graded yet."""
    return f"awaiting manual grading: {', '.join(result.awaiting)}" if result.awaiting else ""


# ----------------------------------------------------------------------------- what nbgrader refused

_ERROR_AT = re.compile(r"There was an error processing assignment: (.+)$")
_FRAME = re.compile(r'^(\s*)File "')


def _exception_line(record: list[str]) -> str:
    """The exception that a traceback in nbgrader's log ends with: the first line after its last frame
    that is indented less than that frame (``KeyError: 'grade_id'``), or ''."""
    frames = [(i, len(m.group(1))) for i, line in enumerate(record) if (m := _FRAME.match(line))]
    if not frames:
        return ""
    last, indent = frames[-1]
    for line in record[last + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            return line.strip()
    return ""


def nbgrader_errors(log: str, assignment: str, students: list[str]) -> dict[str, str]:
    """student -> the error that nbgrader's log (its output, cleaned) gives for that student's submission."""
    lines = log.splitlines()
    found = {}
    for index, line in enumerate(lines):
        match = _ERROR_AT.search(line)
        folder = Path(match.group(1).strip()) if match else None
        if folder is None or folder.name != assignment or folder.parent.name not in students:
            continue
        record = lines[index + 1 : index + 2]  # nbgrader's next record: the traceback, up to the record after it
        for following in lines[index + 2 :]:
            if following.startswith("["):
                break
            record.append(following)
        reason = _exception_line(record)
        if reason:
            found[folder.parent.name] = clean_text(reason, 300)
    return found


def nbgrader_refused(assignment: str, students: list[str], root: Path, log: str) -> tuple[dict[str, str], list[str]]:
    """What ``nbgrader autograde`` left undone among ``students`` (those given to it): the students with
    a submitted notebook of which it left no autograded copy, and so recorded no score.

    Returns, first, student -> the error nbgrader's log gives for that student's notebook (nbgrader
    refused it), and second, the students for whom the log gives none (nbgrader stopped before
    them, say: not the student's doing).
    """
    names = notebook_names(assignment, root)
    undone = [
        student
        for student in students
        if any(
            (Path(root) / "submitted" / student / assignment / f"{name}.ipynb").is_file()
            and not (Path(root) / "autograded" / student / assignment / f"{name}.ipynb").is_file()
            for name in names
        )
    ]
    reasons = nbgrader_errors(log, assignment, undone)
    return reasons, [student for student in undone if student not in reasons]


def _sandbox_score(root: Path, assignment: str, student: str) -> str:
    """What the sandboxed grader's reports give the student ('' if there are none)."""
    try:
        reports = [
            Report.from_json(report_path(root, assignment, student, name).read_text())
            for name in notebook_names(assignment, root)
        ]
    except (OSError, ValueError, TypeError, KeyError):
        return ""
    if not reports or any(r.not_graded for r in reports):
        return ""
    return f"{sum(r.score for r in reports):g} / {sum(r.max_score for r in reports):g}"


# ----------------------------------------------------------------------------- feedback


def write_feedback(
    assignment: str,
    students: list[str],
    root: Path = COURSE_ROOT,
    *,
    exclude: list[str] | tuple = (),
    env: dict | None = None,
    quiet: bool = False,
    seconds: float = FEEDBACK_SECONDS,
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Phase 5: ``nbgrader generate_feedback`` for ``students`` but ``exclude``, each notebook within ``seconds``.

    nbgrader renders each notebook as HTML with no time limit of its own, and one notebook can hold
    it for hours (the markdown that :class:`~autograder.nbgrader_plugins.LimitMarkdown` cuts and
    :func:`~autograder.nbgrader_plugins.strip_files_prefix` renders in linear time is one such;
    others may be unknown). So one nbgrader process writes the class's feedback, watched:
    ``LimitMarkdown``, its first step for each notebook, names the notebook it starts in a file
    (``AUTOGRADER_FEEDBACK_PROGRESS``); a notebook still being written ``seconds`` later stops the
    process, with everything it started. That student's feedback on it is then a page of the
    course's saying so (written in phase 6), and nbgrader starts again for the students it had not
    reached. The phase takes at most ``seconds`` per notebook, and nbgrader's start-up
    (``NBGRADER_START_SECONDS`` at most) each time it starts.

    Returns the notes per student (markdown cut, feedback stopped) and, per student whose feedback
    was stopped, the notebook it was stopped on.
    """
    notes: dict[str, list[str]] = {}
    stopped: dict[str, str] = {}
    pending = [student for student in students if student not in set(exclude)]
    while pending:
        others = sorted(set(students) - set(pending))
        excluded = [f"--CourseDirectory.student_id_exclude={','.join(others)}"] if others else []
        with tempfile.TemporaryDirectory(prefix="autograder-feedback-") as tmp:
            progress = Path(tmp) / "progress.jsonl"
            progress.touch()
            running = run_nbgrader.start(
                "generate_feedback",
                assignment,
                "--force",
                *excluded,
                root=root,
                quiet=quiet,
                log_level="ERROR",
                env={**(env or {}), FEEDBACK_PROGRESS: str(progress)},
            )
            reached: list[str] = []  # students in the order nbgrader started them; all but the last are done
            current, since, limit, timed_out, unread = None, time.monotonic(), NBGRADER_START_SECONDS, False, ""
            with progress.open() as announcements:
                while True:
                    ended = running.poll() is not None
                    unread += announcements.read()
                    *complete, unread = unread.split("\n")
                    for line in complete:
                        try:
                            event = json.loads(line)
                            student, notebook = str(event["student"]), str(event["notebook"])
                        except (ValueError, TypeError, KeyError):  # written by LimitMarkdown alone; never expected
                            continue
                        if student not in pending:
                            continue
                        if student not in reached:
                            reached.append(student)
                        current, since, limit = (student, notebook), time.monotonic(), seconds
                        if event.get("cut"):
                            notes.setdefault(student, []).append(
                                f"feedback on {notebook}.ipynb: {int(event['cut'])} markdown cell(s) too long "
                                "to show were cut"
                            )
                    if ended:
                        break
                    if time.monotonic() - since > limit:
                        running.stop()
                        timed_out = True
                        break
                    time.sleep(0.1)
            running.wait()
        if not timed_out:
            break
        if current is None:  # nbgrader wrote nothing at all: its failure, not a student's
            for student in pending:
                notes.setdefault(student, []).append(
                    f"feedback not written: nbgrader generate_feedback started no notebook within "
                    f"{NBGRADER_START_SECONDS:g} s and was stopped"
                )
            break
        slow, notebook = current
        stopped[slow] = notebook
        notes.setdefault(slow, []).append(
            f"feedback on {notebook}.ipynb not written: it took over {seconds:g} s and was stopped "
            "(the student's feedback page says so)"
        )
        pending = [student for student in pending if student not in reached]
    return notes, stopped


def feedback_page(assignment: str, notebook: str, paragraphs: list[str]) -> str:
    """A feedback page of the course's own: a title and ``paragraphs`` of plain text, every one cleaned
    (:func:`clean_text`) and escaped."""
    title = f"Feedback on {notebook}.ipynb ({assignment})"
    body = "".join(f"<p>{html.escape(clean_text(text, 4000))}</p>\n" for text in paragraphs)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n</head>\n<body>\n<h1>{html.escape(title)}</h1>\n{body}</body>\n</html>\n"
    )


def write_feedback_page(root: Path, student: str, assignment: str, notebook: str, paragraphs: list[str]) -> Path:
    """Write :func:`feedback_page` where nbgrader writes the student's feedback on that notebook."""
    path = Path(root) / "feedback" / student / assignment / f"{notebook}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(feedback_page(assignment, notebook, paragraphs))
    return path


def _score_line(assignment: str, result: Result) -> str:
    failed = f" Tests failed: {', '.join(result.failed)}." if result.failed else ""
    return f"Your score for {assignment}: {result.score:g} / {result.max_score:g}.{failed}"


def column_order(assignment: str, root: Path = COURSE_ROOT) -> list[str]:
    """The CSV's columns of scores: the test cells', then the written answers', each in the notebooks' order."""
    tests, written = [], []
    for name in notebook_names(assignment, root):
        cells = notebooks.read(Path(root) / "solutions" / assignment / f"{name}.ipynb").cells
        tests += [notebooks.cell_id(c) for c in cells if notebooks.is_test(c)]
        written += [notebooks.cell_id(c) for c in cells if notebooks.is_written(c)]
    return tests + written


def write_csv(path: Path, results: list[Result], order: list[str] | None = None) -> None:
    """One row per student; the columns of the tests and the written answers in ``order`` (the notebook's),
    others after them; a written answer not graded yet is empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    seen = {name for r in results for name in [*r.tests, *r.written]}
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
                    *[_cell(r, t) for t in tests],
                    r.note,
                ]
            )


def _cell(result: Result, name: str):
    score = (result.tests.get(name) or result.written.get(name) or ("", ""))[0]
    return "" if score is None else score


def summary(assignment: str, results: list[Result]) -> str:
    width = max([7, *(len(clean_text(r.student, 80)) for r in results)])
    lines = [
        f"Grades for {assignment}: {len(results)} submission(s)",
        f"{'student':<{width}}  {'score':>11}  failed tests / notes",
    ]
    for r in results:
        score = "not graded" if r.score is None else f"{r.score:g} / {r.max_score:g}"
        failed = "" if r.unanswered else ", ".join(r.failed)  # every test: the note says nothing was answered
        notes = ", ".join(filter(None, [failed, r.note])) or "all passed"
        notes = "; ".join(filter(None, [notes, awaiting_note(r)]))
        notes = clean_text(notes, 1000).replace("\n", " ")
        lines.append(f"{clean_text(r.student, 80):<{width}}  {score:>11}  {notes}")
    graded = [r for r in results if r.score is not None]
    if graded:
        mean = sum(r.score for r in graded) / len(graded)
        full = sum(r.score == r.max_score - r.awaiting_points for r in graded)
        so_far = " so far (written answers await grading)" if any(r.awaiting for r in graded) else ""
        lines.append(f"mean {mean:.2f} / {graded[0].max_score:g}; full marks{so_far}: {full} of {len(graded)}")
    awaiting = [r for r in graded if r.awaiting]
    if awaiting:
        answers = sum(len(r.awaiting) for r in awaiting)
        lines.append(
            f"awaiting manual grading: {answers} written answer(s) of {len(awaiting)} student(s); grade them in "
            f"formgrader, then write the CSV again: make grades ASSIGNMENT={assignment}"
        )
    missing = len(results) - len(graded)
    if missing:
        lines.append(f"not graded: {missing} (the grader's failure, see the notes; grade them again once fixed)")
    return "\n".join(lines)


def _write_feedback_pages(
    root: Path,
    assignment: str,
    result: Result,
    refused: dict[str, str],
    refused_by_nbgrader: dict[str, str],
    stopped: dict[str, str],
    seconds: float,
) -> str | None:
    """The course's own feedback pages, where nbgrader wrote none: for a refused submission (every
    notebook) and for a notebook whose feedback was stopped (it and the student's notebooks after it).
    A note for the instructor where they cannot be released."""
    student, names = result.student, notebook_names(assignment, root)
    if student in refused:
        why = f"Your submission was refused: {refused[student].removeprefix('refused: ')}."
        pages = dict.fromkeys(names, [why, _score_line(assignment, result), "Submit again, or ask your instructor."])
    elif student in refused_by_nbgrader:
        # The student's page names the kind of error only: nbgrader's message can quote the notebook as
        # the gradebook restored it (hidden tests included), so it goes to the instructor's notes alone.
        kind = refused_by_nbgrader[student].split(":")[0].rsplit(".", 1)[-1].strip()
        why = (
            f"Your notebook was not graded: nbgrader, which records the grades, refused it"
            f"{f' ({kind})' if kind.isidentifier() else ''}. This happens when a notebook's format or the "
            "nbgrader metadata of its cells was changed by hand."
        )
        advice = "Copy your answers into the notebook as it was released and submit that, or ask your instructor."
        pages = dict.fromkeys(names, [why, _score_line(assignment, result), advice])
    elif student in stopped:
        folder = Path(root) / "feedback" / student / assignment
        late = [name for name in names if name == stopped[student] or not (folder / f"{name}.html").is_file()]
        why = (
            f"The feedback on this notebook could not be written: writing it took more than {seconds:g} s, "
            "so it was stopped. This happens when a cell is very large (a markdown cell of many thousands "
            "of characters, for example). Your work was graded as usual."
        )
        pages = dict.fromkeys(late, [why, _score_line(assignment, result)])
    else:
        return None
    written = [write_feedback_page(root, student, assignment, name, paragraphs) for name, paragraphs in pages.items()]
    return _releasable(root, student, assignment, written)


def _releasable(root: Path, student: str, assignment: str, written: list[Path]) -> str | None:
    """Give the feedback folder what ``nbgrader release_feedback`` reads beside each page (the
    submission's secret and time, from the autograded or collected submission) so that it can
    release the pages just ``written``. A submission the course's collect refused without a secret
    it could read (the student may have made it unreadable) leaves no page: one page without a
    secret stops the release for the whole class; a note for the instructor then. Any other
    submission without one did not come through ``nbgrader submit``, and its pages stay, as
    nbgrader's own would."""
    folder = Path(root) / "feedback" / student / assignment
    sources = [folder, *(Path(root) / kind / student / assignment for kind in ("autograded", "submitted"))]
    secret = next(filter(None, map(exchange.submission_secret, sources)), None)
    if secret is None and exchange.refusal_reason(sources[-1]) is not None:
        for page in written:
            page.unlink(missing_ok=True)
        return (
            f"no feedback page released: the refused submission has no readable {exchange.SECRET}, which "
            "nbgrader release_feedback needs (the student sees their score in the course's export only)"
        )
    if secret is not None:
        (folder / exchange.SECRET).write_text(secret)
    if not (folder / exchange.TIMESTAMP).is_file() or (folder / exchange.TIMESTAMP).is_symlink():
        when = next(filter(None, map(exchange.submitted_time, sources[1:])), None)
        (folder / exchange.TIMESTAMP).unlink(missing_ok=True)
        (folder / exchange.TIMESTAMP).write_text(when or time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    return None


def _record_tests(assignment: str, root: Path) -> None:
    """Phase 1: the assignment's test cells into the gradebook; exercises/ is left alone."""
    with tempfile.TemporaryDirectory() as tmp:
        exercises.generate([assignment], into=Path(tmp), db_url=db_url(root), root=root, quiet=True)


def _grade_in_sandbox(
    assignment: str,
    students: list[str],
    root: Path,
    quiet: bool,
    jobs: int,
    sandbox: bool,
    settings: course.Release,
) -> Precomputed:
    """Phases 2 and 3: the preflight, then every submission graded in the sandbox (nothing without ``sandbox``)."""
    if not sandbox:
        return Precomputed({student: [] for student in students})
    from autograder.grading.notebook import preflight

    _say(quiet, "[2/6] checking that the sandbox works (a program known to be right)")
    problem = preflight(settings)
    if problem:
        raise GradingUnavailable(f"grading cannot start, and nothing was scored: {problem}")
    refused = refusals(assignment, students, root)
    also = f" ({len(refused)} refused, see the summary)" if refused else ""
    _say(quiet, f"[3/6] grading {len(students) - len(refused)} submission(s) in the sandbox, {jobs} at a time{also}")
    return precompute(assignment, students, root, jobs, progress=not quiet, settings=settings, refused=refused)


def _write_feedback_in_parallel(
    assignment: str, students: list[str], root: Path, jobs: int, *, exclude, **options
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Phase 5 in up to ``jobs`` nbgrader processes at once, each writing the feedback of every
    ``jobs``-th student (:func:`write_feedback` each); their notes and stopped notebooks together."""
    given = [student for student in students if student not in set(exclude)]
    shares = [given[i :: max(1, jobs)] for i in range(min(max(1, jobs), len(given)))] or [[]]
    with ThreadPoolExecutor(len(shares)) as pool:
        outcomes = list(
            pool.map(
                lambda share: write_feedback(
                    assignment, students, root, exclude=[s for s in students if s not in share], **options
                ),
                shares,
            )
        )
    notes: dict[str, list[str]] = {}
    stopped: dict[str, str] = {}
    for share_notes, share_stopped in outcomes:
        notes.update(share_notes)
        stopped.update(share_stopped)
    return notes, stopped


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
    feedback_seconds: float = FEEDBACK_SECONDS,
    allow_released: bool = False,
) -> list[Result]:
    """Grade every submission of ``assignment`` under ``root``; see the module's docstring.

    ``sandbox=False`` skips the parallel sandboxed pass and leaves execution to
    whatever ``nbgrader autograde`` is configured with (for comparisons). ``settings``: the
    release whose packages the sandbox offers (default: the course's ``term.yml`` and
    environment); nbgrader's own run is given the same. ``feedback_seconds``: the most that
    writing one notebook's feedback may take (:func:`write_feedback`). Raises
    :class:`GradingUnavailable` when the sandbox does not work; then nothing is scored.
    Raises :class:`autograder.course.ReleasedRefusal` for a term's released assignment unless
    ``allow_released`` (nbgrader's own run, through the course's plugin, is told the same).
    """
    root = Path(root)
    settings = settings or course.release(root)
    refusal = course.grading_refusal(assignment, settings, allow_released)
    if refusal:
        raise course.ReleasedRefusal(refusal)
    env = course.environment(settings)
    students = submitted_students(assignment, root)
    if not students:
        raise SystemExit(f"nothing to grade: no folder submitted/<student>/{assignment}/ under {root}")
    _say(quiet, f"[1/6] recording the tests of {assignment} in the gradebook (in the background)")
    with ThreadPoolExecutor(1) as background:  # leaving it waits for phase 1, whatever happened
        recording = background.submit(_record_tests, assignment, root)
        found = _grade_in_sandbox(assignment, students, root, quiet, jobs, sandbox, settings)
        recording.result()
    # nbgrader warns about every test cell with hidden tests (its checksum changes on release),
    # so only its errors are shown; the summary lists what each student lost. Refused and
    # not-graded submissions are not given to nbgrader: it would follow a link, or record a zero.
    excluded = sorted({*found.refused, *found.not_graded})
    exclude = [f"--CourseDirectory.student_id_exclude={','.join(excluded)}"] if excluded else []
    if allow_released:
        exclude.append("--SandboxedExecute.allow_released=True")
    _say(quiet, "[4/6] recording the scores in the gradebook (nbgrader autograde)")
    autograde = run_nbgrader.run(
        "autograde", assignment, "--force", *exclude, root=root, check=False, quiet=quiet, log_level="ERROR", env=env
    )
    given = [student for student in students if student not in excluded]
    refused_by_nbgrader, unexplained = nbgrader_refused(
        assignment, given, root, f"{autograde.stdout}\n{autograde.stderr}"
    )
    for student in unexplained:  # never a silent 0: the grader's failure, to grade again
        found.not_graded[student] = (
            "nbgrader autograde recorded no score for this submission, and its log names no error of its "
            "(it may have stopped before it: see nbgrader's errors)"
        )
    for student, why in list(refused_by_nbgrader.items()):
        if why.startswith(f"{NotGraded.__module__}.{NotGraded.__name__}:"):  # the grader's failure, not a refusal
            found.not_graded[student] = why.split("not graded: ", 1)[-1]
            del refused_by_nbgrader[student]
    _say(quiet, "[5/6] writing each student's feedback (nbgrader generate_feedback)")
    feedback_notes, stopped = _write_feedback_in_parallel(
        assignment,
        students,
        root,
        jobs,
        exclude=[*excluded, *found.not_graded, *refused_by_nbgrader],
        env=env,
        quiet=quiet,
        seconds=feedback_seconds,
    )
    _say(quiet, f"[6/6] writing grades/{assignment}.csv")
    if found.refused:  # in the gradebook, with no submission: nbgrader's export lists them with 0
        from nbgrader.api import Gradebook

        with Gradebook(db_url(root)) as gradebook:
            for student in found.refused:
                gradebook.update_or_create_student(student)
    results = collect(assignment, students, root)
    for result in results:
        student = result.student
        if student in found.not_graded:
            result.score, result.tests, result.written = None, {}, {}
            result.note = f"not graded: {found.not_graded[student]}"
            continue
        refusal = found.refused.get(student, "")
        if student in refused_by_nbgrader:
            sandboxed = _sandbox_score(root, assignment, student)
            refusal = f"refused by nbgrader: {refused_by_nbgrader[student]}" + (
                f" (the sandboxed grader's report gave {sandboxed}; nbgrader recorded no score)" if sandboxed else ""
            )
        if refusal:
            result.score, result.tests, result.written = 0.0, {}, {}
        blank = [] if refusal else found.unanswered.get(student, [])
        result.unanswered = bool(blank) and set(blank) >= set(notebook_names(assignment, root))
        unreleased = _write_feedback_pages(
            root, assignment, result, found.refused, refused_by_nbgrader, stopped, feedback_seconds
        )
        extra = [
            refusal,
            *(_unanswered_note(name) for name in blank),
            *found.notes.get(student, []),
            *feedback_notes.get(student, []),
            unreleased,
        ]
        result.note = clean_text("; ".join(filter(None, [result.note, *extra])), 4000)
    write_csv(root / "grades" / f"{assignment}.csv", results, column_order(assignment, root))
    return results


def rewrite_csv(assignment: str, root: Path = COURSE_ROOT) -> list[Result]:
    """``grades/<assignment>.csv`` written again from the gradebook, with the scores that the instructor has
    given the written answers since (formgrader): the tests' scores are as graded, each student keeps the notes
    of the grading (a refusal, nothing answered, ...), and one who was not graded or was refused stays so."""
    path = root / "grades" / f"{assignment}.csv"
    if not path.is_file():
        raise GradingUnavailable(f"no {path}: grade the class first (make grade ASSIGNMENT={assignment})")
    with path.open(newline="") as f:
        before = {row["student"]: row for row in csv.DictReader(f)}
    results = collect(assignment, list(before), root)
    for result in results:
        row = before[result.student]
        notes = [n for n in (row.get("note") or "").split("; ") if n]
        if (row.get("score") or "") == "":  # not graded: the grader's failure, never a score
            result.score, result.tests, result.written = None, {}, {}
        elif any(n.startswith("refused") for n in notes):
            result.score, result.tests, result.written = float(row["score"]), {}, {}
        result.unanswered = any(n.startswith("nothing answered") for n in notes)
        result.note = clean_text("; ".join(notes), 4000)
    write_csv(path, results, column_order(assignment, root))
    return results


def _unanswered_note(notebook: str) -> str:
    """The note on a notebook that answers nothing (:func:`nothing_answered`), for the CSV and the summary."""
    return (
        f"nothing answered: {notebook}.ipynb is as released (no answer cell written in, no code added), "
        "so every test failed; was the right file submitted?"
    )


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
    parser.add_argument(
        "--csv-only",
        action="store_true",
        help="grade nothing: write grades/<assignment>.csv again from the gradebook, with the written answers' "
        "scores given since in formgrader (make grades)",
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
    if args.assignment not in course.assignments(args.root):
        parser.error(f"no assignment {args.assignment!r} under {args.root / 'solutions'}")
    if args.csv_only:
        try:
            results = rewrite_csv(args.assignment, args.root)
        except GradingUnavailable as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(summary(args.assignment, results))
        print(f"Grades:   {args.root / 'grades' / (args.assignment + '.csv')}")
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
    try:
        results = grade(
            args.assignment,
            args.root,
            jobs=args.jobs,
            settings=settings,
            feedback_seconds=args.feedback_seconds,
            allow_released=args.allow_released,
        )
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
