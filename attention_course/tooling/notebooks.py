"""The rules of the course's nbgrader notebooks: cell roles and marked regions.

Which cells are setup, solutions and tests, and the one parser of their marked regions (``### BEGIN/END
SOLUTION``, ``### BEGIN/END HIDDEN TESTS``).

The reference modules (:mod:`attention_course.solutions`), grading, feedback, the leak check and the
export all read notebooks through this module, which is why it sits in the lowest package. Cell
roles are read from nbgrader's metadata by nbgrader's rules (``grade``, ``solution``, ``locked``; those of
:mod:`nbgrader.utils`, held equal to them cell by cell by tests/test_notebooks.py) without importing nbgrader,
whose package costs more than a second to import (its server extensions and gradebook come with it): `make
validate` and `make check` read roles and need nothing else of it. nbformat is imported when first needed:
the sandbox's worker imports this module and must start quickly (nbformat's schema validation costs seconds
to import).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from attention_course.tooling import syntax

# The course folder: the checkout (or the student's copy) that holds these packages; a function that
# works on a course elsewhere (a class graded in its own folder) takes that folder as ``root``.
COURSE_ROOT = Path(__file__).resolve().parents[2]
COLAB_CELL = "colab_setup"  # the grade_id of the first cell of every notebook (autograder.release.colab)
# The markers, as nbgrader finds them: anywhere in a line (the course writes them as `### BEGIN SOLUTION`).
QUESTION = "question"  # the tag of an understanding question's answer cell
SOLUTION = ("BEGIN SOLUTION", "END SOLUTION")
HIDDEN_TESTS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
MARKERS = (*SOLUTION, *HIDDEN_TESTS)
# What nbgrader puts in place of a written answer's rubric in the released notebook (its ClearSolutions'
# ``text_stub``): a written answer that still holds it, and nothing else, is not answered.
WRITTEN_PLACEHOLDER = "YOUR ANSWER HERE"


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata; none where a submission put something else than a dict there."""
    metadata = cell.get("metadata", {})
    found = metadata.get("nbgrader", {}) if isinstance(metadata, dict) else {}
    return found if isinstance(found, dict) else {}


def tags(cell) -> list:
    """A cell's tags; none where a submission put something else than a list of them there."""
    metadata = cell.get("metadata", {})
    found = metadata.get("tags", []) if isinstance(metadata, dict) else []
    return [tag for tag in found if isinstance(tag, str)] if isinstance(found, list) else []


def _readable(cell) -> bool:
    """Whether nbgrader can read the cell's roles: its metadata, and nbgrader's part of it, are dicts
    (a submission's own cell may hold anything; then it has no role)."""
    metadata = cell.get("metadata", {})
    return isinstance(metadata, dict) and isinstance(metadata.get("nbgrader", {}), dict)


def _flag(cell, name: str) -> bool:
    """One of nbgrader's flags of a cell (``grade``, ``solution``, ``locked``), as nbgrader reads it: its value's
    truth, false where it is missing."""
    return bool(nbgrader_meta(cell).get(name, False))


def is_solution(cell) -> bool:
    """An answer cell: the student writes its code."""
    return cell.get("cell_type") == "code" and _readable(cell) and _flag(cell, "solution")


def is_question(cell) -> bool:
    """An answer cell of an understanding question (a count, a formula, a choice; tagged
    ``question``): short answers that honest students write alike."""
    return is_solution(cell) and QUESTION in tags(cell)


def is_written(cell) -> bool:
    """A written answer: a text cell the student writes in, with points that the instructor gives by hand
    (nbgrader's manually graded answer). The instructor notebook holds its rubric; students get
    nbgrader's "YOUR ANSWER HERE" in its place."""
    return cell.get("cell_type") == "markdown" and _readable(cell) and _flag(cell, "solution") and _flag(cell, "grade")


@dataclass(frozen=True)
class WrittenAnswer:
    """A written answer of a notebook: its grade id, its points and whether the student wrote in it."""

    grade_id: str
    points: float
    answered: bool


def cell_text(cell) -> str:
    """A cell's source as one string (nbformat holds it as a string or a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source if isinstance(source, str) else ""


def points_of(cell) -> float:
    """A graded cell's points, as its nbgrader metadata gives them (0 where it gives none, or no number)."""
    points = nbgrader_meta(cell).get("points", 0)
    return float(points) if isinstance(points, (int, float)) and not isinstance(points, bool) else 0.0


def written_answers(nb, released=None) -> list[WrittenAnswer]:
    """The written answers of ``nb`` (:func:`is_written`; the first cell of each grade id, as graders read
    them), each answered or left as released: blank, nbgrader's :data:`WRITTEN_PLACEHOLDER` and nothing
    else, or the text of its cell in ``released`` (the notebook as students received it, where the caller
    has it). With ``released``, its written answers are the ones that count, with its points: one that
    ``nb`` lacks (the cell deleted, or its metadata changed) is listed, unanswered, where it was.

    The one rule of what a written answer left as released is, for `make validate`, `make check` and
    `make grade`'s summary: nothing checks a written answer's content (the instructor grades it by hand),
    so each of them says which are still to write, or they are lost silently."""
    found = written_cells(nb)
    expected = found if released is None else written_cells(released)
    answers = []
    for gid, model in expected.items():
        cell = found.get(gid)
        text = "" if cell is None else cell_text(cell)
        blank = not text.replace(WRITTEN_PLACEHOLDER, "").strip()
        unchanged = released is not None and text.strip() == cell_text(model).strip()
        answers.append(WrittenAnswer(gid, points_of(model), not (blank or unchanged)))
    return answers


