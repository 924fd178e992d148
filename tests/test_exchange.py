"""nbgrader's own workflow, end to end, through a local exchange, with the course's configuration.

One term is run once (module fixture) in temporary folders: an instructor's course folder (made by
``make_course``, with ``c.Exchange.root`` pointing at a temporary exchange and a late-penalty
method), and seven students, each with a working folder and a cache of their own. Four are honest:

* alice answers every item and submits on time;
* bob submits the notebook unanswered, with one test cell emptied and another deleted, on time;
* carol answers every item and submits after the due date.

and four attack the exchange once they have submitted, in their own folder there (which they own):

* dave swaps his notebook for a symbolic link to ``solutions/<a>/<a>.ipynb``;
* erin swaps hers for a symbolic link to alice's collected notebook, ``submitted/alice/<a>/<a>.ipynb``;
* frank puts a named pipe beside his notebook;
* grace answers like carol, submits late like her, then writes an on-time submission time into
  her ``timestamp.txt`` and into the name of her folder.

The instructor releases the exercise; the students fetch it, answer it and submit; the instructor
sets the due date (between the on-time and the late submissions, so that carol and grace are late by
a real timestamp); the attackers attack; the instructor collects (``nbgrader collect``, which is the
course's collect, ``autograder.exchange.collect.SafeCollect``), runs ``make grade`` (``python -m
autograder.cli.grade``), then plain ``nbgrader autograde`` with no saved reports,
``generate_feedback`` and ``release_feedback``; the students fetch their feedback; the instructor
exports the grades. Every step is a real nbgrader command in its own process.

nbgrader names the submitter after the OS user (or ``JUPYTERHUB_USER`` when that user is
``jovyan``, see ``nbgrader.utils.get_username``). Here the students share one OS user, so each
passes ``--student`` (``nbgrader submit --help`` describes it), and collect's owner check is off.

``test_make_grade_refuses_what_a_collect_that_follows_links_copied`` grades a second, small class
collected by nbgrader's own collect (which follows links): ``make grade`` finds the link in the
exchange and refuses what was copied through it.
"""

from __future__ import annotations

import csv
import datetime
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.utils import parse_utc

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.cli import grade
from autograder.exchange.records import REFUSAL, SECRET
from autograder.grading import run_nbgrader as _nbgrader
from autograder.grading.classroom import fill, make_course, solution_bodies, submit
from autograder.grading.gradesheet import db_url
from autograder.grading.handoff import report_path
from autograder.grading.notebook import Report
from autograder.release import course as course_settings
from tests.support.points import full_marks, max_points

pytestmark = pytest.mark.slow

A = "ch02_scaled_dot_product"
FULL = full_marks(A)  # the tests' points
MAX = max_points(A)  # and the written answer's, which the instructor grades by hand
COURSE_ID = re.search(
    r'^c\.CourseDirectory\.course_id\s*=\s*"([^"]+)"', (COURSE_ROOT / "nbgrader_config.py").read_text(), re.MULTILINE
).group(1)
TERM = {"RELEASED": "ch01_bahdanau"}  # graded before chapter 2's solutions are released
EDITED, DELETED = "test_softmax_values", "test_sdpa_mask"  # bob's emptied and deleted test cells
EDITED_POINTS = 2.0  # what bob's emptied cell would earn him if it ran as he left it
HONEST = ("alice", "bob", "carol")
LINKED = ("dave", "erin")  # symbolic links to solutions/ and to alice's collected notebook
PIPED, FORGER = "frank", "grace"
REFUSED = (*LINKED, PIPED)
GRADED = (*HONEST, FORGER)
ON_TIME, LATE = ("alice", "bob", *REFUSED), "carol"
LATE_ONES = (LATE, FORGER)
SOLUTION_LINES = [  # lines of the reference code long enough not to be found by chance
    line.strip() for body in solution_bodies(A).values() for line in body.splitlines() if len(line.strip()) > 25
]
COURSE_CONFIG = """
# A local exchange for this term (on a hub: a folder every user can write).
c.Exchange.root = {exchange!r}
# All students share one OS user here, so the owner of a submission never matches its student.
c.ExchangeCollect.check_owner = False
# nbgrader's default ('none') assigns no late penalty; 'zero' takes the whole score of late work.
c.LateSubmissionPlugin.penalty_method = "zero"
"""
STUDENT_CONFIG = """c = get_config()
c.CourseDirectory.course_id = {course_id!r}
c.Exchange.root = {exchange!r}
c.Exchange.cache = {cache!r}
"""
PHASES = [
    "[1/6] recording the tests of",
    "[2/6] checking that the sandbox works",
    "[3/6] grading 4 submission(s) in the sandbox, 2 at a time (3 refused, see the summary)",
    "[4/6] recording the scores in the gradebook (nbgrader autograde)",
    "[5/6] writing the feedback of",
    f"[6/6] writing grades/{A}.csv",
]
PYTHON_WARNING = re.compile(r"^\S.*:\d+: (\w*Warning): ", re.MULTILINE)


