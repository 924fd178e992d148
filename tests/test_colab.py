"""The first cell of every exercise notebook installs the course's packages on Google Colab.

Colab itself cannot be reached from the tests; they run the cell with a stand-in for Colab's
module and for the pip call. The package that the cell installs is built from the students'
repository, and tests/test_export.py builds it and looks inside.
"""

import subprocess
import sys
import types

import nbformat
import pytest

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import colab, colab_pins, course
from autograder.release.course import Repository, exercise_path, repository
from course_site import sphinx_ext

# A term's students' repository at a release (term.yml's students_repository).
STUDENTS = Repository("https://github.com/a-university/attention-2026", "week-1")

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


def fake_colab(monkeypatch, on_colab: bool) -> None:
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)


def run_cell(monkeypatch, on_colab: bool):
    calls = []

    def pip(args, **kwargs):
        calls.append((args, kwargs))
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(subprocess, "run", pip)
    fake_colab(monkeypatch, on_colab)
    source = notebooks.read(COURSE_ROOT / exercise_path(ASSIGNMENTS[0])).cells[0].source
    exec(compile(source, "colab-cell", "exec"), {})
    return calls


def test_on_colab_the_cell_pip_installs_the_course_from_the_repository(monkeypatch):
    calls = run_cell(monkeypatch, on_colab=True)
    pins = repository().raw_url(colab.PINS_FILE)
    expected = [sys.executable, "-m", "pip", "install", "--quiet", "-c", pins, repository().pip_spec()]
    assert calls == [(expected, {"capture_output": True, "text": True})]
    assert repository().pip_spec() == f"attention-course @ git+{repository().url}@{repository().ref}"


def test_the_colab_pins_are_the_lock_without_colabs_own_runtime():
    """constraints-colab.txt, which the cell installs with, is what `make lock` writes from constraints.txt: every
    locked package but Colab's torch, NumPy, matplotlib and Jupyter kernel and what they need."""
    written = colab_pins.colab_constraints((COURSE_ROOT / "constraints.txt").read_text(), colab_pins.runtime_closure())
    assert (COURSE_ROOT / colab.PINS_FILE).read_text() == written, "run `make lock`"
    pinned = {colab_pins.canonical(line.split("==")[0]) for line in written.splitlines() if "==" in line}
    assert not pinned & {"torch", "triton", "numpy", "matplotlib", "ipykernel", "jupyter-client", "tornado", "pyzmq"}
    assert {"transformers", "tokenizers", "safetensors", "nbformat", "msgspec", "plotly"} <= pinned


def test_on_colab_a_failed_install_says_in_one_sentence_what_to_do(monkeypatch, tmp_path, capsys):
    """Offline (git's proxy refuses every connection, pip has no index) the term's cell cannot install its
    release: it prints pip's message and stops with one sentence of its own that names what it tried,
    never pip's CalledProcessError. pip only resolves (a dry run, into a folder of the test's own)."""
    offline = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.proxy",
        "GIT_CONFIG_VALUE_0": "http://127.0.0.1:9",
        "GIT_TERMINAL_PROMPT": "0",
        "PIP_NO_INDEX": "1",
        "PIP_DRY_RUN": "1",
        "PIP_TARGET": str(tmp_path / "target"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
    }
    for name, value in offline.items():
        monkeypatch.setenv(name, value)
    fake_colab(monkeypatch, on_colab=True)
    with pytest.raises(SystemExit) as stopped:
        exec(compile(colab.cell_source(STUDENTS), "colab-cell", "exec"), {})
    said = str(stopped.value)
    assert said.startswith(f"Could not install attention-course @ git+{STUDENTS.url}@week-1 (pip's message is above)")
    assert "run this cell again; if it fails again, tell your instructor." in said
    assert said.count(". ") == 0 and said.endswith("."), "one sentence"
    printed = capsys.readouterr().err
    assert "127.0.0.1" in printed or "git" in printed, printed  # pip's own message, above the sentence
    assert "CalledProcessError" not in printed + said and "Traceback" not in printed
    assert not (tmp_path / "target").exists()


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


