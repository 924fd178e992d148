"""`make grade` run again grades only what changed (`autograder.grading.saved`).

The saved records alone, without a
sandbox: each input that changes says so, a record changed without the grader's secret or moved to another student
is not used. Then a small class of chapter 2 graded by `make grade`'s phases five times in a row, counting the
notebooks run (`grade_notebook`'s calls): the first grading runs all; again with nothing changed, none (nor the
sandbox's preflight), and the CSV and the feedback are the same; with one notebook changed and a tampered record,
those two; with the grader changed, all (and a written answer whose text changed loses the score given by hand,
while one unchanged keeps it); `--again`, all, each student's line saying why. One student's notebook writes forged
records wherever it can in its sandbox: none is ever used.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path

import pytest

from attention_course.tooling import notebooks
from autograder.cli import grade
from autograder.grading import kept, run_nbgrader, saved
from autograder.grading import notebook as graded_notebook
from autograder.grading.classroom import fill, make_course, submit
from autograder.grading.gradesheet import db_url
from autograder.grading.handoff import report_path
from autograder.grading.report import Report
from autograder.grading.report import TestResult as Outcome
from autograder.release import course
from autograder.sandbox.limits import Limits
from tests.test_catalogue import BUG_MODULES

A = "ch02_scaled_dot_product"
LIMITS = ["--cell-timeout", "25", "--call-timeout", "15"]  # make grade's time limits, other than the defaults
TERM = course.Release("term", {"ch01_bahdanau"})  # as in a term: the chapter before is released, this one not
USED = "saved report used"


@pytest.mark.parametrize("option", ["--cell-timeout", "--call-timeout"])
def test_make_grade_refuses_a_time_limit_that_is_not_positive(option, capsys):
    with pytest.raises(SystemExit) as stopped:
        grade.main([A, option, "0"])
    assert stopped.value.code == 2
    assert f"{option} must be more than 0 seconds, got 0" in capsys.readouterr().err


def test_plain_nbgrader_refuses_a_time_limit_that_is_not_positive():
    from traitlets import TraitError

    from autograder.nbgrader.execute import SandboxedExecute

    assert SandboxedExecute(call_timeout=4.0)._limits() == Limits(call_timeout=4.0)
    with pytest.raises(TraitError, match="SandboxedExecute.cell_timeout must be more than 0 seconds, got -1"):
        SandboxedExecute(cell_timeout=-1.0)


def _inputs(**changed) -> saved.Inputs:
    fields = {"notebook": "n", "assignment": "a", "grader": "g", "environment": "e"}
    return saved.Inputs(**{**fields, **changed})


def _report(passed: bool) -> Report:
    return Report(A, A, tests={"t": Outcome("t", 2.0, passed)}, key="k")


def test_a_saved_report_serves_only_its_own_inputs_and_says_what_changed(tmp_path):
    store = saved.Saved(tmp_path)
    assert store.decide(A, "ann", A, _inputs()).why == "graded: no saved report (first grade)"
    store.save(A, "ann", A, _inputs(), _report(False))
    same = store.decide(A, "ann", A, _inputs())
    assert same.report == _report(False) and same.why.startswith(USED)
    assert store.decide(A, "ann", A, _inputs(), again=True) == saved.Decision(None, "graded: --again")
    for field, words in [
        ("notebook", "the notebook changed"),
        ("assignment", "the assignment's tests or reference changed"),
        ("grader", "the grader's code changed"),
        ("environment", "the pinned environment, limits or release changed"),
    ]:
        assert store.decide(A, "ann", A, _inputs(**{field: "other"})) == saved.Decision(None, f"graded: {words}")
    # a new Saved of the same folder reads the same secret: the record still serves
    assert saved.Saved(tmp_path).decide(A, "ann", A, _inputs()).report == _report(False)
    secret = tmp_path / saved.STATE / "secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert len(bytes.fromhex(secret.read_text())) == 32 and [p.name for p in secret.parent.glob("secret*")] == [
        "secret"
    ]
    assert stat.S_IMODE((tmp_path / saved.STATE).stat().st_mode) == 0o700


def test_a_record_changed_without_the_secret_or_moved_to_another_student_is_not_used(tmp_path):
    store = saved.Saved(tmp_path)
    store.save(A, "ann", A, _inputs(), _report(False))
    path = store.path(A, "ann", A)
    record = json.loads(path.read_text())
    record["report"] = _report(True).to_json()  # full marks, the MAC left as it was
    path.write_text(json.dumps(record))
    failed = "graded: its saved report failed the grader's check (changed since it was saved)"
    assert store.decide(A, "ann", A, _inputs()) == saved.Decision(None, failed)
    store.save(A, "ann", A, _inputs(), _report(True))
    other = store.path(A, "bob", A)
    other.parent.mkdir(parents=True)
    other.write_text(path.read_text())  # ann's record, signed for ann, under bob's name
    assert store.decide(A, "bob", A, _inputs()) == saved.Decision(None, failed)
    path.write_text("not json")
    assert store.decide(A, "ann", A, _inputs()) == saved.Decision(None, failed)
    store.save(A, "ann", A, _inputs(), Report(A, A, not_graded="the sandbox could not start"))
    assert not path.exists()  # the grader's failure is never saved


def test_a_phase_record_serves_only_where_its_hmac_holds(tmp_path):
    store = saved.Saved(tmp_path)
    assert store.kept(kept.FEEDBACK, A, "ann") is None
    store.keep(kept.FEEDBACK, A, "ann", {"key": "k", "notes": []})
    assert store.kept(kept.FEEDBACK, A, "ann") == {"key": "k", "notes": []}
    assert store.kept(kept.AUTOGRADE, A, "ann") is None and store.kept(kept.FEEDBACK, A, None) is None
    path = store._phase_path(kept.FEEDBACK, A, "ann")
    other = store._phase_path(kept.FEEDBACK, A, "bob")
    other.parent.mkdir(parents=True)
    other.write_text(path.read_text())  # ann's record under bob's name
    assert store.kept(kept.FEEDBACK, A, "bob") is None
    record = json.loads(path.read_text())
    record["payload"]["key"] = "forged"  # the key changed, the MAC left as it was
    path.write_text(json.dumps(record))
    assert store.kept(kept.FEEDBACK, A, "ann") is None
    store.keep(kept.TESTS, A, None, {"key": "t"})
    assert store.kept(kept.TESTS, A, None) == {"key": "t"}
    store.forget(kept.TESTS, A, None)
    assert store.kept(kept.TESTS, A, None) is None


def test_the_keys_of_autograde_and_feedback_follow_what_those_phases_read(tmp_path):
    folder = make_course(tmp_path / "course")
    path = submit(folder, "ann", A, fill(A))
    keys = kept.Keys(A, folder, TERM, [])
    inputs = {A: saved.Class(A, folder, TERM).inputs(A, path)}
    handed = report_path(folder, A, "ann", A)
    handed.parent.mkdir(parents=True)
    handed.write_text(_report(True).to_json())
    first = keys.autograde("ann", inputs)
    assert first == keys.autograde("ann", inputs) and keys.autograde("ann", {A: None}) is None
    assert kept.Keys(A, folder, TERM, ["--SandboxedExecute.allow_released=True"]).autograde("ann", inputs) != first
    handed.write_text(_report(False).to_json())  # another report handed to nbgrader
    assert keys.autograde("ann", inputs) != first
    assert keys.autograde("ann", {A: dataclasses.replace(inputs[A], notebook="other")}) != first
    copies = {A: "copy"}
    assert keys.feedback(copies, None, 60.0) is None and keys.feedback({A: None}, "state", 60.0) is None
    feedback = keys.feedback(copies, "state", 60.0)
    assert feedback == keys.feedback(copies, "state", 60.0)
    assert len({feedback, keys.feedback(copies, "scores given", 60.0), keys.feedback({A: "other"}, "state", 60.0),
                keys.feedback(copies, "state", 30.0)}) == 4  # fmt: skip
    (folder / "nbgrader_config.py").write_text((folder / "nbgrader_config.py").read_text() + "\n# changed\n")
    changed = kept.Keys(A, folder, TERM, [])
    assert changed.tests != keys.tests and changed.feedback(copies, "state", 60.0) != feedback


@pytest.mark.slow
def test_phase_one_is_checked_against_the_gradebook_and_each_submission_state_read_from_it(tmp_path):
    from nbgrader.api import Gradebook

    folder = make_course(tmp_path / "course")
    other = "ch01_bahdanau"
    run_nbgrader.generate([other], into=tmp_path / "released", db_url=db_url(folder), root=folder, quiet=True)
    with Gradebook(db_url(folder)) as gradebook:
        assert kept.recorded_as_released(gradebook, other, folder)
        assert not kept.recorded_as_released(gradebook, A, folder)  # not recorded yet
    run_nbgrader.generate([A], into=tmp_path / "released", db_url=db_url(folder), root=folder, quiet=True)
    with Gradebook(db_url(folder)) as gradebook:
        assert kept.recorded_as_released(gradebook, A, folder)
        assert kept.submission_state(gradebook, A, "ann") is None
        cell = gradebook.find_assignment(A).notebooks[0].grade_cells[0]
        cell.max_score += 1  # points the instructor notebook does not give
        gradebook.db.commit()
        assert not kept.recorded_as_released(gradebook, A, folder)


def test_the_inputs_follow_the_notebooks_bytes_the_tests_and_the_release(tmp_path, monkeypatch):
    folder = make_course(tmp_path / "course")
    path = submit(folder, "ann", A, fill(A))
    shared = saved.Class(A, folder, TERM)
    first = shared.inputs(A, path)
    assert shared.inputs(A, path) == first
    path.write_bytes(path.read_bytes() + b"\n")  # the same cells, other bytes: graded again
    assert shared.inputs(A, path).changed(first) == ["the notebook changed"]
    assert saved.Class(A, folder, course.Release("open", set())).inputs(A, path).environment != first.environment
    # other time limits (make grade's --call-timeout): graded again
    shorter = saved.Class(A, folder, TERM, Limits(call_timeout=5.0)).inputs(A, path)
    assert shorter.changed(shared.inputs(A, path)) == ["the pinned environment, limits or release changed"]
    # a hidden test changed in the instructor notebook that grading reads (Source.load's digest of its bytes)
    load = saved.Source.load
    monkeypatch.setattr(
        saved.Source, "load", lambda *args: dataclasses.replace(load(*args), digest="a hidden test changed")
    )
    again = saved.Class(A, folder, TERM).inputs(A, path)
    assert again.changed(first) == ["the notebook changed", "the assignment's tests or reference changed"]


# A wrong answer to softmax that also writes a forged record (full marks, a made-up MAC) wherever it might be read.
FORGER = """
import json as _json
import pathlib as _pathlib

