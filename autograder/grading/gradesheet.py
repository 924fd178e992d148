"""The class's grades: each student's result read from nbgrader's gradebook, the CSV and the summary.

``grades/<assignment>.csv`` has one row per student and one column per test cell, then per written
answer (graded by hand in formgrader), in the notebooks' order (:func:`column_order`), and the notes
of the grading; the summary (:func:`summary`) is the table that ``make grade`` prints.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.grading import lateness
from autograder.grading.deadlines import deadline
from autograder.grading.submissions import notebook_names
from autograder.text.terminal import clean_text


@dataclass
class Result:
    student: str
    score: float | None = None  # None: not graded (the grader's failure), never a score
    max_score: float = 0.0
    tests: dict[str, tuple[float, float]] = field(default_factory=dict)  # grade_id -> (score, max)
    note: str = ""
    unanswered: bool = False  # every notebook as released (sandboxed.nothing_answered): the note says so
    # the written answers, graded by hand (formgrader): grade_id -> (score, max); None: not graded yet
    written: dict[str, tuple[float | None, float]] = field(default_factory=dict)
    # the written answers left as released, which nbgrader scores 0 at once (its checksum rule), in order
    blank: list[str] = field(default_factory=list)
    # what make grade's phase 3 did with the student's notebooks and why: graded, or a saved report used (not in
    # the CSV: grades/.grader/, autograder.grading.saved)
    grading: str = ""
    late: str = ""  # how late the submission was and what it lost (autograder.grading.lateness.late_note); '' on time
    refused: bool = False  # scored 0 without being graded (make grade's refusal, or nbgrader's): in no class count

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

    def void(self, score: float | None) -> None:
        """Set the score alone (None: not graded; a refused submission's), with no test, written answer or lateness."""
        self.note = "" if self.note == self.late else self.note
        self.score, self.tests, self.written, self.blank, self.late = score, {}, {}, [], ""


def db_url(root: Path) -> str:
    return f"sqlite:///{Path(root).resolve() / 'gradebook.db'}"


def collect(assignment: str, students: list[str], root: Path = COURSE_ROOT) -> list[Result]:
    """Each student's score and per-test scores, from the gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    results = []
    found = deadline(assignment, root)
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
            penalty = lateness.penalty(submission)
            result.score, result.max_score = max(0.0, submission.score - penalty), submission.max_score
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    if not grade.max_score:
                        continue
                    if grade.cell.cell_type == "markdown":  # a written answer: graded by hand
                        state = written_state(grade)
                        result.written[grade.name] = (None if state == AWAITING else grade.score, grade.max_score)
                        if state == BLANK:
                            result.blank.append(grade.name)
                    else:
                        result.tests[grade.name] = (grade.score or 0.0, grade.max_score)
            result.note = result.late = lateness.late_note(submission, found)
            results.append(result)
    return results


AWAITING, BLANK = "awaiting", "blank"


def written_state(grade) -> str | None:
    """Where a written answer's gradebook ``grade`` stands: :data:`AWAITING` (nobody has graded it), :data:`BLANK`
    (left as released: nbgrader gives a written answer an automatic score, 0, only where the cell is unchanged
    since its release, its checksum rule, and nothing is left for the instructor), or None (graded by hand)."""
    if grade.manual_score is not None:
        return None
    return AWAITING if grade.auto_score is None else BLANK


# The one set of words for a written answer, in the summary, the CSV, `nbgrader export` and the feedback page: one
# that nobody has graded yet awaits grading (its points counted as 0 until then, in the maximum from the start:
# one total everywhere), one left as released is left blank (0 at once), one graded shows its score.
AWAITING_WORDS = "awaiting grading"  # its cell in the CSV, and the words of every note on it
AWAITING_NOTE = f" {AWAITING_WORDS}: "  # what marks :func:`awaiting_words`' note among a CSV row's
BLANK_NOTE = " left blank: 0 of "  # what marks :func:`blank_words`' note among a CSV row's


def _answers(names: list[str]) -> str:
    return f"written {'answers' if len(names) > 1 else 'answer'} {', '.join(names)}"


def awaiting_words(points: dict[str, float]) -> str:
    """The words on the written answers of ``points`` (grade_id -> points) that await grading; '' for none."""
    if not points:
        return ""
    total = notebooks.points_text(sum(points.values()))
    return f"{_answers(list(points))}{AWAITING_NOTE}{total}, counted as 0 until graded"


def blank_words(points: dict[str, float]) -> str:
    """The words on the written answers of ``points`` (grade_id -> points) left as released; '' for none."""
    if not points:
        return ""
    return f"{_answers(list(points))}{BLANK_NOTE}{notebooks.points_text(sum(points.values()))}"


def awaiting_note(result: Result) -> str:
    """The note, in the CSV and the summary, on the written answers of ``result`` that are not graded yet."""
    return awaiting_words({name: result.written[name][1] for name in result.awaiting})


def blank_note(result: Result) -> str:
    """The note, in the CSV and the summary, on the written answers that ``result`` left as released: nbgrader
    scores each 0 at once (it is unchanged since its release), and none awaits the instructor."""
    return blank_words({name: result.written.get(name, (0.0, 0.0))[1] for name in result.blank})


def is_blank_note(note: str) -> bool:
    """Whether ``note``, one of a CSV row's, is the gradebook's to give afresh: :func:`blank_note`'s or
    :func:`awaiting_note`'s (an answer graded since is neither)."""
    return note.startswith("written answer") and (BLANK_NOTE in note or AWAITING_NOTE in note)


def notes(result: Result) -> str:
    """The note of ``result``'s row in the CSV: the grading's notes, then the written answers awaiting grading
    and left blank."""
    return "; ".join(filter(None, [result.note, awaiting_note(result), blank_note(result)]))


def unanswered_note(notebook: str) -> str:
    """The note on a notebook that answers nothing (:func:`~autograder.grading.sandboxed.nothing_answered`),
    for the CSV, the summary and the feedback page."""
    return (
        f"nothing answered: {notebook}.ipynb is as released (no answer cell written in, no code added), "
        "so every test failed; was the right file submitted?"
    )


def class_counts(scored: list[Result]) -> list[str]:
    """The summary's counts over the ``scored`` submissions, each saying what it counts: the mean score, the
    students with every test passed and those with full marks, over the submissions graded (a refused one, scored
    0 without being graded, is counted apart); the written answers awaiting grading (and the students whose full
    marks await only them) or left blank."""
    graded = [r for r in scored if not r.refused]
    refused = len(scored) - len(graded)
    apart = f" ({refused} refused, scored 0, not counted)" if refused else ""
    if not graded:
        return [f"no submission graded{apart}"] if refused else []
    n, most = len(graded), graded[0].max_score
    mean = sum(r.score for r in graded) / n
    passed = sum(bool(r.tests) and not r.failed for r in graded)
    awaiting = [r for r in graded if r.awaiting]
    full = sum(r.score == r.max_score for r in graded)
    counts = (
        f"mean score {mean:.2f} / {most:g} over {n} graded submission(s){apart}; every test passed: {passed} of {n}"
    )
    counts += f"; full marks (every test and written answer): {full} of {n}"
    waiting = sum(r.score + r.awaiting_points == r.max_score for r in awaiting)
    if waiting:
        counts += f", and {waiting} more if the written answers awaiting grading earn every point"
    lines = [counts]
    late = sum(bool(r.late) for r in graded)
    if late:
        lines.append(f"submitted late: {late} of {n} (each student's note says how late, and what it cost)")
    if awaiting:
        lines.append(
            f"written answers awaiting manual grading: {sum(len(r.awaiting) for r in awaiting)}, of {len(awaiting)} "
            f"student(s), {sum(r.awaiting_points for r in awaiting):g} points in all (0 in the scores until graded)"
        )
    blank = [r for r in graded if r.blank]
    if blank:
        lines.append(
            f"written answers left blank (as released: 0 points, nothing to grade): "
            f"{sum(len(r.blank) for r in blank)}, of {len(blank)} student(s)"
        )
    return lines


Cells = list[tuple[str, str, float]]  # (grade_id, notebook, points)


def graded_cells(assignment: str, root: Path = COURSE_ROOT) -> tuple[Cells, Cells]:
    """The assignment's test cells and written answers, each ``(grade_id, notebook, points)``, in the notebooks'
    order, from the instructor's notebooks."""
    tests, written = [], []
    for name in notebook_names(assignment, root):
        for cell in notebooks.read(Path(root) / "solutions" / assignment / f"{name}.ipynb").cells:
            if notebooks.is_test(cell):
                tests.append((notebooks.cell_id(cell), name, notebooks.points_of(cell)))
            elif notebooks.is_written(cell):
                written.append((notebooks.cell_id(cell), name, notebooks.points_of(cell)))
    return tests, written


def column_order(assignment: str, root: Path = COURSE_ROOT) -> list[str]:
    """The CSV's columns of scores: the test cells', then the written answers', each in the notebooks' order."""
    tests, written = graded_cells(assignment, root)
    return [gid for gid, *_ in tests + written]


def write_csv(path: Path, results: list[Result], order: list[str] | None = None) -> None:
    """One row per student; the columns of the tests and the written answers in ``order`` (the notebook's),
    others after them; a written answer not graded yet says so (:data:`AWAITING_WORDS`), as its note does."""
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
                    notes(r),
                ]
            )