def test_a_term_names_its_students_repository_at_a_pinned_release(tmp_path):
    """term.yml's students_repository (or STUDENTS_REPOSITORY, STUDENTS_RELEASE): a GitHub repository at a tag
    or commit, never a branch; the term's exercises name it, the open edition _config.yml's."""
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/a-university/private\n")
    (tmp_path / "term.yml").write_text(
        "edition: term\nstudents_repository:\n  url: https://github.com/a-university/attention-2026\n"
        "  release: 'week-1'\n"
    )
    assert course.students_repository(tmp_path, {}) == STUDENTS
    term = course.Release("term")
    assert course.exercise_repository(term, tmp_path, {}) == STUDENTS
    assert course.exercise_repository(course.Release("open"), tmp_path, {}) == repository(tmp_path)
    assert course.repository_note(term, tmp_path, {}) is None
    environ = {"STUDENTS_RELEASE": "0f3c2a1"}
    assert course.students_repository(tmp_path, environ) == Repository(STUDENTS.url, "0f3c2a1")
    for ref in ("main", "master", "HEAD", "week 1", "a..b", "-x"):
        with pytest.raises(course.SettingsError, match="students_repository.release"):
            course.students_repository(tmp_path, {"STUDENTS_RELEASE": ref})
    with pytest.raises(course.SettingsError, match=r"students_repository.url .* must be https://github.com/"):
        course.students_repository(tmp_path, {"STUDENTS_REPOSITORY": "git@github.com:a/b.git"})
    (tmp_path / "term.yml").write_text("edition: term\nstudents_repository:\n  url: https://github.com/a/b\n")
    with pytest.raises(course.SettingsError, match="must name, in quotes, the git tag"):
        course.students_repository(tmp_path, {})
    (tmp_path / "term.yml").write_text("edition: term\n")
    assert course.students_repository(tmp_path, {}) is None
    assert "names no students_repository" in course.repository_note(term, tmp_path, {})


def test_a_set_up_cell_is_known_whatever_repository_it_names():
    for repo in (repository(), STUDENTS):
        assert colab.repository_of(colab.cell_source(repo)) == repo
    assert colab.repository_of(colab.cell_source(STUDENTS) + "\nimport os") is None
    assert colab.repository_of("PACKAGES = 1") is None


def _sphinx_settings(monkeypatch, **environ):
    """The configuration that the book's extension sets up for the checkout under ``environ``."""
    for name in ("EDITION", "RELEASED", "STUDENTS_REPOSITORY", "STUDENTS_RELEASE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    config = types.SimpleNamespace(nb_execution_cache_path="cache", html_copy_source=True, html_theme_options={})
    sphinx_ext.set_release(types.SimpleNamespace(srcdir=str(COURSE_ROOT)), config)
    return config


def _hrefs(node) -> list[str]:
    return [ref["refuri"] for ref in node.findall(lambda n: "refuri" in getattr(n, "attributes", {}))]


def test_the_term_sites_exercise_links_name_the_students_repository(monkeypatch, tmp_path):
    """The term site's Colab and GitHub links, its repository button and its downloadable notebook name the
    students' repository at the term's release; the open edition's name _config.yml's."""
    config = _sphinx_settings(
        monkeypatch, RELEASED="ch01_bahdanau", STUDENTS_REPOSITORY=STUDENTS.url, STUDENTS_RELEASE="week-1"
    )
    assert sphinx_ext.links_repository(config) == STUDENTS
    path = exercise_path("ch01_bahdanau")
    hrefs = _hrefs(sphinx_ext.exercise_links("ch01_bahdanau", STUDENTS, "book/ch01_bahdanau"))
    assert hrefs == [STUDENTS.colab_url(path), STUDENTS.blob_url(path)]
    assert all("a-university/attention-2026/blob/week-1/" in href for href in hrefs)
    assert config.html_theme_options["repository_url"] == STUDENTS.url
    assert config.html_theme_options["repository_branch"] == "week-1"

    copy = tmp_path / "html" / "_downloads" / "0123" / "ch01_bahdanau.ipynb"
    copy.parent.mkdir(parents=True)
    copy.write_bytes((COURSE_ROOT / path).read_bytes())
    app = types.SimpleNamespace(
        config=config,
        outdir=str(tmp_path / "html"),
        builder=types.SimpleNamespace(format="html"),
        env=types.SimpleNamespace(dlfiles={path: ({"book/ch01_bahdanau"}, "0123/ch01_bahdanau.ipynb")}),
    )
    sphinx_ext.retarget_downloads(app, None)
    assert nbformat.read(str(copy), as_version=4).cells[0].source == colab.cell_source(STUDENTS)
    assert repository().slug not in copy.read_text()

    line = colab.install_line(STUDENTS)  # chapter 9's install line on the term site (the colab-install directive)
    assert STUDENTS.pip_spec() in line and f"-c {STUDENTS.raw_url(colab.PINS_FILE)}" in line
    assert repository().slug not in line

    assert sphinx_ext.links_repository(_sphinx_settings(monkeypatch, EDITION="open")) == repository()
    # a term that names no students' repository keeps _config.yml's (make book prints a note)
    assert sphinx_ext.links_repository(_sphinx_settings(monkeypatch, RELEASED="none")) == repository()
