"""The points of an assignment's tests and items, for tests that check scores."""

from __future__ import annotations

from attention_course.tooling import notebooks
from autograder.release import course


def points_by_test(assignment: str) -> dict[str, float]:
    """The points of each test cell of an assignment, by grade id, from its instructor notebook."""
    nb = notebooks.read(course.notebook_path(assignment))
    return {
        notebooks.cell_id(cell): float(notebooks.nbgrader_meta(cell).get("points", 0))
        for cell in nb.cells
        if notebooks.is_test(cell)
    }


def full_marks(assignment: str) -> float:
    return sum(points_by_test(assignment).values())


def item_points(assignment: str, tests_of_item: dict[str, list[str]]) -> dict[str, float]:
    """Points per graded item, given the item -> test ids map of its buggy suite."""
    points = points_by_test(assignment)
    return {item: sum(points[t] for t in tests) for item, tests in tests_of_item.items()}


def written_points(assignment: str) -> float:
    """The points of the assignment's written answers, which the instructor grades by hand."""
    nb = notebooks.read(course.notebook_path(assignment))
    return sum(float(notebooks.nbgrader_meta(c).get("points", 0)) for c in nb.cells if notebooks.is_written(c))


def max_points(assignment: str) -> float:
    """Everything the assignment is worth, in the gradebook: its tests and its written answers."""
    return full_marks(assignment) + written_points(assignment)
