"""Run an exercise notebook top to bottom and report its visible tests (``make validate NOTEBOOK=...``).

    python -m autograder.cli.validate exercises/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb

This is what a student runs before submitting, on any machine: it needs no ``solutions/`` and no
sandbox. It executes every cell in a fresh kernel (cells tagged ``ungraded``, the optional
training, are left out unless ``--all``), carries on past errors, and prints, for each test cell,
whether its visible tests passed, with the failing check's message. Hidden tests run only when the
work is graded. Exits with 0 when every visible test passed, 1 otherwise, 2 for a bad argument.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from attention_course import notebooks

UNGRADED = "ungraded"


def _points(points) -> str:
    return f"{points:g} point{'' if points == 1 else 's'}"


def _error(cell) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            message = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
            return message.strip()
    return None


def validate(path: Path, *, run_all: bool = False, timeout: int = 600) -> tuple[list[str], bool]:
    """Execute the notebook at ``path``; return the report's lines and whether every visible test passed."""
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    if not run_all:
        nb.cells = [c for c in nb.cells if UNGRADED not in notebooks.tags(c)]
    client = NotebookClient(
        nb,
        # The kernel's own log (its warning that it listens on localhost without encryption) is the
        # machine's business, not the student's: only its errors are shown.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    client.execute()
    lines, passed, tests = [f"{path.name}: visible tests"], True, 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        error = _error(cell)
        if notebooks.is_test(cell):
            tests += 1
            points = notebooks.nbgrader_meta(cell).get("points", 0)
            label = notebooks.cell_id(cell) or notebooks.cell_label(nb, index)
            if error:
                passed = False
                lines.append(f"  FAIL  {label} ({_points(points)})")
                lines += [f"        {line}" for line in error.splitlines()[:12]]
            else:
                lines.append(f"  pass  {label} ({_points(points)})")
        elif error:
            passed = False
            lines.append(f"  error in {notebooks.cell_label(nb, index)}: {error.splitlines()[0][:200]}")
    if tests == 0:
        lines.append("  this notebook has no test cells")
    lines.append(
        "All visible tests passed. Hidden tests run when your work is graded."
        if passed and tests
        else "Some visible tests failed or a cell raised an error: see above."
    )
    return lines, passed and tests > 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", type=Path, help="the exercise notebook to run")
    parser.add_argument("--all", action="store_true", help="also run the cells tagged ungraded (training)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed for one cell (default 600)")
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        parser.error(f"no notebook at {args.notebook}; pass NOTEBOOK=exercises/<assignment>/<assignment>.ipynb")
    lines, passed = validate(args.notebook, run_all=args.all, timeout=args.timeout)
    print("\n".join(lines))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
