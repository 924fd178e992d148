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

from attention_course.tooling.notebooks import COURSE_ROOT
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


# ----------------------------------------------------------------------------- whose a folder is, the class list

AS_ROOT = os.geteuid() == 0
NO_ACCOUNT = 59_999  # a uid with no account (checked where it is used)


def test_a_class_list_is_one_id_a_line_or_nbgraders_student_csv(tmp_path):
    plain = tmp_path / "class_list.txt"
    plain.write_text("# the class of 2031\nalice\n\n  bob  \n# carol left\n")
    assert exchange.read_class_list(plain) == {"alice", "bob"}
    imported = tmp_path / "students.csv"  # as `nbgrader db student import` reads it, with a byte-order mark
    imported.write_text("\ufeffid,first_name,last_name,email\nalice,Alice,A,a@x\nbob,Bob,B,\n,No,Id,\n")
    assert exchange.read_class_list(imported) == {"alice", "bob"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "cannot be read"),
        ("first_name,last_name\nAlice,A\n", "its header has no 'id' column"),
        ("alice bob\n", "'alice bob' is not one student id"),
        ("# nobody yet\n\n", "names no student"),
    ],
)
def test_a_class_list_that_does_not_read_as_one_is_refused_with_the_setting_named(tmp_path, text, expected):
    path = tmp_path / "class_list.txt"
    if text is not None:
        path.write_text(text)
    with pytest.raises(exchange.ClassListError) as refused:
        exchange.read_class_list(path)
    assert f"the class list {path} (c.SafeCollect.class_list)" in str(refused.value) and expected in str(refused.value)


def test_a_folder_in_the_exchange_is_its_owners_whatever_its_name_says(tmp_path):
    me = exchange.owner(tmp_path)
    folder = tmp_path / f"{me}+a+2030-01-01 00:00:00.000000 UTC+x"
    folder.mkdir()
    assert exchange.foreign_owner(folder, me) is None
    assert exchange.foreign_owner(folder, "alice") == f"named for alice but owned by {me}"
    assert exchange.not_on_list("alice", None) is None and exchange.not_on_list("alice", frozenset({"alice"})) is None
    assert exchange.not_on_list("eve", frozenset({"alice"})) == "eve is not on the class list"
    (tmp_path / "alice+a+2030-01-01 00:00:00.000000 UTC").mkdir()
    (tmp_path / "alice+b+2030-01-01 00:00:00.000000 UTC").mkdir()  # another assignment
    (tmp_path / "bob+a").mkdir()  # not a name nbgrader reads
    assert [(path.name, student) for path, student in exchange.folders_in_exchange(tmp_path, "a")] == [
        ("alice+a+2030-01-01 00:00:00.000000 UTC", "alice"),
        (folder.name, me),
    ]


@pytest.mark.skipif(not AS_ROOT, reason="giving a folder to another uid needs root")
def test_an_owner_is_read_without_following_a_link_and_a_uid_without_account_is_named(tmp_path):
    import pwd

    with pytest.raises(KeyError):
        pwd.getpwuid(NO_ACCOUNT)
    nobody = pwd.getpwuid(65534).pw_name
    target = tmp_path / "nobodys"
    target.mkdir()
    os.chown(target, 65534, 65534)
    link = tmp_path / f"{nobody}+a+2030-01-01 00:00:00.000000 UTC"
    link.symlink_to(target)  # root's link to nobody's folder: root's
    assert exchange.foreign_owner(target, nobody) is None
    assert exchange.foreign_owner(link, nobody) == f"named for {nobody} but owned by root"
    os.chown(target, NO_ACCOUNT, NO_ACCOUNT)
    assert (
        exchange.foreign_owner(target, nobody)
        == f"named for {nobody} but owned by uid {NO_ACCOUNT}, which has no account"
    )


def test_the_exchange_settings_read_the_owner_check_and_the_class_list(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "no-user-config"))
    course = tmp_path / "course"
    course.mkdir()
    config = (COURSE_ROOT / "nbgrader_config.py").read_text()
    (course / "nbgrader_config.py").write_text(config)
    settings = exchange.exchange_settings(course)
    assert settings.check_owner and settings.class_list is None  # the course's: nbgrader's check on, no list
    (course / "nbgrader_config.py").write_text(
        config + "\nc.ExchangeCollect.check_owner = False\nc.SafeCollect.class_list = 'class_list.txt'\n"
    )
    settings = exchange.exchange_settings(course)
    assert not settings.check_owner and settings.class_list == course / "class_list.txt"


