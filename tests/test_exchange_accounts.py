"""nbgrader's exchange as a hub has it: each student an account of their own, and every folder in the exchange
owned by the account that made it.

Accounts are made on this machine (``useradd``) and removed at the end. The instructor (root, as ``make
grade`` runs on a hub) releases the exercise into a local exchange, with the course's configuration (nbgrader's
``check_owner`` on, as by default) and a class list (``c.SafeCollect.class_list``) of alice, bob and mallory.
Then, each as their own account:

* alice submits her answers with ``nbgrader submit``; bob submits his, which get the mask wrong;
* eve, an account of the hub who is not on the class list, submits answers too;
* mallory plants, in the exchange's ``inbound/`` (which every account may write), a folder
  ``alice+<a>+<a time before alice's>+x/`` holding one symbolic link (the collect refused a student any of
  whose submissions holds one), a folder ``bob+<a>+<a time after bob's>+x/`` holding the unanswered notebook
  (the collect takes a student's newest), and ``zz-fake-1`` ... ``zz-fake-3``, answered, for students who do
  not exist (each would cost a notebook's grading).

``submitted/zz-fake-0/<a>/`` is there too, as an earlier collect with another configuration would have left
it. The instructor runs ``nbgrader collect`` (the course's collect) and ``make grade`` (``python -m
autograder.cli.grade``); then ``nbgrader collect`` again without the class list. Each step is a real command
in its own process, each student's as that student.
"""

from __future__ import annotations

import csv
import datetime
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.utils import parse_utc

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.exchange.records import REFUSAL
from autograder.grading import run_nbgrader
from autograder.grading.classroom import fill, make_course, submit
from autograder.grading.gradesheet import db_url
from tests.buggy.ch02_scaled_dot_product import BUGS
from tests.support import unprivileged
from tests.support.points import full_marks, max_points, points_by_test
from tests.test_exchange import COURSE_ID, TERM, nbgrader, together

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="making accounts and running as them needs root"),
]

A = "ch02_scaled_dot_product"
FULL, MAX = full_marks(A), max_points(A)
MASK_WITH_ZERO = next(b for b in BUGS if b.name == "sdpa_mask_with_zero")
BOB_SCORE = FULL - points_by_test(A)["test_sdpa_mask"]  # his own work: its mask test lost, nothing else
FAKES = [f"zz-fake-{i}" for i in (1, 2, 3)]
STALE = "zz-fake-0"  # in submitted/ already, not on the class list
ROLES = ("alice", "bob", "mallory", "eve")
NBGRADER_TIME = "%Y-%m-%d %H:%M:%S.%f UTC"
COURSE_CONFIG = """
c.Exchange.root = {exchange!r}
c.SafeCollect.class_list = "class_list.txt"
"""
STUDENT_CONFIG = """c = get_config()
c.CourseDirectory.course_id = {course_id!r}
c.Exchange.root = {exchange!r}
c.Exchange.cache = {cache!r}
"""
SUBMIT = 'set -e; mkdir -p "$1"; cp "$2" "$1/$1.ipynb"; python -m nbgrader submit "$1" --log-level=INFO'
PLANT = """
import shutil, sys
from pathlib import Path
inbound, a, alice, early, bob, late, blank, answered, target, *fakes = sys.argv[1:]
inbound = Path(inbound)
folder = inbound / f"{alice}+{a}+{early}+x"
folder.mkdir()
(folder / f"{a}.ipynb").symlink_to(target)
for name, notebook in [(bob, blank), *((fake, answered) for fake in fakes)]:
    folder = inbound / f"{name}+{a}+{late}+x"
    folder.mkdir()
    shutil.copyfile(notebook, folder / f"{a}.ipynb")
"""


@dataclass
class Hub:
    course: Path
    exchange: Path
    names: dict[str, str]  # role -> account name (the student id)
    submitted: dict[str, str] = field(default_factory=dict)  # role -> the time `nbgrader submit` gave
    plants: dict[str, str] = field(default_factory=dict)  # whose name -> mallory's folder in inbound/
    collected: dict[str, list[str]] = field(default_factory=dict)  # submitted/<student>/<a>/ after each collect
    outputs: dict[str, str] = field(default_factory=dict)
    make_grade: subprocess.CompletedProcess | None = None

    @property
    def inbound(self) -> Path:
        return self.exchange / COURSE_ID / "inbound"

    def folder(self, role: str) -> str:
        """The folder that the account of ``role`` made with ``nbgrader submit``."""
        (found,) = [
            p.name for p in self.inbound.glob(f"{self.names[role]}+{A}+*") if p.name not in self.plants.values()
        ]
        return found