def nbgrader(*args: str, cwd: Path, env: dict | None = None) -> str:
    """``nbgrader ARGS`` in ``cwd`` at log level INFO; its output, stdout then stderr. Fails on an error."""
    result = _nbgrader.run(*args, root=cwd, check=False, quiet=True, log_level="INFO", env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed in {cwd}:\n{output[-4000:]}"
    return output


@dataclass
class Student:
    """A student's working folder (also their home, so nothing of another student's is in reach)."""

    name: str
    home: Path

    @property
    def notebook(self) -> Path:
        return self.home / A / f"{A}.ipynb"

    @property
    def cache(self) -> Path:
        return self.home / ".nbgrader_cache"

    def setup(self, exchange: Path) -> Student:
        self.home.mkdir(parents=True)
        (self.home / "nbgrader_config.py").write_text(
            STUDENT_CONFIG.format(course_id=COURSE_ID, exchange=str(exchange), cache=str(self.cache))
        )
        return self

    def nbgrader(self, *args: str) -> str:
        return nbgrader(*args, cwd=self.home, env={"HOME": str(self.home)})

    def submit(self) -> str:
        """``nbgrader submit``; the timestamp nbgrader gave the submission."""
        output = self.nbgrader("submit", A, f"--student={self.name}")
        return re.search(rf"Submitted as: {re.escape(COURSE_ID)} {A} (.+)$", output, re.MULTILINE).group(1).strip()

    def cached_secret(self) -> str:
        """The secret that ``nbgrader submit`` kept in the student's cache (``fetch_feedback`` needs it)."""
        folders = list((self.cache / COURSE_ID).glob(f"{self.name}+{A}+*"))
        assert len(folders) == 1, folders
        return (folders[0] / "submission_secret.txt").read_text()

    def feedback(self) -> dict[str, Path]:
        """Feedback that ``nbgrader fetch_feedback`` brought: submission timestamp -> HTML file."""
        return {folder.name: folder / f"{A}.html" for folder in (self.home / A / "feedback").iterdir()}


def together(*actions):
    """Call every action at once (each runs its own processes); their results, in order."""
    with ThreadPoolExecutor(len(actions)) as pool:
        return [future.result() for future in [pool.submit(action) for action in actions]]


def each(students: list[Student], action) -> dict:
    """``action(student)`` for every student at once; name -> result."""
    return dict(zip([s.name for s in students], together(*[lambda s=s: action(s) for s in students])))


def tampered_blank():
    """The unanswered notebook with test cell ``EDITED`` emptied and ``DELETED`` removed."""
    nb = fill(A, blank=True)
    for cell in nb.cells:
        if notebooks.cell_id(cell) == EDITED:
            cell.source = "pass  # nothing to check here"
    nb.cells = [cell for cell in nb.cells if notebooks.cell_id(cell) != DELETED]
    return nb


ANSWERS = {
    "alice": lambda: fill(A),
    "bob": tampered_blank,
    "carol": lambda: fill(A),
    "dave": lambda: fill(A, blank=True),
    "erin": lambda: fill(A, blank=True),
    "frank": lambda: fill(A, blank=True),
    "grace": lambda: fill(A),  # carol's answers, late as hers
}


def in_exchange(exchange_root: Path, student: str) -> Path:
    """The student's submission in the exchange (the folder that `nbgrader submit` made, which they own)."""
    (folder,) = (exchange_root / COURSE_ID / "inbound").glob(f"{student}+{A}+*")
    return folder


def attack(t: Term, exchange_root: Path) -> None:
    """What the attackers do to their own submissions in the exchange once they have submitted."""
    for student, target in (("dave", t.course / "solutions" / A), ("erin", t.course / "submitted" / "alice" / A)):
        notebook = in_exchange(exchange_root, student) / f"{A}.ipynb"
        notebook.unlink()
        notebook.symlink_to(target / f"{A}.ipynb")
    os.mkfifo(in_exchange(exchange_root, PIPED) / "weights.npy")
    forged = in_exchange(exchange_root, FORGER)
    on_time = t.timestamps["alice"]  # a time before the due date
    (forged / "timestamp.txt").write_text(on_time)
    name, assignment, _, rest = forged.name.split("+", 3)
    forged.rename(forged.with_name(f"{name}+{assignment}+{on_time}+{rest}"))
    t.forged = on_time


@dataclass
class Term:
    course: Path
    students: dict[str, Student]
    fetched: dict[str, bytes] = field(default_factory=dict)  # the notebook each student fetched
    timestamps: dict[str, str] = field(default_factory=dict)  # as `nbgrader submit` printed them
    due: datetime.datetime | None = None
    make_grade: subprocess.CompletedProcess | None = None
    report_notes: dict[str, list[str]] = field(default_factory=dict)  # make grade's report per student
    outputs: dict[str, str] = field(default_factory=dict)  # instructor's command -> its output
    seconds: dict[str, float] = field(default_factory=dict)
    forged: str = ""  # the on-time submission time that grace wrote into her timestamp.txt


@pytest.fixture(scope="module")
def term(tmp_path_factory) -> Term:
    base = tmp_path_factory.mktemp("exchange")
    exchange = base / "exchange"
    exchange.mkdir()
    course = make_course(base / "course")
    with (course / "nbgrader_config.py").open("a") as f:
        f.write(COURSE_CONFIG.format(exchange=str(exchange)))
    students = {name: Student(name, base / "students" / name).setup(exchange) for name in ANSWERS}
    t = Term(course, students)
    started = time.monotonic()

    def step(name: str, *args: str) -> str:
        begun = time.monotonic()
        t.outputs[name] = nbgrader(*args, cwd=course, env=TERM)
        t.seconds[name] = time.monotonic() - begun
        return t.outputs[name]

    step("release_assignment", "release_assignment", A)
    each(list(students.values()), lambda s: s.nbgrader("fetch_assignment", A))
    for name, student in students.items():
        t.fetched[name] = student.notebook.read_bytes()
        nbformat.write(ANSWERS[name](), str(student.notebook))
    t.timestamps.update(each([students[n] for n in ON_TIME], Student.submit))
    # The due date: after the on-time submissions have ended, before the late one starts.
    t.due = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    _, t.timestamps[LATE], t.timestamps[FORGER] = together(
        lambda: step("db assignment add", "db", "assignment", "add", A, f"--duedate={t.due.isoformat(sep=' ')} UTC"),
        students[LATE].submit,
        students[FORGER].submit,
    )
    attack(t, exchange)
    step("collect", "collect", A)
    t.seconds["students until collect"] = time.monotonic() - started

    begun = time.monotonic()
    t.make_grade = subprocess.run(
        [sys.executable, "-m", "autograder.cli.grade", A, "--root", str(course), "--jobs", "2"],
        cwd=COURSE_ROOT,
        env={**_nbgrader.environment(), **TERM},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    t.seconds["make grade"] = time.monotonic() - begun
    assert t.make_grade.returncode == 0, t.make_grade.stderr[-4000:]
    for name in GRADED:
        t.report_notes[name] = Report.from_json(report_path(course, A, name, A).read_text()).notes
    shutil.rmtree(course / "grades" / "reports")  # plain nbgrader autograde grades every notebook itself

    step("autograde", "autograde", A, "--force")

    def feedback():
        step("generate_feedback", "generate_feedback", A, "--force")
        step("release_feedback", "release_feedback", A)
        each(list(students.values()), lambda s: s.nbgrader("fetch_feedback", A, f"--student={s.name}"))

    together(feedback, lambda: step("export", "export", "--to", "export.csv"))
    t.seconds["total"] = time.monotonic() - started
    print("seconds:", {k: round(v, 1) for k, v in t.seconds.items()})
    return t


def exported(t: Term) -> dict[str, dict[str, str]]:
    with (t.course / "export.csv").open() as f:
        return {row["student_id"]: row for row in csv.DictReader(f) if row["assignment"] == A}


def submissions(t: Term) -> dict[str, dict]:
    """What the gradebook holds for each submission that was graded (the refused have none)."""
    with Gradebook(db_url(t.course)) as gradebook:
        found = {s.student.id: s for s in gradebook.find_assignment(A).submissions}
        return {
            name: {
                "score": s.score,
                "max_score": s.max_score,
                "timestamp": s.timestamp,
                "seconds_late": s.total_seconds_late,
                "penalty": s.late_submission_penalty,
                "duedate": s.duedate,
            }
            for name, s in sorted(found.items())
        }


def recorded_timestamp(t: Term, student: str) -> datetime.datetime:
    """The submission time that the collect recorded (submitted/<student>/<a>/timestamp.txt)."""
    return parse_utc((t.course / "submitted" / student / A / "timestamp.txt").read_text())


def assert_recorded_when_submitted(t: Term, student: str) -> None:
    """The recorded time is when the kernel saw the submission's files written: just after the time that
    `nbgrader submit` printed (it copies the files after taking it), never before it."""
    lag = (recorded_timestamp(t, student) - parse_utc(t.timestamps[student])).total_seconds()
    assert 0 <= lag < 5, (student, lag)


def texts_of(*folders: Path) -> dict[str, str]:
    """Every file under ``folders``, as text."""
    return {
        str(path): path.read_text(errors="replace")
        for folder in folders
        for path in ([folder] if folder.is_file() else folder.rglob("*") if folder.exists() else [])
        if path.is_file() and not path.is_symlink()
    }


def assert_nothing_of_the_solutions_reaches(t: Term, student: str) -> None:
    """Nothing of solutions/ (nor of alice's answers, which are the reference code) is in what the course
    keeps or gives back for ``student``: their collected, autograded and feedback folders, and the feedback
    they fetched."""
    assert SOLUTION_LINES
    texts = texts_of(
        *(t.course / folder / student for folder in ("submitted", "autograded", "feedback")),
        t.students[student].home / A / "feedback",
    )
    leaks = {path: line for path, text in texts.items() for line in SOLUTION_LINES if line in text}
    assert not leaks and not [path for path, text in texts.items() if "BEGIN SOLUTION" in text], leaks


def autograde_lines(t: Term, student: str) -> list[str]:
    """The lines of plain `nbgrader autograde`'s output from grading ``student``'s submission."""
    sections = re.split(r"^(?=.*Creating/updating student with ID ')", t.outputs["autograde"], flags=re.MULTILINE)
    found = [part for part in sections if part.split("\n", 1)[0].endswith(f"ID '{student}': {{}}")]
    assert len(found) == 1, sections[:1]
    return found[0].splitlines()


TAMPERED = re.compile(r"test cell \S+ was (changed|deleted)")


# ----------------------------------------------------------------------------- the workflow


def test_every_student_fetches_the_released_notebook(term):
    released = (COURSE_ROOT / "exercises" / A / f"{A}.ipynb").read_bytes()
    assert all(fetched == released for fetched in term.fetched.values())


def test_each_submission_is_collected_and_graded(term):
    found = submissions(term)
    assert {name: s["score"] for name, s in found.items()} == {"alice": FULL, "bob": 0.0, "carol": FULL, "grace": FULL}
    assert all(s["max_score"] == MAX for s in found.values())
    with Gradebook(db_url(term.course)) as gradebook:  # bob's emptied cell ran as the instructor wrote it
        edited = gradebook.find_grade(EDITED, A, A, "bob")
        assert (edited.score, edited.max_score) == (0.0, EDITED_POINTS)


def test_each_student_fetches_their_own_feedback_with_their_score(term):
    scores = {"alice": FULL, "bob": 0.0, "carol": 0.0, "grace": 0.0}  # a late penalty takes the whole score
    for name in GRADED:
        feedback = term.students[name].feedback()
        assert list(feedback) == [term.timestamps[name]], (name, list(feedback))
        html = feedback[term.timestamps[name]].read_text()
        # a written answer awaiting the instructor makes the total partial; bob left his as released (0, final)
        heading = (
            f"{A} (Score: {scores[name]:.1f} / {MAX:.1f})"
            if name == "bob"
            else f"{A} (Score: {scores[name]:.1f} / {MAX:.1f} so far; written answer "
        )
        assert heading in html, (name, re.findall(r"<h4>.*?</h4>", html)[:2])
        assert (f"Late submission penalty (Score: -{FULL:.1f})" in html) == (name in LATE_ONES), name
        assert "BEGIN HIDDEN TESTS" not in html
    kinds = {"dave": "a symbolic link", "erin": "a symbolic link", "frank": "a named pipe"}
    for name in REFUSED:  # the course's page: why nothing was graded, and the score
        (html,) = [page.read_text() for page in term.students[name].feedback().values()]
        assert f"Your submission was refused: the submission in the exchange holds {kinds[name]}" in html, html
        assert f"Your score for {A}: 0 / {MAX:g}." in html, html


def test_release_feedback_publishes_one_file_per_student_refused_or_graded(term):
    """A refused submission's page is released as well (make grade gives it the submission's secret,
    which release_feedback needs: a page without one stopped the release for the whole class)."""
    published = list((term.course.parent / "exchange" / COURSE_ID / "feedback").glob("*.html"))
    assert len(published) == len(GRADED) + len(REFUSED)
    for name in REFUSED:
        assert (term.course / "feedback" / name / A / SECRET).read_text() == term.students[name].cached_secret(), name


def test_export_lists_every_student_with_the_recorded_timestamp(term):
    rows = exported(term)
    assert set(rows) == set(term.students)
    for name, row in rows.items():
        assert float(row["max_score"]) == MAX
        if name in REFUSED:
            assert row["timestamp"] == "" and float(row["score"]) == 0, row
        else:
            assert parse_utc(row["timestamp"]) == recorded_timestamp(term, name), name


# ----------------------------------------------------------------------------- nbgrader's own files


def test_collect_keeps_nbgraders_own_files_and_records_when_each_was_submitted(term):
    for name in HONEST:
        folder = term.course / "submitted" / name / A
        assert sorted(p.name for p in folder.iterdir()) == [f"{A}.ipynb", "submission_secret.txt", "timestamp.txt"]
        assert_recorded_when_submitted(term, name)
        assert (folder / "submission_secret.txt").read_text() == term.students[name].cached_secret()


def test_the_gradebook_records_the_collected_timestamp(term):
    for name, submission in submissions(term).items():
        assert submission["timestamp"] == recorded_timestamp(term, name), name


# ----------------------------------------------------------------------------- late penalties


def test_the_due_date_falls_between_the_on_time_and_the_late_submissions(term):
    assert all(recorded_timestamp(term, name) < term.due for name in ("alice", "bob"))
    assert all(parse_utc(term.timestamps[name]) < term.due for name in ON_TIME)
    assert all(parse_utc(term.timestamps[name]) > term.due for name in LATE_ONES)
    assert all(s["duedate"] == term.due for s in submissions(term).values())


def test_a_late_submission_gets_the_configured_penalty_and_an_on_time_one_none(term):
    found = submissions(term)
    late = found[LATE]
    assert late["seconds_late"] == (recorded_timestamp(term, LATE) - term.due).total_seconds() > 0
    assert late["penalty"] == FULL  # penalty_method "zero": the whole score
    for name in ("alice", "bob"):
        assert found[name]["seconds_late"] == 0 and found[name]["penalty"] == 0, name
    output = term.outputs["autograde"]
    assert re.search(rf"SubmittedAssignment<{A} for {LATE}> is [\d.]+ seconds late", output)
    assert f"Late submission penalty: {FULL:.1f}" in output
    assert not re.search(rf"SubmittedAssignment<{A} for (alice|bob)> is [\d.]+ seconds late", output)


def test_the_exported_total_reflects_the_penalty(term):
    rows = exported(term)
    numbers = {
        name: (float(r["raw_score"]), float(r["late_submission_penalty"]), float(r["score"]))
        for name, r in rows.items()
        if name not in REFUSED
    }
    assert numbers == {
        "alice": (FULL, 0.0, FULL),
        "bob": (0.0, 0.0, 0.0),
        "carol": (FULL, FULL, 0.0),
        "grace": (FULL, FULL, 0.0),  # carol's answers, as late as hers, whatever her timestamp.txt says
    }
    # nbgrader's own due date and "zero" penalty (term.yml sets none here): the summary's words, in points
    assert rows["carol"]["note"].startswith("late by ") and f": -{FULL:g} points" in rows["carol"]["note"]
    assert "late" not in rows["alice"]["note"]
    # a refused submission has no submission in the gradebook: make grade's 0 and its reason, no raw score
    for name in REFUSED:
        row = rows[name]
        assert (row["raw_score"], float(row["score"])) == ("", 0.0), (name, row)
        assert row["note"].startswith("refused"), (name, row["note"])
    assert all(parse_utc(r["duedate"]) == term.due for r in rows.values())


# ----------------------------------------------------------------------------- test cells changed or not


def test_plain_autograde_grades_without_reports_and_warns_of_no_untouched_test_cell(term):
    assert not (term.course / "grades" / "reports").exists()
    for name in ("alice", "carol", "grace"):
        assert not [line for line in autograde_lines(term, name) if TAMPERED.search(line)], name
    flagged = [line for line in term.outputs["autograde"].splitlines() if TAMPERED.search(line)]
    assert flagged and all(f"] bob/{A}: test cell " in line for line in flagged), flagged


def test_plain_autograde_logs_no_checksum_warning_for_an_untouched_notebook(term):
    assert not [line for line in autograde_lines(term, "alice") if "Attribute 'checksum'" in line]


def test_plain_autograde_names_an_edited_test_cell(term):
    assert any(f"test cell {EDITED} was changed" in line for line in autograde_lines(term, "bob")), autograde_lines(
        term, "bob"
    )


def test_plain_autograde_names_a_deleted_test_cell_as_deleted(term):
    lines = autograde_lines(term, "bob")
    assert any(f"test cell {DELETED} was deleted" in line for line in lines), lines
    assert not any(f"test cell {DELETED} was changed" in line for line in lines), lines


def test_make_grade_reports_name_the_edited_and_the_deleted_test_cell(term):
    assert term.report_notes["bob"] == [
        f"test cell {EDITED} was changed; the original was graded",
        f"test cell {DELETED} was deleted; the original was graded",
    ]
    assert term.report_notes["alice"] == term.report_notes["carol"] == term.report_notes["grace"] == []
    line = next(line for line in term.make_grade.stdout.splitlines() if line.startswith("bob "))
    assert f"test cell {EDITED} was changed" in line and f"test cell {DELETED} was deleted" in line


# ----------------------------------------------------------------------------- make grade's output


def python_warnings(t: Term) -> list[str]:
    return PYTHON_WARNING.findall(t.make_grade.stdout + t.make_grade.stderr.replace("\r", "\n"))


def test_make_grade_prints_each_phase_and_the_summary(term):
    err, out = term.make_grade.stderr, term.make_grade.stdout
    where = [err.find(phase) for phase in PHASES]
    assert -1 not in where and where == sorted(where), dict(zip(PHASES, where))
    assert f"Grades for {A}: 7 submission(s)" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] in [[name] for name in ANSWERS]}
    assert f"{FULL:g} / {MAX:g}  all tests passed; written answer " in lines["alice"]
    assert " awaiting grading: 2 points, counted as 0 until graded" in lines["alice"]
    assert f"0 / {MAX:g}" in lines["bob"]
    assert all(f"0 / {MAX:g}  refused: the submission in the exchange holds" in lines[name] for name in REFUSED)
    assert "mean " in out and f"Grades:   {term.course / 'grades' / (A + '.csv')}" in out


