"""Names for a notebook's cells that a student can find (Jupyter shows no cell numbers)."""

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.grading.report import Report
from autograder.notebooks import cell_label


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
    from autograder import course, notebooks

    nb = notebooks.read(course.notebook_path("ch02_scaled_dot_product"))
    questions = [notebooks.cell_id(c) for c in nb.cells if notebooks.is_question(c)]
    assert questions == ["score_matrix_bytes", "unscaled_score_std"]
    assert all(notebooks.is_solution(c) for c in nb.cells if notebooks.is_question(c))


def test_every_exercise_asks_questions_graded_in_their_own_test_cells():
    from autograder import course, notebooks

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