def _cell(result: Result, name: str):
    score = (result.tests.get(name) or result.written.get(name) or ("", ""))[0]
    return AWAITING_WORDS if score is None else score


def summary(assignment: str, results: list[Result]) -> str:
    """The table that ``make grade`` and ``make grades`` print: each student's score, failed tests and notes, then
    what the class's counts count (:func:`class_counts`)."""
    width = max([7, *(len(clean_text(r.student, 80)) for r in results)])
    lines = [
        f"Grades for {assignment}: {len(results)} submission(s)",
        f"{'student':<{width}}  {'score':>11}  failed tests / notes",
    ]
    for r in results:
        score = "not graded" if r.score is None else f"{r.score:g} / {r.max_score:g}"
        failed = "" if r.unanswered else ", ".join(r.failed)  # every test: the note says nothing was answered
        passed = "all tests passed" if r.tests and not r.failed else ""
        # the failed tests, one list, then each note after a semicolon
        notes = "; ".join(filter(None, [f"failed: {failed}" if failed else passed, r.note]))
        notes = "; ".join(filter(None, [notes, awaiting_note(r), blank_note(r)]))
        notes = clean_text(notes, 1000).replace("\n", " ")
        lines.append(f"{clean_text(r.student, 80):<{width}}  {score:>11}  {notes}")
    graded = [r for r in results if r.score is not None]
    lines += class_counts(graded)
    awaiting = [r for r in graded if r.awaiting]
    if awaiting:
        lines.append(
            f"grade the written answers that await you in formgrader (make formgrader), then bring the CSV, the "
            f"feedback and nbgrader export's grades/all.csv up to date: make grades ASSIGNMENT={assignment}"
        )
    missing = len(results) - len(graded)
    if missing:
        lines.append(f"not graded: {missing} (the grader's failure, see the notes; grade them again once fixed)")
    return "\n".join(lines)


