"""What the grader takes from the instructor notebook and from a submission, and the key of a report.

From the assignment: the instructor notebook's setup and test cells, the graded items' names and each
cell's type (:class:`Source`); from a submission: its cells' roles as they are graded (:func:`roles`), the
student's program, the test cells it changed or deleted and the answer cells it holds copies of."""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from attention_course.tooling import notebooks, syntax
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course, packages, reference

UNGRADED = "ungraded"  # a cell tag: long, optional work (training) that grading does not run
_ITEM = re.compile(r"""\bItem\(\s*ASSIGNMENT\s*,\s*["'](\w+)["']""")
_USES = re.compile(r"""\buses\s*=\s*\(([^)]*)\)""")


@dataclass(frozen=True)
class Source:
    """What the grader takes from the instructor's notebook."""

    assignment: str
    notebook: str
    setup: dict[str, str]  # grade_id -> source
    tests: list[tuple[str, str, float]]  # (grade_id, source, points)
    items: tuple[str, ...]
    digest: str
    kinds: dict[str, str] = field(default_factory=dict)  # grade_id -> its cell's type, for every cell that has one

    @classmethod
    def load(cls, assignment: str, notebook: str | None = None, root: Path | None = None) -> Source:
        """The instructor notebook ``notebook`` (default: the assignment's own) of the course under ``root``
        (default: this one)."""
        root = root or COURSE_ROOT
        notebook = notebook or assignment
        path = Path(root) / "solutions" / assignment / f"{notebook}.ipynb"
        if not path.is_file():
            raise reference.ReferenceUnavailable(f"no instructor notebook at {path}")
        nb = notebooks.read(path)
        setup = {notebooks.cell_id(c): c.source for c in nb.cells if notebooks.is_setup(c)}
        tests = [
            (notebooks.cell_id(c), c.source, float(notebooks.nbgrader_meta(c).get("points", 0)))
            for c in nb.cells
            if notebooks.is_test(c)
        ]
        items = tuple(name for c in nb.cells if notebooks.is_solution(c) for name in notebooks.defined_names(c.source))
        kinds = {notebooks.cell_id(c): c.cell_type for c in nb.cells if notebooks.cell_id(c) and _recorded(c)}
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        source = cls(assignment, notebook, setup, tests, items, digest, kinds)
        problems = source.order_problems()
        if problems:
            raise ValueError(f"{path}: {'; '.join(problems)}")
        return source

    @property
    def cell_types(self) -> dict[str, str]:
        """grade_id -> the type of the instructor's cell that has it (:func:`roles` reads it): ``kinds``, or
        where a Source was made without them, its setup and test cells, which are code."""
        return {**dict.fromkeys([*self.setup, *(gid for gid, _, _ in self.tests)], "code"), **self.kinds}

    def graded_in(self, gid: str) -> set[str]:
        """The graded items whose checks test cell ``gid`` runs (the items it builds an ``Item`` of)."""
        return {name for test, code, _ in self.tests if test == gid for name in _ITEM.findall(code)}

    def tests_of(self, chosen) -> list[tuple[str, str, float]]:
        """The test cells that grade any of the ``chosen`` items (all of them for None), in order; a
        ValueError names a chosen item that the notebook does not grade."""
        if chosen is None:
            return list(self.tests)
        chosen = set(chosen)
        unknown = sorted(chosen - {name for gid, _, _ in self.tests for name in self.graded_in(gid)})
        if unknown:
            raise ValueError(f"items={sorted(chosen)}: {', '.join(unknown)} is not graded in {self.notebook}")
        return [test for test in self.tests if self.graded_in(test[0]) & chosen]

    def builds_on(self) -> list[str]:
        """The earlier assignments whose reference solutions the setup imports (chapter 7 imports chapter
        3's split_heads), in the course's order."""
        found = set()
        prefix = reference.PACKAGE + "."
        for code in self.setup.values():
            try:
                tree = syntax.parse(code)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
                found.update(name[len(prefix) :].split(".")[0] for name in names if name.startswith(prefix))
        return sorted(found - {self.assignment})

    def order_problems(self) -> list[str]:
        """Test cells of an item that come after a test cell of an item that uses it. The grader answers
        an item's stand-ins only once that item's own tests have run, so a stand-in that the student's code
        kept could not answer them; the instructor notebook must keep that order."""
        graded: dict[str, list[int]] = {}
        for index, (_, code, _) in enumerate(self.tests):
            for name in _ITEM.findall(code):
                graded.setdefault(name, []).append(index)
        problems = []
        for index, (gid, code, _) in enumerate(self.tests):
            for uses in _USES.findall(code):
                for name in re.findall(r"""["'](\w+)["']""", uses):
                    later = [self.tests[i][0] for i in graded.get(name, []) if i > index]
                    if later:
                        problems.append(f"{gid} uses {name}, whose test cells {', '.join(later)} come after it")
        return problems


