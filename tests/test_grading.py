"""End to end through nbgrader: a class of each assignment graded by `make grade` (`autograder.grading.phases`).

One course folder is graded once (module fixture); the tests read its gradebook results, its reports,
its CSV and its feedback. Each class holds the reference, a blank notebook, notebooks whose test cells
were deleted or emptied, a wrong answer and a notebook of correct answers in other idioms: what the
pipeline adds to grading each notebook (nbgrader's gradebook, restored test cells, feedback, the CSV)
is the same for every submission. Every known mistake and every correct idiom is graded on its own by
tests/test_catalogue.py, through the function that this pipeline runs for each notebook.
"""

from __future__ import annotations

import csv
import html
import json
import re

import pytest

from attention_course.tooling import notebooks
from autograder.cli import grade
from autograder.grading.classroom import fill, make_course, submit
from autograder.grading.gradesheet import db_url
from autograder.nbgrader.hide_tests import FEEDBACK_WIDTH
from autograder.release import course
from tests.catalogue import variant
from tests.test_catalogue import ASSIGNMENTS, BUG_MODULES, CORRECT, hidden_test_lines

pytestmark = pytest.mark.slow

# The wrong answers in each class: the first of each assignment, and the one whose feedback is read below.
PIPELINE_BUGS = {
    a: [bug for k, bug in enumerate(BUG_MODULES[a].BUGS) if k == 0 or bug.name == "sdpa_mask_with_zero"]
    for a in ASSIGNMENTS
}
WARNING_SOFTMAX = """
import warnings

def softmax(x, axis=-1):
    warnings.warn("softmax: this is only a warning")
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)
"""


# Question 4 of ch04 with four of its six methods right: one answered with another option, one with a string
# that is none of them.
PARTLY_RIGHT_ROWS = variant(
    "ch04_masking",
    "fully_masked_row",
    (
        '"masked_fill(~mask, -1e9), then torch.softmax": "equal weights"',
        '"masked_fill(~mask, -1e9), then torch.softmax": "zeros"',
    ),
    ('"torch.softmax, then multiplied by the mask": "zeros"', '"torch.softmax, then multiplied by the mask": "zero"'),
)


def graded_max(result) -> float:
    """The points a submission can have before the instructor grades its written answers by hand."""
    return result.max_score - result.awaiting_points


def _without_tests(nb):
    nb.cells = [c for c in nb.cells if not notebooks.is_test(c)]
    return nb


