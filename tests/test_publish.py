"""Publishing: the student repository holds what students need and no solution or hidden test, and
the leak check (`python -m course_site.publish check`) fails wrong work. The book is not built here."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml

from course_site import COURSE_ROOT, publish

ROOT = COURSE_ROOT
SOLUTION = ROOT / "solutions" / "ch02_scaled_dot_product" / "ch02_scaled_dot_product.ipynb"


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("publish") / "student"
    files, report = publish.student_repo(dest, ROOT)
    assert report.ok and files
    return dest


@pytest.fixture
def copy(export, tmp_path) -> Path:
    """A copy of the export, to plant things in."""
    return Path(shutil.copytree(export, tmp_path / "copy", symlinks=True))


@pytest.fixture(scope="module")
def hidden_line() -> tuple[str, str]:
    """A line of a hidden-test region of a real solutions notebook that no public source shows,
    with quotes in it (so that a notebook escapes it), and its cell's grade_id."""
    secrets = {s.text for s in publish.secret_lines(ROOT)}
    nb = nbformat.read(str(SOLUTION), as_version=4)
    for cell in nb.cells:
        match = re.search(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S)
        for line in (match.group(1).splitlines() if match else []):
            line = line.strip()
            if line in secrets and '"' in line:
                return line, cell.metadata["nbgrader"]["grade_id"]
    raise AssertionError(f"no hidden-test line with quotes in {SOLUTION}")


def _problems(directory: Path) -> list[str]:
    return [str(problem) for problem in publish.check(directory, ROOT).problems]


def _highlighted(code: str) -> str:
    """``code`` as Pygments shows it in a built page: each token in a span, HTML-escaped."""
    tokens = re.findall(r"\w+|\s+|[^\w\s]", code)
    return "".join(tok if tok.isspace() else f'<span class="n">{html.escape(tok)}</span>' for tok in tokens)


# --- the export ---------------------------------------------------------------------------------


def test_export_holds_exercises_packages_and_book_and_nothing_private(export):
    names = {p.relative_to(export).as_posix() for p in export.rglob("*") if p.is_file()}
    assert any(name.startswith("exercises/") and name.endswith(".ipynb") for name in names)
    assert {"attention_course/__init__.py", "autograder/__init__.py", "autograder/checks.py",
            "book/intro.md", "_config.yml", "_toc.yml", "requirements.txt", "pyproject.toml"} <= names
    for private in ("solutions", "tests", "submitted", "autograded", "feedback", "grades", "_build", ".venv"):
        assert not (export / private).exists(), private
    assert not (export / "gradebook.db").exists()
    assert not (export / "book" / "_static" / "mathjax").exists()
    assert not any("__pycache__" in name or ".ipynb_checkpoints" in name for name in names)
    # Exactly the allowed files that git tracks: nothing ignored or untracked slips in.
    assert names == set(publish.student_files(ROOT))


def test_exported_exercise_notebooks_are_byte_identical(export):
    exercises = sorted(ROOT.glob("exercises/*/*.ipynb"))
    assert exercises
    for path in exercises:
        rel = path.relative_to(ROOT)
        assert (export / rel).read_bytes() == path.read_bytes(), rel


def test_check_passes_on_the_export(export):
    report = publish.check(export, ROOT)
    assert report.ok, report.problems
    assert report.has_solutions and report.secrets > 50 and report.notebooks >= 6


def test_book_chapters_showing_package_code_are_not_secret():
    # The reference solutions of chapters 3 to 6 share lines with attention_course, which the book
    # shows; such lines are public and never reported.
    public = publish.public_text(ROOT)
    assert all(secret.text not in public for secret in publish.secret_lines(ROOT))


