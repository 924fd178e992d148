"""The students' repository (`make student-repo`): what it holds for a term, that it holds no
unreleased solution, and that what its README tells students to run works there."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder import course, packages, reference
from autograder.course import COURSE_ROOT
from course_site import export, leaks
from tests.support.submissions import fill

ROOT = COURSE_ROOT
TERM = course.Release("term", {"ch01_bahdanau"})
STUDENT_FILES = {"README.md", "Makefile", "requirements.txt", "pyproject.toml", ".gitignore"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("export") / "student"
    files, report = export.student_repo(dest, TERM, ROOT)
    assert report.ok and files
    return dest


def _names(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_the_export_holds_exercises_packages_and_files_for_students(exported):
    names = _names(exported)
    assert names >= STUDENT_FILES
    assert {
        "attention_course/__init__.py",
        "attention_course/dates.py",
        "attention_course/solutions/__init__.py",
        "autograder/__init__.py",
        "autograder/checks.py",
        "autograder/cli/validate.py",
    } <= names
    for path in sorted(ROOT.glob("exercises/*/*.ipynb")):
        rel = path.relative_to(ROOT).as_posix()
        assert (exported / rel).read_bytes() == path.read_bytes(), rel
    for private in ("solutions", "tests", "book", "course_site", "_config.yml", "term.yml", "submitted", "grades"):
        assert not (exported / private).exists(), private
    assert not any("__pycache__" in name or ".ipynb_checkpoints" in name for name in names)


def test_only_the_released_solutions_are_in_it(exported):
    solutions = sorted(p.name for p in (exported / "attention_course" / "solutions").iterdir())
    assert solutions == ["__init__.py", "ch01_bahdanau.py"]
    assert (exported / "attention_course/solutions/ch01_bahdanau.py").read_text() == reference.module_source(
        "ch01_bahdanau"
    )
    # The capstone's models build on chapters 3 to 6: they wait for those releases.
    assert not (exported / "attention_course" / "model.py").exists()
    assert not (exported / "attention_course" / "trainer.py").exists()
    assert leaks.check(exported, ROOT, TERM).ok


def test_every_edition_exports_what_it_releases(tmp_path):
    everything = export.write(tmp_path / "open", course.Release("open"), ROOT)
    assert {f"attention_course/solutions/{a}.py" for a in course.assignments()} <= set(everything)
    assert "attention_course/model.py" in everything and "attention_course/trainer.py" in everything
    none = export.write(tmp_path / "none", course.Release("term"), ROOT)
    assert not [f for f in none if f.startswith("attention_course/solutions/ch")]


def test_the_readme_is_written_for_students(exported):
    readme = (exported / "README.md").read_text()
    for phrase in (
        "make venv",
        "make lab",
        "make validate NOTEBOOK=",
        "Open in Colab",
        "`ch01_bahdanau`",
        course_site_repository_url(),
    ):
        assert phrase in readme, phrase
    for instructor_only in (
        "make grade",
        "make student-repo",
        "solutions/<",
        "hidden tests run only where",
        "gradebook",
    ):
        assert instructor_only not in readme, instructor_only
    assert "{{" not in readme and "{{" not in (exported / "Makefile").read_text()


def course_site_repository_url() -> str:
    from autograder.course import repository

    return repository(ROOT).url


def test_the_students_make_targets_work(exported, tmp_path):
    """`make help` and `make validate` run in the export (with this machine's environment, which
    `make venv` would install from the export's requirements.txt)."""
    venv = Path(sys.executable).parent.parent
    common = ["make", "-C", str(exported), f"VENV={venv}", "-o", f"{venv}/.installed"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUTOGRADER_COURSE_ROOT")}
    listed = subprocess.run(["make", "-C", str(exported), "help"], capture_output=True, text=True, env=env)
    assert listed.returncode == 0 and all(f"make {t}" in listed.stdout for t in ("venv", "lab", "validate"))

    answered = exported / "answered.ipynb"
    nbformat.write(fill("ch01_bahdanau"), str(answered))
    ok = subprocess.run([*common, "validate", "NOTEBOOK=answered.ipynb"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]
    assert "All visible tests passed" in ok.stdout and "FAIL" not in ok.stdout

    blank = subprocess.run(
        [*common, "validate", "NOTEBOOK=exercises/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert blank.returncode != 0 and "FAIL" in blank.stdout and "NotImplementedError" in blank.stdout
    usage = subprocess.run([*common, "validate"], capture_output=True, text=True, env=env)
    assert usage.returncode == 2 and "usage: make validate NOTEBOOK=" in usage.stdout
    answered.unlink()


def test_the_students_requirements_are_the_courses_pins(exported):
    pins = [
        line
        for line in (exported / "requirements.txt").read_text().splitlines()
        if line and not line.startswith(("#", "-e"))
    ]
    assert len(pins) == len(export.STUDENT_REQUIREMENTS)
    course_pins = set((ROOT / "requirements.txt").read_text().splitlines())
    for pin in pins:
        name, version = pin.split("==")
        assert pin in course_pins and importlib.metadata.version(name).split("+")[0] == version, pin


def test_the_colab_package_holds_only_released_solutions(exported, tmp_path):
    """The first cell of an exercise pip-installs the students' repository on Colab: build that package."""
    source = Path(shutil.copytree(exported, tmp_path / "source"))  # setuptools writes build/ next to it
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith("METADATA"))).decode()
        archive.extractall(unpacked)
    for module in (
        "autograder/checks.py",
        "autograder/specs.py",
        "attention_course/dates.py",
        "attention_course/solutions/ch01_bahdanau.py",
    ):
        assert module in names, f"the package that Colab installs lacks {module}"
    assert not [n for n in names if n.startswith("attention_course/solutions/ch") and "ch01" not in n]
    assert leaks.check(unpacked, ROOT, TERM).ok
    requirements = [
        line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")
    ]
    # Colab's own torch, NumPy and matplotlib must satisfy them: no exact pins.
    assert requirements and not any("==" in r for r in requirements), requirements


def test_the_export_refuses_a_busy_dest_a_file_or_a_dest_inside_the_repository(tmp_path, capsys):
    dest = tmp_path / "busy"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    with pytest.raises(export.ExportError, match=r"DEST .*busy is not empty .*notes\.txt.*empty folder"):
        export.student_repo(dest, TERM, ROOT)
    assert export.main([str(dest)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]
    (tmp_path / "file").write_text("")
    with pytest.raises(export.ExportError, match="is a file"):
        export.student_repo(tmp_path / "file", TERM, ROOT)
    with pytest.raises(export.ExportError, match="inside the course repository"):
        export.student_repo(ROOT / "_build" / "student", TERM, ROOT)


def test_an_export_that_leaks_is_removed(tmp_path, monkeypatch):
    """A module that students would get holds an unreleased solution, renamed: the export stops."""
    body = reference.item_source("ch03_multi_head", "MultiHeadAttention")
    disguised = body.replace("MultiHeadAttention", "Helper").replace("scores", "s").replace("weights", "w")
    write = packages.write

    def write_and_plant(dest, release, root=None, files=None):
        written = write(dest, release, root, files)
        (Path(dest) / "attention_course" / "helpers.py").write_text("import math\n\n" + disguised)
        return written + ["attention_course/helpers.py"]

    monkeypatch.setattr(packages, "write", write_and_plant)
    dest = tmp_path / "student"
    with pytest.raises(export.LeakFound, match="attention_course/helpers.py"):
        export.student_repo(dest, TERM, ROOT)
    assert not dest.exists()