_forged = {"inputs": INPUTS, "report": REPORT, "mac": "0" * 64, "forged": True}
for _place in PLACES:
    try:
        _target = _pathlib.Path(_place)
        _target.parent.mkdir(parents=True, exist_ok=True)
        _target.write_text(_json.dumps(_forged))
    except OSError:
        pass
"""


def _forger(folder: Path) -> str:
    bug = BUG_MODULES[A].BUGS[0]
    places = [
        str(folder / saved.STATE / A / "mallory" / f"{A}.json"),
        str(folder / "grades" / "reports" / A / "mallory" / f"{A}.json"),
        f"grades/.grader/{A}/mallory/{A}.json",
        f"/tmp/grades/.grader/{A}/mallory/{A}.json",
    ]
    full = Report(A, A, tests={"forged": Outcome("forged", 100.0, True)}).to_json()
    code = FORGER.replace("PLACES", repr(places)).replace("REPORT", repr(full))
    return bug.code + code.replace("INPUTS", repr({"notebook": "", "assignment": "", "grader": "", "environment": ""}))


def _written(nb, text: str):
    for cell in nb.cells:
        if notebooks.is_written(cell):
            cell.source = text
    return nb


def _outputs(folder: Path) -> dict[str, bytes]:
    files = [folder / "grades" / f"{A}.csv", *sorted((folder / "feedback").glob(f"*/{A}/*.html"))]
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


def _manual(folder: Path, scores: dict[str, float | None]) -> dict[str, float | None]:
    """Set (where ``scores`` gives a number) and read the written answer's score given by hand, per student."""
    from nbgrader.api import Gradebook

    gid = next(notebooks.cell_id(c) for c in fill(A).cells if notebooks.is_written(c))
    with Gradebook(db_url(folder)) as gradebook:
        found = {}
        for student, score in scores.items():
            grade_ = gradebook.find_grade(gid, A, A, student)
            if score is not None:
                grade_.manual_score = score
            found[student] = grade_.manual_score
        gradebook.db.commit()
    return found