def stale_written_grades(assignment: str, students: list[str], root: Path = COURSE_ROOT) -> dict[str, list[str]]:
    """The scores given by hand to written answers whose text the student has changed since: each dropped from
    the gradebook (the answer awaits the instructor again), student -> the grade ids dropped.

    nbgrader's autograde keeps a score given by hand whatever the answer now says; ``make grade`` calls this
    before it, comparing each written answer of ``submitted/`` with the text that was graded, nbgrader's copy
    in ``autograded/`` from the last grading. An answer whose text is the same keeps its score; a notebook
    that either copy lacks or that cannot be read drops nothing."""
    from nbgrader.api import Gradebook, MissingEntry

    dropped: dict[str, list[str]] = {}
    with Gradebook(db_url(root)) as gradebook:
        for student in students:
            for name in notebook_names(assignment, root):
                now = Path(root) / "submitted" / student / assignment / f"{name}.ipynb"
                graded = Path(root) / "autograded" / student / assignment / f"{name}.ipynb"
                try:
                    if now.is_symlink() or graded.is_symlink():
                        continue
                    before = notebooks.written_cells(notebooks.read(graded))
                    after = notebooks.written_cells(notebooks.read(now))
                except Exception:  # a copy missing or unreadable: nothing to compare, nothing dropped
                    continue
                for gid, cell in before.items():
                    if gid in after and after[gid].source == cell.source:
                        continue
                    try:
                        grade = gradebook.find_grade(gid, name, assignment, student)
                    except MissingEntry:
                        continue
                    if grade.manual_score is not None:
                        grade.manual_score = None
                        dropped.setdefault(student, []).append(gid)
            gradebook.db.commit()
    return dropped


def read_results(assignment: str, root: Path = COURSE_ROOT) -> list[Result]:
    """The class's results as ``grades/<assignment>.csv`` and the gradebook hold them now, changing neither (for the
    class report, ``make class-report``); a :class:`FileNotFoundError` where the class was never graded."""
    path = Path(root) / "grades" / f"{assignment}.csv"
    with path.open(newline="") as f:
        return as_graded(assignment, root, {row["student"]: row for row in csv.DictReader(f)})


def as_graded(assignment: str, root: Path, before: dict[str, dict]) -> list[Result]:
    """Each student's result from the gradebook, with the grading's notes of their row of the CSV in ``before``
    (student -> row): the tests' scores as graded, the written answers' as given since, and one who was not graded or
    was refused stays so."""
    results = collect(assignment, list(before), root)
    for result in results:
        row = before[result.student]
        # the notes on written answers left blank or awaiting grading, and on lateness, are the gradebook's to give
        # again (the result's note from it comes first)
        notes = [n for n in (row.get("note") or "").split("; ") if n and not is_blank_note(n)]
        notes = [result.note] + [n for n in notes if not lateness.is_late_note(n)]
        if (row.get("score") or "") == "":  # not graded: the grader's failure, never a score
            result.void(None)
        elif any(n.startswith("refused") for n in notes):
            result.void(float(row["score"]))
            result.refused = True
        result.unanswered = any(n.startswith("nothing answered") for n in notes)
        result.note = clean_text("; ".join(filter(None, notes)), 4000)
    return results
