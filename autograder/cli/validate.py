"""Run an exercise notebook top to bottom and report its visible tests (``make validate NOTEBOOK=...``).

    python -m autograder.cli.validate exercises/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb

This is what a student runs before submitting, on any machine: it needs no ``solutions/`` and no
sandbox. It executes every cell in a fresh kernel (cells tagged ``ungraded``, the optional
training, are left out unless ``--all``), carries on past errors, and prints, for each test cell,
whether its visible tests passed, with the failing check's message. Hidden tests run only when the
work is graded.

It also lists the notebook's written answers (text cells the instructor grades by hand, with a rubric;
nothing here checks them): each one still as released (blank, nbgrader's "YOUR ANSWER HERE", or the
released notebook's text) is named with its points, and so is each one answered, as awaiting the
instructor's grading. Where one is still to write, the last line says so, never "all passed" alone.

A notebook that grading would not read under its name (anything but ``<assignment>.ipynb``: a browser's
``... (1).ipynb``, Colab's ``Copy of ...``) is run all the same; the first line and the last say what to
rename it to.

Exit status (``make validate`` fails unless it is 0): 0 every visible test passed; 1 a visible test
failed or a cell raised an error; 2 the notebook could not be validated (no such file, a file that is
not a notebook, a notebook without test cells) or a bad argument. A written answer still to write does
not change it: it is not a test, and students run this while they work, most of it before they write
the answer; a status of 1 would read as a failed test. The last line warns instead, and `make check`,
the check before submitting, fails on it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from attention_course.tooling import notebooks
from autograder.release import course
from autograder.text.unwritten import cell_error, not_written, unwritten_item

UNGRADED = "ungraded"


def _error(cell) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            name, value = output.get("ename", "Error"), str(output.get("evalue", "")).strip()
            return f"{name}: {value}" if value else name
    return None


class NotValidated(Exception):
    """The notebook cannot be validated: it cannot be read as a notebook, or it has no test cell. The
    message says why and what to pass instead."""


def read_exercise(path: Path):
    """The notebook at ``path``, which must be readable as one and hold a test cell (:class:`NotValidated`)."""
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:  # not JSON, not a notebook's JSON, not UTF-8, unreadable
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise NotValidated(
            f"{path} could not be read as a notebook ({type(exc).__name__}: {first}); pass the .ipynb file "
            "itself, as Jupyter saved it"
        ) from None
    if not any(notebooks.is_test(cell) for cell in nb.cells):
        raise NotValidated(
            f"{path.name} has no test cells: is it an exercise? Pass "
            "NOTEBOOK=exercises/<assignment>/<assignment>.ipynb, or your copy of one"
        )
    return nb


def validate(path: Path, *, run_all: bool = False, timeout: int = 600) -> tuple[list[str], bool]:
    """Execute the notebook at ``path``; return the report's lines and whether every visible test passed.
    Raises :class:`NotValidated` for a file that is not a notebook or a notebook without test cells."""
    from nbclient import NotebookClient

    nb = read_exercise(path)
    written = notebooks.written_answers(nb, _released(path))
    if not run_all:
        nb.cells = [c for c in nb.cells if UNGRADED not in notebooks.tags(c)]
    client = NotebookClient(
        nb,
        # The kernel's own log is the machine's business, not the student's: its warning that it listens on
        # localhost without encryption, and the errors of its sockets torn down as it stops on a busy machine
        # (ZMQ's "Socket operation on non-socket"). The student's errors are in the cells' outputs.
        extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    client.execute()
    lines, passed, tests = [f"{path.name}: visible tests"], True, 0
    unwritten: list[str] = []  # the items not written yet of the test cells that failed so, in a row
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        error = _error(cell)
        if notebooks.is_test(cell):
            tests += 1
            points = notebooks.nbgrader_meta(cell).get("points", 0)
            label = notebooks.cell_id(cell) or notebooks.cell_label(nb, index)
            item = unwritten_item(error or "")
            if unwritten and item != unwritten[-1]:  # said once, after the last test cell of the item
                unwritten = _said(lines, unwritten)
            if error:
                passed = False
                lines.append(f"  FAIL  {label} ({notebooks.points_text(points)})")
                if item:
                    unwritten.append(item)
                else:
                    lines += [f"        {line}" for line in error.splitlines()[:12]]
            else:
                lines.append(f"  pass  {label} ({notebooks.points_text(points)})")
        elif error:
            passed = False
            unwritten = _said(lines, unwritten)
            lines.append(f"  error in {notebooks.cell_label(nb, index)}: {cell_error(error)}")
    _said(lines, unwritten)
    if tests == 0:  # the ungraded cells held them all (--all runs those)
        lines.append("  no test cell ran: every one is tagged ungraded")
    lines += written_lines(written)
    todo = [answer for answer in written if not answer.answered]
    if passed and tests:
        last = "All visible tests passed."
        if todo:
            last = (
                f"All visible tests passed, but {notebooks.written_named(todo)} "
                f"{'is' if len(todo) == 1 else 'are'} not written yet: write "
                f"{'it' if len(todo) == 1 else 'them'} before you submit."
            )
        lines.append(f"{last} Hidden tests run when your work is graded.")
    else:
        last = "Some visible tests failed or a cell raised an error: see above."
        if todo:
            last += f" And {notebooks.written_named(todo)} {'is' if len(todo) == 1 else 'are'} not written yet."
        lines.append(last)
    return lines, passed and tests > 0


def _said(lines: list[str], unwritten: list[str]) -> list[str]:
    """Say once, after the FAIL lines of the test cells in a row that failed because one item is not written yet
    (``unwritten``: its name, once for each), that it is not; what is left to say then: nothing."""
    if unwritten:
        lines.append(f"        {not_written(unwritten[-1], len(unwritten))}")
    return []


def written_lines(written: list[notebooks.WrittenAnswer]) -> list[str]:
    """The report's lines on the written answers: each one named with its points, still to write or
    awaiting the instructor's grading (nothing here grades them)."""
    if not written:
        return []
    lines = ["Written answers: graded by hand by your instructor, with a rubric; not checked here"]
    for answer in written:
        if answer.answered:
            lines.append(
                f"  written      {answer.grade_id} ({notebooks.points_text(answer.points)}): "
                "awaits your instructor's grading"
            )
        else:
            lines.append(
                f"  NOT WRITTEN  {answer.grade_id} ({notebooks.points_text(answer.points)}): its cell is as released "
                f"({notebooks.WRITTEN_PLACEHOLDER} or blank); write your answer there"
            )
    return lines


def _released(path: Path):
    """The released notebook of the exercise at ``path`` (its assignment named by its file, its setup cell or
    its folder: :func:`autograder.release.course.assignment_names`), to compare its written answers with; None
    where this copy of the course has none."""
    for name in course.assignment_names(path):
        released = course.released_notebook(name)
        if released is not None:
            return released
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path, help="the exercise notebook to run")
    parser.add_argument("--all", action="store_true", help="also run the cells tagged ungraded (training)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed for one cell (default 600)")
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        parser.error(f"no notebook at {args.notebook}; pass NOTEBOOK=exercises/<assignment>/<assignment>.ipynb")
    names = course.assignment_names(args.notebook)
    misnamed = course.not_graded_under(args.notebook, names[0]) if names else None
    if misnamed:  # before anything else, and again at the end: grading reads no other name
        print(f"NOT GRADED UNDER THIS NAME: {misnamed}")
    try:
        lines, passed = validate(args.notebook, run_all=args.all, timeout=args.timeout)
    except NotValidated as error:
        print(f"Not validated: {error}")
        return 2
    print("\n".join(lines))
    if misnamed:
        print(f"And rename the notebook {names[0]}.ipynb before you submit: grading reads no other name.")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