@pytest.mark.slow
def test_make_grade_again_runs_only_what_changed(tmp_path, monkeypatch, capsys):
    folder = make_course(tmp_path / "course")
    submit(folder, "alice", A, fill(A))
    submit(folder, "bob", A, fill(A))
    submit(folder, "mallory", A, fill(A, {"softmax": _forger(folder)}))
    linked = folder / "submitted" / "rex" / A
    linked.mkdir(parents=True)
    (linked / f"{A}.ipynb").symlink_to(folder / "submitted" / "alice" / A / f"{A}.ipynb")  # refused, never run
    runs: list[str] = []
    real = graded_notebook.grade_notebook

    def counted(assignment, submission, **options):
        runs.append(Path(submission).parent.parent.name)
        return real(assignment, submission, **options)

    monkeypatch.setattr(graded_notebook, "grade_notebook", counted)
    preflights = []
    real_preflight = graded_notebook.preflight

    def preflight(*args, **options):
        preflights.append(1)
        return real_preflight(*args, **options)

    monkeypatch.setattr(graded_notebook, "preflight", preflight)
    commands: list[tuple[str, str]] = []  # each nbgrader command that make grade starts, and whom it leaves out
    real_start = run_nbgrader.start

    def start(*args, **options):
        left_out = [a.split("=", 1)[1] for a in args if a.startswith("--CourseDirectory.student_id_exclude=")]
        commands.append((args[0], ",".join(left_out)))
        return real_start(*args, **options)

    monkeypatch.setattr(run_nbgrader, "start", start)

    def graded(**options) -> dict:
        runs.clear()
        preflights.clear()
        commands.clear()
        results = grade.grade(A, root=folder, quiet=True, jobs=2, settings=TERM, **options)
        return {r.student: r for r in results}

    first = graded()
    assert sorted(runs) == ["alice", "bob", "mallory"]
    assert first["rex"].note.startswith("refused: ") and first["rex"].score == 0 and first["rex"].grading == ""
    first_rex_note = first.pop("rex").note
    assert {r.grading for r in first.values()} == {"graded: no saved report (first grade)"}
    full = first["alice"].score
    assert first["bob"].score == full and first["mallory"].score < full
    state = folder / saved.STATE
    handed = folder / "grades" / "reports" / A / "mallory" / f"{A}.json"
    assert not any("forged" in p.read_text() for p in [*state.rglob("*.json"), handed])
    before = _outputs(folder)

    second = graded()  # nothing changed: no notebook runs (no sandbox started), the same grades and feedback
    assert second.pop("rex").note == first_rex_note
    assert runs == [] and preflights == []
    assert commands == []  # nor phases 1, 4 and 5: no nbgrader command at all
    assert all(r.grading.startswith(USED) for r in second.values()), [r.grading for r in second.values()]
    assert {s: r.score for s, r in second.items()} == {s: r.score for s, r in first.items()}
    assert _outputs(folder) == before

    # scores given by hand, and nothing else: no notebook runs, no autograde, the feedback of those two (and of
    # mallory, whose page was deleted) written again with their scores, the CSV with them
    assert _manual(folder, {"alice": 1.5, "bob": 1.0}) == {"alice": 1.5, "bob": 1.0}
    mallory_page = folder / "feedback" / "mallory" / A / f"{A}.html"
    mallory_page.unlink()
    by_hand = graded()
    by_hand.pop("rex")
    assert runs == [] and {name for name, _ in commands} == {"generate_feedback"}
    assert _given(commands) == {"alice", "bob", "mallory"}  # rex is refused
    assert by_hand["alice"].score == full + 1.5 and by_hand["bob"].score == full + 1.0
    again = "feedback written again: the student's scores or comments in the gradebook changed"
    assert by_hand["alice"].grading.endswith(again) and by_hand["mallory"].grading.startswith(USED)
    assert by_hand["mallory"].grading.endswith(
        "feedback written again: a page of it was changed or removed since it was written"
    )
    rows = {row.split(",")[0]: row.split(",")[1] for row in (folder / "grades" / f"{A}.csv").read_text().splitlines()}
    assert (float(rows["alice"]), float(rows["bob"])) == (full + 1.5, full + 1.0)
    pages = {s: (folder / "feedback" / s / A / f"{A}.html").read_text() for s in ("alice", "bob", "mallory")}
    assert f"Score: {full + 1.5:.1f} / " in pages["alice"] and "awaiting grading" not in pages["alice"]
    assert f"Score: {full + 1.0:.1f} / " in pages["bob"] and "awaiting grading" in before_mallory_page(before)
    assert mallory_page.read_bytes() == before[f"feedback/mallory/{A}/{A}.html"]
    commands.clear()
    graded()  # and nothing changed since: nothing written
    assert commands == []

    # alice's code changes (her written answer does not) and mallory's record is tampered with: full marks,
    # without the secret
    submit(folder, "alice", A, fill(A, {"softmax": _softmax_other_idiom()}))
    record_path = state / A / "mallory" / f"{A}.json"
    record = json.loads(record_path.read_text())
    tampered = Report.from_json(record["report"])
    for result in tampered.tests.values():
        result.passed = True
    record["report"] = tampered.to_json()
    record_path.write_text(json.dumps(record))
    third = graded()
    third.pop("rex")
    assert sorted(runs) == ["alice", "mallory"] and preflights == [1]
    # phase 1 not run again; autograde for those two alone (bob and rex left out), and the feedback of alice alone:
    # mallory's notebook, graded again, gave nbgrader the same autograded copy and scores
    assert [name for name, _ in commands][0] == "autograde" and _given(commands[:1]) == {"alice", "mallory"}
    assert {name for name, _ in commands[1:]} == {"generate_feedback"} and _given(commands[1:]) == {"alice"}
    assert third["alice"].grading == "graded: the notebook changed" and third["bob"].grading.startswith(USED)
    assert third["mallory"].grading.startswith("graded: its saved report failed the grader's check")
    assert third["mallory"].score == first["mallory"].score and third["alice"].score == full + 1.5
    assert _manual(folder, {"alice": None, "bob": None}) == {"alice": 1.5, "bob": 1.0}

    # the grader changes, and bob rewrites his written answer: all run, bob's hand-given score dropped
    submit(folder, "bob", A, _written(fill(A), "Another explanation, rewritten."))
    monkeypatch.setattr(saved, "grader_digest", lambda: "another grader")
    fourth = graded()
    fourth.pop("rex")
    assert sorted(runs) == ["alice", "bob", "mallory"]
    assert fourth["alice"].grading == "graded: the grader's code changed"
    assert fourth["bob"].grading == "graded: the notebook changed, the grader's code changed"
    assert _manual(folder, {"alice": None, "bob": None}) == {"alice": 1.5, "bob": None}
    assert "the score given by hand to" in fourth["bob"].note and "dropped" in fourth["bob"].note

    capsys.readouterr()
    runs.clear()
    # the command, as make grade ARGS=--again runs it (the course folder's release: the open edition)
    assert grade.main([A, "--root", str(folder), "--jobs", "2", "--again", *LIMITS]) == 0
    assert sorted(runs) == ["alice", "bob", "mallory"]
    said = capsys.readouterr().err
    for student in ("alice", "bob", "mallory"):
        assert f"  {student}: graded: --again\n" in said, said[-3000:]
    assert not any("forged" in p.read_text() for p in state.rglob("*.json"))
    assert os.stat(state).st_mode & 0o077 == 0

    # the gradebook removed: phase 1 records the tests again, and every student is autograded again, no notebook run
    # (with the limits the --again run graded under: nbgrader's autograde is given them, and its key agrees)
    (folder / "gradebook.db").unlink()
    runs.clear()
    commands.clear()
    assert grade.main([A, "--root", str(folder), "--jobs", "2", *LIMITS]) == 0  # the open edition, as before
    assert runs == [] and [name for name, _ in commands][:2] == ["generate_assignment", "autograde"]
    assert _given(commands[1:2]) == {"alice", "bob", "mallory"}
    rows = {row.split(",")[0]: row.split(",")[1] for row in (folder / "grades" / f"{A}.csv").read_text().splitlines()}
    # the scores given by hand went with the gradebook
    assert [float(rows[s]) for s in ("alice", "bob", "mallory")] == [full, full, first["mallory"].score]


def _given(commands: list[tuple[str, str]]) -> set[str]:
    """The students that ``commands`` (nbgrader's, each with whom it leaves out) were given, of this class."""
    everyone = {"alice", "bob", "mallory", "rex"}
    return set().union(*(everyone - set(left.split(",")) for _, left in commands))


def before_mallory_page(before: dict[str, bytes]) -> str:
    """Mallory's feedback page as the first grading wrote it (her written answer awaiting grading)."""
    return before[f"feedback/mallory/{A}/{A}.html"].decode()


def _softmax_other_idiom() -> str:
    """softmax right, in other code than the reference's (alice's changed notebook)."""
    return (
        "def softmax(x, axis=-1):\n"
        "    exps = np.exp(x - np.max(x, axis=axis, keepdims=True))\n"
        "    return exps / exps.sum(axis=axis, keepdims=True)\n"
    )
