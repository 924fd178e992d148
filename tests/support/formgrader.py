"""`make formgrader`'s server started on a course folder for a test, and stopped after it (and any Jupyter server a
test starts: `served`, for `make lab` in tests/test_student_lab.py).

Used by tests/test_manual_grading.py (the rubric beside each written answer) and tests/test_inert_pages.py (the
page of a submission fetches nothing a student named)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

TOKEN = "course-test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(command: list[str], env: dict, log: Path, ready: str):
    """A Jupyter server started by ``command`` (its output in ``log``), in a session of its own: yields once the URL
    ``ready`` answers (a failure to start quotes the log); then stopped, with what it started."""
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None and time.monotonic() < deadline, (
                f"exit {server.poll()}:\n{log.read_text()[-3000:]}"
            )
            try:
                with urllib.request.urlopen(ready, timeout=10):
                    break
            except OSError:  # not listening yet
                time.sleep(0.5)
        yield server
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)


@contextmanager
def running(folder: Path, tmp_path: Path):
    """The formgrader for ``folder``, as `make formgrader` starts it: yields its base URL and its log's path once
    its page answers (a failure to start quotes the log); then stopped, with what it started."""
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    log = tmp_path / "lab.log"
    command = [sys.executable, "-m", "autograder.nbgrader.formgrader", "--root", str(folder), "--no-browser"]
    command += [f"--port={port}", f"--IdentityProvider.token={TOKEN}", "--ServerApp.port_retries=0"]
    base = f"http://127.0.0.1:{port}/formgrader"
    with served(command, env, log, f"{base}/manage_assignments?token={TOKEN}"):
        yield base, log
