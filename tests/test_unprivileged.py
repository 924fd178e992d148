"""The tests' way of running a command as ``nobody`` (``tests/support/unprivileged.py``) reaches the folders it
needs when a folder above them is mode 0700 (a clone made in ``mktemp -d``'s folder), and nothing else there."""

from __future__ import annotations

import pytest

from tests.support import unprivileged

pytestmark = pytest.mark.skipif(unprivileged.available() is not None, reason=str(unprivileged.available()))


@pytest.fixture
def locked(tmp_path):
    """A 0700 folder holding a 0755 folder the command needs and a file it does not."""
    top = tmp_path / "locked"
    needed = top / "clone"
    needed.mkdir(parents=True)
    (needed / "page.txt").write_text("needed\n")
    (top / "other.txt").write_text("not needed\n")
    needed.chmod(0o755)
    (needed / "page.txt").chmod(0o644)
    (top / "other.txt").chmod(0o644)
    top.chmod(0o700)
    return top


def test_a_needed_folder_behind_a_locked_one_is_reached(locked):
    done = unprivileged.run_as(["cat", str(locked / "clone" / "page.txt")], reach=[locked / "clone"], timeout=60)
    assert (done.returncode, done.stdout) == (0, "needed\n"), done.stderr


def test_without_being_named_it_is_not_reached(locked):
    done = unprivileged.run_as(["cat", str(locked / "clone" / "page.txt")], timeout=60)
    assert done.returncode != 0 and "Permission denied" in done.stderr, (done.stdout, done.stderr)


def test_nothing_else_behind_the_locked_folder_is_reached_and_the_host_is_unchanged(locked):
    done = unprivileged.run_as(["ls", "-A", str(locked)], reach=[locked / "clone"], timeout=60)
    assert done.stdout.split() == ["clone"], (done.stdout, done.stderr)
    assert sorted(p.name for p in locked.iterdir()) == ["clone", "other.txt"]
    assert oct(locked.stat().st_mode & 0o777) == oct(0o700)


def test_a_needed_folder_no_one_else_may_search_is_named(locked):
    (locked / "clone").chmod(0o700)
    with pytest.raises(AssertionError, match=r"clone is not searchable by uid 65534 \(mode 700\)"):
        unprivileged.run_as(["true"], reach=[locked / "clone"], timeout=60)
