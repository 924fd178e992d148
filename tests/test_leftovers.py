"""What the suite leaves behind: nothing in TMPDIR and nothing in the checkout.

`make test` (and test-fast, test-exhaustive) runs pytest in a folder of its own, made in TMPDIR and removed when
pytest ends, whatever its outcome: the tests' folders (--basetemp), what the programs they start put in TMPDIR,
and torch's and Triton's compile caches. The tests that left folders or bytecode of their own before are run
here as make runs them, and must leave nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from attention_course.tooling.notebooks import COURSE_ROOT

# Writes where make test's stand-in python was told to: TMPDIR, --basetemp and the compile caches, and a line of
# what it was given; then exits with the status the test chose.
STAND_IN = """#!/bin/sh
[ "$1" = "-c" ] && exit 0  # make test-device's question (which tests compute on a device): no answer
seen="$SEEN"
basetemp=""
previous=""
for argument in "$@"; do
  [ "$previous" = "--basetemp" ] && basetemp="$argument"
  previous="$argument"
done
mkdir -p "$basetemp/popen-gw0" "$TORCHINDUCTOR_CACHE_DIR" "$TRITON_CACHE_DIR" "$TMPDIR/torchelastic_x"
touch "$basetemp/popen-gw0/report.json" "$TMPDIR/tmpfile"
printf '%s\\n' "TMPDIR=$TMPDIR" "basetemp=$basetemp" "TORCHINDUCTOR_CACHE_DIR=$TORCHINDUCTOR_CACHE_DIR" \\
  "TRITON_CACHE_DIR=$TRITON_CACHE_DIR" "mode=$(stat -c %a "$TMPDIR") $(stat -c %a "$TMPDIR/..")" "args=$*" > "$seen"
exit "$STATUS"
"""


def _environment(**extra: str) -> dict[str, str]:
    """This environment without an outer make's variables (its jobserver, its flags), with ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k != "PYTEST_ARGS"}
    return {**env, **extra}


def _make_with_stand_in(
    tmp_path: Path, target: str, status: int, **extra: str
) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """`make target` in the checkout with a stand-in python (BIN) that exits with ``status``, and TMPDIR an empty
    folder of this test's: make's output, and what the stand-in was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python").write_text(STAND_IN)
    (bin_dir / "python").chmod(0o755)
    temporary = tmp_path / "tmp"
    temporary.mkdir(exist_ok=True)
    seen = tmp_path / "seen.txt"
    old = [f"--assume-old={name}" for name in (".venv/.installed", ".venv/.bytecode")]
    made = subprocess.run(
        ["make", "--no-print-directory", "-C", str(COURSE_ROOT), *old, f"BIN={bin_dir}", target],
        capture_output=True,
        text=True,
        env=_environment(TMPDIR=str(temporary), SEEN=str(seen), STATUS=str(status), **extra),
        timeout=120,
    )
    given = dict(line.split("=", 1) for line in seen.read_text().splitlines()) if seen.exists() else {}
    return made, given


@pytest.mark.parametrize("target", ["test-fast", "test-exhaustive", "test-device"])
def test_make_runs_pytest_in_a_folder_of_its_own_and_removes_it_passed_or_failed(tmp_path, target):
    temporary = tmp_path / "tmp"
    for status in (0, 3):
        made, given = _make_with_stand_in(tmp_path, target, status)
        assert given, made.stdout + made.stderr
        run = Path(given["TMPDIR"]).parent
        assert run.parent == temporary and run.name.startswith("attention-test-")
        for name in ("basetemp", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
            assert Path(given[name]).parent == run, name
        assert "--durations=40" in given["args"].split()
        # the sandbox's unprivileged uid passes through both to the folders staged for it in TMPDIR
        assert given["mode"] == "711 711", given["mode"]
        left = sorted(p.name for p in temporary.iterdir())
        assert not left, f"make {target} left {left} in TMPDIR (pytest's status {status})"
        if status:
            assert made.returncode != 0 and f"Error {status}" in made.stderr, made.stderr  # pytest's status kept
        else:
            assert made.returncode == 0, made.stdout + made.stderr


def test_make_keeps_the_folder_where_asked(tmp_path):
    made, given = _make_with_stand_in(tmp_path, "test-fast", 0, TEST_KEEP="1")
    run = Path(given["TMPDIR"]).parent
    assert made.returncode == 0 and f"kept: {run}" in made.stdout, made.stdout + made.stderr
    assert (Path(given["basetemp"]) / "popen-gw0" / "report.json").is_file()
    assert stat.S_IMODE(run.stat().st_mode) == 0o711


# Tests that left something before, each with what it left: run as `make test-fast` runs them.
LEFT_BEHIND = {
    # JupyterLab started without make (the environment emptied but for PATH and HOME): __pycache__ in the checkout
    "tests/test_lab.py::test_a_notebook_given_to_jupyter_lab_alone_is_what_nbgrader_refuses": "__pycache__",
    # the unprivileged user's home, attention-nobody-* in /tmp (not TMPDIR: where that user can reach it)
    "tests/test_lab.py::test_make_lab_serves_the_course_as_root_or_not": "attention-nobody-*",
    # benchmarks.nanogpt's nanogpt-* checkpoint folder in TMPDIR
    "tests/test_gpu.py::test_nanogpt_runs_from_a_folder_of_its_own_and_is_timed_between_its_logs": "nanogpt-*",
}


def _homes_of_this_checkouts_labs() -> set[str]:
    """The unprivileged user's homes in /tmp where a JupyterLab of this checkout ran (its log names the checkout:
    other runs on the machine make homes of their own)."""
    homes = set()
    for home in Path("/tmp").glob("attention-nobody-*"):
        with contextlib.suppress(OSError):
            if str(COURSE_ROOT) in (home / "lab.log").read_text(errors="replace"):
                homes.add(home.name)
    return homes


def _bytecode_beside_the_sources() -> set[str]:
    """The checkout's __pycache__ folders (the venv and the built book aside)."""
    found = set()
    for folder, names, _ in os.walk(COURSE_ROOT):
        names[:] = [n for n in names if n not in (".venv", "_build", ".git", "node_modules")]
        if "__pycache__" in names:
            found.add(os.path.relpath(os.path.join(folder, "__pycache__"), COURSE_ROOT))
    return found


