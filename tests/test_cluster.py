"""A class graded on a Dask cluster (`make grade CLUSTER=...`, `autograder.cluster`), its members on 127.0.0.1.

A scheduler and two grading workers are started as an instructor starts them (`python -m autograder.cli.cluster`,
TLS with the course's certificates), each worker with the faults of `tests/cluster_faults.py` ready for the
notebooks that carry their marker. The class graded on the cluster gets the reports that grading here gives it; a
worker killed in the middle of a notebook costs nothing; a notebook that kills every worker it meets is "not
graded", the rest graded; a worker of another commit refuses, and its notebooks are graded by the others; a
notebook past the instructor's deadline is "not graded"; the scheduler lost in the middle leaves the reports
received saved, and `make grade` again sends only the rest. Barriers are files (a held notebook says that it
started), never a time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.cli import grade
from autograder.cluster import certificates
from autograder.cluster.client import Cluster, _accepted
from autograder.cluster.local import STARTING, LocalCluster
from autograder.cluster.worker import differences
from autograder.grading import saved
from autograder.grading.classroom import fill, make_course, submit
from autograder.grading.handoff import report_path
from autograder.grading.phases import grade as grade_class
from autograder.grading.report import Report
from autograder.grading.run import GradingUnavailable
from autograder.release import course
from tests import attacks
from tests.test_catalogue import BUG_MODULES, CORRECT
from tests.test_sandbox_grading import with_cell, zeros

A = "ch02_scaled_dot_product"
TERM = course.Release("term", {"ch01_bahdanau"})


class Members(LocalCluster):
    """The cluster's members on 127.0.0.1, each worker with the faults of tests/cluster_faults.py ready."""

    def workers(self, *names: str, faults: str = "", jobs: int = 1) -> None:
        env = {"COURSE_CLUSTER_FAULTS": faults, "PYTHONPATH": str(COURSE_ROOT)}
        super().workers(*names, jobs=jobs, preload="tests.cluster_faults", env=env)

    def ready(self, workers: int) -> None:
        """Wait until the scheduler has ``workers`` grading workers (a worker killed is restarted by its nanny)."""
        cluster = self.cluster()
        try:
            cluster.client.wait_for_workers(workers, timeout=STARTING)
        finally:
            cluster.close()

    def cluster(self, **options) -> Cluster:
        cluster = Cluster(self.address, self.certs, **options)
        cluster.connect()
        return cluster


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("certs") / "cluster"
    certificates.make(folder)
    return folder


@pytest.fixture(scope="module")
def members(tmp_path_factory, certs):
    """The shared cluster: a scheduler (a notebook may stop one worker, not two) and two workers."""
    folder = tmp_path_factory.mktemp("members")
    holds = {marker: folder / marker for marker in ("HELD-ONCE", "HELD-PAST-DEADLINE")}
    faults = ",".join(["kill:KILLS-ITS-WORKER", *(f"hold:{marker}:{where}" for marker, where in holds.items())])
    for where in holds.values():
        where.mkdir()
    cluster = Members(folder, certs)
    try:
        cluster.workers("first", "second", faults=faults)
        yield cluster, holds
    finally:
        cluster.close()


def marked(nb, marker: str):
    """The notebook with a cell that carries ``marker`` (a comment: it changes nothing graded)."""
    return with_cell(nb, f"# {marker}")


def scores(folder: Path, students: list[str]) -> dict[str, tuple]:
    """Each student's report as graded: per test, its points, whether it passed, its share and message; notes."""
    found = {}
    for student in students:
        report = Report.from_json(report_path(folder, A, student, A).read_text())
        tests = {gid: (t.points, t.passed, t.partial, t.message) for gid, t in report.tests.items()}
        found[student] = (tests, report.not_graded, sorted(report.notes))
    return found


def graded_on(members_, folder: Path, **options) -> tuple[dict, Cluster]:
    cluster = members_.cluster(**options)
    try:
        results = {r.student: r for r in grade_class(A, root=folder, quiet=True, settings=TERM, remote=cluster)}
    finally:
        cluster.close()
    return results, cluster


@pytest.mark.slow
def test_a_class_graded_on_the_cluster_gets_the_reports_that_grading_here_gives(members, tmp_path):
    cluster_, _ = members
    bug = BUG_MODULES[A].BUGS[0]
    right = CORRECT[A][0]
    class_ = {
        "reference": fill(A),
        "blank": fill(A, blank=True),
        "wrong": fill(A, {bug.item: bug.code}),
        "other_idiom": fill(A, {item: answer.code for item, answer in right.items()}),
        "patches_comparisons": with_cell(zeros(), attacks.PATCH_COMPARISONS, after_setup=True),
        "kills_its_kernel": with_cell(fill(A), attacks.KILL_AT_END),
    }
    here, there = make_course(tmp_path / "here"), make_course(tmp_path / "there")
    for student, nb in class_.items():
        submit(here, student, A, nb)
        submit(there, student, A, nb)
    grade_class(A, root=here, quiet=True, jobs=2, settings=TERM)
    results, cluster = graded_on(cluster_, there)
    assert scores(there, list(class_)) == scores(here, list(class_))
    assert results["reference"].score == results["kills_its_kernel"].score > results["wrong"].score
    assert results["patches_comparisons"].score < results["wrong"].score
    assert set(cluster.graded_on) == {(student, A) for student in class_}  # each graded once, on a worker
    lines = cluster.summary()  # make grade's summary: which worker graded each notebook, and in how long
    assert all(any(line.startswith(f"  {student}: {A} on worker ") for line in lines) for student in class_)
    assert {worker for worker, _ in cluster.graded_on.values()} <= {"first", "second"}
    assert not cluster.refused
    assert json.loads((cluster_.folder / "scheduler.json").read_text())["address"] == cluster_.address