def _recorded(cell) -> bool:
    """Whether nbgrader's gradebook records the instructor's cell (and so gives its role to a submission's)."""
    return any(notebooks.nbgrader_meta(cell).get(flag) for flag in ("grade", "solution", "locked", "task"))


@dataclass(frozen=True)
class Role:
    """A submission's cell as it is graded (:func:`roles`)."""

    grade_id: str | None  # the instructor's grade_id that the cell holds; None: a cell of the student's own
    cell_type: str  # the type of the instructor's cell of that grade_id, else the cell's own
    copy_of: int | None = None  # a later copy of a cell of the instructor's: the index of the cell that keeps the role


def roles(nb, kinds: Mapping[str, str]) -> list[Role]:
    """Each cell of the submission ``nb`` as it is graded: the cell that holds one of the instructor's grade_ids
    (``kinds``: grade_id -> its cell's type in the instructor's notebook) has that cell's role and type, and
    every other cell is the student's own, of its own type. Jupyter's copy and paste keeps a cell's metadata,
    so two cells can hold one grade_id: the first keeps the role, and each later copy is a cell of the
    student's own (``copy_of`` names the first).

    ``make grade``'s sandboxed pass (:func:`student_program`) and nbgrader's
    (:class:`~autograder.nbgrader.cell_roles.InstructorCellRoles`, which writes these roles into the
    notebook before nbgrader reads it) both read a submission so: moving, copying or retyping a cell's
    metadata cannot make the program that one grades differ from the other's."""
    first: dict[str, int] = {}
    found = []
    for index, cell in enumerate(nb.cells):
        gid = notebooks.cell_id(cell)
        own_type = cell.get("cell_type")
        if gid is None or gid not in kinds:
            found.append(Role(None, own_type))
        elif gid in first:
            found.append(Role(None, own_type, first[gid]))
        else:
            first[gid] = index
            found.append(Role(gid, kinds[gid]))
    return found


def copied_answers(source: Source, nb) -> dict[str, str]:
    """grade_id -> a note, for each answer cell (code, or a written answer) that ``nb`` holds copies of whose
    texts differ from the first's (:func:`roles`): what was graded, so that nothing is lost silently."""
    found = roles(nb, source.cell_types)
    fixed = {*source.setup, *(gid for gid, _, _ in source.tests)}  # graded as the instructor wrote them
    notes = {}
    for places in _copies(found).values():
        gid, copies = found[places[0]].grade_id, len(places)
        if gid in fixed or len({notebooks.cell_text(nb.cells[i]).strip() for i in places}) == 1:
            continue
        if found[places[0]].cell_type == "code":
            notes[gid] = (
                f"cell '{gid}' is in the notebook {copies} times, with different code (a copy made by copy and "
                "paste keeps the cell's grade id): every copy ran, top to bottom, as in the notebook, so where they "
                f"define the same name, the last ({_copy_label(gid, copies)}) is the one the tests used"
            )
        else:
            notes[gid] = (
                f"written answer '{gid}' is in the notebook {copies} times, with different texts (a copy made by "
                "copy and paste keeps the cell's grade id): the first is the one graded by hand; the other "
                f"{'copy is' if copies == 2 else 'copies are'} kept below it as text of the student's own"
            )
    return notes


def copy_labels(source: Source, nb) -> dict[int, str]:
    """cell index -> how a student finds it, for each later copy of a cell of the instructor's (its grade id is
    the first's: ``copy 2 of cell 'softmax'``)."""
    found = roles(nb, source.cell_types)
    return {
        index: _copy_label(found[places[0]].grade_id, ordinal)
        for places in _copies(found).values()
        for ordinal, index in enumerate(places[1:], start=2)
    }


def _copies(found: list[Role]) -> dict[int, list[int]]:
    """The index of each cell that has copies -> its index and its copies', in order."""
    copies: dict[int, list[int]] = {}
    for index, role in enumerate(found):
        if role.copy_of is not None:
            copies.setdefault(role.copy_of, [role.copy_of]).append(index)
    return copies


def _copy_label(gid: str, ordinal: int) -> str:
    """How a student finds the ``ordinal``-th of the cells that hold ``gid``."""
    return f"cell '{gid}'" if ordinal == 1 else f"copy {ordinal} of cell '{gid}'"


