"""What the class got wrong: the class report of one assignment after grading, and the term's over every assignment.

``make grade`` (and ``make grades``, ``make class-report``) writes it from what grading saved: each student's result
in the gradebook and the CSV (:func:`~autograder.grading.gradesheet.read_results`), and the grader's report of each
notebook (``grades/reports/``, :func:`~autograder.grading.handoff.report_path`). Per test cell: its points, who is at
full marks, partial, zero or not graded, the mean, and the causes of failure, each counted under the words the
grader gave it (:class:`~autograder.grading.report.Cause`: a known mistake, a property that failed and no known
mistake explains, a question's wrong part, ...), never guessed; per written answer: graded, awaiting grading, left
blank; the scores; the notebooks the grader could not grade (its failure) and the submissions refused (with the kind
of refusal, not its details, which name the student's files); the grading's times and what made a notebook slow.

Nothing of a student's code, text or errors is in it, nor any hidden input: only the grader's own words, scores,
seconds and, in the instructor's copy, the students' names (:mod:`autograder.grading.class_pages` writes it).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.grading import report as reports
from autograder.grading.gradesheet import Result, graded_cells, read_results
from autograder.grading.handoff import saved_reports
from autograder.grading.report import Cause, Report
from autograder.grading.submissions import notebook_names
from autograder.text.terminal import clean_text

UNRECORDED = "unrecorded"  # a failed test cell whose report is missing: counted, its cause unknown
KIND_WORDS = {
    reports.KNOWN: "a known mistake",
    reports.UNKNOWN: "not a known mistake",
    reports.PART: "a part answered wrong",
    reports.UNWRITTEN: "not written yet",
    reports.STOPPED: "stopped",
    reports.ERROR: "the test could not run",
    reports.NOT_RUN: "not run",
    UNRECORDED: "no cause recorded",
}
UNRECORDED_CAUSE = Cause(UNRECORDED, "no report of the grader's names it (none saved, or one from before causes were)")
SLOWEST = 10  # notebooks listed by their grading time
MOST_LOST = 5  # test cells listed first, as the lecture's plan


@dataclass
class Counted:
    """One cause of failure of a test cell, and the students whose failure it is."""

    kind: str  # a Cause's kind, or UNRECORDED
    words: str
    students: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.students)


@dataclass
class TestItem:
    """A test cell across the class: who is where, the mean over the graded, and why it was lost."""

    grade_id: str
    notebook: str
    points: float
    full: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    zero: list[str] = field(default_factory=list)
    not_graded: list[str] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)  # student -> score, the graded only
    causes: list[Counted] = field(default_factory=list)  # the most frequent first
    seconds: float = 0.0  # its mean grading time, over the notebooks whose report holds it

    @property
    def graded(self) -> int:
        return len(self.scores)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scores.values()) if self.scores else None

    @property
    def lost(self) -> float:
        """The points the class lost on it, over the graded."""
        return sum(self.points - score for score in self.scores.values())

    def discrimination(self, totals: dict[str, float]) -> float | None:
        """The item-rest correlation (item analysis's discrimination): how well scoring on this cell goes with scoring
        on the rest of the assignment (``totals``: each graded student's score), from -1 to 1; None where either
        does not vary (every student alike) or fewer than three were graded. A low or negative one marks a cell
        that the students who do well elsewhere lose too: a check to read again."""
        students = [s for s in self.scores if s in totals]
        if len(students) < 3:
            return None
        own = [self.scores[s] for s in students]
        rest = [totals[s] - self.scores[s] for s in students]
        if len(set(own)) < 2 or len(set(rest)) < 2:
            return None
        return statistics.correlation(own, rest)


@dataclass
class WrittenItem:
    """A written answer across the class, graded by hand."""

    grade_id: str
    notebook: str
    points: float
    graded: dict[str, float] = field(default_factory=dict)  # student -> score given
    awaiting: list[str] = field(default_factory=list)
    blank: list[str] = field(default_factory=list)  # left as released: 0, nothing to grade
    not_graded: list[str] = field(default_factory=list)  # the notebook was not graded

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.graded.values()) if self.graded else None


@dataclass
class NotebookTime:
    """How long one notebook's grading took, where, and what made it slow (in the grader's words)."""

    student: str
    notebook: str
    seconds: float
    phases: dict[str, float]
    why: list[str]


@dataclass
class ClassReport:
    assignment: str
    max_score: float
    scores: dict[str, float] = field(default_factory=dict)  # the graded submissions' scores (late penalties taken)
    refused: dict[str, str] = field(default_factory=dict)  # student -> the kind of refusal (scored 0, not counted)
    not_graded: dict[str, str] = field(default_factory=dict)  # student -> why (the grader's failure)
    unanswered: list[str] = field(default_factory=list)  # graded, with nothing answered
    late: list[str] = field(default_factory=list)
    tests: list[TestItem] = field(default_factory=list)  # in the notebooks' order
    written: list[WrittenItem] = field(default_factory=list)
    times: list[NotebookTime] = field(default_factory=list)  # every notebook graded, the slowest first

    @property
    def students(self) -> int:
        return len(self.scores) + len(self.refused) + len(self.not_graded)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scores.values()) if self.scores else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.scores.values()) if self.scores else None

    @property
    def stdev(self) -> float | None:
        return statistics.pstdev(self.scores.values()) if self.scores else None

    @property
    def at_full_marks(self) -> int:
        return sum(score >= self.max_score for score in self.scores.values())

    @property
    def awaiting(self) -> int:
        return sum(len(item.awaiting) for item in self.written)

    def most_lost(self, most: int = MOST_LOST) -> list[TestItem]:
        """The test cells that cost the class most points, the most first (none that cost nothing)."""
        lost = [item for item in self.tests if item.lost > 0]
        return sorted(lost, key=lambda item: (-item.lost, self.tests.index(item)))[:most]

    def to_json(self) -> dict:
        data = asdict(self)
        data["summary"] = {
            "students": self.students,
            "graded": len(self.scores),
            "mean": self.mean,
            "median": self.median,
            "stdev": self.stdev,
            "at_full_marks": self.at_full_marks,
            "awaiting_grading": self.awaiting,
        }
        for item, row in zip(self.tests, data["tests"]):
            row |= {"mean": item.mean, "lost": item.lost, "discrimination": item.discrimination(self.scores)}
            for counted, cause in zip(item.causes, row["causes"]):
                cause["count"] = counted.count
        for item, row in zip(self.written, data["written"]):
            row["mean"] = item.mean
        return data


def refusal_kind(note: str) -> str:
    """The kind of a refusal, from the grader's note on it: its details name the student's files, which the report
    leaves to the student's row of the CSV."""
    first = note.split("; ")[0]
    if "refused by nbgrader" in first:
        return "nbgrader could not read the notebook"
    if first.startswith("refused: missing "):
        return "no notebook of the assignment's name"
    if " holds " in first and any(word in first for word in ("link", "pipe", "plain files", "socket", "device")):
        return "not plain files and folders (a link, a pipe, ...)"
    if "collect" in first:
        return "refused by the course's collect"
    return "refused"


def build(assignment: str, root: Path = COURSE_ROOT, results: list[Result] | None = None) -> ClassReport:
    """The class report of ``assignment`` from what grading saved under ``root`` (``results``: the class's results
    where the caller has them, else read from the CSV and the gradebook)."""
    root = Path(root)
    results = read_results(assignment, root) if results is None else results
    test_cells, written_cells = graded_cells(assignment, root)
    names = notebook_names(assignment, root)
    report = ClassReport(assignment, sum(p for *_, p in test_cells) + sum(p for *_, p in written_cells))
    report.tests = [TestItem(gid, name, points) for gid, name, points in test_cells]
    report.written = [WrittenItem(gid, name, points) for gid, name, points in written_cells]
    causes: dict[str, dict[tuple[str, str], Counted]] = {item.grade_id: {} for item in report.tests}
    seconds: dict[str, list[float]] = {item.grade_id: [] for item in report.tests}
    for result in results:
        student = result.student
        if result.refused:
            report.refused[student] = refusal_kind(result.note)
            continue
        saved = saved_reports(root, assignment, student, names)
        if result.score is None:
            report.not_graded[student] = _not_graded_why(result, saved)
            for item in [*report.tests, *report.written]:
                item.not_graded.append(student)
            continue
        report.scores[student] = result.score
        if result.unanswered:
            report.unanswered.append(student)
        if result.late:
            report.late.append(student)
        by_gid = {gid: test for saved_report in saved.values() for gid, test in saved_report.tests.items()}
        for item in report.tests:
            if item.grade_id not in result.tests:
                item.not_graded.append(student)
                continue
            score, most = result.tests[item.grade_id]
            item.scores[student] = score
            (item.full if score >= most else item.partial if score > 0 else item.zero).append(student)
            test = by_gid.get(item.grade_id)
            if test is not None:
                seconds[item.grade_id].append(test.seconds)
            if score >= most:
                continue
            found = test.causes if test is not None and not test.passed and test.causes else []
            for cause in found or [UNRECORDED_CAUSE]:
                key = (cause.kind, clean_text(cause.words, 300))
                counted = causes[item.grade_id].setdefault(key, Counted(*key))
                if student not in counted.students:
                    counted.students.append(student)
        for item in report.written:
            score, _ = result.written.get(item.grade_id, (0.0, item.points))
            if item.grade_id in result.blank:
                item.blank.append(student)
            elif item.grade_id not in result.written:
                item.not_graded.append(student)
            elif score is None:
                item.awaiting.append(student)
            else:
                item.graded[student] = score
        for name, saved_report in saved.items():
            timed = NotebookTime(student, name, saved_report.seconds, saved_report.phases, slow_why(saved_report))
            report.times.append(timed)
    order = list(KIND_WORDS)
    for item in report.tests:
        item.causes = sorted(causes[item.grade_id].values(), key=lambda c: (-c.count, order.index(c.kind), c.words))
        item.seconds = statistics.fmean(seconds[item.grade_id]) if seconds[item.grade_id] else 0.0
    report.times.sort(key=lambda t: -t.seconds)
    return report


def _not_graded_why(result: Result, saved: dict[str, Report]) -> str:
    """Why a student's submission was not graded: the grader's own words (its report, or the CSV's note)."""
    why = next((r.not_graded for r in saved.values() if r.not_graded), "")
    if not why:  # the CSV's note on it, and nothing else of the row's
        notes = result.note.split("; ")
        why = next((n.removeprefix("not graded: ") for n in notes if n.startswith("not graded: ")), "")
    return clean_text(why or "not graded (the grader's failure)", 400).replace("\n", " ")


def slow_why(report: Report) -> list[str]:
    """What made a notebook's grading take the time it took, in the grader's words: the cells that hung or ended the
    process, the tests stopped at a limit, the time spent naming causes, the phase that took the most."""
    why = []
    if report.not_graded:
        why.append(clean_text(report.not_graded, 300))
    if report.skipped:
        why.append(f"{len(report.skipped)} cell(s) of the student's stopped (a time limit, or the process ended)")
    stopped = sum(any(c.kind == reports.STOPPED for c in t.causes) for t in report.tests.values())
    if stopped:
        why.append(f"{stopped} test(s) stopped (a time limit, or the process ended)")
    if report.phases:
        phase, spent = max(report.phases.items(), key=lambda kv: kv[1])
        if report.seconds and spent >= 0.5 * report.seconds:
            why.append(f"most of it in {phase} ({spent:.1f} s)")
    return why


# ---------------------------------------------------------------------------------------------------- the term


@dataclass
class TermReport:
    """Every assignment graded: its class's figures, the test cells most lost, each student's trajectory."""

    assignments: list[dict] = field(default_factory=list)  # name, graded, mean, max_score, at_full_marks
    most_lost: list[dict] = field(default_factory=list)  # assignment, grade_id, lost per graded student, top cause
    students: dict[str, dict[str, float | None]] = field(default_factory=dict)  # student -> assignment -> share

    def to_json(self) -> dict:
        return asdict(self)


def term(root: Path = COURSE_ROOT, assignments: list[str] | None = None, most: int = 10) -> TermReport:
    """The term report, from each assignment's saved class report (``grades/<assignment>-report.json``, which ``make
    grade`` writes), in the course's order."""
    from autograder.release import course

    names = assignments or course.assignments(root)
    found = TermReport()
    lost = []
    for name in names:
        path = Path(root) / "grades" / f"{name}-report.json"
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        summary, most_score = data["summary"], data["max_score"]
        found.assignments.append(
            {
                "assignment": name,
                "graded": summary["graded"],
                "students": summary["students"],
                "mean": summary["mean"],
                "max_score": most_score,
                "at_full_marks": summary["at_full_marks"],
            }
        )
        for student, score in data["scores"].items():
            found.students.setdefault(student, {})[name] = score / most_score if most_score else None
        for student in [*data["not_graded"], *data["refused"]]:
            found.students.setdefault(student, {})[name] = None
        for item in data["tests"]:
            graded = len(item["scores"])
            if graded and item["lost"] > 0:
                top = item["causes"][0] if item["causes"] else None
                lost.append(
                    {
                        "assignment": name,
                        "grade_id": item["grade_id"],
                        "points": item["points"],
                        "lost_per_student": item["lost"] / graded,
                        "share_lost": 1 - len(item["full"]) / graded,
                        "top_cause": None
                        if top is None
                        else {"kind": top["kind"], "words": top["words"], "count": len(top["students"])},
                    }
                )
    found.most_lost = sorted(lost, key=lambda row: -row["lost_per_student"])[:most]
    return found
