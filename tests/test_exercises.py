"""exercises/ is exactly what `make exercises` generates from solutions/, and gives nothing away."""

import ast
import re

import nbformat
import pytest

from attention_course.tooling import notebooks
from autograder.cli import exercises
from autograder.release import course

ASSIGNMENTS = course.assignments()


@pytest.mark.slow  # nbgrader generate_assignment of every notebook: twenty seconds
def test_exercises_are_generated_from_solutions():
    assert exercises.differences() == []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_released_notebook_holds_no_solution_or_hidden_test(assignment):
    text = course.notebook_path(assignment, "exercises").read_text()
    for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "check_matches_reference"):
        assert marker not in text


def _spelled_out(node: ast.AST) -> bool:
    """Whether ``node`` is arithmetic of numbers alone (``4 * (48 * 16 + 3 * 2 * 48 * 16)``, ``2.0**6``): a
    derivation, which a known answer in a released cell must not spell (a negative number is a number)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return False
    return isinstance(node, (ast.BinOp, ast.UnaryOp)) and all(
        isinstance(part, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.expr_context))
        for part in ast.walk(node)
    )


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_visible_known_answer_is_a_number_not_its_derivation(assignment):
    """The released test cells' known answers (check_equals's expected value) are numbers: an answer to a question
    written as the arithmetic that gives it (chapter 11's 4 * (48 * 16 + 3 * 2 * 48 * 16), the bytes its Question
    2 asks for) hands the student the derivation the question asks them to work out."""
    nb = notebooks.read(course.notebook_path(assignment, "exercises"))
    spelled = []
    for cell in (c for c in nb.cells if notebooks.is_test(c)):
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_equals":
                given = node.args[2] if len(node.args) > 2 else None
                given = next((k.value for k in node.keywords if k.arg == "expected"), given)
                if given is not None and _spelled_out(given):
                    spelled.append(f"{notebooks.cell_id(cell)}: {ast.unparse(given)}")
    assert not spelled, f"known answers spelled as their derivation: {spelled}"


def _graded_items(tests) -> set[str]:
    """The names that test cells grade: ``Item(ASSIGNMENT, "name", name, ...)``, however it is laid out."""
    found = set()
    for cell in tests:
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Item" and len(node.args) >= 3:
                named, given = node.args[1], node.args[2]
                if isinstance(named, ast.Constant) and isinstance(given, ast.Name) and named.value == given.id:
                    found.add(given.id)
    return found


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_solution_cell_is_graded_and_every_test_has_points(assignment):
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    tests = [c for c in nb.cells if notebooks.is_test(c)]
    solutions = [c for c in nb.cells if notebooks.is_solution(c)]
    assert solutions and tests
    assert all(notebooks.nbgrader_meta(c).get("points", 0) > 0 for c in tests)
    for cell in solutions:
        name = notebooks.cell_id(cell)
        assert name in _graded_items(tests), f"no test grades {name}"
        assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source
    for cell in tests:
        assert "### BEGIN HIDDEN TESTS" in cell.source, f"{notebooks.cell_id(cell)} has no hidden tests"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_visible_tests_run_without_the_solutions(assignment, tmp_path, monkeypatch):
    """A student's machine during the term: no solutions/, the packages as students get them, the earlier
    chapters' solutions released and this one's not. The released notebook, answered correctly, passes
    its visible tests (`make validate`, which students run, says so)."""
    from autograder.cli.validate import validate
    from autograder.grading.classroom import fill
    from autograder.release import course, packages

    earlier = ASSIGNMENTS[: ASSIGNMENTS.index(assignment)]
    answered = fill(assignment)  # answered here, where solutions/ is
    visible_tests = len([c for c in answered.cells if notebooks.is_test(c)])
    packages.write(tmp_path / "packages", course.Release("term", set(earlier)))
    # The kernel imports the students' packages, whose course folder (tmp_path/packages) has no solutions/.
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "packages"))
    path = tmp_path / f"{assignment}.ipynb"
    nbformat.write(answered, str(path))
    lines, passed = validate(path, timeout=120)
    assert passed, "\n".join(lines)
    assert sum(line.lstrip().startswith("pass") for line in lines) == visible_tests


def _questions_in_the_guide() -> dict[str, set[str]]:
    """assignment -> the items the instructor guide's table lists as questions."""
    found = {}
    for line in (course.COURSE_ROOT / "book" / "instructor_guide.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[2].strip("`") in ASSIGNMENTS and "questions " in cells[3]:
            questions = cells[3].split("questions ", 1)[1].split("; written answer", 1)[0]
            found[cells[2].strip("`")] = set(re.findall(r"`(\w+)`", questions))
    return found


def _written_in_the_guide() -> dict[str, set[str]]:
    """assignment -> the written answers the instructor guide's table lists."""
    found = {}
    for line in (course.COURSE_ROOT / "book" / "instructor_guide.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[2].strip("`") in ASSIGNMENTS and "; written answer" in cells[3]:
            found[cells[2].strip("`")] = set(re.findall(r"`(\w+)`", cells[3].split("; written answer", 1)[1]))
    return found


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_exercise_has_a_written_answer_after_a_predict_then_check_question(assignment):
    """A text cell graded by hand, with points and a rubric in the instructor notebook, right after the test cell
    of a question that asks to predict, then check; students get nbgrader's stub in its place."""
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    written = [i for i, c in enumerate(nb.cells) if notebooks.is_written(c)]
    assert written, f"{assignment}: no written answer"
    assert {notebooks.cell_id(nb.cells[i]) for i in written} == _written_in_the_guide().get(assignment), assignment
    released = {notebooks.cell_id(c): c for c in notebooks.read(course.notebook_path(assignment, "exercises")).cells}
    for i in written:
        cell, gid = nb.cells[i], notebooks.cell_id(nb.cells[i])
        question = gid.removeprefix("explain_")
        assert notebooks.cell_id(nb.cells[i - 2]) == f"test_{question}", f"{gid} does not follow test_{question}"
        at = next(k for k, c in enumerate(nb.cells) if notebooks.cell_id(c) == question)
        asked = next(c.source for c in reversed(nb.cells[:at]) if c.cell_type == "markdown")  # its prompt
        assert "(predict, then check)" in asked, f"{gid}: its question does not ask to predict, then check"
        assert notebooks.nbgrader_meta(cell)["points"] > 0 and "Rubric" in cell.source, gid
        assert released[gid].source == "YOUR ANSWER HERE", gid


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_question_is_tagged_as_one(assignment):
    # the tag keeps an answer out of the solution blocks' checks, the similarity report and the
    # term edition's release rules written for code; an untagged question breaks all three
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    tagged = {notebooks.cell_id(c) for c in nb.cells if notebooks.is_question(c)}
    assert tagged == _questions_in_the_guide().get(assignment, set()), (
        f"{assignment}: tagged `question` {sorted(tagged)}, the instructor guide lists "
        f"{sorted(_questions_in_the_guide().get(assignment, set()))}"
    )


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_at_least_half_of_the_questions_ask_to_predict_then_check(assignment):
    # a question's prompt is the last text cell above its answer cell
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    prompt, asked, predicted = "", [], []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            prompt = cell.source
        elif notebooks.is_question(cell):
            asked.append(notebooks.cell_id(cell))
            if "(predict, then check)" in prompt:
                predicted.append(notebooks.cell_id(cell))
    assert asked and 2 * len(predicted) >= len(asked), (
        f"{assignment}: {len(predicted)} of its {len(asked)} questions ask to predict, then check ({predicted})"
    )


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_chapters_exercise_section_names_its_written_answer_graded_by_hand(assignment):
    """A student reads of the hand-graded written answer before the notebook: the chapter's Exercise section names
    it with its points (as the notebook has them), says the instructor grades it by hand with a rubric, and that
    `make check` does not grade it."""
    from attention_course.tooling.notebooks import COURSE_ROOT

    text = (COURSE_ROOT / "book" / f"{assignment}.md").read_text()
    anchor = f"({assignment[:4]}-exercise)="
    assert anchor in text, f"book/{assignment}.md has no Exercise section ({anchor})"
    section = text[text.index(anchor) + len(anchor) :].lstrip().removeprefix("## Exercise")
    section = " ".join(section.split("\n## ")[0].split())  # up to the next section
    released = course.notebook_path(assignment, "exercises")
    written = notebooks.written_answers(notebooks.read(released))
    assert written, f"{assignment} has no written answer"
    for answer in written:
        assert f"`{answer.grade_id}` ({answer.points:g} points)" in section, section[-600:]
    for words in ("written answer", "grades it by hand, with a rubric", "`make check` does not grade it"):
        assert words in section, (words, section[-600:])
