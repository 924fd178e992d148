"""Deadlines and late work: term.yml's due date, late policy and extensions, from the collect's time to every output.

A class of chapter 2 is recorded in a gradebook as ``make grade`` leaves it (every test passed, the written answer
awaiting the instructor), each student collected at a time of their own around the due date; the term's deadline is
settled into the gradebook (:func:`autograder.grading.lateness.settle`, what ``make grade`` does after phase 4), and
the summary, the CSV, ``nbgrader export`` and the feedback page (nbgrader's own commands, in the course folder) must
each say how late each student was and what it cost, with one total. Two more tests run nbgrader's collect (the
course's) on a submission edited after it was made and on a resubmission after the due date.
"""

from __future__ import annotations

import csv
import datetime
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml
from nbgrader.api import Gradebook
from nbgrader.preprocessors import AssignLatePenalties
from nbgrader.utils import parse_utc

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.cli import grade
from autograder.grading import deadlines, gradesheet, lateness, run_nbgrader
from autograder.grading.classroom import fill, make_course
from autograder.grading.feedback import write_feedback
from autograder.nbgrader.late_policy import CourseLatePenalty
from autograder.release import course as course_settings
from tests.support.points import full_marks, max_points

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own add_submission

A = "ch02_scaled_dot_product"
FULL, MAX = full_marks(A), max_points(A)  # 20 points of tests, 22 with the written answer
DUE = datetime.datetime(2027, 2, 14, 23, 59)  # naive UTC, as the gradebook holds it: 23:59 in London in February
POLICY = """late_policy:
  penalty: 10%
  per: day
  cap: 30%
  zero_after: 7 days
"""
TERM = (
    "edition: open\n"
    "released: []\n"
    + POLICY
    + f"""deadlines:
  {A}:
    due: 2027-02-14 23:59 Europe/London
    extensions:
      extended: 2 days
      extended_late: 2027-02-15 11:59 UTC
"""
)
HOURS = {  # each student's collected time, in hours after the due date
    "on_time": -1,
    "late": 6 + 41 / 60,  # late by 6 h 41 min: -10%
    "later": 3 * 24 + 2,  # 4 days started: -40%, the cap takes 30%
    "past_cutoff": 8 * 24,  # past 7 days: the whole score
    "extended": 30,  # within 2 days' extension: on time
    "extended_late": 12 + 1 / 60,  # 12 hours' extension: late by 1 min, one day started: -10%
}
EXPECTED = {  # student -> (the penalty in points, the words)
    "on_time": (0.0, ""),
    "late": (2.0, "late by 6 h 41 min: -10%"),
    "later": (6.0, "late by 3 days 2 h: -30%"),
    "past_cutoff": (FULL, "late by 8 days: past the cut-off of 7 days, -100%"),
    "extended": (0.0, ""),
    "extended_late": (2.0, "late by 1 min (after an extension of 12 h): -10%"),
}


def nbgrader_time(when: datetime.datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def record_assignment(gradebook: Gradebook, assignment: str = A) -> None:
    """The assignment's graded cells in ``gradebook``, as ``make grade``'s phase 1 records them."""
    nb = notebooks.read(course_settings.notebook_path(assignment))
    gradebook.update_or_create_assignment(assignment)
    gradebook.add_notebook(assignment, assignment)
    for cell in nb.cells:
        meta = notebooks.nbgrader_meta(cell)
        if meta.get("grade"):
            gradebook.add_grade_cell(
                meta["grade_id"], assignment, assignment, max_score=float(meta["points"]), cell_type=cell.cell_type
            )
        if meta.get("solution"):
            gradebook.add_solution_cell(meta["grade_id"], assignment, assignment)


def graded(gradebook: Gradebook, student: str, assignment: str = A) -> None:
    """``student``'s submission as autograde leaves it: every test passed, the written answer awaiting grading."""
    gradebook.add_student(student)
    submission = gradebook.add_submission(assignment, student)
    for notebook in submission.notebooks:
        for cell in notebook.grades:
            if cell.cell.cell_type == "code":
                cell.auto_score = cell.max_score
    gradebook.db.commit()


def collected(root: Path, student: str, when: datetime.datetime, assignment: str = A) -> Path:
    """``submitted/<student>/<assignment>/`` as the course's collect leaves it, collected at ``when``."""
    folder = root / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(fill(assignment), str(folder / f"{assignment}.ipynb"))
    (folder / "timestamp.txt").write_text(nbgrader_time(when))
    return folder


def graded_class(root: Path) -> Path:
    """A course folder at ``root`` whose class of :data:`HOURS` is graded, the term's deadline settled."""
    root = make_course(root)
    (root / "term.yml").write_text(TERM)
    with Gradebook(gradesheet.db_url(root)) as gradebook:
        record_assignment(gradebook)
        for student, hours in HOURS.items():
            collected(root, student, DUE + datetime.timedelta(hours=hours))
            graded(gradebook, student)
        lateness.settle(gradebook, A, list(HOURS), root)
    for student in HOURS:  # nbgrader's autograded copies, which the feedback is written from
        folder = root / "autograded" / student / A
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / "submitted" / student / A / f"{A}.ipynb", folder / f"{A}.ipynb")
    return root