def test_student_repo_refuses_a_non_empty_dest(tmp_path, capsys):
    dest = tmp_path / "busy"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    with pytest.raises(publish.PublishError, match=r"DEST .*busy is not empty .*notes\.txt.*empty folder"):
        publish.student_repo(dest, ROOT)
    assert publish.main(["student-repo", str(dest)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]


def test_student_repo_refuses_a_file_or_a_dest_inside_the_repository(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(publish.PublishError, match="is a file"):
        publish.student_repo(tmp_path / "file", ROOT)
    with pytest.raises(publish.PublishError, match="inside the course repository"):
        publish.student_repo(ROOT / "_build" / "student", ROOT)


def test_check_names_a_missing_dir(tmp_path):
    with pytest.raises(publish.PublishError, match="DIR .* does not exist"):
        publish.check(tmp_path / "nowhere", ROOT)


# --- the check fails wrong work -----------------------------------------------------------------


@pytest.mark.parametrize("highlight", [False, True], ids=["plain", "highlighted"])
def test_check_fails_on_a_hidden_test_line_in_html(copy, hidden_line, highlight, capsys):
    line, cell = hidden_line
    shown = _highlighted(line) if highlight else html.escape(line)
    (copy / "book" / "leak.html").write_text(f"<html><body><pre>{shown}</pre></body></html>\n")
    problems = _problems(copy)
    assert any(p.startswith("book/leak.html: ") and "hidden-test line" in p and SOLUTION.name in p and cell in p
               for p in problems), problems
    # The command line fails too, and never prints the secret itself.
    assert publish.main(["check", str(copy)]) == 1
    out = capsys.readouterr()
    assert "book/leak.html" in out.err and line not in out.out + out.err


def test_check_fails_on_a_hidden_test_line_in_a_notebook(copy, hidden_line):
    line, cell = hidden_line
    path = copy / "exercises" / "ch02_scaled_dot_product" / "ch02_scaled_dot_product.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"# an extra check\n{line}\n"))
    nbformat.write(nb, str(path))
    assert line not in path.read_text()  # the notebook escapes its quotes: the check decodes them
    problems = _problems(copy)
    assert any(p.startswith("exercises/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb: ")
               and "hidden-test line" in p and cell in p for p in problems), problems
    assert all(line not in p for p in problems)


def test_check_fails_on_a_solutions_notebook(copy):
    (copy / "solutions" / "ch02_scaled_dot_product").mkdir(parents=True)
    shutil.copy(SOLUTION, copy / "solutions" / "ch02_scaled_dot_product" / SOLUTION.name)
    shutil.copy(SOLUTION, copy / "exercises" / "ch02_scaled_dot_product" / "answers.ipynb")
    problems = _problems(copy)
    inside = [p for p in problems if p.startswith("solutions/ch02_scaled_dot_product/")]
    renamed = [p for p in problems if p.startswith("exercises/ch02_scaled_dot_product/answers.ipynb: ")]
    for found in (inside, renamed):
        assert any("a copy of solutions/ch02_scaled_dot_product/" in p for p in found), problems
        assert any("marker 'BEGIN HIDDEN TESTS'" in p for p in found), problems
        assert any("hidden-test lines" in p for p in found), problems
    assert any("a file from a solutions/ folder" in p for p in inside)


def test_check_fails_on_the_marker_alone(copy):
    (copy / "book" / "notes.md").write_text("### BEGIN HIDDEN TESTS\n")
    assert _problems(copy) == ["book/notes.md: line 1: holds the nbgrader marker 'BEGIN HIDDEN TESTS'"]


def test_markers_are_allowed_only_in_the_files_that_explain_them(copy):
    # The README explains the markers, and the export's copy is the repository's: allowed.
    readme = (copy / "README.md").read_text()
    assert "### BEGIN HIDDEN TESTS" in readme and publish.check(copy, ROOT).ok
    # Once it differs from the repository's, it is checked like any other file.
    (copy / "README.md").write_text(readme + "\nextra\n")
    assert any(p.startswith("README.md: ") and "marker" in p for p in _problems(copy))


def test_check_in_a_repository_without_solutions_still_finds_markers(export, tmp_path):
    # The student repository (no solutions/) checks its own built site: markers only.
    site = tmp_path / "html"
    (site / "_sources" / "book").mkdir(parents=True)
    (site / "book").mkdir()
    guide = (export / "book" / "instructor_guide.md").read_text()
    (site / "_sources" / "book" / "instructor_guide.md").write_text(guide)
    (site / "book" / "instructor_guide.html").write_text(f"<pre>{html.escape(guide)}</pre>")
    (site / "book" / "ch02_scaled_dot_product.html").write_text("<pre>### BEGIN SOLUTION</pre>")
    report = publish.check(site, export)
    assert not report.has_solutions and report.secrets == 0
    assert [str(p) for p in report.problems] == [
        "book/ch02_scaled_dot_product.html: line 1: holds the nbgrader marker 'BEGIN SOLUTION'"]
    assert sorted(report.marker_exempt) == ["_sources/book/instructor_guide.md", "book/instructor_guide.html"]


# --- the GitHub Pages workflow -------------------------------------------------------------------


def test_pages_workflow_builds_checks_and_uploads_the_site():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as True
    assert triggers["push"]["branches"] == ["main"] and "workflow_dispatch" in triggers
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert workflow["concurrency"]["group"]

    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    runs = [step.get("run", "") for step in steps]
    uses = [step.get("uses", "") for step in steps]

    def index(predicate):
        found = [i for i, step in enumerate(steps) if predicate(step)]
        assert found, "step not found"
        return found[0]

    torch = index(lambda s: "torch==2.13.0" in s.get("run", "") and "download.pytorch.org/whl/cpu" in s.get("run", ""))
    assert "python -m venv .venv" in runs[torch] and ".venv/bin/" in runs[torch]
    venv = index(lambda s: s.get("run", "").strip() == "make venv")
    book = index(lambda s: "make book" in s.get("run", ""))
    checked = index(lambda s: "python -m course_site.publish check _build/html" in s.get("run", ""))
    upload = index(lambda s: s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert torch < venv < book < checked < upload
    assert steps[upload]["with"]["path"] == "_build/html"
    python = steps[index(lambda s: s.get("uses", "").startswith("actions/setup-python@"))]
    assert str(python["with"]["python-version"]) == "3.11"
    assert any(u.startswith("actions/checkout@") for u in uses)
    assert any(u.startswith("actions/configure-pages@") for u in uses)
    assert any(u.startswith("actions/deploy-pages@") for u in uses)
