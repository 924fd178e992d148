"""Grading the written answers by hand, as an instructor meets it: ch10 graded by `make grade`'s phases in a fresh
course folder, then the summary, the feedback before and after the instructor grades, `nbgrader export` and the
formgrader step (`make formgrader`), started as the guide says (as root where the tests run as root).

The class: `reference` passes every test and writes its answer (which awaits the instructor), `tests_only` passes
every test and leaves the written answer as released (nbgrader scores it 0 at once), `blank` answers nothing;
`never` is in the gradebook without a submission of ch10.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from attention_course.tooling import notebooks
from autograder.cli import grade
from autograder.grading.classroom import WRITTEN_ANSWER, fill, make_course, submit
from autograder.grading.feedback import write_feedback
from autograder.grading.gradesheet import db_url
from autograder.nbgrader import formgrader
from autograder.release import course
from tests.support import formgrader as running_formgrader
from tests.support.points import full_marks, max_points

A = "ch10_what_heads_learn"
WRITTEN = "explain_split_prefix_score"
TESTS = full_marks(A)  # the points of ch10's tests
MAX = max_points(A)  # and its written answer's
# The one set of words for the written answer awaiting grading: the summary's, the CSV's, the export's, the page's
AWAITING = f"written answer {WRITTEN} awaiting grading: 2 points, counted as 0 until graded"


def _as_released(nb):
    """``nb`` with its written answers as released."""
    released = {notebooks.cell_id(c): c.source for c in notebooks.read(course.notebook_path(A, "exercises")).cells}
    for cell in nb.cells:
        if notebooks.is_written(cell):
            cell.source = released[notebooks.cell_id(cell)]
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """(course folder, {student: Result}): ch10 graded, its exchange (c.Exchange.root) a folder not made yet."""
    from nbgrader.api import Gradebook

    folder = make_course(tmp_path_factory.mktemp("course") / "instructor")
    exchange = folder.parent / "exchange"
    with (folder / "nbgrader_config.py").open("a") as f:
        f.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    submit(folder, "reference", A, fill(A))
    submit(folder, "tests_only", A, _as_released(fill(A)))
    submit(folder, "blank", A, fill(A, blank=True))
    term = course.Release("term", set(course.assignments()) - {A})
    results = {r.student: r for r in grade.grade(A, root=folder, quiet=True, jobs=2, settings=term)}
    with Gradebook(db_url(folder)) as gradebook:
        gradebook.update_or_create_student("never")
    return folder, results


def _feedback(folder: Path, student: str) -> str:
    return (folder / "feedback" / student / A / f"{A}.html").read_text()


def _rows(path: Path, key: str = "student") -> dict[str, dict]:
    with path.open(newline="") as f:
        return {row[key]: row for row in csv.DictReader(f)}


@pytest.mark.slow
def test_the_summary_names_a_blank_written_answer_and_counts_what_it_says(graded):
    folder, results = graded
    assert results["tests_only"].blank == [WRITTEN] and results["reference"].awaiting == [WRITTEN]
    said = grade.summary(A, list(results.values()))
    lines = {line.split()[0]: line for line in said.splitlines() if line.split()[:1] in [[s] for s in results]}
    blank_note = f"written answer {WRITTEN} left blank: 0 of 2 points"
    assert lines["tests_only"].endswith(f"{TESTS:g} / {MAX:g}  all tests passed; {blank_note}"), lines["tests_only"]
    assert lines["reference"].endswith(f"all tests passed; {AWAITING}"), lines["reference"]
    assert blank_note in lines["blank"] and "nothing answered" in lines["blank"]
    # two students passed every test, and the count says that it counts that
    assert "over 3 graded submission(s); every test passed: 2 of 3" in said, said
    assert "full marks so far" not in said  # reference's written answer awaits: not counted, said to be pending
    assert "full marks (every test and written answer): 0 of 3, and 1 more if the written answers awaiting " in said
    assert "written answers awaiting manual grading: 1, of 1 student(s), 2 points in all" in said
    assert "written answers left blank (as released: 0 points, nothing to grade): 2, of 2 student(s)" in said
    rows = _rows(folder / "grades" / f"{A}.csv")
    assert blank_note in rows["tests_only"]["note"] and rows["tests_only"][WRITTEN] == "0.0"
    assert rows["reference"][WRITTEN] == "awaiting grading" and "left blank" not in rows["reference"]["note"]
    assert rows["reference"]["note"] == AWAITING


@pytest.mark.slow
def test_feedback_before_manual_grading_says_awaiting_and_the_total_is_partial(graded):
    folder, _ = graded
    page = _feedback(folder, "reference")
    assert f"(Score: {TESTS:.1f} / {MAX:.1f} so far; {AWAITING})</h4>" in page
    assert f'<a href="#{WRITTEN}">Written answer <code>{WRITTEN}</code></a> (awaiting grading: 2 points)' in page
    assert "Awaiting grading: 2 points, counted as 0 until graded" in page
    assert f"Score: {TESTS:.1f} / {MAX:.1f})" not in page and "Written response" not in page  # said to be so far
    # a written answer left as released is graded (0 at once): its score shows, and the total is whole
    left = _feedback(folder, "tests_only")
    assert f"(Score: {TESTS:.1f} / {MAX:.1f})</h4>" in left and "awaiting grading" not in left and "so far" not in left
    assert f"Written answer <code>{WRITTEN}</code></a> (left blank: 0 of 2 points)" in left
    assert "Left blank: 0 of 2 points" in left
    for student in ("reference", "tests_only", "blank"):  # the formgrader's rubric never reaches a student
        assert "Rubric (2 points)" not in _feedback(folder, student)


@pytest.mark.slow
def test_once_graded_by_hand_the_feedback_and_the_csv_show_the_score(graded, tmp_path):
    """As the formgrader saves a score (nbgrader's gradebook), then the feedback written again and `make grades`."""
    from nbgrader.api import Gradebook

    folder = tmp_path / "course"
    shutil.copytree(graded[0], folder, symlinks=True)
    with Gradebook(db_url(folder)) as gradebook:
        gradebook.find_grade(WRITTEN, A, A, "reference").manual_score = 1.5
        gradebook.db.commit()
    notes, stopped = write_feedback(A, ["reference"], folder, quiet=True, env=course.environment(course.Release()))
    assert not stopped, notes
    page = _feedback(folder, "reference")
    assert f"(Score: {TESTS + 1.5:.1f} / {MAX:.1f})</h4>" in page and "awaiting grading" not in page
    assert f"Written answer <code>{WRITTEN}</code></a> (Score: 1.5 / 2.0)" in page
    assert grade.main([A, "--root", str(folder), "--csv-only"]) == 0
    rows = _rows(folder / "grades" / f"{A}.csv")
    assert rows["reference"][WRITTEN] == "1.5" and float(rows["reference"]["score"]) == TESTS + 1.5


@pytest.mark.slow
def test_nbgrader_export_leaves_an_assignment_never_submitted_without_a_score(graded, tmp_path):
    folder, _ = graded
    out = tmp_path / "all.csv"
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(
        [str(bin_dir / "nbgrader"), "export", "--to", str(out)], cwd=folder, capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "CourseCsvExport" in run.stderr
    rows = _rows(out, "student_id")
    assert set(rows) == {"reference", "tests_only", "blank", "never"}
    never = rows["never"]
    assert (never["raw_score"], never["score"], never["note"]) == ("", "", "not submitted"), never
    assert never["max_score"] == f"{MAX:.1f}"
    assert rows["blank"]["score"] == "0.0" and rows["reference"]["score"] == f"{TESTS:.1f}"
    assert rows["reference"]["note"] == AWAITING
    assert rows["tests_only"]["note"] == f"written answer {WRITTEN} left blank: 0 of 2 points"


def _export(folder: Path, out: Path) -> dict[str, dict]:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(
        [str(bin_dir / "nbgrader"), "export", "--to", str(out)], cwd=folder, capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return _rows(out, "student_id")


@pytest.mark.slow
def test_one_total_and_one_set_of_words_on_the_page_the_summary_the_csv_and_the_export(graded, tmp_path):
    """Each student's total is the same on the feedback page, in the summary, the CSV and `nbgrader export`: out
    of every point, the written answer awaiting grading counted as 0 and named in the same words everywhere; a
    notebook that answers nothing says so on its page as in the summary."""
    folder, results = graded
    said = grade.summary(A, list(results.values()))
    lines = {line.split()[0]: line for line in said.splitlines() if line.split()[:1] in [[s] for s in results]}
    rows = _rows(folder / "grades" / f"{A}.csv")
    exported = _export(folder, tmp_path / "all.csv")
    for student in ("reference", "tests_only", "blank"):
        result = results[student]
        page = _feedback(folder, student)
        (heading,) = re.findall(rf"<h4>{A} \(Score: ([0-9.]+) / ([0-9.]+)", page)
        on_page = tuple(float(n) for n in heading)
        assert on_page == (result.score, result.max_score), (student, heading)
        assert f"{result.score:g} / {result.max_score:g}" in lines[student], lines[student]
        assert (float(rows[student]["score"]), float(rows[student]["max_score"])) == on_page, rows[student]
        row = exported[student]
        assert (float(row["score"]), float(row["max_score"])) == on_page, row
    assert results["reference"].max_score == MAX and results["reference"].score == TESTS
    for words in (lines["reference"], rows["reference"]["note"], exported["reference"]["note"]):
        assert AWAITING in words, words
    assert AWAITING in _feedback(folder, "reference")
    nothing = "nothing answered: ch10_what_heads_learn.ipynb is as released"
    assert nothing in lines["blank"] and nothing in rows["blank"]["note"]
    assert nothing in _feedback(folder, "blank") and "was the right file submitted?" in _feedback(folder, "blank")
    assert nothing not in _feedback(folder, "reference")


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


@pytest.mark.slow
def test_the_formgrader_step_works_as_the_guide_says_with_the_rubric_beside_the_answer(graded, tmp_path):
    """`make formgrader`'s command in the instructors' course folder (as root where the tests run as root): the
    exchange folder made, the formgrader's pages answer, with no exchange warning, and each written answer shows
    its rubric right below it; then stopped."""
    folder, _ = graded
    exchange = folder.parent / "exchange"
    token = running_formgrader.TOKEN
    with running_formgrader.running(folder, tmp_path) as (base, log):
        status, page = _get(f"{base}/manage_assignments?token={token}")
        said = log.read_text()
        assert status == 200, f"status {status}:\n{said[-3000:]}"
        assert "warning-exchange" not in page and "does not exist" not in page
        assert exchange.is_dir() and (exchange.stat().st_mode & 0o777) == formgrader.EXCHANGE_MODE
        assert f"made nbgrader's exchange {exchange}" in said

        status, listed = _get(f"{base}/api/submitted_notebooks/{A}/{A}?token={token}")
        assert status == 200, listed[:2000]
        ids = {entry["student"]: entry["id"] for entry in json.loads(listed)}
        status, shown = _get(f"{base}/submissions/{ids['reference']}/?token={token}")
        assert status == 200, shown[:2000]
        assert f"Rubric for <code>{WRITTEN}</code>" in shown, "the formgrader's page shows no rubric"
        answer = shown.index(WRITTEN_ANSWER)
        rubric = shown.index(f"Rubric for <code>{WRITTEN}</code>")
        assert answer < rubric < shown.index("One point for each of") < shown.index("Question 2"), "rubric not below"
        assert f"from <code>solutions/{A}/{A}.ipynb</code>" in shown
    said = log.read_text()
    assert "Running as root is not recommended" not in said, said[-2000:]  # root allowed where it is root
    assert "ExchangeError" not in said and "exchange directory" not in said.lower(), said[-3000:]


def test_the_formgrader_command_allows_root_only_to_root(tmp_path):
    root = tmp_path / "course"
    assert "--allow-root" in formgrader.lab_command(root, ["--no-browser"], as_root=True)
    command = formgrader.lab_command(root, ["--no-browser"], as_root=False)
    assert "--allow-root" not in command and command[-1] == "--no-browser"
    assert f"--ServerApp.root_dir={root}" in command and Path(command[0]).name == "jupyter-lab"


def test_an_exchange_that_cannot_be_made_is_said_with_what_to_do(tmp_path):
    """Where the exchange folder cannot be made (here: under a file), the command says so and how to make it;
    one that exists is left as it is."""
    folder = make_course(tmp_path / "course")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with (folder / "nbgrader_config.py").open("a") as f:
        f.write(f"\nc.Exchange.root = {str(blocker / 'exchange')!r}\n")
    said = formgrader.prepare_exchange(folder)
    assert f"nbgrader's exchange {blocker / 'exchange'} (c.Exchange.root in nbgrader_config.py) does not exist" in said
    assert f"sudo mkdir -p {blocker / 'exchange'} && sudo chmod 777" in said and "grading by hand does not" in said
    made = tmp_path / "exchange"
    made.mkdir(mode=0o755)
    with (folder / "nbgrader_config.py").open("a") as f:
        f.write(f"\nc.Exchange.root = {str(made)!r}\n")
    assert formgrader.prepare_exchange(folder) == f"nbgrader's exchange: {made}"
    assert made.stat().st_mode & 0o777 == 0o755


def test_the_exchange_is_the_courses_own_unless_another_is_named(tmp_path, monkeypatch):
    """nbgrader_config.py keeps nbgrader's exchange in the course (exchange/), made there by make formgrader, never
    nbgrader's system folder opened to every user; NBGRADER_EXCHANGE (which make passes on) names another."""
    from autograder.exchange import exchange_settings

    folder = tmp_path / "course"
    folder.mkdir()
    shutil.copy(course.COURSE_ROOT / "nbgrader_config.py", folder)
    monkeypatch.delenv("NBGRADER_EXCHANGE", raising=False)
    assert exchange_settings(folder).root == folder.resolve() / "exchange"
    assert formgrader.prepare_exchange(folder) == (
        f"made nbgrader's exchange {folder.resolve() / 'exchange'} (c.Exchange.root in nbgrader_config.py), "
        "writable by every user"
    )
    system = tmp_path / "system-exchange"
    monkeypatch.setenv("NBGRADER_EXCHANGE", str(system))
    assert exchange_settings(folder).root == system
    # make passes the variable on to the command (a stand-in python prints what it gets)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text('#!/bin/sh\necho "exchange: $NBGRADER_EXCHANGE"\n')
    (bin_dir / "python").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k != "NBGRADER_EXCHANGE"}
    old = [f"--assume-old={name}" for name in (".venv/.installed", ".venv/.bytecode", "book/_static/mathjax/VERSION")]
    for given, expected in (([], "exchange:"), ([f"NBGRADER_EXCHANGE={system}"], f"exchange: {system}")):
        made = subprocess.run(
            ["make", "-s", "-C", str(course.COURSE_ROOT), *old, f"BIN={bin_dir}", "formgrader", *given],
            capture_output=True,
            text=True,
            env=env,
        )
        assert made.returncode == 0 and made.stdout.strip() == expected, made.stdout + made.stderr


def test_the_formgrader_serves_the_courses_mathjax_and_its_template_asks_no_cdn():
    """make formgrader's JupyterLab serves book/_static as static files, and nbconvert's mathjax macro that its page
    of a submission calls is the course's, first on JUPYTER_PATH: the course's MathJax, no CDN."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers

    command = formgrader.lab_command(Path("course"), [], as_root=False)
    assert f"--ServerApp.extra_static_paths={course.FEEDBACK_MATHJAX.parent.parent}" in command
    env = formgrader.lab_environment({"JUPYTER_PATH": "/elsewhere"})
    assert env["JUPYTER_PATH"].split(os.pathsep) == [str(formgrader.TEMPLATES), "/elsewhere"]
    cdn = HTMLExporter().mathjax_url.split("?")[0]
    source = course.notebook_path(A, "exercises")
    resources = {"base_url": "/", "notebook_id": A, "index": 0, "total": 1, "submission_id": "x"}
    pages = {}
    for path in (None, env["JUPYTER_PATH"]):
        script = (
            "import sys\nfrom nbconvert.exporters import HTMLExporter\n"
            "exporter = HTMLExporter(template_name='formgrade', extra_template_basedirs=[sys.argv[1]])\n"
            f"print(exporter.from_filename(sys.argv[2], resources={resources!r})[0])\n"
        )
        run_env = {k: v for k, v in os.environ.items() if k != "JUPYTER_PATH"}
        if path:
            run_env["JUPYTER_PATH"] = path
        done = subprocess.run(
            [sys.executable, "-c", script, handlers.template_path, str(source)],
            capture_output=True,
            text=True,
            env=run_env,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        pages[path] = done.stdout
    assert cdn in pages[None]  # nbgrader's own template, as it was: the CDN
    assert (
        cdn not in pages[env["JUPYTER_PATH"]]
        and 'src="../../../static/mathjax/tex-svg.js"' in pages[env["JUPYTER_PATH"]]
    )