def tampered_tests(source: Source, nb) -> list[str]:
    """Notes on test cells a submission deleted or changed (grading uses the instructor's anyway).

    A test cell as released, or as the instructor wrote it (``nbgrader autograde`` puts that
    back before grading), is untouched. Of a test cell's copies, the first is the test cell (:func:`roles`).
    """
    found = {
        role.grade_id: notebooks.cell_text(cell)
        for cell, role in zip(nb.cells, roles(nb, source.cell_types))
        if role.grade_id is not None and role.cell_type == "code"
    }
    notes = []
    for gid, code, _ in source.tests:
        if gid not in found:
            notes.append(f"test cell {gid} was deleted; the original was graded")
        elif found[gid].strip() not in (notebooks.released_source(code), code.strip()):
            notes.append(f"test cell {gid} was changed; the original was graded")
    return notes


MAX_NOTEBOOK_BYTES = 10 * 2**20  # a larger submission is not read


def program_key(source: Source, program: list[str], limits, release, chosen=None) -> str:
    """The key of a report: what was graded (the tests, the student's program, the ``chosen`` items or
    all) and how (the grader's own code, the sandbox's :class:`~autograder.sandbox.limits.Limits`, the
    term's :class:`~autograder.release.course.Release`): a report that any of them would change is never reused."""
    items = None if chosen is None else sorted(chosen)
    data = json.dumps([source.digest, grader_digest(), program, items, asdict(limits), release.key]).encode()
    return hashlib.sha256(data).hexdigest()


def submission_key(source: Source, nb, limits, release, chosen=None) -> str:
    """The key of the report of grading the notebook ``nb`` (:func:`program_key`), without grading it."""
    return program_key(source, student_program(source, nb)[0], limits, release, chosen)


def grader_digest(root: Path | None = None) -> str:
    """A digest of what grading computes with, besides the assignment's own notebook: the code of the
    course's two packages (the checks, the sandbox, the tasks) and every instructor notebook (the
    references of earlier chapters). Read anew each time: a change in the checkout is never missed."""
    root = Path(root or COURSE_ROOT)
    digest = hashlib.sha256()
    for rel in packages.package_files(root):
        digest.update(rel.encode() + b"\0" + (root / rel).read_bytes())
    for notebook in sorted((root / "solutions").glob("*/*.ipynb")):
        digest.update(notebook.relative_to(root).as_posix().encode() + b"\0" + notebook.read_bytes())
    return digest.hexdigest()


def student_program(source: Source, nb) -> tuple[list[str], list[int]]:
    """The code to run for the student, and each piece's index among the submission's cells.

    The cells are read as they are graded (:func:`roles`): the setup cells are the instructor's, the
    test cells are left out, and every other code cell (a copy of an answer cell too) is the student's, in
    the notebook's order. Cells tagged ``ungraded`` (optional training runs) are left out; no test may need them.
    """
    program, where = [], []
    seen_setup = set()
    tests = {gid for gid, _, _ in source.tests}
    for index, (cell, role) in enumerate(zip(nb.cells, roles(nb, source.cell_types))):
        if role.cell_type != "code" or UNGRADED in notebooks.tags(cell):
            continue
        if role.grade_id in source.setup:
            program.append(source.setup[role.grade_id])
            seen_setup.add(role.grade_id)
        elif role.grade_id not in tests:
            program.append(notebooks.cell_text(cell))
        else:
            continue
        where.append(index)
    missing = [gid for gid in source.setup if gid not in seen_setup]
    return [source.setup[g] for g in missing] + program, [-1] * len(missing) + where


def unanswered(source: Source, nb, released) -> bool:
    """Whether the submission ``nb`` answers nothing: every piece of code it runs (:func:`student_program`:
    no test cell, no ``ungraded`` one) is, but for blank lines around it, a cell of the ``released``
    notebook, so that no answer cell was written in and no cell of the student's own holds code (a cell
    emptied or deleted answers nothing either)."""
    released_code = {piece.strip() for piece in student_program(source, released)[0]}
    return all(piece.strip() in released_code for piece in student_program(source, nb)[0] if piece.strip())


def unreleased_prerequisites_note(assignment: str, settings: course.Release) -> str | None:
    """For the instructor: the earlier chapters that ``assignment`` builds on and ``settings`` does not
    release. Its notebook asks students to paste their own code of them; the graded items are graded with
    the grader's stand-ins for them, but a cell of a notebook that pasted nothing raises."""
    try:
        earlier = Source.load(assignment).builds_on()
    except (reference.ReferenceUnavailable, ValueError, OSError):
        return None
    missing = [name for name in earlier if not settings.is_released(name)]
    if not missing:
        return None
    return (
        f"{assignment} builds on {', '.join(missing)}, whose solutions this term has not released: its notebook "
        "asks students to paste their own code of them. Its graded items are graded on their own code all the "
        "same; a notebook that pasted nothing gets a cell error for it. Release "
        f"{', '.join(missing)} first to spare students that."
    )
