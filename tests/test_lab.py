"""`make lab`, as README tells students and instructors to start JupyterLab: it starts as root (JupyterLab refuses
root unless told to) and as an unprivileged user, serves the notebook it is given, and nbgrader's course folder
lies inside the server's root (`jupyter lab path/to/x.ipynb` alone makes the notebook's folder the root, and
nbgrader's server extension logs that it "will not work correctly")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course
from tests.support import unprivileged

pytestmark = pytest.mark.slow  # JupyterLab started and stopped: tens of seconds each

NBGRADER_ERROR = "The course directory root is not a subdirectory of the notebook server root"
NOTEBOOK = course.exercise_path("ch02_scaled_dot_product")

# Starts `make lab` on a free port, waits until the server answers (and serves the notebook it opened), stops it
# and prints its log; "served <status>" where it served, "not served" otherwise. The venv taken as made.
DRIVER = r"""
import os, signal, socket, subprocess, sys, time, urllib.error, urllib.request
folder, notebook, log_path = sys.argv[1:4]
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
args = f"--no-browser --ip=127.0.0.1 --port={port} --ServerApp.port_retries=0 --ServerApp.token=test"
with open(log_path, "w") as log:
    lab = subprocess.Popen(
        ["make", "-s", "-C", folder, "--assume-old=.venv/.installed", "--assume-old=.venv/.bytecode", "lab",
         f"NOTEBOOK={notebook}", f"LAB_ARGS={args}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
served, deadline = None, time.monotonic() + 120
try:
    while served is None and time.monotonic() < deadline and lab.poll() is None:
        url = f"http://127.0.0.1:{port}/api/contents/{notebook}?content=0&token=test"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                served = answer.status
        except urllib.error.HTTPError as error:  # served, but not that notebook
            served = error.code
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
finally:
    if lab.poll() is None:
        os.killpg(lab.pid, signal.SIGTERM)
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait()
print(open(log_path).read())
print(f"served {served}" if served else "not served")
"""


def _environment(home: Path) -> dict[str, str]:
    # PYTHONPYCACHEPREFIX (make's): a server started without make writes no __pycache__ into the checkout
    keep = ("PATH", "LANG", "LC_ALL", "PYTHONPYCACHEPREFIX")
    env = {key: value for key, value in os.environ.items() if key in keep}
    return {**env, "HOME": str(home), "TMPDIR": str(home), "JUPYTER_RUNTIME_DIR": str(home / "runtime")}


def _assert_served_with_nbgrader(out: str) -> None:
    assert out.rstrip().endswith("served 200"), out
    assert NBGRADER_ERROR not in out, out


def test_make_lab_serves_the_course_as_root_or_not(tmp_path):
    """As this process's user (root in a container: --allow-root is make's), then as ``nobody`` where the tests
    run as root: each serves the notebook, and nbgrader logs no course folder outside the server's root."""
    as_me = subprocess.run(
        [sys.executable, "-c", DRIVER, str(COURSE_ROOT), NOTEBOOK, str(tmp_path / "lab.log")],
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    _assert_served_with_nbgrader(as_me.stdout + as_me.stderr)
    why = unprivileged.available()
    if why:  # not root: the run above was the unprivileged one
        assert os.geteuid() != 0, why
        return
    home = unprivileged.home()  # under /tmp, whatever TMPDIR is: removed here
    try:
        as_nobody = unprivileged.run_as(
            [sys.executable, "-c", DRIVER, str(COURSE_ROOT), NOTEBOOK, str(home / "lab.log")],
            env=_environment(home),
            cwd=home,
            timeout=240,
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    _assert_served_with_nbgrader(as_nobody.stdout + as_nobody.stderr)


def test_a_notebook_given_to_jupyter_lab_alone_is_what_nbgrader_refuses(tmp_path):
    """The check above can fail: `jupyter lab NOTEBOOK` without make's root gives nbgrader's error in the log."""
    env = _environment(tmp_path)
    lab = Path(sys.executable).parent / "jupyter"
    script = DRIVER.replace(
        '["make", "-s", "-C", folder, "--assume-old=.venv/.installed", "--assume-old=.venv/.bytecode", "lab",\n'
        '         f"NOTEBOOK={notebook}", f"LAB_ARGS={args}"]',
        f'[{str(lab)!r}, "lab", *(["--allow-root"] if os.geteuid() == 0 else []), *args.split(), notebook]',
    )
    assert script != DRIVER
    done = subprocess.run(
        [sys.executable, "-c", script, str(COURSE_ROOT), NOTEBOOK, str(tmp_path / "lab.log")],
        env=env,
        cwd=COURSE_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert "served" in done.stdout and NBGRADER_ERROR in done.stdout, done.stdout + done.stderr