def test_make_grade_prints_no_gradebook_or_other_library_warning(term):
    """Apart from nbformat's warning about a re-added cell (the next test), nothing warns."""
    output = term.make_grade.stdout + term.make_grade.stderr
    assert "SAWarning" not in output and "| WARNING]" not in output and "Traceback" not in output
    assert set(python_warnings(term)) <= {"MissingIDFieldWarning"}, python_warnings(term)


def test_make_grade_prints_no_python_warning(term):
    assert python_warnings(term) == []


def test_make_grade_csv_follows_the_notebooks_order_of_test_cells(term):
    source = notebooks.read(COURSE_ROOT / "solutions" / A / f"{A}.ipynb")
    order = [notebooks.cell_id(cell) for cell in source.cells if notebooks.is_test(cell)]
    written = [notebooks.cell_id(cell) for cell in source.cells if notebooks.is_written(cell)]
    assert order != sorted(order) and written  # so that an alphabetical CSV would not pass
    with (term.course / "grades" / f"{A}.csv").open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["student", "score", "max_score", *order, *written, "note"]
    assert [row[0] for row in rows[1:]] == sorted(ANSWERS)


# ----------------------------------------------------------------------------- attacks on the exchange


def refusal(t: Term, student: str) -> str:
    return (t.course / "submitted" / student / A / REFUSAL).read_text()


