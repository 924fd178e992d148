"""Names for a notebook's cells that a student can find (Jupyter shows no cell numbers)."""

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import cell_label
from autograder.grading.report import Report


def _notebook():
    graded = new_code_cell("def softmax(x): ...")
    graded.metadata["nbgrader"] = {"grade_id": "softmax", "solution": True, "grade": False}
    return new_notebook(
        cells=[
            new_code_cell("import numpy as np"),
            new_markdown_cell("Some prose.\n\n## Scaled scores\n\nMore prose."),
            new_code_cell("x = 1"),
            new_code_cell("y = 2"),
            graded,
        ]
    )


def test_a_graded_cell_is_named_by_its_grade_id():
    assert cell_label(_notebook(), 4) == "cell 'softmax'"


def test_other_cells_are_named_by_the_heading_above_them():
    nb = _notebook()
    assert cell_label(nb, 2) == "the first code cell under the heading 'Scaled scores'"
    assert cell_label(nb, 3) == "the second code cell under the heading 'Scaled scores'"
    assert cell_label(nb, 0) == "code cell 1"


def test_reports_keep_the_names_through_json():
    report = Report("ch02_scaled_dot_product", "ch02_scaled_dot_product")
    report.cell_names = {3: "the second code cell under the heading 'Scaled scores'"}
    again = Report.from_json(report.to_json())
    assert again.cell_name(3) == report.cell_names[3]
    assert again.cell_name(7) == "cell 8"


def test_understanding_questions_are_tagged_answer_cells():
    from attention_course.tooling import notebooks
    from autograder.release import course

    nb = notebooks.read(course.notebook_path("ch02_scaled_dot_product"))
    questions = [notebooks.cell_id(c) for c in nb.cells if notebooks.is_question(c)]
    assert questions == ["score_matrix_bytes", "unscaled_score_std", "saturated_attention", "effect_on_attention"]
    assert all(notebooks.is_solution(c) for c in nb.cells if notebooks.is_question(c))


