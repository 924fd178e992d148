"""The sandboxes' host uids: one per sandbox at a time across every grader process on the machine.

RLIMIT_NPROC counts a host uid's processes wherever they run, so two sandboxes that shared a uid
would share one process limit (tests/test_sandbox_grading.py shows what that costs a student).
These tests use a pool of their own, with lock folders under ``tmp_path``, so they neither wait for
nor disturb the graders that run on the machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.sandbox import uids
from autograder.sandbox.errors import SandboxUnavailable
from autograder.sandbox.uids import _UidPool

UIDS = range(64000, 64003)  # outside uids.UIDS, so that no real grader's uid is ever locked here
HOLDER = """
import sys
from pathlib import Path
from autograder.sandbox.uids import _UidPool
pool = _UidPool(range({start}, {stop}), (Path({folder!r}),))
print(pool.take(), flush=True)
sys.stdin.read()
"""


def other_grader(folder: Path) -> tuple[subprocess.Popen, int]:
    """Another process that takes a uid from a pool on ``folder`` and holds it; it and the uid."""
    code = HOLDER.format(start=UIDS.start, stop=UIDS.stop, folder=str(folder))
    holder = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(COURSE_ROOT)},
    )
    return holder, int(holder.stdout.readline())


@pytest.fixture
def folder(tmp_path) -> Path:
    return tmp_path / "locks" / "uids"


def test_a_uid_held_by_another_process_is_not_given_out_until_that_process_ends(folder):
    holder, held = other_grader(folder)
    try:
        pool = _UidPool(UIDS, (folder,))
        mine = [pool.take(), pool.take()]
        assert held == UIDS[0] and held not in mine and sorted(mine) == list(UIDS[1:])
        with pytest.raises(SandboxUnavailable, match="every sandbox uid .* is in use"):
            pool.take()
    finally:
        holder.kill()  # dies holding its lock: the kernel releases it, nobody cleans up
        holder.wait()
    assert pool.take() == held
    pool.give_back(mine[0])
    assert pool.take() == mine[0]


def test_a_uid_given_back_is_free_for_another_process(folder):
    pool = _UidPool(UIDS, (folder,))
    uid = pool.take()
    pool.give_back(uid)
    holder, held = other_grader(folder)
    holder.communicate("")
    assert held == uid


def test_a_uid_that_a_process_runs_as_is_skipped(folder, monkeypatch):
    monkeypatch.setattr(uids, "_uids_of_processes", lambda: {UIDS[0]})
    assert _UidPool(UIDS, (folder,)).take() == UIDS[1]


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process as another uid needs root")
def test_the_uids_of_processes_are_read_from_proc():
    sleeper = subprocess.Popen(["sleep", "30"], user=UIDS[2], group=UIDS[2], extra_groups=[])
    try:
        assert UIDS[2] in uids._uids_of_processes()
    finally:
        sleeper.send_signal(signal.SIGKILL)
        sleeper.wait()


def test_the_lock_folder_is_private(folder):
    _UidPool(UIDS, (folder,)).take()
    assert oct(folder.stat().st_mode & 0o777) == "0o700" and folder.stat().st_uid == os.geteuid()
    assert [p.name for p in folder.iterdir()] == [f"{UIDS[0]}.lock"]


@pytest.mark.parametrize("kind", ["writable by others", "a symbolic link", "a file"])
def test_an_unsafe_lock_folder_is_passed_over_and_named(tmp_path, folder, kind):
    unsafe = tmp_path / "unsafe"
    if kind == "writable by others":
        unsafe.mkdir(mode=0o700)
        unsafe.chmod(0o777)
    elif kind == "a symbolic link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        unsafe.symlink_to(tmp_path / "elsewhere")
    else:
        unsafe.write_text("")
    assert _UidPool(UIDS, (unsafe, folder)).take() == UIDS[0]  # the next folder on the list
    assert [p.name for p in folder.iterdir()] == [f"{UIDS[0]}.lock"]
    assert not (tmp_path / "elsewhere").exists() or not list((tmp_path / "elsewhere").iterdir())
    with pytest.raises(SandboxUnavailable, match="no folder for the sandbox uids' locks") as raised:
        _UidPool(UIDS, (unsafe,)).take()
    expected = {
        "writable by others": "may be written by other users (mode 777)",
        "a symbolic link": "is not a folder",
        "a file": "is not a folder",
    }[kind]
    assert str(unsafe) in str(raised.value) and expected in str(raised.value)


def test_a_lock_file_that_is_a_symbolic_link_is_not_followed(folder, tmp_path):
    folder.mkdir(parents=True, mode=0o700)
    target = tmp_path / "target"
    target.write_text("untouched")
    (folder / f"{UIDS[0]}.lock").symlink_to(target)
    with pytest.raises(SandboxUnavailable, match=f"cannot open the sandbox uid lock {folder}/{UIDS[0]}.lock"):
        _UidPool(UIDS, (folder,)).take()
    assert target.read_text() == "untouched"
