"""Grade the written answers by hand in nbgrader's formgrader (``make formgrader``).

    python -m autograder.nbgrader.formgrader [--root COURSE] [JUPYTER LAB OPTIONS ...]

Starts JupyterLab from the course's root (where ``nbgrader_config.py`` and ``gradebook.db`` are, which the
formgrader reads from the folder it starts in), with ``--allow-root`` where it runs as root (a container: Jupyter
refuses root without it). The formgrader's *Manage Assignments* page warns that "the exchange directory does
not exist" wherever nbgrader's exchange folder (``c.Exchange.root``: the course's ``exchange/`` as
``nbgrader_config.py`` sets it, unless ``NBGRADER_EXCHANGE`` names another, such as nbgrader's default
``/usr/local/share/nbgrader/exchange``) is missing: that folder is made first, writable by every user as
nbgrader's own ``release_assignment`` makes it, where this account may (:func:`prepare_exchange`); where it may
not, the command says how, and the warning is then true (grading by hand needs no exchange; the formgrader's
*Release* and *Collect* buttons do). Options it does not know go to ``jupyter lab`` (``--no-browser``,
``--port 8890``, ...). Each written answer shows its rubric right below it (:mod:`autograder.nbgrader.rubric`),
and the mathematics of the page of a submission is typeset by the course's own MathJax, which JupyterLab serves as
static files (``book/_static/mathjax``, which ``make formgrader`` fetches once, as ``make book`` does), never
from a CDN: :data:`TEMPLATES` goes first on ``JUPYTER_PATH``, with nbconvert's ``mathjax`` macro as the course
writes it (an offline machine's page fetches nothing from outside).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.exchange import exchange_settings
from autograder.release import course

EXCHANGE_MODE = 0o777  # what nbgrader's release_assignment gives the exchange folder (and resets it to)
# A Jupyter data folder whose nbconvert templates come first: the mathjax macro of the formgrader's pages.
TEMPLATES = Path(__file__).resolve().parent / "formgrader_data"


def prepare_exchange(root: Path) -> str:
    """Make nbgrader's exchange folder, as ``root``'s ``nbgrader_config.py`` names it, where it is missing and
    this account may; a line that says what was found or done, and what to do where it could not be made."""
    folder = exchange_settings(root).root
    if folder.is_dir():
        if os.access(folder, os.W_OK | os.X_OK):
            return f"nbgrader's exchange: {folder}"
        return (
            f"nbgrader's exchange {folder} is not writable by this account: the formgrader's Release and Collect "
            f"need it (sudo chmod {EXCHANGE_MODE:o} {folder}); grading by hand does not"
        )
    try:
        folder.mkdir(parents=True)
        folder.chmod(EXCHANGE_MODE)
    except OSError as error:
        return (
            f"nbgrader's exchange {folder} (c.Exchange.root in nbgrader_config.py) does not exist and could not be "
            f"made ({error.strerror or error}): the formgrader's Release and Collect need it, and its Manage "
            f"Assignments page says so (sudo mkdir -p {folder} && sudo chmod {EXCHANGE_MODE:o} {folder}); grading "
            "by hand does not"
        )
    return f"made nbgrader's exchange {folder} (c.Exchange.root in nbgrader_config.py), writable by every user"


def lab_command(root: Path, options: list[str], *, as_root: bool | None = None) -> list[str]:
    """``jupyter lab`` serving ``root``, and the course's MathJax as static files (``static/mathjax/``), with
    ``--allow-root`` where this process is root; then ``options``."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    lab = Path(sys.executable).parent / "jupyter-lab"
    static = f"--ServerApp.extra_static_paths={course.FEEDBACK_MATHJAX.parent.parent}"
    return [str(lab), f"--ServerApp.root_dir={root}", static, *(["--allow-root"] if as_root else []), *options]


def lab_environment(environ) -> dict[str, str]:
    """``environ`` with :data:`TEMPLATES` first on ``JUPYTER_PATH``: nbconvert finds the course's ``mathjax`` macro
    before its own (which loads MathJax 2 from a CDN) for the formgrader's page of a submission."""
    path = [str(TEMPLATES), *filter(None, environ.get("JUPYTER_PATH", "").split(os.pathsep))]
    return {**environ, "JUPYTER_PATH": os.pathsep.join(path)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.nbgrader.formgrader",
        allow_abbrev=False,
        description=__doc__.split("\n\n")[0],
        epilog="Other options go to jupyter lab, e.g. --no-browser --port 8890.",
    )
    parser.add_argument("--root", type=Path, default=COURSE_ROOT, help="the course folder (default: this repository)")
    args, options = parser.parse_known_args(argv)
    root = args.root.resolve()
    if not (root / "nbgrader_config.py").is_file():
        parser.error(f"no nbgrader_config.py in {root}: give the course folder (--root)")
    print(prepare_exchange(root), flush=True)
    command = lab_command(root, options)
    print(
        f"Starting JupyterLab in {root}: open Nbgrader > Formgrader, then Manual Grading and the assignment (each "
        "written answer with its rubric below it). Ctrl-C stops it.",
        flush=True,
    )
    os.chdir(root)
    os.execve(command[0], command, lab_environment(os.environ))
    return 0  # never reached: jupyter lab took the process's place


if __name__ == "__main__":
    sys.exit(main())