@pytest.fixture(scope="module")
def term(tmp_path_factory) -> Path:
    return graded_class(tmp_path_factory.mktemp("lateness") / "course")


def results(root: Path) -> dict[str, gradesheet.Result]:
    return {r.student: r for r in gradesheet.collect(A, list(HOURS), root)}


# ----------------------------------------------------------------------------- the policy


def test_the_policy_counts_days_started_up_to_the_cap_and_zero_past_the_cut_off():
    policy = deadlines.policy({"penalty": "10%", "per": "day", "cap": "30%", "zero_after": "7 days"}, "here")
    hour = 3600
    assert [policy.percent(h * hour) for h in (0, 0.01, 24, 24.01, 48.5, 71, 7 * 24, 7 * 24 + 0.01)] == [
        0, 10, 10, 20, 30, 30, 30, 100,
    ]  # fmt: skip
    assert policy.penalty_points(FULL, 6 * hour) == 2.0 and policy.penalty_points(0.0, 6 * hour) == 0.0
    hourly = deadlines.policy({"penalty": 5, "per": "hour", "grace": "15 minutes"}, "here")
    assert [hourly.percent(m * 60) for m in (10, 15, 16, 61, 60 * 40)] == [0, 0, 5, 10, 100]
    zero = deadlines.policy({"zero_after": "0 days"}, "here")  # nbgrader's "zero": any lateness
    assert (zero.percent(1), zero.percent(0)) == (100, 0)
    assert deadlines.policy("none", "here").percent(10**6) == deadlines.policy(None, "here").percent(10**6) == 0


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({"due": "2027-02-14 23:59"}, f"deadlines.{A}.due has no time zone"),
        ({"due": "next Friday"}, f"deadlines.{A}.due must be a date and time with its time zone"),
        ({"due": "2027-02-14 23:59 Mars/Olympus"}, "no time zone named 'Mars/Olympus'"),
        ({"due": "2027-02-14 23:59 UTC", "late_policy": {"penalty": "110%"}}, f"{A}.late_policy.penalty"),
        ({"due": "2027-02-14 23:59 UTC", "late_policy": {"per": "week"}}, f"{A}.late_policy.per must be day or hour"),
        ({"due": "2027-02-14 23:59 UTC", "extensions": {"alice": "a while"}}, f"{A}.extensions.alice must be"),
        ({"due": "2027-02-14 23:59 UTC", "extensions": {"bob": "2027-02-01 12:00 UTC"}}, f"{A}.extensions.bob:"),
        ({"due": "2027-02-14 23:59 UTC", "duedate": "x"}, "'duedate': only due, late_policy and extensions"),
    ],
)
def test_make_grade_refuses_a_deadline_it_cannot_read_naming_where_it_is(tmp_path, capsys, entry, named):
    root = make_course(tmp_path / "course")
    (root / "term.yml").write_text("edition: open\nreleased: []\n" + yaml.safe_dump({"deadlines": {A: entry}}))
    with pytest.raises(SystemExit) as stopped:
        grade.main([A, "--root", str(root)])
    assert stopped.value.code == 2
    assert named in capsys.readouterr().err


def test_a_due_date_is_read_in_its_own_time_zone():
    assert deadlines.moment("2027-07-14 23:59 Europe/London", "x") == datetime.datetime(2027, 7, 14, 22, 59)
    assert deadlines.moment("2027-02-14T23:59+01:00", "x") == datetime.datetime(2027, 2, 14, 22, 59)
    assert deadlines.moment(datetime.datetime(2027, 2, 14, 23, 59, tzinfo=datetime.timezone.utc), "x") == DUE


# ----------------------------------------------------------------------------- the gradebook