def course_with_exchange(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    """A course folder with the course's configuration and an exchange of its own: (course, inbound)."""
    from autograder.grading.classroom import make_course

    course = make_course(tmp_path / "course")
    with (course / "nbgrader_config.py").open("a") as f:
        f.write(f"\nc.Exchange.root = {str(tmp_path / 'exchange')!r}\n{extra}")
    inbound = tmp_path / "exchange" / "attention-course" / "inbound"
    inbound.mkdir(parents=True)
    return course, inbound


def plant(inbound: Path, student: str, uid: int, link: bool = False) -> str:
    """A folder of ch02 in ``inbound`` named for ``student``, owned by ``uid``, holding a notebook or a link."""
    folder = inbound / f"{student}+ch02_scaled_dot_product+2030-01-01 00:00:00.000000 UTC+{uid}"
    folder.mkdir()
    if link:
        (folder / "ch02_scaled_dot_product.ipynb").symlink_to("/etc/hostname")
    else:
        (folder / "ch02_scaled_dot_product.ipynb").write_text("{}")
    os.lchown(folder, uid, uid)
    return folder.name


@pytest.mark.skipif(not AS_ROOT, reason="giving a folder to another uid needs root")
def test_make_grade_takes_the_class_list_and_never_a_folder_planted_under_a_students_name(tmp_path, monkeypatch):
    """nobody (on the class list) with a folder of their own; root plants one under nobody's name holding a
    link (which refused nobody), and one for a student who does not exist; ``ghost`` has a submitted folder
    and is not on the list. nobody is graded and not refused; everything else is listed, and graded for nobody."""
    import pwd

    from autograder.grading.submissions import class_of, refusals

    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "no-user-config"))
    nobody, me = pwd.getpwuid(65534).pw_name, exchange.owner(tmp_path)
    course, inbound = course_with_exchange(tmp_path, "c.SafeCollect.class_list = 'class_list.txt'\n")
    (course / "class_list.txt").write_text(f"{nobody}\n")
    a = "ch02_scaled_dot_product"
    for student in (nobody, "ghost"):
        (course / "submitted" / student / a).mkdir(parents=True)
        (course / "submitted" / student / a / f"{a}.ipynb").write_text("{}")
    own = plant(inbound, nobody, 65534)
    planted = plant(inbound, nobody, os.geteuid(), link=True)
    fake = plant(inbound, "zz-fake-1", os.geteuid())

    found = class_of(a, course)

    assert (found.students, found.not_listed) == ([nobody], ["ghost"])
    assert sorted(found.in_exchange) == sorted(
        [(planted, f"named for {nobody} but owned by {me}"), (fake, f"named for zz-fake-1 but owned by {me}")]
    )
    assert own not in [folder for folder, _ in found.in_exchange]
    assert found.summary() == [
        f"Class list: {course / 'class_list.txt'}",
        "Not collected or graded, for anyone (3):",
        f"  submitted/ghost/{a}/: ghost is not on the class list",
        *(f"  {folder} in the exchange: {why}" for folder, why in found.in_exchange),
    ]
    assert refusals(a, [nobody], course) == {}  # the link planted under nobody's name is not nobody's
    (inbound / own / f"{a}.ipynb").unlink()  # nobody's own folder, holding a link, refuses them
    (inbound / own / f"{a}.ipynb").symlink_to("/etc/hostname")
    assert refusals(a, [nobody], course)[nobody].startswith("refused: the submission in the exchange")


def test_without_a_class_list_make_grade_takes_every_submission_and_says_so(tmp_path, monkeypatch):
    from autograder.grading.submissions import class_of

    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "no-user-config"))
    course, _ = course_with_exchange(tmp_path)
    a = "ch02_scaled_dot_product"
    for student in ("alice", "bob"):
        (course / "submitted" / student / a).mkdir(parents=True)
    found = class_of(a, course)
    assert (found.students, found.not_listed, found.class_list) == (["alice", "bob"], [], None)
    assert found.summary() == [
        "Class list: none given (c.SafeCollect.class_list), so every student with a submission was graded"
    ]


def test_make_grade_stops_on_a_class_list_that_does_not_read_as_one_and_scores_nobody(tmp_path, monkeypatch):
    from autograder.grading.phases import GradingUnavailable, grade
    from autograder.release import course as course_settings

    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "no-user-config"))
    course, _ = course_with_exchange(tmp_path, "c.SafeCollect.class_list = 'students.csv'\n")
    (course / "students.csv").write_text("first_name,last_name\nAlice,A\n")
    (course / "submitted" / "alice" / "ch02_scaled_dot_product").mkdir(parents=True)
    with pytest.raises(GradingUnavailable, match=r"students.csv \(c.SafeCollect.class_list\) reads as a CSV file"):
        grade(
            "ch02_scaled_dot_product", course, quiet=True, settings=course_settings.Release("term", {"ch01_bahdanau"})
        )
    assert not (course / "grades").exists() and not (course / "gradebook.db").exists()