@pytest.mark.slow  # JupyterLab started and stopped, in a run of pytest of its own
def test_the_tests_that_left_folders_or_bytecode_leave_nothing(tmp_path):
    """The checkout is compared with itself before the run: in a fresh clone (CI's) it holds no __pycache__ at
    all, so a test that writes bytecode beside the sources shows; a checkout where `python -m pytest` ran without
    make's PYTHONPYCACHEPREFIX already holds it."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    before, homes = _bytecode_beside_the_sources(), _homes_of_this_checkouts_labs()
    venv = Path(sys.prefix)
    old = [f"--assume-old={venv}/.installed", f"--assume-old={venv}/.bytecode"]
    selection = " ".join(LEFT_BEHIND)
    made = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(COURSE_ROOT),
            *old,
            f"VENV={venv}",
            "test-fast",
            f"PYTEST_ARGS=-m 'slow or not slow' {selection}",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env=_environment(TMPDIR=str(temporary)),
        timeout=600,
    )
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    assert re.search(rf"\b{len(LEFT_BEHIND)} passed\b", made.stdout), made.stdout[-3000:]
    left = sorted(p.name for p in temporary.iterdir())
    written = sorted(_bytecode_beside_the_sources() - before)
    left += sorted(f"/tmp/{home}" for home in _homes_of_this_checkouts_labs() - homes)
    assert not left and not written, f"left: {left}; bytecode written beside the sources: {written}"


def test_make_lint_keeps_its_caches_under_the_venv(tmp_path):
    """ruff and import-linter cache what they read: in .ruff_cache and .import_linter_cache of the checkout unless
    told otherwise (`make test` lints first)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "seen.txt"
    for tool in ("ruff", "lint-imports"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $* RUFF_CACHE_DIR=$RUFF_CACHE_DIR" >> "{seen}"\n')
        (bin_dir / tool).chmod(0o755)
    venv = tmp_path / "venv"
    old = [f"--assume-old={venv}/.installed", f"--assume-old={venv}/.bytecode"]
    made = subprocess.run(
        ["make", "--no-print-directory", "-C", str(COURSE_ROOT), *old, f"VENV={venv}", f"BIN={bin_dir}", "lint"],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=60,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    ruff_check, ruff_format, imports = seen.read_text().splitlines()
    for line in (ruff_check, ruff_format):
        assert line.endswith(f"RUFF_CACHE_DIR={venv}/ruff-cache"), line
    assert f"--cache-dir {venv}/import-linter-cache" in imports, imports


def test_every_folder_a_chapter_makes_with_mkdtemp_is_removed_by_the_chapter():
    """A chapter's folder of its own (a model trained, checkpoints saved) is removed by a later cell: else each
    build of the book leaves it in TMPDIR (tests/test_book.py checks a whole build's TMPDIR)."""
    kept = []
    for page in sorted((COURSE_ROOT / "book").glob("*.md")):
        text = page.read_text()
        for made in re.finditer(r"^(\w+) = .*\btempfile\.mkdtemp\(", text, re.M):
            if not re.search(rf"\bshutil\.rmtree\({made.group(1)}\b", text[made.end() :]):
                kept.append(f"{page.name}: {made.group(1)}")
    assert not kept, f"folders made and never removed: {kept}"


# Writes the students' packages as a grader does, says where, and waits to be killed.
GRADER_KILLED = """
import sys, time
from autograder.release import course, packages
print(packages.sandbox_packages(course.Release("term", {"ch01_bahdanau"})), flush=True)
time.sleep(120)
"""


def test_a_killed_graders_packages_are_removed_by_the_next_grader_and_a_running_ones_kept(tmp_path, monkeypatch):
    """A grader removes its packages' folder as it ends; one killed (SIGKILL: no finally, no atexit) cannot, and
    the next grader to write such a folder removes it, never one whose process still runs."""
    from autograder.release import course, packages

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    release = course.Release("term", {"ch01_bahdanau"})
    running = packages.SandboxPackages()  # this process's: it runs
    kept = running.folder(release)
    grader = subprocess.Popen(
        [sys.executable, "-c", GRADER_KILLED],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(temporary), "PYTHONPATH": str(COURSE_ROOT)},
    )
    try:
        written = Path(grader.stdout.readline().strip())
    finally:
        grader.send_signal(signal.SIGKILL)
        grader.wait()
    assert written.is_dir() and written.parent.parent == temporary
    other = packages.SandboxPackages()
    made = other.folder(release)
    assert not written.parent.exists(), "the killed grader's packages were left in TMPDIR"
    assert kept.is_dir() and made.is_dir() and kept != made
    other.close()
    running.close()
    assert not list(temporary.iterdir())