def add_accounts(roles) -> dict[str, str]:
    """A new account for each role, named after it (with a suffix of this run's): role -> account name."""
    suffix = secrets.token_hex(2)
    names = {}
    try:
        for role in roles:
            name = f"{role}{suffix}"
            subprocess.run(
                ["useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name],
                check=True,
                capture_output=True,
            )
            names[role] = name
    except BaseException:
        remove_accounts(names)
        raise
    return names


def remove_accounts(names: dict[str, str]) -> None:
    for name in names.values():
        subprocess.run(["userdel", name], check=False, capture_output=True)


def as_account(name: str, command: list[str], home: Path) -> subprocess.CompletedProcess:
    """``command`` run as the account ``name`` (its uid, no other group), in its home."""
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
    }
    done = unprivileged.run_as(command, uid=pwd.getpwnam(name).pw_uid, env=env, cwd=home, timeout=300)
    assert done.returncode == 0, (name, done.stdout[-3000:], done.stderr[-3000:])
    return done


def moved(timestamp: str, hours: float) -> str:
    return (parse_utc(timestamp) + datetime.timedelta(hours=hours)).strftime(NBGRADER_TIME)


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Hub:
    why = unprivileged.available()
    if why or shutil.which("useradd") is None:
        pytest.skip(why or "no useradd")
    shared = Path(tempfile.mkdtemp(prefix="attention-hub-", dir="/tmp"))  # what every account may reach
    shared.chmod(0o755)
    names = add_accounts(ROLES)
    try:
        yield run_the_term(tmp_path_factory.mktemp("hub") / "course", shared, names)
    finally:
        remove_accounts(names)
        shutil.rmtree(shared, ignore_errors=True)