def written_cells(nb) -> dict[str, object]:
    """grade_id -> the written answer's cell (:func:`is_written`) of ``nb``: of copies, the first, which graders
    read; in the notebook's order."""
    found: dict[str, object] = {}
    for cell in nb.cells:
        if is_written(cell) and cell_id(cell) and cell_id(cell) not in found:
            found[cell_id(cell)] = cell
    return found


def is_test(cell) -> bool:
    """A test cell: read-only, with points, run by the grader."""
    return cell.get("cell_type") == "code" and _readable(cell) and _flag(cell, "grade") and not _flag(cell, "solution")


def is_setup(cell) -> bool:
    """A read-only code cell that is neither a solution nor a test (imports, helpers): nbgrader locks a cell that
    is not a solution if it is a test or says ``locked``."""
    return (
        cell.get("cell_type") == "code"
        and _readable(cell)
        and _flag(cell, "locked")
        and not _flag(cell, "solution")
        and not _flag(cell, "grade")
    )


def declared_assignment(nb) -> str | None:
    """The assignment that ``nb``'s setup cells name (``ASSIGNMENT = "ch02_scaled_dot_product"``, a string
    assigned at a setup cell's top level: :func:`is_setup`), as written: a name a notebook keeps whatever its file
    is called (``Copy of ...``, ``... (1).ipynb``). Unchecked: the caller takes it only where it is one of the
    course's assignment names, and never builds a path from it otherwise; None where no setup cell names one."""
    for cell in nb.cells:
        if not is_setup(cell):
            continue
        try:
            tree = syntax.parse(cell_text(cell))
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and [getattr(target, "id", None) for target in node.targets] == ["ASSIGNMENT"]
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                return node.value.value
    return None


def cell_id(cell) -> str | None:
    gid = nbgrader_meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def cell_label(nb, index: int) -> str:
    """A name for cell ``index`` that a student can find in Jupyter, which shows no cell numbers:
    its grade id, else its place under the nearest heading above it."""
    gid = cell_id(nb.cells[index])
    if gid:
        return f"cell '{gid}'"
    place = 1
    for cell in reversed(nb.cells[:index]):
        if cell.get("cell_type") == "markdown":
            text = cell.source if isinstance(cell.source, str) else "".join(cell.source)
            headings = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
            if headings:
                ordinal = {1: "first", 2: "second", 3: "third"}.get(place, f"{place}th")
                return f"the {ordinal} code cell under the heading '{headings[-1][:60]}'"
        elif cell.get("cell_type") == "code":
            place += 1
    return f"code cell {sum(c.get('cell_type') == 'code' for c in nb.cells[: index + 1])}"


def read(path: Path):
    import nbformat

    return nbformat.read(str(path), as_version=4)


def defined_names(source: str) -> list[str]:
    """The functions and classes that a cell's code defines at its top level."""
    tree = syntax.parse(source)
    return [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]


def split_regions(source: str, markers: tuple[str, str]) -> list[tuple[bool, list[str]]]:
    """The lines of ``source`` in runs, each ``(inside, lines)``: inside a marked region or not.

    As nbgrader reads them: a line that holds a marker belongs to no run (an end marker outside a
    region too); a region that is never closed runs to the end.
    """
    begin, end = markers
    runs: list[tuple[bool, list[str]]] = [(False, [])]
    for line in source.split("\n"):
        if begin in line:
            runs.append((True, []))
        elif end in line:
            if runs[-1][0]:
                runs.append((False, []))
        else:
            runs[-1][1].append(line)
    return [(inside, lines) for inside, lines in runs if lines or not inside]


def region_lines(source: str, markers: tuple[str, str]) -> list[str]:
    """Every line inside the regions that ``markers`` mark."""
    return [line for inside, lines in split_regions(source, markers) if inside for line in lines]


def solution_body(cell) -> str:
    """A solution cell's source with the ``### BEGIN/END SOLUTION`` marker lines removed."""
    return "\n".join(line for _, lines in split_regions(cell.source, SOLUTION) for line in lines)


def without_hidden_tests(source: str, placeholder: str | None = None) -> str:
    """A test cell's source as students get it: the hidden-test regions removed, as nbgrader reads them
    (:func:`split_regions`). Where ``placeholder`` is given, it stands once, where the first region was,
    indented like its marker (a cell with several regions shows one placeholder)."""
    kept, inside, placed = [], False, placeholder is None
    for line in source.split("\n"):
        if HIDDEN_TESTS[0] in line:
            inside = True
            if not placed:
                kept.append(line[: len(line) - len(line.lstrip())] + placeholder)
                placed = True
        elif HIDDEN_TESTS[1] in line:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept)


def released_source(code: str) -> str:
    """A test cell as students receive it (hidden tests removed), stripped, for comparisons."""
    return without_hidden_tests(code).strip()


def points_text(points: float) -> str:
    """A number of points in words: "1 point", "2.5 points"."""
    return f"{points:g} point{'' if points == 1 else 's'}"


def written_named(answers: list[WrittenAnswer]) -> str:
    """``answers`` named for a student, each with its points: "the written answer explain_x (2 points)"."""
    named = [f"{answer.grade_id} ({points_text(answer.points)})" for answer in answers]
    listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
    return f"the written answer{'' if len(named) == 1 else 's'} {listed}"
