"""Course folders for tests: this course's configuration, solutions/ and exercises/, elsewhere."""

from __future__ import annotations

import shutil
from pathlib import Path

from autograder.course import COURSE_ROOT

# nbgrader's own way of executing submissions (a Jupyter kernel that runs the
# student's cells and the tests together), kept for side-by-side comparisons:
# the attack tests and benchmarks.grading grades with it as well as with ours.
PLAIN_EXECUTION = """
c.Autograde.autograde_preprocessors = [
    "nbgrader.preprocessors.Execute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
c.Execute.timeout = 30
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(?i)warning"
"""


def make_course(folder: Path, *, plain: bool = False, root: Path = COURSE_ROOT) -> Path:
    """A course folder for grading elsewhere: this course's config, solutions/ and exercises/ linked.

    ``plain=True`` configures nbgrader's own in-kernel execution instead of the sandbox.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(root) / "nbgrader_config.py", folder / "nbgrader_config.py")
    if plain:
        with (folder / "nbgrader_config.py").open("a") as f:
            f.write(PLAIN_EXECUTION)
    for name in ("solutions", "exercises"):
        if not (folder / name).exists():
            (folder / name).symlink_to(Path(root).resolve() / name)
    return folder


def points_by_test(assignment: str) -> dict[str, float]:
    """The points of each test cell of an assignment, by grade id, from its instructor notebook."""
    from autograder import course, notebooks

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