def test_the_gradebook_holds_the_due_date_the_extensions_and_each_penalty(term):
    with Gradebook(gradesheet.db_url(term)) as gradebook:
        assert gradebook.find_assignment(A).duedate == DUE
        for student, (points, _) in EXPECTED.items():
            submission = gradebook.find_submission(A, student)
            assert submission.timestamp == DUE + datetime.timedelta(hours=HOURS[student]), student
            assert (submission.score, lateness.penalty(submission)) == (FULL, points), student
        assert gradebook.find_submission(A, "extended").extension == datetime.timedelta(days=2)
        assert gradebook.find_submission(A, "late").extension is None


def test_nbgraders_own_late_penalty_step_gives_the_same_penalty_with_the_courses_plugin(term, monkeypatch):
    """``nbgrader autograde``'s AssignLatePenalties, with the plugin nbgrader_config.py names: the same penalty as
    make grade's settling, for each student (its gradebook's penalty cleared first)."""
    assert (
        'c.AssignLatePenalties.plugin_class = "autograder.nbgrader.late_policy.CourseLatePenalty"'
        in (term / "nbgrader_config.py").read_text()
    )
    monkeypatch.chdir(term)  # where nbgrader runs
    for student, (points, _) in EXPECTED.items():
        with Gradebook(gradesheet.db_url(term)) as gradebook:
            gradebook.find_submission_notebook(A, A, student).late_submission_penalty = 99.0
            gradebook.db.commit()
        step = AssignLatePenalties(plugin_class=CourseLatePenalty)
        info = {"notebook": A, "assignment": A, "student": student, "db_url": gradesheet.db_url(term)}
        step.preprocess(nbformat.v4.new_notebook(), {"nbgrader": info})
        with Gradebook(gradesheet.db_url(term)) as gradebook:
            assert (gradebook.find_submission_notebook(A, A, student).late_submission_penalty or 0.0) == points, student


# ----------------------------------------------------------------------------- what each output says


def test_the_summary_and_the_csv_say_how_late_and_what_it_cost_with_one_total(term, tmp_path):
    found = results(term)
    text = gradesheet.summary(A, list(found.values()))
    path = tmp_path / f"{A}.csv"
    gradesheet.write_csv(path, list(found.values()))
    with path.open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    for student, (points, words) in EXPECTED.items():
        assert found[student].score == FULL - points, student
        line = next(line for line in text.splitlines() if line.startswith(student + " "))
        assert f"{FULL - points:g} / {MAX:g}  all tests passed" in line, line
        assert float(rows[student]["score"]) == FULL - points
        if words:
            assert f"all tests passed; {words}; written answer" in line, line
            assert rows[student]["note"].startswith(words + "; written answer"), rows[student]["note"]
        else:
            assert "late" not in line and "late" not in rows[student]["note"], student


def test_nbgrader_export_says_the_same_words_and_total(term, tmp_path):
    out = tmp_path / "export.csv"
    run_nbgrader.run("export", "--to", str(out), root=term, quiet=True)
    with out.open() as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f) if row["assignment"] == A}
    for student, (points, words) in EXPECTED.items():
        row = rows[student]
        assert (float(row["raw_score"]), float(row["late_submission_penalty"]), float(row["score"])) == (
            FULL,
            points,
            FULL - points,
        ), row
        assert parse_utc(row["duedate"]) == DUE
        assert row["note"].startswith(words + "; " if words else "written answer"), row["note"]


def test_the_feedback_page_says_the_same_under_its_total(term):
    write_feedback(A, list(HOURS), term, quiet=True)
    for student, (points, words) in EXPECTED.items():
        page = (term / "feedback" / student / A / f"{A}.html").read_text()
        total = f"<h4>{A} (Score: {FULL - points:.1f} / {MAX:.1f} so far; written answer "
        assert total in page, (student, page[page.find("<h4>") : page.find("<h4>") + 300])
        shown = f'<p class="late-penalty"><b>{words}</b></p>'
        assert (shown in page) == bool(words) and ("late by" in page) == bool(words), student