def run_the_term(course_folder: Path, shared: Path, names: dict[str, str]) -> Hub:
    exchange = shared / "exchange"
    course = make_course(course_folder)
    with (course / "nbgrader_config.py").open("a") as f:
        f.write(COURSE_CONFIG.format(exchange=str(exchange)))
    (course / "class_list.txt").write_text("".join(f"{names[role]}\n" for role in ("alice", "bob", "mallory")))
    h = Hub(course, exchange, names)
    nbgrader("release_assignment", A, cwd=course, env=TERM)

    answers = shared / "answers"
    answers.mkdir(mode=0o755)
    notebooks = {
        "alice": fill(A),
        "bob": fill(A, {MASK_WITH_ZERO.item: MASK_WITH_ZERO.code}),
        "eve": fill(A),
        "blank": fill(A, blank=True),
    }
    for name, nb in notebooks.items():
        nbformat.write(nb, str(answers / f"{name}.ipynb"))
        (answers / f"{name}.ipynb").chmod(0o644)
    homes = {}
    for role, name in names.items():
        homes[role] = home = shared / "homes" / name
        home.mkdir(parents=True)
        (home / "nbgrader_config.py").write_text(
            STUDENT_CONFIG.format(course_id=COURSE_ID, exchange=str(exchange), cache=str(home / ".cache"))
        )
        uid = pwd.getpwnam(name).pw_uid
        os.chown(home, uid, pwd.getpwnam(name).pw_gid)

    def submits(role: str) -> str:
        done = as_account(names[role], ["sh", "-c", SUBMIT, "sh", A, str(answers / f"{role}.ipynb")], homes[role])
        output = done.stdout + done.stderr
        return re.search(rf"Submitted as: {re.escape(COURSE_ID)} {A} (.+)$", output, re.MULTILINE).group(1).strip()

    roles = ("alice", "bob", "eve")
    h.submitted = dict(zip(roles, together(*[lambda r=r: submits(r) for r in roles])))
    early, late = moved(h.submitted["alice"], -1), moved(h.submitted["bob"], 1)
    as_account(
        names["mallory"],
        [
            sys.executable,
            "-c",
            PLANT,
            str(h.inbound),
            A,
            names["alice"],
            early,
            names["bob"],
            late,
            str(answers / "blank.ipynb"),
            str(answers / "alice.ipynb"),
            str(course / "solutions" / A / f"{A}.ipynb"),
            *FAKES,
        ],
        homes["mallory"],
    )
    h.plants = {
        names["alice"]: f"{names['alice']}+{A}+{early}+x",
        names["bob"]: f"{names['bob']}+{A}+{late}+x",
        **{fake: f"{fake}+{A}+{late}+x" for fake in FAKES},
    }
    submit(course, STALE, A, fill(A))

    h.outputs["collect"] = nbgrader("collect", A, cwd=course, env=TERM)
    h.collected["with the class list"] = sorted(p.name for p in (course / "submitted").iterdir())
    h.make_grade = subprocess.run(
        [sys.executable, "-m", "autograder.cli.grade", A, "--root", str(course), "--jobs", "2"],
        cwd=COURSE_ROOT,
        env={**run_nbgrader.environment(), **TERM},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    h.outputs["collect without a class list"] = nbgrader(
        "collect", A, "--SafeCollect.class_list=", cwd=course, env=TERM
    )
    h.collected["without a class list"] = sorted(p.name for p in (course / "submitted").iterdir())
    return h


def owned_by(h: Hub, folder: str) -> str:
    return pwd.getpwuid((h.inbound / folder).lstat().st_uid).pw_name


def csv_rows(h: Hub) -> dict[str, dict]:
    with (h.course / "grades" / f"{A}.csv").open() as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def summary_line(h: Hub, student: str) -> str:
    return next(line for line in h.make_grade.stdout.splitlines() if line.startswith(f"{student} "))


def test_each_folder_in_the_exchange_is_owned_by_the_account_that_made_it(hub):
    for role in ("alice", "bob", "eve"):
        assert owned_by(hub, hub.folder(role)) == hub.names[role], role
    for folder in hub.plants.values():
        assert owned_by(hub, folder) == hub.names["mallory"], folder
    assert (hub.inbound / hub.plants[hub.names["alice"]] / f"{A}.ipynb").is_symlink()


def test_the_collect_takes_each_students_own_folder_and_none_planted_under_their_name(hub):
    """alice is collected, not refused for mallory's link; bob's own answers are collected, not mallory's
    later unanswered notebook; nobody else is collected: not the students who do not exist, not eve."""
    alice, bob = hub.names["alice"], hub.names["bob"]
    assert hub.collected["with the class list"] == sorted([alice, bob, STALE])
    for role, answers in (("alice", fill(A)), ("bob", fill(A, {MASK_WITH_ZERO.item: MASK_WITH_ZERO.code}))):
        folder = hub.course / "submitted" / hub.names[role] / A
        assert not (folder / REFUSAL).exists(), (folder / REFUSAL).read_text()
        collected = nbformat.read(str(folder / f"{A}.ipynb"), as_version=4)
        assert collected == nbformat.reads(nbformat.writes(answers), as_version=4), role


def test_the_collect_names_each_folder_it_collects_for_nobody_with_its_owner(hub):
    log, mallory = hub.outputs["collect"], hub.names["mallory"]
    for student, folder in hub.plants.items():
        expected = f"ERROR] Not collecting {folder}, for anyone: it is named for {student} but owned by {mallory}"
        assert expected in log, (expected, log)
    eve = hub.names["eve"]
    assert f"WARNING] Not collecting {hub.folder('eve')}: {eve} is not on the class list" in log, log
    assert "Refusing the submission" not in log, log


def test_make_grade_grades_alice_and_bob_on_their_own_work_and_nobody_off_the_list(hub):
    assert hub.make_grade.returncode == 0, hub.make_grade.stderr[-4000:]
    alice, bob = hub.names["alice"], hub.names["bob"]
    assert f"{FULL:g} / {MAX:g}  all tests passed" in summary_line(hub, alice), summary_line(hub, alice)
    assert f"{BOB_SCORE:g} / {MAX:g}  failed: test_sdpa_mask" in summary_line(hub, bob), summary_line(hub, bob)
    assert "refused" not in hub.make_grade.stdout and "nothing answered" not in hub.make_grade.stdout
    rows = csv_rows(hub)
    assert set(rows) == {alice, bob}
    assert (float(rows[alice]["score"]), float(rows[bob]["score"])) == (FULL, BOB_SCORE)
    with Gradebook(db_url(hub.course)) as gradebook:
        assert {s.student.id for s in gradebook.find_assignment(A).submissions} == {alice, bob}
        assert {s.id for s in gradebook.students} == {alice, bob}
    assert sorted(p.name for p in (hub.course / "feedback").iterdir()) == sorted([alice, bob])
    assert sorted(p.name for p in (hub.course / "grades" / "reports" / A).iterdir()) == sorted([alice, bob])


def test_make_grade_lists_what_counts_for_nobody_with_its_owner(hub):
    out, mallory = hub.make_grade.stdout, hub.names["mallory"]
    assert f"Class list: {hub.course / 'class_list.txt'}" in out
    expected = [
        f"  submitted/{STALE}/{A}/: {STALE} is not on the class list",
        *(f"  {folder} in the exchange: named for {who} but owned by {mallory}" for who, folder in hub.plants.items()),
        f"  {hub.folder('eve')} in the exchange: {hub.names['eve']} is not on the class list",
    ]
    lines = out.splitlines()
    start = lines.index(f"Not collected or graded, for anyone ({len(expected)}):")
    assert sorted(lines[start + 1 : start + 1 + len(expected)]) == sorted(expected), out


def test_without_a_class_list_every_account_that_owns_its_folder_is_collected_and_no_plant_is(hub):
    """No class list: eve, who submitted as herself, is collected; the folders mallory made under other
    students' names are still collected for nobody, and alice and bob keep their own submissions."""
    names = hub.names
    assert hub.collected["without a class list"] == sorted([names["alice"], names["bob"], names["eve"], STALE])
    log = hub.outputs["collect without a class list"]
    assert "No class list (c.SafeCollect.class_list)" in log, log
    for student, folder in hub.plants.items():
        assert f"Not collecting {folder}, for anyone: it is named for {student} but owned by {names['mallory']}" in log
    assert not (hub.course / "submitted" / names["alice"] / A / REFUSAL).exists()
