"""The pieces of the course's collect (autograder/exchange/), on folders made here: the check of a
submission's tree, the copy that follows no link, and where the exchange is found.

tests/test_exchange.py runs the whole collect through nbgrader, with students who attack it.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from attention_course.notebooks import COURSE_ROOT
from autograder import exchange
from autograder.exchange.copying import Refused, copy_tree
from autograder.exchange.entries import unsafe_entries


def submission(folder: Path) -> Path:
    """A submission folder as nbgrader submit leaves it: a notebook, nbgrader's files and a subfolder."""
    (folder / "data").mkdir(parents=True)
    (folder / "a.ipynb").write_text('{"cells": []}')
    (folder / "timestamp.txt").write_text("2030-01-01 00:00:00.000000 UTC")
    (folder / "data" / "x.csv").write_text("1,2\n")
    return folder


def test_plain_folders_and_files_are_safe(tmp_path):
    assert unsafe_entries(submission(tmp_path / "s")) == []


def test_every_kind_of_special_file_is_found_at_any_depth_without_following_it(tmp_path):
    folder = submission(tmp_path / "s")
    secret = tmp_path / "secret"
    secret.mkdir()
    (folder / "data" / "deeper").mkdir()
    (folder / "data" / "deeper" / "link.ipynb").symlink_to(secret / "missing.ipynb")  # dangling: never followed
    (folder / "folder_link").symlink_to(secret)
    os.mkfifo(folder / "data" / "pipe")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(folder / "sock"))
        (secret / "hard.ipynb").write_text("{}")
        os.link(secret / "hard.ipynb", folder / "data" / "hard.ipynb")
        assert unsafe_entries(folder, tmp_path) == [
            ("s/data/deeper/link.ipynb", "a symbolic link"),
            ("s/data/hard.ipynb", "a file with 2 hard links"),
            ("s/data/pipe", "a named pipe"),
            ("s/folder_link", "a symbolic link"),
            ("s/sock", "a socket"),
        ]
    assert ("s/data/hard.ipynb", "a file with 2 hard links") not in unsafe_entries(folder, tmp_path, hard_links=False)


def test_a_submission_folder_that_is_a_link_is_found_itself(tmp_path):
    submission(tmp_path / "real")
    (tmp_path / "s").symlink_to(tmp_path / "real")
    assert unsafe_entries(tmp_path / "s") == [("s", "a symbolic link")]
    assert unsafe_entries(tmp_path / "missing") == []


def test_describe_names_what_and_where_and_counts_the_rest():
    found = [(f"s/{i}", "a named pipe") for i in range(5)]
    assert exchange.describe(found) == "a named pipe (s/0), a named pipe (s/1), a named pipe (s/2) and 2 more"


def test_copy_tree_copies_plain_files_and_takes_the_newest_change(tmp_path):
    folder = submission(tmp_path / "s")
    time.sleep(0.05)
    (folder / "data" / "x.csv").write_text("3,4\n")  # changed last
    copied = copy_tree(folder, tmp_path / "copy")
    assert (tmp_path / "copy" / "data" / "x.csv").read_text() == "3,4\n"
    assert sorted(p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*")) == [
        "a.ipynb",
        "data",
        "data/x.csv",
        "timestamp.txt",
    ]
    assert copied.files == 3 and copied.newest_change_ns == os.stat(folder / "data" / "x.csv").st_ctime_ns


@pytest.mark.parametrize("plant", ["symbolic link", "named pipe", "hard link"])
def test_copy_tree_refuses_what_is_not_a_plain_file_and_leaves_no_copy(tmp_path, plant):
    folder = submission(tmp_path / "s")
    target = tmp_path / "solution.ipynb"
    target.write_text("THE SOLUTION")
    if plant == "symbolic link":
        (folder / "a.ipynb").unlink()
        (folder / "a.ipynb").symlink_to(target)
    elif plant == "named pipe":
        os.mkfifo(folder / "data" / "pipe")  # opening it for reading must not wait for a writer
    else:
        (folder / "a.ipynb").unlink()
        os.link(target, folder / "a.ipynb")
    with pytest.raises(Refused) as refused:
        copy_tree(folder, tmp_path / "copy", shown="s")
    expected = {
        "symbolic link": "holds a symbolic link (s/a.ipynb)",
        "named pipe": "holds a named pipe (s/data/pipe)",
        "hard link": "holds a file with 2 hard links (s/a.ipynb)",
    }[plant]
    assert str(refused.value) == expected
    assert not (tmp_path / "copy").exists()