def test_after_grading_by_hand_make_grades_brings_the_penalty_the_feedback_the_csv_and_the_export_up_to_date(
    tmp_path, capsys
):
    """The written answers of two students, one late, graded by hand after make grade: ``make grades`` alone (grading
    nothing) gives the late one's penalty on the score earned now, and the feedback pages, the CSV and
    ``grades/all.csv`` (nbgrader export's) all say the new totals; the summary of make grade named that command."""
    root = graded_class(tmp_path / "course")
    found = results(root)
    gradesheet.write_csv(root / "grades" / f"{A}.csv", list(found.values()), gradesheet.column_order(A, root))
    assert "make grades ASSIGNMENT=" in gradesheet.summary(A, list(found.values())).splitlines()[-1]
    write_feedback(A, list(HOURS), root, quiet=True)
    assert "awaiting grading" in (root / "feedback" / "late" / A / f"{A}.html").read_text()
    written = next(c for c in notebooks.read(course_settings.notebook_path(A)).cells if notebooks.is_written(c))
    with Gradebook(gradesheet.db_url(root)) as gradebook:  # as the formgrader saves a score
        for student in ("on_time", "late"):
            gradebook.find_grade(notebooks.cell_id(written), A, A, student).manual_score = MAX - FULL
        gradebook.db.commit()

    assert grade.main([A, "--root", str(root), "--csv-only", "--jobs", "1"]) == 0
    said = capsys.readouterr().out
    totals = {"on_time": MAX, "late": MAX - MAX / 10, "later": FULL - 6.0}
    with (root / "grades" / f"{A}.csv").open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    with (root / "grades" / "all.csv").open() as f:
        exported = {row["student_id"]: row for row in csv.DictReader(f)}
    for student, total in totals.items():
        page = (root / "feedback" / student / A / f"{A}.html").read_text()
        whole = student != "later"  # still awaiting its written answer
        assert f"<h4>{A} (Score: {total:.1f} / {MAX:.1f}{')' if whole else ' so far;'}" in page, student
        assert ("awaiting grading" in page) != whole, student
        assert float(rows[student]["score"]) == float(exported[student]["score"]) == total, student
        assert f"{total:g} / {MAX:g}" in next(line for line in said.splitlines() if line.startswith(student + " "))
    assert rows["late"]["note"] == exported["late"]["note"] == "late by 6 h 41 min: -10%"
    assert f"Export:   {root / 'grades' / 'all.csv'}" in said


# ----------------------------------------------------------------------------- the collect's time


COLLECT_CONFIG = """
c.Exchange.root = {exchange!r}
c.ExchangeCollect.check_owner = False  # the test's students share one account
"""


def exchange_course(tmp_path: Path, term_yml: str) -> tuple[Path, Path]:
    exchange = tmp_path / "exchange"
    root = make_course(tmp_path / "course")
    with (root / "nbgrader_config.py").open("a") as f:
        f.write(COLLECT_CONFIG.format(exchange=str(exchange)))
    (root / "term.yml").write_text(term_yml)
    return root, exchange / "attention-course" / "inbound"


def submit_to(inbound: Path, student: str, named: datetime.datetime, claimed: datetime.datetime | None = None) -> Path:
    """A submission in the exchange as ``nbgrader submit`` makes it, its folder named for the time ``named`` and
    its ``timestamp.txt`` saying ``claimed`` (the student's to write, like the name)."""
    folder = inbound / f"{student}+{A}+{nbgrader_time(named)}+abc123"
    folder.mkdir(parents=True)
    nbformat.write(fill(A), str(folder / f"{A}.ipynb"))
    (folder / "timestamp.txt").write_text(nbgrader_time(claimed or named))
    return folder


def settled(root: Path, student: str) -> tuple[float, str]:
    with Gradebook(gradesheet.db_url(root)) as gradebook:
        if not gradebook.find_assignment(A).submissions:
            graded(gradebook, student)
        words = lateness.settle(gradebook, A, [student], root)[student]
        return lateness.penalty(gradebook.find_submission(A, student)), words


def test_a_timestamp_the_student_edited_is_ignored(tmp_path):
    """The student's timestamp.txt and folder name say a day before the due date; the files were written long
    after it: the collect records when they were, and the policy takes the whole score past the cut-off."""
    due = datetime.datetime(2020, 3, 1, 12, 0)
    root, inbound = exchange_course(tmp_path, f"edition: open\nreleased: []\n{POLICY}deadlines:\n  {A}:\n"
                                              f"    due: {due.isoformat(sep=' ')} UTC\n")  # fmt: skip
    forged = due - datetime.timedelta(days=1)
    submit_to(inbound, "forger", forged, claimed=forged)
    output = run_nbgrader.run("collect", A, root=root, quiet=True, log_level="INFO")
    recorded = parse_utc((root / "submitted" / "forger" / A / "timestamp.txt").read_text())
    assert recorded > due + datetime.timedelta(days=7), recorded
    assert "its timestamp.txt says" in output.stdout + output.stderr
    with Gradebook(gradesheet.db_url(root)) as gradebook:
        record_assignment(gradebook)
    points, words = settled(root, "forger")
    assert points == FULL and words.endswith("past the cut-off of 7 days, -100%"), words