def test_collect_refuses_a_submission_that_holds_a_link_or_a_pipe_and_collects_the_rest_of_the_class(term):
    """The collect copies nothing of a refused submission (no link is followed, no pipe waited on): the
    refused folder holds the reason and a time, the others are collected whole."""
    log = term.outputs["collect"]
    expected = {
        "dave": f"a symbolic link (dave+{A}+",
        "erin": f"a symbolic link (erin+{A}+",
        "frank": f"a named pipe (frank+{A}+",
    }
    for name, what in expected.items():
        folder = term.course / "submitted" / name / A
        assert sorted(p.name for p in folder.iterdir()) == [REFUSAL, SECRET, "timestamp.txt"], name
        assert refusal(term, name).startswith(f"the submission in the exchange holds {what}"), refusal(term, name)
        assert re.search(rf"ERROR\] Refusing the submission of {name} for {A}: .*{re.escape(what)}", log), log
    for name in GRADED:
        assert (term.course / "submitted" / name / A / f"{A}.ipynb").is_file(), name


def test_a_link_to_solutions_swapped_into_the_exchange_scores_nothing_and_shows_nothing_of_them(term):
    """dave's link to solutions/<a>/<a>.ipynb: nbgrader's collect would copy the instructor notebook, which
    scores full marks and puts the reference code into his feedback."""
    assert "dave" not in submissions(term)
    assert exported(term)["dave"]["score"] == "0.0"
    assert_nothing_of_the_solutions_reaches(term, "dave")


