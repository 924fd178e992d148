"""Running nbgrader's command line from Python, from the course root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.notebooks import COURSE_ROOT


def environment() -> dict:
    """The environment for nbgrader: the venv's bin first on PATH (its gradebook runs `alembic`)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("MPLBACKEND", "Agg")
    return env


def run(*args: str, root: Path = COURSE_ROOT, check: bool = True, quiet: bool = False,
        log_level: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """``nbgrader ARGS...`` in ``root`` (where nbgrader_config.py is).

    ``quiet`` captures the output (returned in the result); ``log_level`` sets nbgrader's;
    ``env`` adds environment variables.
    """
    command = [sys.executable, "-m", "nbgrader", *args, f"--log-level={log_level or ('WARN' if quiet else 'INFO')}"]
    return subprocess.run(command, cwd=Path(root).resolve(), env={**environment(), **(env or {})}, check=check,
                          capture_output=quiet, text=True)


def assignments(root: Path = COURSE_ROOT) -> list[str]:
    """Every assignment: a folder ``solutions/<name>/`` holding ``<name>.ipynb``."""
    return sorted(p.parent.name for p in (Path(root) / "solutions").glob("*/*.ipynb")
                  if p.stem == p.parent.name)


# nbgrader's own way of executing submissions (a Jupyter kernel that runs the
# student's cells and the tests together), kept for side-by-side comparisons:
# the attack tests and benchmarks/grading.py grade with it as well as with ours.
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
