"""The first cell of every exercise notebook: on Google Colab it installs the course's packages.

The cell is part of the instructor notebook in ``solutions/`` (a read-only nbgrader cell, so
grading takes it from there) and is written by ``make exercises`` from ``_config.yml``'s
``repository:`` (the open edition's); ``make check-exercises`` fails when it is out of date. A
term's export rewrites it in the notebooks students get (:func:`retarget`) to install the students'
repository at the term's release; grading puts the instructor's cell back quietly
(:func:`repository_of` tells a set-up cell of any repository from a changed one).

The cell installs with the repository's ``constraints-colab.txt`` at the same ref
(:mod:`autograder.release.colab_pins`): every package at the version the course was tested with, but those of Colab's
own runtime. Where pip fails on Colab (no network, a release that is not there), the cell says so in one
sentence, naming what it tried to install, and stops, without pip's ``CalledProcessError`` traceback.
"""

from __future__ import annotations

import re

import nbformat

from attention_course.tooling import notebooks
from autograder.release.course import Repository

GRADE_ID = notebooks.COLAB_CELL
PINS_FILE = "constraints-colab.txt"  # in the repository, beside constraints.txt (autograder.release.colab_pins)


def cell_source(repo: Repository) -> str:
    """The set-up cell's code, installing the packages from ``repo`` at its ref."""
    return (
        "# Run this cell first. On Google Colab it installs the course's packages (attention_course,\n"
        "# and autograder for the visible tests) from the course repository. Anywhere else it does\n"
        "# nothing: `make venv` has installed them.\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        f'PACKAGES = "{repo.pip_spec()}"\n'
        "# The versions the course was tested with (all but Colab's own torch, NumPy and Jupyter).\n"
        f'PINS = "{repo.raw_url(PINS_FILE)}"\n'
        "\n"
        'if "google.colab" in sys.modules:\n'
        '    install = [sys.executable, "-m", "pip", "install", "--quiet", "-c", PINS, PACKAGES]\n'
        "    pip = subprocess.run(install, capture_output=True, text=True)\n"
        "    if pip.returncode != 0:\n"
        "        print(pip.stderr, file=sys.stderr)\n"
        "        raise SystemExit(\n"
        '            f"Could not install {PACKAGES} (pip\'s message is above): check that this runtime is online, "\n'
        '            "then run this cell again; if it fails again, tell your instructor."\n'
        "        )"
    )


def install_line(repo: Repository) -> str:
    """The line a Colab notebook of a reader's own runs to install the packages as the set-up cell does."""
    return f'!pip install --quiet -c {repo.raw_url(PINS_FILE)} "{repo.pip_spec()}"'


PACKAGES_LINE = re.compile(
    r'^PACKAGES = "attention-course @ git\+(https://github\.com/[^/"@]+/[^/"@]+)@([^"]+)"$',
    re.M,
)


def repository_of(source: str) -> Repository | None:
    """The repository whose set-up cell ``source`` is, exactly as :func:`cell_source` writes it, or None."""
    match = PACKAGES_LINE.search(source)
    if match is None:
        return None
    repo = Repository(match.group(1), match.group(2))
    return repo if cell_source(repo) == source else None


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


def retarget(nb, repo: Repository) -> bool:
    """Make the notebook's set-up cell install from ``repo``, in place (its id and nbgrader metadata kept,
    and the checksum that nbgrader's released cells carry recomputed, as ``nbgrader validate`` compares
    it); return whether ``nb`` changed. The notebook must start with a set-up cell."""
    from nbgrader.utils import compute_checksum

    if not nb.cells or not is_colab_cell(nb.cells[0]):
        raise ValueError(f"the notebook must start with the Colab set-up cell ({GRADE_ID})")
    cell = nb.cells[0]
    if cell.source == cell_source(repo):
        return False
    cell.source = cell_source(repo)
    if "checksum" in cell.metadata.get("nbgrader", {}):
        cell.metadata["nbgrader"]["checksum"] = compute_checksum(cell)
    return True
