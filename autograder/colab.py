"""The first cell of every exercise notebook: on Google Colab it installs the course's packages.

The cell is part of the instructor notebook in ``solutions/`` (a read-only nbgrader cell, so
grading takes it from there) and is written by ``make exercises`` from ``_config.yml``'s
``repository:``; ``make check-exercises`` fails when it is out of date.
"""

from __future__ import annotations

import nbformat

from attention_course import notebooks
from autograder.course import Repository

GRADE_ID = notebooks.COLAB_CELL


def cell_source(repo: Repository) -> str:
    return (
        "# Run this cell first. On Google Colab it installs the course's packages (attention_course,\n"
        "# and autograder for the visible tests) from the course repository. Anywhere else it does\n"
        "# nothing: `make venv` has installed them.\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        f'PACKAGES = "{repo.pip_spec()}"\n'
        "\n"
        'if "google.colab" in sys.modules:\n'
        '    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", PACKAGES], check=True)'
    )


def make_cell(repo: Repository):
    cell = nbformat.v4.new_code_cell(cell_source(repo))
    cell.id = "colab-setup"
    cell.metadata["nbgrader"] = {
        "grade": False,
        "grade_id": GRADE_ID,
        "locked": True,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    cell.metadata["deletable"] = False
    cell.metadata["editable"] = False
    return cell


def is_colab_cell(cell) -> bool:
    return notebooks.cell_id(cell) == GRADE_ID


def is_current(nb, repo: Repository) -> bool:
    """Whether the notebook starts with the set-up cell for ``repo``."""
    return bool(nb.cells) and is_colab_cell(nb.cells[0]) and nb.cells[0].source == cell_source(repo)


def put_first(nb, repo: Repository) -> bool:
    """Make the set-up cell for ``repo`` the notebook's first cell; return whether ``nb`` changed."""
    if is_current(nb, repo):
        return False
    nb.cells = [make_cell(repo)] + [cell for cell in nb.cells if not is_colab_cell(cell)]
    return True