def test_a_resubmission_after_the_due_date_moves_the_student_from_on_time_to_late(tmp_path):
    """The due date falls between a student's first submission (collected) and their second: once the second is
    collected (``nbgrader collect --update``), the same notebook is late, and penalised."""
    root, inbound = exchange_course(tmp_path, "edition: open\nreleased: []\n")
    first = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    submit_to(inbound, "resubmitter", first)
    run_nbgrader.run("collect", A, root=root, quiet=True)
    recorded = parse_utc((root / "submitted" / "resubmitter" / A / "timestamp.txt").read_text())
    # the due date: the moment the first submission was recorded at (on time: not after it)
    (root / "term.yml").write_text(
        f"edition: open\nreleased: []\n{POLICY}deadlines:\n  {A}:\n    due: {recorded.isoformat(sep=' ')} UTC\n"
    )
    with Gradebook(gradesheet.db_url(root)) as gradebook:
        record_assignment(gradebook)
    assert settled(root, "resubmitter") == (0.0, "")
    submit_to(inbound, "resubmitter", first + datetime.timedelta(seconds=1))
    run_nbgrader.run("collect", A, "--update", root=root, quiet=True)
    assert parse_utc((root / "submitted" / "resubmitter" / A / "timestamp.txt").read_text()) > recorded
    points, words = settled(root, "resubmitter")
    assert points == FULL / 10 and words.startswith("late by ") and words.endswith(": -10%"), words


# ----------------------------------------------------------------------------- what the guide and term.yml say


def _section(text: str, start: str) -> str:
    return text[text.index(start) :]


def test_the_guides_example_reads_as_it_says_and_gives_the_words_it_quotes(tmp_path):
    guide = _section((COURSE_ROOT / "book" / "instructor_guide.md").read_text(), "(deadlines)=")
    example = guide.split("```yaml\n", 1)[1].split("```", 1)[0]
    root = make_course(tmp_path / "course")
    (root / "term.yml").write_text("edition: open\nreleased: []\n" + example)
    found = deadlines.deadline(A, root)
    assert found.due == DUE and found.policy == deadlines.NO_POLICY  # the assignment's own: none
    assert found.extension("alice") == datetime.timedelta(days=2)
    assert found.extension("bob") == datetime.timedelta(days=1, hours=12, minutes=1)
    term_policy = deadlines.policy(yaml.safe_load(example)["late_policy"], "late_policy")
    quoted = guide.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    minute, hour = 60, 3600
    assert quoted == [
        deadlines.late_words(6 * hour + 41 * minute, term_policy),
        deadlines.late_words(20 * minute, term_policy, datetime.timedelta(hours=12)),
        deadlines.late_words(8 * 24 * hour, term_policy),
        deadlines.late_words(6 * minute, term_policy),
    ]
    assert deadlines.late_words(2 * hour + 5 * minute, None, penalty=16) in guide  # nbgrader's own penalty


def test_the_example_in_term_yml_reads_as_it_says(tmp_path):
    text = (COURSE_ROOT / "term.yml").read_text()
    example = "\n".join(line[2:] for line in _section(text, "# late_policy:").splitlines())
    root = make_course(tmp_path / "course")
    (root / "term.yml").write_text("edition: open\nreleased: []\n" + example)
    assert [d.assignment for d in deadlines.check_all(root)] == [A]
    assert deadlines.policy(yaml.safe_load(example)["late_policy"], "x").percent(25 * 3600) == 20
    assert deadlines.deadline(A, COURSE_ROOT) is None  # the committed settings set no deadline


# ----------------------------------------------------------------------------- make grade, end to end


