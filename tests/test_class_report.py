"""What the class got wrong: the class report of a class graded by `make grade`, against what each student is known
to do (tests/example_class.py: the catalogue's wrong answers, correct answers in other idioms, the reference, a
blank notebook, a wrong answer no known mistake describes, code that raises, and a notebook the grader could not
grade), then written again by `make class-report`, the term's report, and both opened in Chromium."""

from __future__ import annotations

import html
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from autograder.api.items import CheckFailed
from autograder.cli import class_report as cli
from autograder.grading import class_pages, class_report
from autograder.grading.classroom import fill, make_course, submit
from autograder.grading.notebook import failure_cause, grade_notebook
from autograder.grading.phases import grade
from autograder.grading.report import KNOWN, PART, UNKNOWN, UNWRITTEN, Cause, Report
from tests import example_class
from tests.test_catalogue import BUG_MODULES

A = example_class.ASSIGNMENT
MARKER = "zq-student-wrote-this-7431"  # in a written answer, a comment and an error message
LOST = "student-lost"  # its notebook not graded: the grader's failure
NOT_GRADED = "the cluster: it stopped every grading worker it was sent to (the grader's failure, not yours)"


class _HereExceptOne:
    """Phase 3's graders (a :class:`~autograder.grading.sandboxed.Remote`): this machine's sandbox, two at a time, but
    for one notebook, which comes back not graded, as a cluster's does when its notebook stops every worker."""

    def describe(self) -> str:
        return "this machine, one notebook lost"

    def graded(self, assignment, work, release, limits, progress):
        def one(job):
            student, name, path, _ = job
            if student == LOST:
                return student, name, Report(assignment, name, not_graded=NOT_GRADED), ""
            return student, name, grade_notebook(assignment, path, notebook=name, release=release, limits=limits), ""

        with ThreadPoolExecutor(2) as pool:
            yield from pool.map(one, work)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class") / "course"
    students = example_class.make_class(folder, MARKER)
    submit(folder, LOST, A, fill(A))
    results = grade(A, root=folder, quiet=True, jobs=2, settings=example_class.term_before(A), remote=_HereExceptOne())
    data = json.loads((folder / "grades" / f"{A}-report.json").read_text())
    return folder, students, {r.student: r for r in results}, data


def _tests(data) -> dict[str, dict]:
    return {item["grade_id"]: item for item in data["tests"]}


def _causes_of(data, student: str) -> dict[str, list[dict]]:
    """grade_id -> the causes counted for ``student``."""
    return {
        gid: [c for c in item["causes"] if student in c["students"]]
        for gid, item in _tests(data).items()
        if any(student in c["students"] for c in item["causes"])
    }


@pytest.mark.slow
def test_every_known_mistake_is_counted_under_its_cause_in_its_own_item(graded):
    _, students, _, data = graded
    bugs = [s for s in students if s.kind == "bug"]
    assert len(bugs) >= 8
    for student in bugs:
        bug, own = student.what, set(BUG_MODULES[A].TESTS[student.item])
        found = _causes_of(data, student.name)
        assert found and set(found) <= own, (bug.name, found)
        words = [c["words"].lower() for causes in found.values() for c in causes]
        assert any(bug.cause.lower() in w for w in words), (bug.name, bug.cause, words)
        assert all(c["kind"] in (KNOWN, UNKNOWN, PART) for causes in found.values() for c in causes), found
    known = [c for item in data["tests"] for c in item["causes"] if c["kind"] == KNOWN]
    assert known and all(c["count"] == len(c["students"]) for c in known)


@pytest.mark.slow
def test_every_correct_answer_is_at_full_marks_in_every_item(graded):
    _, students, _, data = graded
    correct = [s.name for s in students if s.kind in ("correct", "reference")]
    assert len(correct) >= 3
    for item in data["tests"]:
        assert set(correct) <= set(item["full"]), (item["grade_id"], set(correct) - set(item["full"]))
    for name in correct:
        assert not _causes_of(data, name), name