def test_a_link_to_another_students_collected_notebook_scores_nothing_and_leaves_hers_alone(term):
    """erin's link to submitted/alice/<a>/<a>.ipynb: nbgrader's collect gives her alice's answers when it
    has collected alice first, and otherwise stops on the missing target, collecting nobody after her."""
    assert "erin" not in submissions(term)
    assert exported(term)["erin"]["score"] == "0.0"
    assert_nothing_of_the_solutions_reaches(term, "erin")  # alice's answers are the reference code
    alice = term.course / "submitted" / "alice" / A / f"{A}.ipynb"
    assert not alice.is_symlink() and nbformat.read(str(alice), as_version=4) == nbformat.reads(
        nbformat.writes(ANSWERS["alice"]()), as_version=4
    )
    assert submissions(term)["alice"]["score"] == FULL


def test_a_named_pipe_in_the_exchange_neither_stops_the_collect_nor_scores(term):
    """frank's named pipe: nbgrader's collect fails on it (or waits for a writer), collecting nobody after
    him; here he is refused and the class is collected and graded."""
    assert "frank" not in submissions(term)
    assert exported(term)["frank"]["score"] == "0.0"
    assert set(submissions(term)) == set(GRADED)


def test_an_edited_timestamp_does_not_escape_the_late_penalty(term):
    """grace submitted carol's answers as late as carol, then wrote an on-time time into her timestamp.txt
    and into her folder's name: the collect records when her files were written, after the due date, so
    the two identical late answers score the same (0 with the 'zero' penalty), not 16 and 0."""
    assert term.forged and parse_utc(term.forged) < term.due
    assert (in_exchange(term.course.parent / "exchange", FORGER) / "timestamp.txt").read_text() == term.forged
    recorded = recorded_timestamp(term, FORGER)
    assert recorded > term.due and recorded >= parse_utc(term.timestamps[FORGER])
    found = submissions(term)
    assert found[FORGER]["timestamp"] == recorded and found[FORGER]["seconds_late"] > 0
    assert (found[FORGER]["score"], found[FORGER]["penalty"]) == (found[LATE]["score"], found[LATE]["penalty"])
    assert found[FORGER]["penalty"] == FULL
    rows = exported(term)
    assert rows[FORGER]["score"] == rows[LATE]["score"] == "0.0"
    assert f"{FORGER}'s submission" in term.outputs["collect"] and "its timestamp.txt says" in term.outputs["collect"]