def test_copy_tree_refuses_a_link_swapped_in_after_the_folder_was_listed(tmp_path):
    """The race a student can run against a collect: a plain file when listed, a link when opened."""
    folder = submission(tmp_path / "s")
    target = tmp_path / "solution.ipynb"
    target.write_text("THE SOLUTION")

    def swap(path, size):  # called between listing a file and opening it
        if path == "a.ipynb":
            (folder / "a.ipynb").unlink()
            (folder / "a.ipynb").symlink_to(target)
        return True

    with pytest.raises(Refused, match=r"changed while it was collected \(s/a.ipynb: Too many levels"):
        copy_tree(folder, tmp_path / "copy", keep=swap, shown="s")
    assert not (tmp_path / "copy").exists()


def test_copy_tree_refuses_a_file_replaced_by_another_after_it_was_listed(tmp_path):
    folder = submission(tmp_path / "s")

    def replace(path, size):
        if path == "a.ipynb":
            (folder / "other").write_text("another file")
            os.replace(folder / "other", folder / "a.ipynb")
        return True

    with pytest.raises(Refused, match="another file took its place"):
        copy_tree(folder, tmp_path / "copy", keep=replace, shown="s")


def test_copy_tree_refuses_a_source_that_is_a_link(tmp_path):
    submission(tmp_path / "real")
    (tmp_path / "s").symlink_to(tmp_path / "real")
    with pytest.raises(Refused, match="is not a folder that can be opened"):
        copy_tree(tmp_path / "s", tmp_path / "copy", shown="s")


def test_refusal_reason_reads_what_the_collect_wrote_and_nothing_through_a_link(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    assert exchange.refusal_reason(folder) is None
    (folder / exchange.REFUSAL).write_text("the submission in the exchange holds a named pipe (x)\n")
    assert exchange.refusal_reason(folder) == "the submission in the exchange holds a named pipe (x)"
    (folder / exchange.REFUSAL).unlink()
    (folder / exchange.REFUSAL).symlink_to(tmp_path / "elsewhere")
    assert "cannot be read" in exchange.refusal_reason(folder)


def test_the_submission_secret_is_read_only_from_a_plain_file_in_a_plain_folder(tmp_path):
    folder = submission(tmp_path / "s")
    assert exchange.submission_secret(folder) is None
    (folder / exchange.SECRET).write_text("ab12" * 32)
    assert exchange.submission_secret(folder) == "ab12" * 32
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert exchange.submission_secret(link) is None  # the folder itself a link
    for forged in ("not hex", "a" * 513, ""):
        (folder / exchange.SECRET).write_text(forged)
        assert exchange.submission_secret(folder) is None, forged
    (folder / exchange.SECRET).unlink()
    (folder / exchange.SECRET).symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text("cd" * 64)
    assert exchange.submission_secret(folder) is None
    (folder / exchange.SECRET).unlink()
    os.mkfifo(folder / exchange.SECRET)
    assert exchange.submission_secret(folder) is None  # returns at once: no wait on the pipe


def test_submitted_time_is_nbgraders_format_or_none(tmp_path):
    folder = submission(tmp_path / "s")
    assert exchange.submitted_time(folder) == "2030-01-01 00:00:00.000000 UTC"
    (folder / "timestamp.txt").write_text("yesterday, roughly")
    assert exchange.submitted_time(folder) is None


def test_the_exchange_is_found_from_the_course_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "no-user-config"))
    course = tmp_path / "course"
    course.mkdir()
    config = (COURSE_ROOT / "nbgrader_config.py").read_text()
    (course / "nbgrader_config.py").write_text(config + f"\nc.Exchange.root = {str(tmp_path / 'exchange')!r}\n")
    settings = exchange.exchange_settings(course)
    assert settings.inbound is None and settings.collect_is_safe  # no inbound folder yet
    inbound = tmp_path / "exchange" / "attention-course" / "inbound"
    inbound.mkdir(parents=True)
    assert exchange.exchange_settings(course).inbound == inbound
    (course / "nbgrader_config.py").write_text(
        config + "\nc.ExchangeFactory.collect = 'nbgrader.exchange.default.collect.ExchangeCollect'\n"
    )
    assert not exchange.exchange_settings(course).collect_is_safe


def test_the_course_configures_the_safe_collect():
    from nbgrader.exchange import ExchangeFactory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(COURSE_ROOT)).load_config()
    assert ExchangeFactory(config=config).collect is exchange.SafeCollect