@pytest.mark.slow
def test_a_worker_killed_in_the_middle_of_a_notebook_costs_nothing(members, tmp_path, monkeypatch):
    cluster_, holds = members
    saves = []
    real_save = saved.Saved.save
    monkeypatch.setattr(
        saved.Saved, "save", lambda self, a, s, n, *rest: (saves.append((s, n)), real_save(self, a, s, n, *rest))
    )
    folder = make_course(tmp_path)
    students = ["ada", "victim", "grace", "alan"]
    for student in students:
        submit(folder, student, A, marked(fill(A), "HELD-ONCE") if student == "victim" else fill(A))
    outcome = {}
    grading = threading.Thread(target=lambda: outcome.update(graded_on(cluster_, folder)[0]))
    grading.start()
    started = _first(holds["HELD-ONCE"], "started-*")
    os.kill(int(started.read_text()), signal.SIGKILL)  # the worker process that holds the victim's notebook
    grading.join()
    assert {s: r.score for s, r in outcome.items()} == dict.fromkeys(students, outcome["ada"].score)
    assert not any(r.note.startswith("not graded") for r in outcome.values())
    assert sorted(saves) == sorted((student, A) for student in students)  # each report saved once
    cluster_.ready(2)


@pytest.mark.slow
def test_a_notebook_that_kills_every_worker_it_meets_is_not_graded_and_the_class_is(members, tmp_path):
    cluster_, _ = members
    cluster_.ready(2)
    folder = make_course(tmp_path)
    submit(folder, "killer", A, marked(fill(A), "KILLS-ITS-WORKER"))
    submit(folder, "ada", A, fill(A))
    results, cluster = graded_on(cluster_, folder)
    assert results["killer"].note.startswith("not graded: the cluster: it stopped every grading worker")
    assert results["killer"].score is None
    assert results["ada"].score > 0 and not results["ada"].note.startswith("not graded")
    assert set(cluster.graded_on) == {("ada", A)}
    report = json.loads((folder / "grades" / f"{A}-report.json").read_text())  # the class report lists it, and why
    assert report["not_graded"]["killer"].startswith("the cluster: it stopped every grading worker")
    assert list(report["scores"]) == ["ada"]
    cluster_.ready(2)


@pytest.mark.slow
def test_a_notebook_past_the_instructors_deadline_is_not_graded(members, tmp_path):
    cluster_, holds = members
    cluster_.ready(2)
    folder = make_course(tmp_path)
    submit(folder, "slow", A, marked(fill(A), "HELD-PAST-DEADLINE"))
    try:
        results, _ = graded_on(cluster_, folder, notebook_deadline=2.0)
    finally:
        (holds["HELD-PAST-DEADLINE"] / "go").touch()  # the worker holding it is let go
    assert list(holds["HELD-PAST-DEADLINE"].glob("started-*"))  # a worker started it, and held it
    assert results["slow"].note.startswith("not graded: the cluster: worker ")
    assert "started it and sent no report within 2 s" in results["slow"].note
    cluster_.ready(2)  # the worker that held it was started again


@pytest.mark.slow
def test_a_worker_of_another_commit_refuses_and_another_grades_its_notebooks(tmp_path, certs):
    members_ = Members(tmp_path, certs)
    try:
        members_.workers("stale", faults="stale")
        folder = make_course(tmp_path / "course")
        submit(folder, "ada", A, fill(A))
        results, cluster = graded_on(members_, folder)
        note = results["ada"].note
        assert note.startswith("not graded: the cluster: no grading worker would grade it (worker stale")
        assert "the grader's code (another commit, or files changed)" in note
        assert list(cluster.refused) and "worker stale" in next(iter(cluster.refused.values()))
        members_.workers("current")
        results, cluster = graded_on(members_, folder)
        assert results["ada"].score > 0 and not results["ada"].note.startswith("not graded")
        assert {worker for worker, _ in cluster.graded_on.values()} == {"current"}
    finally:
        members_.close()