def test_make_grade_lists_the_refused_with_the_reason_and_scores_them_zero(term):
    with (term.course / "grades" / f"{A}.csv").open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    for name in REFUSED:
        assert not report_path(term.course, A, name, A).exists(), name  # never graded
        assert rows[name]["score"] == "0.0", rows[name]
        assert rows[name]["note"].startswith("refused: the submission in the exchange holds"), rows[name]
        assert not (term.course / "autograded" / name).exists()
        feedback = term.course / "feedback" / name / A  # the course's page alone, with what releases it
        assert sorted(p.name for p in feedback.iterdir()) == [f"{A}.html", SECRET, "timestamp.txt"], name
    assert rows["alice"]["score"] == str(FULL)
    assert (
        rows["alice"]["note"]
        == "written answer explain_saturated_attention awaiting grading: 2 points, counted as 0 until graded"
    )


# ----------------------------------------------------------------------------- a collect that follows links

SMALL_TERM = course_settings.Release("term", {"ch01_bahdanau"})
PLAIN_COLLECT = "--ExchangeFactory.collect=nbgrader.exchange.default.collect.ExchangeCollect"


def test_make_grade_refuses_what_a_collect_that_follows_links_copied(tmp_path):
    """A class collected by nbgrader's own collect (not the course's): ``linked`` swapped a link to
    solutions/ into the exchange, and the collect copied the instructor notebook; ``piped`` was copied by
    hand with a named pipe in a subfolder. ``make grade`` refuses both (finding the link in the exchange,
    the pipe in submitted/), gives nbgrader neither, and grades ``honest`` as usual."""
    exchange_root = tmp_path / "exchange"
    exchange_root.mkdir()
    course = make_course(tmp_path / "course")
    with (course / "nbgrader_config.py").open("a") as f:
        f.write(COURSE_CONFIG.format(exchange=str(exchange_root)))
    nbgrader("release_assignment", A, cwd=course, env=TERM)
    students = {name: Student(name, tmp_path / "students" / name).setup(exchange_root) for name in ("honest", "linked")}
    for student in students.values():
        student.nbgrader("fetch_assignment", A)
        nbformat.write(fill(A, blank=student.name == "linked"), str(student.notebook))
        student.submit()
    notebook = in_exchange(exchange_root, "linked") / f"{A}.ipynb"
    notebook.unlink()
    notebook.symlink_to(course / "solutions" / A / f"{A}.ipynb")
    nbgrader("collect", A, PLAIN_COLLECT, cwd=course, env=TERM)
    copied = course / "submitted" / "linked" / A / f"{A}.ipynb"
    assert "BEGIN SOLUTION" in copied.read_text()  # what nbgrader's collect does with the link
    folder = submit(course, "piped", A, fill(A)).parent
    (folder / "data").mkdir()
    os.mkfifo(folder / "data" / "pipe")

    results = {r.student: r for r in grade.grade(A, root=course, quiet=True, jobs=2, settings=SMALL_TERM)}

    assert results["honest"].score == FULL and results["honest"].note == ""
    assert results["linked"].score == 0 and results["piped"].score == 0
    assert results["linked"].note.startswith(
        f"refused: the submission in the exchange ({exchange_root / COURSE_ID / 'inbound'}) holds a symbolic link "
        f"(linked+{A}+"
    ), results["linked"].note
    assert results["piped"].note.startswith(f"refused: the submission holds a named pipe (piped/{A}/data/pipe)")
    for name in ("linked", "piped"):
        assert not (course / "autograded" / name).exists(), name
        assert not report_path(course, A, name, A).exists(), name
    page = (course / "feedback" / "linked" / A / f"{A}.html").read_text()  # the secret plain collect copied
    assert "Your submission was refused" in page and "BEGIN SOLUTION" not in page
    piped = (course / "feedback" / "piped" / A / f"{A}.html").read_text()  # not from the exchange: no secret
    assert "Your submission was refused" in piped and not (course / "feedback" / "piped" / A / SECRET).exists()
    with Gradebook(db_url(course)) as gradebook:
        assert {s.student.id for s in gradebook.find_assignment(A).submissions} == {"honest"}
