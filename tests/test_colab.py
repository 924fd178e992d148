"""The first cell of every exercise notebook installs the course's packages on Google Colab.

Colab itself cannot be reached from the tests; they run the cell with a stand-in for Colab's
module and for the pip call. The package that the cell installs is built from the students'
repository, and tests/test_export.py builds it and looks inside.
"""

import subprocess
import sys
import types

import pytest

from attention_course import notebooks
from attention_course.notebooks import COURSE_ROOT
from autograder import colab, course
from autograder.course import Repository, exercise_path, repository

ASSIGNMENTS = sorted(p.name for p in (COURSE_ROOT / "solutions").iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", ["exercises", "solutions"])
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_notebook_starts_with_the_colab_cell(folder, assignment):
    nb = notebooks.read(course.notebook_path(assignment, folder))
    assert colab.is_current(nb, repository()), (
        f"{folder}/{assignment}: the first cell is not the Colab set-up cell for {repository().url}; "
        "run `make exercises`"
    )
    assert notebooks.is_setup(nb.cells[0]), "the Colab cell must be read-only, so grading takes it from solutions/"


def run_cell(monkeypatch, on_colab: bool):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, **kwargs: calls.append((args, kwargs)))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    source = notebooks.read(COURSE_ROOT / exercise_path(ASSIGNMENTS[0])).cells[0].source
    exec(compile(source, "colab-cell", "exec"), {})
    return calls


def test_on_colab_the_cell_pip_installs_the_course_from_the_repository(monkeypatch):
    calls = run_cell(monkeypatch, on_colab=True)
    assert calls == [([sys.executable, "-m", "pip", "install", "--quiet", repository().pip_spec()], {"check": True})]
    assert repository().pip_spec() == f"attention-course @ git+{repository().url}@{repository().branch}"


def test_elsewhere_the_cell_does_nothing(monkeypatch):
    assert run_cell(monkeypatch, on_colab=False) == []


@pytest.mark.parametrize(
    "url", ["http://github.com/a/b", "https://gitlab.com/a/b", "https://github.com/a", "https://github.com/a/b/c", None]
)
def test_repository_url_must_name_a_github_repository(tmp_path, url):
    (tmp_path / "_config.yml").write_text(f"repository:\n  url: {url}\n" if url else "title: t\n")
    with pytest.raises(ValueError, match="repository.url must be https://github.com/<owner>/<name>"):
        repository(tmp_path)


def test_repository_addresses():
    repo = Repository("https://github.com/o/n", "term-2027")
    assert (
        repo.colab_url("exercises/x/x.ipynb")
        == "https://colab.research.google.com/github/o/n/blob/term-2027/exercises/x/x.ipynb"
    )
    assert repo.blob_url("exercises/x/x.ipynb") == "https://github.com/o/n/blob/term-2027/exercises/x/x.ipynb"