def test_the_instructor_refuses_a_report_graded_from_other_inputs():
    expected = saved.Inputs("n", "a", "g", "e")
    report = Report(A, A).to_json()
    answer = {"worker": "w", "host": "h", "seconds": 1.0, "report": report, "inputs": dict(vars(expected))}
    accepted, where = _accepted(A, A, answer, expected)
    assert not accepted.not_graded and where == "graded on worker w (h) in 1.0 s"
    for field in ("notebook", "assignment", "grader", "environment"):
        forged = {**answer, "inputs": {**vars(expected), field: "other"}}
        refused, where = _accepted(A, A, forged, expected)
        assert refused.not_graded.startswith("the cluster: worker w graded it from other inputs") and not where
        assert differences(saved.Inputs(**forged["inputs"]), expected) in refused.not_graded
    assert "sent no readable report" in _accepted(A, A, {**answer, "report": "{"}, expected)[0].not_graded


@pytest.mark.slow
def test_the_scheduler_lost_in_the_middle_then_make_grade_again_grades_only_what_is_missing(tmp_path, certs):
    holds = tmp_path / "holds"
    holds.mkdir()
    folder = make_course(tmp_path / "course")
    students = ["ada", "grace", "alan", "held"]
    for student in students:
        submit(folder, student, A, marked(fill(A), "HELD-TILL-LOST") if student == "held" else fill(A))
    members_ = Members(tmp_path, certs)
    try:
        members_.workers("first", faults=f"hold:HELD-TILL-LOST:{holds}", jobs=2)  # one notebook held, the rest graded
        stopped = []

        def run():
            try:
                graded_on(members_, folder, connect_seconds=5.0)
            except GradingUnavailable as error:
                stopped.append(str(error.code))

        grading = threading.Thread(target=run)
        grading.start()
        _first(holds, "started-*")
        for student in ("ada", "grace", "alan"):  # their reports received and saved
            _first(folder / saved.STATE / A / student, f"{A}.json")
        members_.stop_scheduler()
        grading.join()
        assert stopped and "was lost after 3 of 4 notebook(s)" in stopped[0]
        assert "make grade again sends only the notebooks that have none" in stopped[0]
    finally:
        (holds / "go").touch()
        members_.close()
    (tmp_path / "again").mkdir()
    again = Members(tmp_path / "again", certs)
    try:
        again.workers("fresh")
        results, cluster = graded_on(again, folder)
        assert set(cluster.graded_on) == {("held", A)}  # the others' saved reports serve
        assert all(r.score == results["ada"].score and not r.note.startswith("not graded") for r in results.values())
    finally:
        again.close()


@pytest.mark.slow
def test_make_grade_refuses_a_cluster_without_tls_or_without_the_courses_certificates(members, tmp_path, capsys):
    cluster_, _ = members
    folder = make_course(tmp_path / "course")
    submit(folder, "ada", A, fill(A))
    plain = cluster_.address.replace("tls://", "tcp://")
    assert grade.main([A, "--root", str(folder), "--cluster", plain, "--certs", str(cluster_.certs)]) == 2
    assert "the scheduler's address must start with tls://" in capsys.readouterr().err
    other = tmp_path / "other"
    certificates.make(other)  # another authority: the scheduler refuses its certificate
    assert grade.main([A, "--root", str(folder), "--cluster", cluster_.address, "--certs", str(other)]) == 2
    assert f"the scheduler at {cluster_.address} cannot be reached" in capsys.readouterr().err
    assert grade.main([A, "--root", str(folder), "--cluster", cluster_.address, "--certs", str(tmp_path)]) == 2
    assert "has no ca.pem, member.pem, member-key.pem (make them with make cluster-certs" in capsys.readouterr().err
    assert not (folder / "grades" / f"{A}.csv").exists()  # nothing scored


@pytest.mark.slow
def test_a_host_whose_sandbox_does_not_work_joins_no_cluster(members, tmp_path):
    cluster_, _ = members
    env = {**os.environ, "PATH": str(tmp_path)}  # no bubblewrap on it
    done = subprocess.run(
        [sys.executable, "-m", "autograder.cli.cluster", "--certs", str(cluster_.certs), "worker", cluster_.address],
        capture_output=True, text=True, cwd=COURSE_ROOT, env=env, timeout=STARTING,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "error: this host cannot grade, and joins no cluster:" in done.stderr


def test_certificates_are_its_owners_alone_and_never_replaced_unasked(tmp_path):
    folder = tmp_path / "certs"
    written = certificates.make(folder)
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert all(oct(path.stat().st_mode & 0o777) == "0o600" for path in written)
    with pytest.raises(FileExistsError, match="--force replaces them"):
        certificates.make(folder)
    before = (folder / "ca.pem").read_bytes()
    certificates.make(folder, force=True)
    assert (folder / "ca.pem").read_bytes() != before
    with pytest.raises(ValueError, match="days: the certificates' life must be at least 1 day, got 0"):
        certificates.make(tmp_path / "none", days=0)


def _first(folder: Path, pattern: str) -> Path:
    """The first file of ``folder`` matching ``pattern``, once one is there (a barrier: it says what happened)."""
    deadline = time.monotonic() + STARTING
    while time.monotonic() < deadline:
        found = sorted(Path(folder).glob(pattern)) if Path(folder).is_dir() else []
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"nothing matched {pattern} in {folder}")