def test_every_exercise_asks_questions_graded_in_their_own_test_cells():
    from attention_course.tooling import notebooks
    from autograder.release import course

    for assignment in course.assignments():
        nb = notebooks.read(course.notebook_path(assignment))
        questions = [notebooks.cell_id(c) for c in nb.cells if notebooks.is_question(c)]
        assert len(questions) >= 2, f"{assignment}: {questions}"
        tests = {notebooks.cell_id(c): c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
        for name in questions:
            test = tests.get(f"test_{name}")
            assert test is not None, f"{assignment}: no test cell test_{name}"
            assert test.metadata["nbgrader"]["points"] > 0
            assert f'"{name}"' in test.source, f"{assignment}: test_{name} does not grade {name}"


def test_a_test_cell_without_its_hidden_tests_shows_one_placeholder_where_the_first_region_was():
    """Feedback shows a cell's visible tests and one placeholder, however many hidden regions it had (chapter 2's
    test_attention_numpy_general has two); without a placeholder, what nbgrader's regions leave outside."""
    from autograder.release import course

    placeholder = "# Hidden tests ran here."
    several = 0
    for assignment in course.assignments():
        for cell in notebooks.read(course.notebook_path(assignment)).cells:
            if not notebooks.is_test(cell):
                continue
            runs = notebooks.split_regions(cell.source, notebooks.HIDDEN_TESTS)
            outside = [line for inside, lines in runs if not inside for line in lines]
            assert notebooks.without_hidden_tests(cell.source) == "\n".join(outside)
            regions = cell.source.count(notebooks.HIDDEN_TESTS[0])
            several += regions > 1
            shown = notebooks.without_hidden_tests(cell.source, placeholder)
            assert shown.count(placeholder) == min(regions, 1), cell.source
            if regions:
                marker = next(line for line in cell.source.split("\n") if notebooks.HIDDEN_TESTS[0] in line)
                first = next(line for line in shown.split("\n") if placeholder in line)
                assert first == marker[: len(marker) - len(marker.lstrip())] + placeholder
    assert several, "no test cell with several hidden regions: this test no longer tests that case"


def _cells_of_every_kind():
    """Every cell of the course's exercise and solution notebooks, and cells whose nbgrader metadata a
    submission could have written: flags of every truth, missing, or not what nbgrader writes."""
    cells = [
        cell
        for folder in ("exercises", "solutions")
        for path in sorted((notebooks.COURSE_ROOT / folder).glob("*/*.ipynb"))
        for cell in notebooks.read(path).cells
    ]
    values = (True, False, 1, 0, "yes", "", None, [], [0], {})
    for flag in ("grade", "solution", "locked"):
        for other in ("grade", "solution", "locked"):
            for value in values:
                for kind in ("code", "markdown"):
                    cell = new_code_cell("x = 1") if kind == "code" else new_markdown_cell("x")
                    cell.metadata["nbgrader"] = {flag: value, other: not value}
                    cells.append(cell)
    cells.append(new_code_cell("x = 1"))  # no nbgrader metadata at all
    return cells


def test_cell_roles_are_read_by_nbgraders_own_rules():
    """The roles are read without importing nbgrader (make validate and make check start a second sooner), by
    the rules of nbgrader.utils, cell for cell."""
    from nbgrader import utils

    def code(cell):
        return cell.cell_type == "code"

    cells = _cells_of_every_kind()
    assert len(cells) > 500
    for cell in cells:
        said = (
            notebooks.is_solution(cell),
            notebooks.is_test(cell),
            notebooks.is_setup(cell),
            notebooks.is_written(cell),
        )
        nbgrader = (
            code(cell) and bool(utils.is_solution(cell)),
            code(cell) and bool(utils.is_grade(cell)) and not utils.is_solution(cell),
            code(cell) and bool(utils.is_locked(cell)) and not utils.is_solution(cell) and not utils.is_grade(cell),
            cell.cell_type == "markdown" and bool(utils.is_solution(cell)) and bool(utils.is_grade(cell)),
        )
        assert said == nbgrader, cell


def test_reading_a_notebooks_cells_imports_no_nbgrader():
    import subprocess
    import sys

    program = (
        "import sys\nfrom attention_course import notebooks\n"
        "path = 'solutions/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb'\n"
        "nb = notebooks.read(notebooks.COURSE_ROOT / path)\n"
        "assert any(map(notebooks.is_test, nb.cells)) and any(map(notebooks.is_setup, nb.cells))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'nbgrader'))\n"
    )
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "[]", ran.stdout


def test_a_written_answer_left_as_released_is_unanswered_and_one_written_in_is_answered():
    """The one rule of `make validate`, `make check` and `make grade`: a written answer is left as released where
    it is blank, nbgrader's placeholder alone, the released notebook's text, or missing (deleted); with the
    released notebook's points, in the notebook's order."""
    from copy import deepcopy

    from autograder.release import course

    a = "ch10_what_heads_learn"
    released = course.released_notebook(a)
    gid = "explain_split_prefix_score"
    assert [a for a in notebooks.written_answers(released, released) if not a.answered] == [
        notebooks.WrittenAnswer(gid, 2.0, False)
    ]
    assert [a for a in notebooks.written_answers(released) if not a.answered] == [
        notebooks.WrittenAnswer(gid, 2.0, False)
    ]

    def answered(text: str | None, compared=released, points=None) -> list[bool]:
        nb = deepcopy(released)
        for cell in nb.cells:
            if notebooks.cell_id(cell) == gid:
                cell.source = text
                if points is not None:
                    cell.metadata["nbgrader"]["points"] = points
        nb.cells = [c for c in nb.cells if text is not None or notebooks.cell_id(c) != gid]
        return [(answer.answered, answer.points) for answer in notebooks.written_answers(nb, compared)]

    assert answered("The score averages 1/k over the copies.") == [(True, 2.0)]
    assert answered("YOUR ANSWER HERE\n\nThe score averages 1/k.") == [(True, 2.0)]
    assert answered("") == answered("  \n") == answered("YOUR ANSWER HERE\n") == [(False, 2.0)]
    assert answered(None) == [(False, 2.0)]  # the cell deleted
    assert answered("An answer", points=99) == [(True, 2.0)]  # the released notebook's points count
    # the released text, whatever it is, is not an answer
    prompt = deepcopy(released)
    for cell in prompt.cells:
        if notebooks.cell_id(cell) == gid:
            cell.source = "Write here why the score falls."
    assert answered("Write here why the score falls.", compared=prompt) == [(False, 2.0)]
    assert answered("Write here why the score falls.", compared=None) == [(True, 2.0)]
    assert notebooks.written_named([a for a in notebooks.written_answers(released) if not a.answered]) == (
        "the written answer explain_split_prefix_score (2 points)"
    )
    two = [notebooks.WrittenAnswer("a", 1.0, False), notebooks.WrittenAnswer("b", 2.5, False)]
    assert notebooks.written_named(two) == "the written answers a (1 point) and b (2.5 points)"


def _helpers_defined(source: str) -> list[str]:
    """The names that a test cell's code (its hidden and visible parts, the markers stripped) defines as a helper:
    a function, a class, or a lambda bound to a name (a lambda passed as an argument, as to ``Item``, is none)."""
    import ast

    from attention_course.tooling import syntax

    code = "\n".join(line for _, lines in notebooks.split_regions(source, notebooks.HIDDEN_TESTS) for line in lines)
    names = []
    for node in ast.walk(syntax.parse(code)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and isinstance(node.value, ast.Lambda):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.extend(ast.unparse(target) for target in targets)
    return names


def _test_cells(path):
    """``(grade_id, source)`` of every nbgrader test cell of the notebook at ``path``."""
    return [(notebooks.cell_id(cell), cell.source) for cell in notebooks.read(path).cells if notebooks.is_test(cell)]


def test_no_test_cell_defines_a_helper():
    """A test cell only calls the checks and the specs of `from autograder import *`: a helper that makes inputs
    belongs in the library's specs, one that computes the expected answers is written out in the checks."""
    from autograder.release import course

    found = [
        f"{course.notebook_path(assignment).relative_to(notebooks.COURSE_ROOT)}: cell {gid!r} defines {name}"
        for assignment in course.assignments()
        for gid, source in _test_cells(course.notebook_path(assignment))
        for name in _helpers_defined(source)
    ]
    assert not found, "\n".join(found)


def test_a_helper_planted_in_a_test_cell_is_found():
    source = (
        "item = Item(ASSIGNMENT, 'f', f, outputs=('a',))\n"
        "check_equals(Item(ASSIGNMENT, 'g', lambda **s: g(**s)), [], 1)\n"
        "### BEGIN HIDDEN TESTS\n"
        "def helper(x):\n    return x\n"
        "for n in range(2):\n    class Sizes:\n        pass\n"
        "twice = lambda x: 2 * x\n"
        "### END HIDDEN TESTS\n"
        "async def fetch():\n    pass\n"
    )
    assert _helpers_defined(source) == ["helper", "twice", "fetch", "Sizes"]
    assert _helpers_defined("check_equals(item, [], 1, hint=HINT.format(name='base'))\n") == []


def test_no_thread_parses_while_another_holds_the_parse_lock():
    """Triton's interpreter parses a kernel with ast itself; the grader runs it holding syntax.held(), so that
    no other grading thread's parse meets it in CPython 3.11's AST constructor (a SystemError)."""
    import threading

    from attention_course.tooling import syntax

    parsed = threading.Event()

    def parse_elsewhere():
        syntax.parse("x = 1")
        parsed.set()

    with syntax.held():
        syntax.parse("y = 2")  # re-entrant: the holder itself may parse
        other = threading.Thread(target=parse_elsewhere)
        other.start()
        assert not parsed.wait(0.3), "a thread parsed while another held the parse lock"
    assert parsed.wait(5), "the waiting parse never ran after the lock was released"
    other.join()
