"""What must not leak, as the solution notebooks hold it: their hidden-test and reference-solution regions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import nbformat

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from course_site.leaks.files import posix
from course_site.leaks.report import PublishError


@dataclass(frozen=True)
class Secret:
    """A line that must not be published, and where it comes from (never printed)."""

    text: str
    notebook: str  # relative to the repository root
    cell: str  # the cell's nbgrader grade_id, or its number
    kind: str  # "hidden-test" or "reference-solution"


@dataclass(frozen=True)
class Region:
    """The code of one reference-solution region (never printed)."""

    code: str
    notebook: str  # relative to the repository root
    assignment: str
    item: str  # the solution cell's grade_id, or its number


def notebook_secrets(nb, notebook: str) -> list[tuple[str, str, str]]:
    """(line, cell, kind) for every line of a hidden-test or reference-solution region."""
    found = []
    for number, cell in enumerate(nb.cells, 1):
        name = notebooks.cell_id(cell) or f"cell {number}"
        source = cell.get("source", "")
        for line in notebooks.region_lines(source, notebooks.HIDDEN_TESTS):
            found.append((line, name, "hidden-test"))
        if notebooks.SOLUTION[0] in source:
            for line in notebooks.region_lines(source, notebooks.SOLUTION):
                found.append((line, name, "reference-solution"))
        elif notebooks.is_solution(cell):
            # A solution cell without markers is replaced whole when the exercise is generated.
            found += [(line, name, "reference-solution") for line in source.splitlines()]
    return found


def solution_notebooks(root: Path) -> list[tuple[str, str, object]]:
    """(relative path, assignment, notebook) of every notebook under ``root/solutions``."""
    found = []
    solutions = root / "solutions"
    if not solutions.is_dir():
        return found
    for path in sorted(solutions.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        rel = posix(path.relative_to(root))
        try:
            nb = nbformat.read(str(path), as_version=4)
        except Exception as error:  # an unreadable notebook stops the check
            raise PublishError(f"cannot read {rel} to find its secrets: {error}") from None
        inside = path.relative_to(solutions).parts
        found.append((rel, inside[0] if len(inside) > 1 else path.stem, nb))
    return found


def solution_regions(root: Path = COURSE_ROOT) -> list[Region]:
    """The code of every reference-solution region of the notebooks under ``root/solutions``:
    the text between each pair of solution markers, or a whole solution cell without them."""
    regions = []
    for rel, assignment, nb in solution_notebooks(Path(root)):
        for number, cell in enumerate(nb.cells, 1):
            if cell.cell_type != "code":
                continue
            name = notebooks.cell_id(cell) or f"cell {number}"
            source = cell.get("source", "")
            matches = [
                "\n".join(lines) for inside, lines in notebooks.split_regions(source, notebooks.SOLUTION) if inside
            ]
            if matches:
                regions += [Region(code, rel, assignment, name) for code in matches]
            elif notebooks.is_solution(cell):
                regions.append(Region(source, rel, assignment, name))
    return regions


def assignment_of(notebook: str) -> str:
    parts = PurePosixPath(notebook).parts
    return parts[1] if len(parts) > 2 else PurePosixPath(notebook).stem
