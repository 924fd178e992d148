"""Running nbgrader's command line from Python, from the course root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autograder.course import COURSE_ROOT


def environment() -> dict:
    """The environment for nbgrader: the venv's bin first on PATH (its gradebook runs `alembic`)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("MPLBACKEND", "Agg")
    return env


def run(
    *args: str,
    root: Path = COURSE_ROOT,
    check: bool = True,
    quiet: bool = False,
    log_level: str | None = None,
    env: dict | None = None,
) -> subprocess.CompletedProcess:
    """``nbgrader ARGS...`` in ``root`` (where nbgrader_config.py is).

    ``quiet`` captures the output (returned in the result); ``log_level`` sets nbgrader's;
    ``env`` adds environment variables.
    """
    command = [sys.executable, "-m", "nbgrader", *args, f"--log-level={log_level or ('WARN' if quiet else 'INFO')}"]
    return subprocess.run(
        command,
        cwd=Path(root).resolve(),
        env={**environment(), **(env or {})},
        check=check,
        capture_output=quiet,
        text=True,
    )