def _with_tests_emptied(nb):
    for cell in nb.cells:
        if notebooks.is_test(cell):
            cell.source = "pass  # nothing to see here"
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{assignment: {student: Result}} for a class graded in a temporary course folder."""
    folder = make_course(tmp_path_factory.mktemp("course"))
    results = {}
    for assignment in ASSIGNMENTS:
        submit(folder, "reference", assignment, fill(assignment))
        submit(folder, "blank", assignment, fill(assignment, blank=True))
        submit(folder, "deleted_tests", assignment, _without_tests(fill(assignment)))
        for bug in PIPELINE_BUGS[assignment]:
            submit(folder, f"bug_{bug.name}", assignment, fill(assignment, {bug.item: bug.code}))
        first = BUG_MODULES[assignment].BUGS[0]
        submit(folder, "emptied_tests", assignment, _with_tests_emptied(fill(assignment, {first.item: first.code})))
        answers = CORRECT[assignment][0]
        submit(folder, "correct_0", assignment, fill(assignment, {item: a.code for item, a in answers.items()}))
        if assignment == "ch02_scaled_dot_product":
            submit(folder, "warns", assignment, fill(assignment, {"softmax": WARNING_SOFTMAX}))
        if assignment == "ch04_masking":
            submit(folder, "partly_right", assignment, fill(assignment, {"fully_masked_row": PARTLY_RIGHT_ROWS}))
        # As in a term: the chapters before this one are released, this one is not.
        term = course.Release("term", set(ASSIGNMENTS[: ASSIGNMENTS.index(assignment)]))
        results[assignment] = {
            r.student: r for r in grade.grade(assignment, root=folder, quiet=True, jobs=2, settings=term)
        }
    return folder, results


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_solution_gets_full_marks(graded, assignment):
    result = graded[1][assignment]["reference"]
    assert result.max_score > 0
    assert result.score == graded_max(result), f"failed: {result.failed}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_unfilled_exercise_scores_zero_and_the_rest_are_graded(graded, assignment):
    results = graded[1][assignment]
    assert results["blank"].score == 0
    assert all(r.score is not None for r in results.values()), [r.student for r in results.values() if r.score is None]


@pytest.mark.parametrize(
    "assignment,bug",
    [(a, b) for a in ASSIGNMENTS for b in PIPELINE_BUGS[a]],
    ids=lambda v: getattr(v, "name", v),
)
def test_a_buggy_submission_loses_points_in_its_item_and_no_other_in_the_gradebook(graded, assignment, bug):
    result = graded[1][assignment][f"bug_{bug.name}"]
    assert result.score < result.max_score, f"{bug.name} ({bug.why}) kept full marks"
    item_tests = set(BUG_MODULES[assignment].TESTS[bug.item])
    assert result.failed and set(result.failed) <= item_tests, (bug.name, result.failed)
    messages = _messages(graded[0], assignment, f"bug_{bug.name}")
    assert set(messages) == set(result.failed)
    assert any(bug.cause.lower() in message.lower() for message in messages.values()), messages


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_correct_answers_in_other_idioms_keep_full_marks_in_the_gradebook(graded, assignment):
    result = graded[1][assignment]["correct_0"]
    assert result.score == graded_max(result), (result.failed, _messages(graded[0], assignment, "correct_0"))


def _messages(course, assignment: str, student: str) -> dict[str, str]:
    """grade_id -> the message of each failed test, from the student's grading report."""
    report = json.loads((course / "grades" / "reports" / assignment / student / f"{assignment}.json").read_text())
    return {gid: test["message"] for gid, test in report["tests"].items() if not test["passed"]}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_deleted_test_cells_are_restored_and_graded(graded, assignment):
    results = graded[1][assignment]
    assert results["deleted_tests"].score == graded_max(results["reference"])
    assert set(results["deleted_tests"].tests) == set(results["reference"].tests)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_emptied_test_cells_are_restored(graded, assignment):
    results = graded[1][assignment]
    first = BUG_MODULES[assignment].BUGS[0]
    assert results["emptied_tests"].score == results[f"bug_{first.name}"].score


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_deleted_and_changed_test_cells_are_named_in_the_summary(graded, assignment):
    results = graded[1][assignment]
    tests = set(results["reference"].tests)
    for student, verb in (("deleted_tests", "deleted"), ("emptied_tests", "changed")):
        for gid in tests:
            assert f"test cell {gid} was {verb}; the original was graded" in results[student].note
    assert "test cell" not in results["reference"].note


def test_a_warning_on_stderr_does_not_cost_points(graded):
    result = graded[1]["ch02_scaled_dot_product"]["warns"]
    assert result.score == graded_max(result), result.failed


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_grades_csv_has_a_row_per_student(graded, assignment):
    course, results = graded
    with (course / "grades" / f"{assignment}.csv").open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert set(rows) == set(results[assignment])
    assert float(rows["reference"]["score"]) == graded_max(results[assignment]["reference"])
    assert float(rows["blank"]["score"]) == 0


def _feedback(course, student, assignment):
    return (course / "feedback" / student / assignment / f"{assignment}.html").read_text()


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_feedback_never_shows_hidden_tests_or_tracebacks(graded, assignment):
    folder, results = graded
    hidden_lines = hidden_test_lines(assignment)
    for student in results[assignment]:
        html = _feedback(folder, student, assignment)
        assert "BEGIN HIDDEN TESTS" not in html
        # A traceback through a test would quote the test and the checks; only messages may show.
        assert "autograder/checks/" not in html
        leaked = [line for line in hidden_lines if line in html]
        assert not leaked, f"{student}'s feedback shows hidden test code: {leaked[:3]}"


def test_feedback_names_item_property_shapes_and_hint(graded):
    course, _ = graded
    html = _feedback(course, "bug_sdpa_mask_with_zero", "ch02_scaled_dot_product")
    assert "scaled_dot_product_attention: masked keys get zero weight failed" in html
    assert "q=torch float32 (2, 5, 8)" in html
    assert "hint: keys where the mask is False must get exactly zero weight" in html