@pytest.mark.slow
def test_an_unknown_mistake_is_counted_as_unknown_and_the_blank_as_unwritten(graded):
    _, students, _, data = graded
    by_kind = {s.kind: s.name for s in students}
    softmax = set(BUG_MODULES[A].TESTS["softmax"])
    for kind in ("unknown", "raises"):
        found = _causes_of(data, by_kind[kind])
        assert found and set(found) <= softmax, found
        assert all(c["kind"] == UNKNOWN for causes in found.values() for c in causes), found
    raised = [c["words"] for causes in _causes_of(data, by_kind["raises"]).values() for c in causes]
    assert all(w.endswith("failed: the code raised an error") for w in raised), raised
    blank = _causes_of(data, by_kind["blank"])
    assert set(blank) == set(_tests(data)), "the blank notebook fails every test cell"
    kinds = {c["kind"] for causes in blank.values() for c in causes}
    assert kinds <= {UNWRITTEN, PART}, kinds  # a question's parts, as released, are each answered wrong
    assert by_kind["blank"] in data["unanswered"]


@pytest.mark.slow
def test_a_notebook_not_graded_is_listed_with_why_and_counted_in_no_score(graded):
    folder, _, results, data = graded
    assert results[LOST].score is None
    assert data["not_graded"] == {LOST: NOT_GRADED}
    assert LOST not in data["scores"]
    for item in data["tests"]:
        assert LOST in item["not_graded"] and LOST not in item["scores"]
    for name in (f"{A}-report.html", f"{A}-report-anonymous.html"):
        assert html.escape(NOT_GRADED) in (folder / "grades" / name).read_text()


@pytest.mark.slow
def test_the_counts_are_the_gradebooks(graded):
    _, _, results, data = graded
    scored = {s: r for s, r in results.items() if r.score is not None and not r.refused}
    assert data["scores"] == {s: r.score for s, r in scored.items()}
    assert data["summary"]["graded"] == len(scored) and data["summary"]["students"] == len(results)
    for item in data["tests"]:
        gid = item["grade_id"]
        assert len(item["full"]) + len(item["partial"]) + len(item["zero"]) == len(scored)
        assert item["scores"] == {s: r.tests[gid][0] for s, r in scored.items()}
        lost = {s for s, r in scored.items() if r.tests[gid][0] < r.tests[gid][1]}
        assert {s for c in item["causes"] for s in c["students"]} == lost, gid
    written = data["written"][0]
    assert len(written["awaiting"]) == sum(bool(r.awaiting) for r in scored.values())
    assert written["blank"] == [s for s, r in scored.items() if r.blank]


@pytest.mark.slow
def test_nothing_a_student_wrote_is_in_the_report_and_no_name_in_the_anonymous_copy(graded):
    folder, students, _, _ = graded
    raises = next(s.name for s in students if s.kind == "raises")
    # the words reached the grader (its report of the notebook quotes the student's error, for their feedback)
    assert MARKER in (folder / "grades" / "reports" / A / raises / f"{A}.json").read_text()
    files = sorted((folder / "grades").glob(f"{A}-report*"))
    assert len(files) == 5, files
    for path in files:
        assert MARKER not in path.read_text(), path.name
    anonymous = (folder / "grades" / f"{A}-report-anonymous.html").read_text()
    for name in [s.name for s in students] + [LOST]:
        assert name not in anonymous, name
    instructor = (folder / "grades" / f"{A}-report.html").read_text()
    assert all(s.name in instructor for s in students if s.kind == "bug")


@pytest.mark.slow
def test_make_class_report_writes_the_same_report_again_without_grading(graded, capsys):
    folder, _, _, _ = graded
    before = {p.name: p.read_bytes() for p in (folder / "grades").glob(f"{A}-report*")}
    for path in (folder / "grades").glob(f"{A}-report*"):
        path.unlink()
    assert cli.main([A, "--root", str(folder)]) == 0
    assert "most lost: " in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in (folder / "grades").glob(f"{A}-report*")} == before


def test_make_class_report_needs_a_graded_class(tmp_path, capsys):
    assert cli.main([A, "--root", str(make_course(tmp_path))]) == 2
    assert "grade the class first" in capsys.readouterr().err


@pytest.mark.slow
def test_the_term_report_gathers_each_assignment_and_each_students_trajectory(graded):
    folder, students, _, data = graded
    assert cli.main(["--term", "--root", str(folder)]) == 0
    term = json.loads((folder / "grades" / "term-report.json").read_text())
    assert [row["assignment"] for row in term["assignments"]] == [A]
    assert term["assignments"][0]["mean"] == pytest.approx(data["summary"]["mean"])
    reference = next(s.name for s in students if s.kind == "reference")
    assert term["students"][reference][A] == pytest.approx(data["scores"][reference] / data["max_score"])
    assert term["students"][LOST][A] is None
    assert term["most_lost"] and term["most_lost"][0]["assignment"] == A
    anonymous = (folder / "grades" / "term-report-anonymous.html").read_text()
    assert reference not in anonymous and reference in (folder / "grades" / "term-report.html").read_text()