@pytest.mark.slow
def test_make_grade_counts_a_resubmission_after_the_due_date_late_though_its_notebook_is_the_same(tmp_path):
    """Two students submit on time and are graded; one submits the same notebook again after the due date and is
    collected again. ``make grade`` run again runs no notebook (nothing graded changed), yet the resubmission is
    late by the collect's new time: her summary line, CSV row and feedback page say so, with the penalty in the
    total; the other student's stand as they were."""
    root, inbound = exchange_course(tmp_path, "edition: open\nreleased: []\n")
    first = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    for student in ("ann", "ben"):
        submit_to(inbound, student, first)
    run_nbgrader.run("collect", A, root=root, quiet=True)
    due = max(parse_utc((root / "submitted" / s / A / "timestamp.txt").read_text()) for s in ("ann", "ben"))
    (root / "term.yml").write_text(
        f"edition: open\nreleased: []\n{POLICY}deadlines:\n  {A}:\n    due: {due.isoformat(sep=' ')} UTC\n"
    )
    settings = course_settings.Release("term", {"ch01_bahdanau"})  # chapter 2's solutions not released

    def graded_now() -> tuple[dict[str, gradesheet.Result], dict[str, str]]:
        results = {r.student: r for r in grade.grade(A, root=root, quiet=True, jobs=2, settings=settings)}
        pages = {s: (root / "feedback" / s / A / f"{A}.html").read_text() for s in results}
        return results, pages

    before, pages = graded_now()
    assert {s: (r.score, r.late) for s, r in before.items()} == {"ann": (FULL, ""), "ben": (FULL, "")}
    assert not [s for s, page in pages.items() if "late by" in page]

    submit_to(inbound, "ann", first + datetime.timedelta(seconds=1))  # the same notebook, after the due date
    run_nbgrader.run("collect", A, "--update", root=root, quiet=True)
    after, pages = graded_now()
    ann = after["ann"]
    assert ann.score == FULL - FULL / 10 and ann.late.startswith("late by ") and ann.late.endswith(": -10%"), ann
    assert "saved report used" in ann.grading, ann.grading  # nothing graded again: the time alone changed
    assert (after["ben"].score, after["ben"].late) == (FULL, "")
    with (root / "grades" / f"{A}.csv").open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert float(rows["ann"]["score"]) == ann.score and rows["ann"]["note"].startswith(ann.late + "; ")
    assert f"<h4>{A} (Score: {ann.score:.1f} / {MAX:.1f} so far; " in pages["ann"]
    assert f'<p class="late-penalty"><b>{ann.late}</b></p>' in pages["ann"]
    assert "late by" not in pages["ben"]


# ----------------------------------------------------------------------------- the summary's counts and lists


def _result(student: str, score: float, failed: int = 0, awaiting: bool = False, **kw) -> gradesheet.Result:
    tests = {f"test_{i}": (0.0 if i < failed else 5.0, 5.0) for i in range(4)}
    written = {"explain_x": (None if awaiting else 2.0, 2.0)}
    return gradesheet.Result(student, score, 22.0, tests, written=written, **kw)


def test_a_refused_student_is_counted_apart_from_the_mean_and_the_counts():
    results = [_result("ann", 22.0), _result("ben", 12.0, failed=2)]
    refused = gradesheet.Result("cat", 0.0, 22.0, note="refused: the submission holds a symbolic link", refused=True)
    said = gradesheet.summary(A, [*results, refused])
    assert "mean score 17.00 / 22 over 2 graded submission(s) (1 refused, scored 0, not counted)" in said, said
    assert "every test passed: 1 of 2; full marks (every test and written answer): 1 of 2" in said, said
    assert gradesheet.class_counts([refused]) == ["no submission graded (1 refused, scored 0, not counted)"]


def test_full_marks_are_counted_while_written_answers_await_and_those_pending_said():
    results = [_result("ann", 22.0), _result("ben", 20.0, awaiting=True), _result("cat", 15.0, 1, awaiting=True)]
    said = gradesheet.summary(A, results)
    assert (
        "full marks (every test and written answer): 1 of 3, and 1 more if the written answers awaiting grading "
        "earn every point"
    ) in said, said


def test_the_failed_tests_are_one_list_and_each_note_apart():
    result = _result("ann", 8.8, failed=2, note="late by 6 h 41 min: -10%; a cell was skipped")
    line = gradesheet.summary(A, [result]).splitlines()[2]
    assert line.endswith("8.8 / 22  failed: test_0, test_1; late by 6 h 41 min: -10%; a cell was skipped"), line


def test_nbgrader_export_says_nothing_answered_as_the_summary_does(tmp_path):
    root = graded_class(tmp_path / "course")
    nbformat.write(fill(A, blank=True), str(root / "submitted" / "late" / A / f"{A}.ipynb"))  # as released
    out = tmp_path / "export.csv"
    run_nbgrader.run("export", "--to", str(out), root=root, quiet=True)
    with out.open() as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert rows["late"]["note"].startswith(f"late by 6 h 41 min: -10%; {gradesheet.unanswered_note(A)}; written ")
    assert "nothing answered" not in rows["on_time"]["note"]