def test_a_multiple_choice_question_earns_a_share_per_right_part_and_names_each_wrong_one(graded):
    folder, results = graded
    result = results["ch04_masking"]["partly_right"]
    assert result.failed == ["test_fully_masked_row"], result.failed
    assert result.tests["test_fully_masked_row"] == (1.33, 2.0)
    assert result.score == pytest.approx(graded_max(result) - 2 + 1.33)
    with (folder / "grades" / "ch04_masking.csv").open() as f:
        row = next(row for row in csv.DictReader(f) if row["student"] == "partly_right")
    assert float(row["test_fully_masked_row"]) == 1.33
    message = _messages(folder, "ch04_masking", "partly_right")["test_fully_masked_row"]
    assert "2 of 6 methods wrong, 4 right" in message
    assert "method='masked_fill(~mask, -1e9), then torch.softmax'" in message
    assert "problem: the answer is another option" in message
    assert "hint: a large finite fill hides masked keys only behind visible ones" in message
    assert "method='torch.softmax, then multiplied by the mask'" in message
    assert "problem: the answer is none of the options" in message
    assert "hint: answer with one of the strings of ROW_OPTIONS" in message
    page = _feedback(folder, "partly_right", "ch04_masking")
    assert "Score: 1.33 / 2.0" in page
    output = re.search(r"<pre>PartlyRight: 1.33 of 2 points.*?</pre>", page, re.S)[0]
    shown = html.unescape(re.sub(r"<[^>]+>", "", output))
    assert "methods wrong" in shown and max(map(len, shown.splitlines())) <= FEEDBACK_WIDTH  # never scrolls sideways


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_feedback_index_names_each_test(graded, assignment):
    folder, results = graded
    page = _feedback(folder, "blank", assignment)
    assert ">Test cell<" not in page and ">Comment<" not in page
    for gid in results[assignment]["reference"].tests:
        assert f'<a href="#{gid}"><code>{gid}</code></a>' in page


def _rows(folder, assignment: str) -> dict[str, dict]:
    with (folder / "grades" / f"{assignment}.csv").open() as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def test_a_written_answer_awaits_the_instructor_and_the_score_given_reaches_the_csv(graded, tmp_path):
    """Chapter 10's written answer is graded by hand: make grade leaves its column empty and says that it awaits
    manual grading (an answer left as released scores 0 at once); a score entered as formgrader enters it,
    through nbgrader's gradebook, reaches the CSV with `make grades`, and the grading's notes stay. On a copy
    of the graded class, so that the other tests read the class as graded."""
    import shutil
    import subprocess
    import sys

    from nbgrader.api import Gradebook

    a, written = "ch10_what_heads_learn", "explain_split_prefix_score"
    folder = tmp_path / "course"
    shutil.copytree(graded[0], folder, symlinks=True)
    results = graded[1][a]
    assert results["reference"].written == {written: (None, 2.0)} and results["reference"].awaiting_points == 2
    assert results["blank"].written == {written: (0.0, 2.0)} and not results["blank"].awaiting
    assert results["blank"].blank == [written] and results["reference"].blank == []
    before = _rows(folder, a)
    assert before["reference"][written] == "awaiting grading" and before["blank"][written] == "0.0"
    assert f"written answer {written} left blank: 0 of 2 points" in before["blank"]["note"]
    said = grade.summary(a, list(results.values()))
    assert f"make grades ASSIGNMENT={a}" in said
    assert "more if the written answers awaiting grading earn every point" in said
    line = next(line for line in said.splitlines() if line.startswith("reference "))
    assert line.endswith(
        f"all tests passed; written answer {written} awaiting grading: 2 points, counted as 0 until graded"
    ), line

    with Gradebook(db_url(folder)) as gradebook:
        gradebook.find_grade(written, a, a, "reference").manual_score = 1.5
        gradebook.db.commit()
    run = subprocess.run(
        [sys.executable, "-m", "autograder.cli.grade", a, "--root", str(folder), "--csv-only"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    after = _rows(folder, a)
    assert float(after["reference"][written]) == 1.5
    assert float(after["reference"]["score"]) == graded_max(results["reference"]) + 1.5
    # graded since, it awaits nothing: the note on it goes, the grading's own notes stay
    kept = [note for note in before["reference"]["note"].split("; ") if " awaiting grading: " not in note]
    assert after["reference"]["note"] == "; ".join(kept) and "awaiting" not in after["reference"]["note"]
    assert {s: row for s, row in after.items() if s != "reference"} == {
        s: row for s, row in before.items() if s != "reference"
    }
    assert "make grades" in run.stdout  # the others still await


def test_make_grades_needs_a_graded_class(tmp_path):
    folder = make_course(tmp_path / "course")
    run = grade.main(["ch10_what_heads_learn", "--root", str(folder), "--csv-only"])
    assert run == 2