@pytest.mark.slow
@pytest.mark.browser
def test_the_reports_read_on_a_phone_and_a_desktop_and_load_nothing(graded):
    from tests.support import browser

    folder, _, _, _ = graded
    cli.main(["--term", "--root", str(folder)])
    pages = [f"{A}-report.html", f"{A}-report-anonymous.html", "term-report.html"]
    with browser.serve(folder / "grades") as base, browser.chromium() as chromium:
        for name in pages:
            for width, height in ((390, 844), (1440, 900)):
                with browser.open_page(chromium, base + name, width=width, height=height) as (page, visit):
                    requests: list[str] = []
                    page.on("request", lambda request, seen=requests: seen.append(request.url))
                    page.reload(wait_until="networkidle")
                    overflow = browser.page_overflow(page)
                    assert overflow["width"] <= overflow["view"], (name, width, overflow)
                    figures = page.evaluate(
                        "() => Array.from(document.querySelectorAll('figure svg')).map(s => "
                        "[s.getBoundingClientRect().width, document.documentElement.clientWidth])"
                    )
                    assert all(0 < w <= view for w, view in figures), (name, width, figures)
                    scrolled = page.evaluate(  # a table fits its column; the term's trajectories may scroll
                        "() => Array.from(document.querySelectorAll('.scroll:not(.trajectory)'))"
                        ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 60))"
                    )
                    assert scrolled == [], (name, width, scrolled)
                assert visit.problems == [], (name, width, visit.problems)
                assert requests == [base + name], (name, requests)


# ---------------------------------------------------------------------------------------------- without grading


def _failure(problem: str, hint: str = "the hint", known: str = "", unwritten: str = "") -> CheckFailed:
    return CheckFailed("softmax", "finite outputs", "x=numpy float64 (3,)", problem, hint, unwritten, known)


@pytest.mark.parametrize(
    "failure,expected",
    [
        (_failure("nan", known="the scores are not shifted"), Cause(KNOWN, "the scores are not shifted")),
        (_failure("it raised NotImplementedError", unwritten="softmax"), Cause(UNWRITTEN, "softmax not written yet "
                                                                              "(it raises NotImplementedError)")),
        (_failure(f"it raised ValueError: {MARKER}"),
         Cause(UNKNOWN, "finite outputs failed: the code raised an error")),
        (_failure(f"returned {MARKER}"), Cause(UNKNOWN, "finite outputs failed: the hint")),
    ],
)  # fmt: skip
def test_a_failures_cause_is_the_graders_words_alone(failure, expected):
    assert failure_cause(failure) == expected


def test_the_pages_escape_names_and_words():
    report = class_report.ClassReport("ch02_scaled_dot_product", 2.0, scores={"<b>x</b>": 1.0})
    item = class_report.TestItem("test_a", "nb", 2.0, partial=["<b>x</b>"], scores={"<b>x</b>": 1.0})
    item.causes = [class_report.Counted(UNKNOWN, "<script>alert(1)</script> failed", ["<b>x</b>"])]
    report.tests = [item]
    for names in (True, False):
        page = class_pages.class_html(report, names)
        assert "<script>" not in page and "<b>x</b>" not in page
        assert ("&lt;b&gt;x&lt;/b&gt;" in page) is names
        assert f'content="{class_pages.CSP}"' in page


def test_discrimination_is_the_item_rest_correlation_and_none_where_nothing_varies():
    totals = {"a": 10.0, "b": 6.0, "c": 2.0, "d": 8.0}
    with_the_rest = class_report.TestItem("t", "nb", 2.0, scores={"a": 2.0, "b": 2.0, "c": 0.0, "d": 2.0})
    against_it = class_report.TestItem("t", "nb", 2.0, scores={"a": 0.0, "b": 2.0, "c": 2.0, "d": 0.0})
    assert with_the_rest.discrimination(totals) > 0.5
    assert against_it.discrimination(totals) < -0.5
    alike = class_report.TestItem("t", "nb", 2.0, scores=dict.fromkeys(totals, 2.0))
    assert alike.discrimination(totals) is None
    assert class_report.TestItem("t", "nb", 2.0, scores={"a": 2.0, "b": 0.0}).discrimination(totals) is None
