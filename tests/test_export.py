"""The students' repository (`make student-repo`): what it holds for a term, that it holds no
unreleased solution, and that what its README tells students to run works there."""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest

from attention_course import solutions
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.grading.classroom import fill
from autograder.release import colab, course, packages, reference
from course_site import export, leaks
from tests.support.pins import canonical, outside, pins

ROOT = COURSE_ROOT
TERM = course.Release("term", {"ch01_bahdanau"})
# The term's students' repository at its first release (term.yml's students_repository, as a test sets it).
STUDENTS = course.Repository("https://github.com/a-university/attention-2026", "week-1")
STUDENT_FILES = {
    "README.md",
    "Makefile",
    "requirements.txt",
    "constraints.txt",
    "constraints-colab.txt",
    "pyproject.toml",
    ".gitignore",
    export.MARKER,
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("export") / "student"
    files, report = export.student_repo(dest, TERM, ROOT, STUDENTS)
    assert report.ok and files
    return dest


def _names(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_the_export_holds_exercises_packages_and_files_for_students(exported):
    names = _names(exported)
    assert names >= STUDENT_FILES
    assert {
        "attention_course/__init__.py",
        "attention_course/data/dates.py",
        "attention_course/solutions/__init__.py",
        "autograder/__init__.py",
        "autograder/checks/values.py",
        "autograder/cli/validate.py",
    } <= names
    for path in sorted(ROOT.glob("exercises/*/*.ipynb")):  # the instructor's but for the first cell's repository
        rel = path.relative_to(ROOT).as_posix()
        theirs, ours = nbformat.read(str(exported / rel), as_version=4), nbformat.read(str(path), as_version=4)
        assert theirs.cells[1:] == ours.cells[1:] and theirs.metadata == ours.metadata, rel
    for private in ("tests", "book", "course_site", "_config.yml", "submitted", "grades"):
        assert not (exported / private).exists(), private
    assert not [name for name in names if packages.instructor_only(name)]
    assert {"autograder/exchange/collect.py", "autograder/nbgrader/execute.py"} <= set(packages.package_files(ROOT))
    # the released chapter's instructor notebook, for make check, and no other
    assert sorted(n for n in names if n.startswith("solutions/")) == ["solutions/ch01_bahdanau/ch01_bahdanau.ipynb"]
    assert course.release(exported, environ={}) == TERM
    assert not any("__pycache__" in name or ".ipynb_checkpoints" in name for name in names)


def test_only_the_released_solutions_are_in_it(exported):
    files = sorted(p.name for p in (exported / "attention_course" / "solutions").iterdir())
    assert files == ["__init__.py", "ch01_bahdanau.py"]
    assert (exported / "attention_course/solutions/ch01_bahdanau.py").read_text() == solutions.module_source(
        "ch01_bahdanau"
    )
    # The capstone's models build on chapters 3 to 6: they wait for those releases.
    assert not (exported / "attention_course" / "models" / "transformer.py").exists()
    assert not (exported / "attention_course" / "moved" / "model.py").exists()  # nor its earlier name
    assert not (exported / "attention_course" / "trainer" / "command.py").exists()
    assert (exported / "attention_course" / "moved" / "dates.py").is_file()  # the date task's is there
    assert leaks.scan(exported, ROOT, TERM, published=export.published_tests(TERM, ROOT)).ok


def test_every_edition_exports_what_it_releases(tmp_path):
    everything = export.write(tmp_path / "open", course.Release("open"), ROOT)
    assert {f"attention_course/solutions/{a}.py" for a in course.assignments()} <= set(everything)
    assert "attention_course/models/transformer.py" in everything
    assert "attention_course/trainer/command.py" in everything
    # the open edition's notebooks are the committed ones, naming _config.yml's repository
    for rel in (course.exercise_path("ch01_bahdanau"), "solutions/ch01_bahdanau/ch01_bahdanau.ipynb"):
        assert (tmp_path / "open" / rel).read_bytes() == (ROOT / rel).read_bytes(), rel
    none = export.write(tmp_path / "none", course.Release("term"), ROOT, STUDENTS)
    assert not [f for f in none if f.startswith("attention_course/solutions/ch")]


def test_the_readme_is_written_for_students(exported):
    readme = (exported / "README.md").read_text()
    for phrase in (
        "make venv",
        "make lab",
        "make validate NOTEBOOK=",
        "Open in Colab",
        "`ch01_bahdanau`",
        f"git clone {STUDENTS.url}.git",
    ):
        assert phrase in readme, phrase
    assert course.repository(ROOT).url not in readme
    for instructor_only in (
        "make grade",
        "make student-repo",
        "solutions/<",
        "hidden tests run only where",
        "gradebook",
    ):
        assert instructor_only not in readme, instructor_only
    assert "{{" not in readme and "{{" not in (exported / "Makefile").read_text()


# The term of the students' repository tests: two chapters released, the third not yet.
STUDENT_TERM = course.Release("term", {"ch01_bahdanau", "ch02_scaled_dot_product"})
WRONG = {"ch01_bahdanau": "additive_mask_inverted", "ch02_scaled_dot_product": "sdpa_mask_with_zero"}


def _student_env() -> dict:
    """The environment a student's shell has: none of the instructor's venv, course root or caches."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONPYCACHEPREFIX", "EDITION", "RELEASED")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("MAKE")}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


@pytest.fixture(scope="module")
def student_repo(tmp_path_factory) -> Path:
    """The students' repository of STUDENT_TERM, with its own .venv made by its own `make venv` from its own
    requirements.txt (as a student's clone would be: nothing of the instructor's environment)."""
    dest = tmp_path_factory.mktemp("students") / "repo"
    export.student_repo(dest, STUDENT_TERM, ROOT, STUDENTS)
    made = subprocess.run(["make", "-C", str(dest), "venv"], capture_output=True, text=True, env=_student_env())
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    return dest


def _student_notebooks(assignment: str, folder: Path) -> dict[str, Path]:
    bugs = importlib.import_module(f"tests.buggy.{assignment}").BUGS
    wrong = next(bug for bug in bugs if bug.name == WRONG[assignment])
    notebooks = {
        "right": fill(assignment),
        "blank": nbformat.read(str(ROOT / course.exercise_path(assignment)), as_version=4),
        "wrong": fill(assignment, {wrong.item: wrong.code}),
    }
    paths = {}
    for kind, nb in notebooks.items():
        paths[kind] = folder / kind / f"{assignment}.ipynb"
        paths[kind].parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(paths[kind]))
    return paths


def _verdicts(output: str) -> list[str]:
    """A validate or check report without its timing: every line but the first (which names the file)."""
    return [line for line in output.splitlines()[1:] if line.strip()]


def _instructors(module: str, path: Path, monkeypatch) -> tuple[int, str]:
    """The exit status and output of the instructor's ``python -m <module> <path>`` under STUDENT_TERM: its
    ``main``, run in this process (the same code, without importing torch and the grader again)."""
    for name, value in course.environment(STUDENT_TERM).items():
        monkeypatch.setenv(name, value)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = importlib.import_module(module).main([str(path)])
    return status, out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(STUDENT_TERM.released))
def test_the_students_repository_checks_a_notebook_as_the_instructors_checkout_does(
    student_repo, assignment, monkeypatch
):
    """In the students' repository, with its own venv, `make validate` and `make check` on a right, a blank
    and a wrong notebook of each released chapter give what the instructor's checkout gives (validate:
    the same visible tests' verdicts and messages; check: the hidden tests' verdicts, messages and score,
    the instructor's in the sandbox)."""
    paths = _student_notebooks(assignment, student_repo / "work")
    for kind, path in paths.items():
        rel = path.relative_to(student_repo)
        for target, module in (("validate", "autograder.cli.validate"), ("check", "autograder.cli.check")):
            student = subprocess.run(
                ["make", "-s", "-C", str(student_repo), target, f"NOTEBOOK={rel}"],
                capture_output=True,
                text=True,
                env=_student_env(),
            )
            status, ours = _instructors(module, path, monkeypatch)
            said = f"{kind} {target}:\n{student.stdout[-3000:]}{student.stderr[-3000:]}\n--- instructor:\n{ours}"
            assert "Traceback" not in student.stdout + student.stderr, said
            assert _verdicts(student.stdout) == _verdicts(ours), said
            # make fails (its own status, 2) unless every test passed; the command's status is in its message
            assert student.returncode == (0 if kind == "right" else 2), said
            assert status == (0 if kind == "right" else 1), said
            if kind != "right":
                assert f"{target}] Error 1" in student.stderr, said
            if target == "check":
                assert ("Verdict: every test passes" in student.stdout) == (kind == "right"), said
                assert ("Ready to submit." in student.stdout) == (kind == "right"), said


@pytest.mark.slow
def test_an_unreleased_chapter_gets_the_same_visible_verdicts_and_no_hidden_tests(student_repo, monkeypatch):
    """ch03 is not released: the students' repository has no reference of it. A notebook whose split_heads and
    merge_heads are plain reshapes, with a right MultiHeadAttention: validate says the same as in the
    instructor's checkout (the hint says that the helpers ran and must pass first, never a cause the
    answer lacks), and make check says that the hidden tests come with the release."""
    from tests.buggy.ch03_multi_head import BUGS

    assignment = "ch03_multi_head"
    reshapes = ("split_without_transpose", "merge_without_transpose")
    answers = {bug.item: bug.code for bug in BUGS if bug.name in reshapes}
    path = student_repo / "work" / "helpers" / f"{assignment}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(fill(assignment, answers), str(path))
    rel = path.relative_to(student_repo)
    student = subprocess.run(
        ["make", "-s", "-C", str(student_repo), "validate", f"NOTEBOOK={rel}"],
        capture_output=True,
        text=True,
        env=_student_env(),
    )
    _, ours = _instructors("autograder.cli.validate", path, monkeypatch)
    assert _verdicts(student.stdout) == _verdicts(ours), student.stdout + "\n---\n" + ours
    assert "FAIL  test_mha_matches_torch" in student.stdout, student.stdout
    assert "ran here with your own split_heads, merge_heads" in student.stdout
    checked = subprocess.run(
        ["make", "-s", "-C", str(student_repo), "check", f"NOTEBOOK={rel}"],
        capture_output=True,
        text=True,
        env=_student_env(),
    )
    assert checked.returncode != 0
    assert "The hidden tests of ch03_multi_head are not here" in checked.stdout, checked.stdout + checked.stderr


def test_the_students_make_targets_say_how_to_use_them(exported):
    listed = subprocess.run(["make", "-C", str(exported), "help"], capture_output=True, text=True, env=_student_env())
    assert listed.returncode == 0
    assert all(f"make {t}" in listed.stdout for t in ("venv", "lab", "validate", "check")), listed.stdout
    for target in ("validate", "check"):
        usage = subprocess.run(
            ["make", "-C", str(exported), "-o", ".venv/.installed", "-o", ".venv/.jupyter-config", target],
            capture_output=True,
            text=True,
            env=_student_env(),
        )
        assert usage.returncode == 2 and f"usage: make {target} NOTEBOOK=" in usage.stdout, usage.stdout


def _lab_command(exported: Path, uid: int, tmp_path: Path) -> str:
    """The command that the students' `make lab` runs for a user of ``uid`` (``id -u`` answers it)."""
    fake = tmp_path / f"uid{uid}"
    fake.mkdir()
    (fake / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (fake / "id").chmod(0o755)
    env = {**_student_env(), "PATH": f"{fake}{os.pathsep}{_student_env()['PATH']}"}
    made = subprocess.run(
        ["make", "-n", "-C", str(exported), "-o", ".venv/.installed", "-o", ".venv/.jupyter-config", "lab"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    return next(line for line in made.stdout.splitlines() if "jupyter lab" in line)


def test_the_students_make_lab_allows_root_only_to_root(exported, tmp_path):
    """JupyterLab refuses to start as root without --allow-root: make passes it where the user is root only."""
    assert _lab_command(exported, 0, tmp_path).split()[1:] == ["lab", "--allow-root", "exercises"]
    assert _lab_command(exported, 1000, tmp_path).split()[1:] == ["lab", "exercises"]


def _listed(command: list[str], env: dict) -> str:
    """What a `jupyter ... list` command prints (both streams), its colours taken out."""
    listed = subprocess.run(command, capture_output=True, text=True, env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    return re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)


# nbgrader's lab plugins that only instructors use.
INSTRUCTOR_PLUGINS = [
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:formgrader",
    "@jupyter/nbgrader:course-list",
]
# JupyterLab's plugin that asks whether to fetch Jupyter's news: off too.
NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
# The students' server extensions of nbgrader's: off for the instructor's tools, on for theirs.
SERVER_EXTENSIONS = {
    "formgrader": "disabled",
    "course_list": "disabled",
    "assignment_list": "enabled",
    "validate_assignment": "enabled",
}


@pytest.mark.slow
def test_the_students_venv_turns_off_nbgraders_instructor_tools(exported, tmp_path):
    """The students' Makefile's venv step, run on a venv as installing the pins leaves it (this one's Python
    packages, through a .pth, and nbgrader's data and configuration, copied): `jupyter labextension list`
    shows the Create Assignment, formgrader and course list plugins disabled (and JupyterLab's announcements,
    which asks about news), and `jupyter server extension list` the formgrader's and course list's server
    extensions; the assignment list and Validate stay. Only the throwaway venv's configuration is written."""
    shared = Path(sys.prefix)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run(
        [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.copytree(shared / "etc" / "jupyter", venv / "etc" / "jupyter")
    (venv / "share").mkdir()
    (venv / "share" / "jupyter").symlink_to(shared / "share" / "jupyter")
    before = sorted((p, p.stat().st_mtime_ns) for p in (shared / "etc" / "jupyter").rglob("*"))
    env = {k: v for k, v in _student_env().items() if k not in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH")}
    env.update(JUPYTER_CONFIG_DIR=str(tmp_path / "user-config"), JUPYTER_DATA_DIR=str(tmp_path / "user-data"))
    config = f"{venv}/.jupyter-config"
    made = subprocess.run(
        ["make", "-C", str(exported), f"VENV={venv}", "-o", f"{venv}/.installed", config],
        capture_output=True,
        text=True,
        env=env,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert "Turning off nbgrader's instructor tools and the news question" in made.stdout, made.stdout + made.stderr
    assert not made.stderr, made.stderr
    python = str(venv / "bin" / "python")
    lab = _listed([python, "-m", "jupyterlab.labextensions", "list"], env)
    disabled = lab.split("Disabled extensions:")[1].split()
    assert sorted(disabled) == sorted([*INSTRUCTOR_PLUGINS, NEWS_PLUGIN]), lab
    assert "@jupyter/nbgrader v0.9.6 enabled OK" in lab and "locked" in lab, lab
    server = _listed([python, "-m", "jupyter_server.extension.serverextension", "list"], env)
    for extension, state in SERVER_EXTENSIONS.items():
        assert f"nbgrader.server_extensions.{extension} {state}" in server, server
    assert sorted((p, p.stat().st_mtime_ns) for p in (shared / "etc" / "jupyter").rglob("*")) == before


def test_the_students_requirements_are_the_courses_pins(exported):
    pins = [
        line
        for line in (exported / "requirements.txt").read_text().splitlines()
        if line and not line.startswith(("#", "-e"))
    ]
    assert len(pins) == len(export.STUDENT_REQUIREMENTS)
    course_pins = set((ROOT / "requirements.txt").read_text().splitlines())
    for pin in pins:
        name, version = pin.split(";")[0].strip().split("==")  # triton's pin has a marker (Linux only)
        assert pin in course_pins and importlib.metadata.version(name).split("+")[0] == version, pin
    assert (exported / "constraints.txt").read_bytes() == (ROOT / "constraints.txt").read_bytes()


@pytest.mark.slow
def test_the_students_venv_holds_the_courses_locked_versions(student_repo):
    """The students' `make venv` installs with the course's constraints.txt: every package at the version that
    the course's own venv was tested with, not the newest that the students' pins allow on the day."""
    listing = (
        "import importlib.metadata as m, json, sysconfig; "
        "folders = [sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']]; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions(path=folders)}))"
    )
    found = subprocess.run(
        [str(student_repo / ".venv" / "bin" / "python"), "-c", listing], capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    installed = {canonical(name): version for name, version in json.loads(found.stdout).items()}
    installed.pop("attention-course")
    assert len(installed) > 50, sorted(installed)
    differing = outside(pins(ROOT / "constraints.txt"), installed)
    assert not differing, f"the students' venv holds versions outside the lock: {differing}"


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
        "autograder/checks/values.py",
        "autograder/api/specs.py",
        "attention_course/data/dates.py",
        "attention_course/solutions/ch01_bahdanau.py",
    ):
        assert module in names, f"the package that Colab installs lacks {module}"
    assert not [n for n in names if n.startswith("attention_course/solutions/ch") and "ch01" not in n]
    assert leaks.scan(unpacked, ROOT, TERM).ok
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
        export.student_repo(dest, TERM, ROOT, STUDENTS)
    assert export.main([str(dest)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]
    (tmp_path / "file").write_text("")
    with pytest.raises(export.ExportError, match="is a file"):
        export.student_repo(tmp_path / "file", TERM, ROOT, STUDENTS)
    with pytest.raises(export.ExportError, match="inside the course repository"):
        export.student_repo(ROOT / "_build" / "student", TERM, ROOT, STUDENTS)
    # an earlier export's files without its git checkout is not one to update
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / export.MARKER).write_text(export.marker(STUDENTS))
    with pytest.raises(export.ExportError, match=r"is not empty .*the git checkout of an earlier export"):
        export.student_repo(tmp_path / "copy", TERM, ROOT, STUDENTS)


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
        export.student_repo(dest, TERM, ROOT, STUDENTS)
    assert not dest.exists()


def test_a_terms_export_names_only_the_students_repository_at_its_release(exported):
    """No file of the export names the instructor's repository, or installs or links a branch: every
    exercise's first cell and the released chapter's instructor notebook install the students' repository at
    the term's release, and the marker says which."""
    instructors = course.repository(ROOT)
    for path in sorted(p for p in exported.rglob("*") if p.is_file()):
        text = path.read_bytes().decode("utf-8", errors="replace")
        rel = path.relative_to(exported).as_posix()
        assert instructors.slug not in text, f"{rel} names the instructor's repository {instructors.url}"
        assert f"@{instructors.ref}" not in text and f"/blob/{instructors.ref}/" not in text, rel
    first_cells = [
        nbformat.read(str(path), as_version=4).cells[0].source
        for path in sorted(exported.glob("*/*/*.ipynb"))  # exercises/ and the released solutions/
    ]
    assert len(first_cells) == len(course.assignments(ROOT)) + len(TERM.released)
    assert set(first_cells) == {colab.cell_source(STUDENTS)}
    assert f'PACKAGES = "attention-course @ git+{STUDENTS.url}@week-1"' in first_cells[0]
    assert (exported / export.MARKER).read_text().endswith(f"release: week-1\nrepository: {STUDENTS.url}\n")


def test_the_export_refuses_the_instructors_own_repository(tmp_path, capsys, monkeypatch):
    """A term's export needs its students' repository, which is never _config.yml's nor this checkout's
    origin, at a release that is not a branch; each refusal says what to set, and writes nothing."""
    dest = tmp_path / "student"
    monkeypatch.setenv("RELEASED", "ch01_bahdanau")
    for name in ("EDITION", "STUDENTS_REPOSITORY", "STUDENTS_RELEASE"):
        monkeypatch.delenv(name, raising=False)
    assert export.main([str(dest)]) == 2
    assert "term.yml names no students_repository; set its url" in capsys.readouterr().err

    instructors = course.repository(ROOT).url
    monkeypatch.setenv("STUDENTS_REPOSITORY", instructors.replace("attention-course/", "Attention-Course/") + ".git")
    monkeypatch.setenv("STUDENTS_RELEASE", "week-1")
    assert export.main([str(dest)]) == 2
    said = capsys.readouterr().err
    assert "is _config.yml's repository.url, the instructor's repository" in said, said
    assert "set students_repository.url in term.yml (or STUDENTS_REPOSITORY)" in said, said

    monkeypatch.setattr(export, "_origin", lambda root: "git@github.com:A-University/attention-2026.git")
    with pytest.raises(export.ExportError, match="is the git remote origin of this checkout"):
        export.student_repo(dest, TERM, ROOT, STUDENTS)
    monkeypatch.setenv("STUDENTS_REPOSITORY", STUDENTS.url)
    monkeypatch.setenv("STUDENTS_RELEASE", "main")
    assert export.main([str(dest)]) == 2
    assert "'main', a branch, which changes with every push" in capsys.readouterr().err
    assert not dest.exists()


def test_the_open_editions_export_says_to_push_it_to_a_new_repository_never_the_courses(tmp_path, capsys, monkeypatch):
    """The open edition names no students' repository: its export's notebooks install the packages from
    _config.yml's repository, the course's own, so "Next:" never sends the export there; a term's export goes to
    its students' repository, tagged with its release."""
    monkeypatch.setenv("EDITION", "open")
    for name in ("RELEASED", "STUDENTS_REPOSITORY", "STUDENTS_RELEASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(export, "student_repo", lambda dest, release, root, repo: (["README.md"], None))
    own = course.repository(ROOT)
    assert export.main([str(tmp_path / "copy")]) == 0
    said = capsys.readouterr().out
    steps = said.split("Next: ", 1)[1]
    assert f"git remote add origin {own.url}" not in steps and f"push to {own.url}" not in steps
    assert "git remote add origin https://github.com/<you>/<new-repository>.git" in steps, steps
    assert f"never to {own.url}, which it would replace" in steps and "git tag" not in steps

    term = export.next_steps(tmp_path / "copy", STUDENTS, TERM, update=False)
    assert f"git remote add origin {STUDENTS.url}.git" in term and f"git tag {STUDENTS.ref}" in term
    assert f"git push -u origin main {STUDENTS.ref}" in term


def _git(dest: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(dest), "-c", "user.name=Instructor", "-c", "user.email=i@example.org", *args],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_second_release_updates_the_students_checkout_in_place(exported, tmp_path):
    """Release 2 (chapter 2 added, tag week-2) into the checkout of release 1 (committed and tagged week-1):
    its history stays, the new chapter's files are there, a file that release 1 had and the course no longer
    has is gone, and the cells pin week-2. The tag of an earlier release and another course's export are
    refused."""
    dest = tmp_path / "students"
    shutil.copytree(exported, dest)
    _git(dest, "init", "-q", "-b", "main")
    retired = dest / "exercises" / "ch00_retired" / "ch00_retired.ipynb"  # a chapter since deleted from the course
    retired.parent.mkdir()
    retired.write_text("{}")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "Release week-1")
    _git(dest, "tag", "week-1")
    (dest / "notes.txt").write_text("not the course's")

    with pytest.raises(export.ExportError, match="already has a tag week-1"):
        export.student_repo(dest, STUDENT_TERM, ROOT, STUDENTS)
    elsewhere = course.Repository("https://github.com/another/course", "week-2")
    with pytest.raises(export.ExportError, match="is the export for 'https://github.com/a-university/attention-2026'"):
        export.student_repo(dest, STUDENT_TERM, ROOT, elsewhere)

    second = course.Repository(STUDENTS.url, "week-2")
    files, report = export.student_repo(dest, STUDENT_TERM, ROOT, second)
    assert report.ok
    assert _names(dest) - {n for n in _names(dest) if n.startswith(".git/")} == set(files)
    assert not retired.exists() and not (dest / "notes.txt").exists()
    assert (dest / "attention_course/solutions/ch02_scaled_dot_product.py").is_file()
    assert (dest / "solutions/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb").is_file()
    first = nbformat.read(str(dest / course.exercise_path("ch03_multi_head")), as_version=4).cells[0]
    assert first.source == colab.cell_source(second)
    assert _git(dest, "log", "--format=%s") == "Release week-1\n"
    changed = _git(dest, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert " D exercises/ch00_retired/ch00_retired.ipynb" in changed
    assert "?? attention_course/solutions/ch02_scaled_dot_product.py" in changed
    assert course.release(dest, environ={}) == STUDENT_TERM


def test_grading_takes_the_instructors_colab_cell_for_the_students(exported, tmp_path):
    """nbgrader puts the instructor's read-only cells back before grading: a submission made from the
    students' repository (its first cell the term's) gets the instructor's cell quietly, with no changed-cell
    warning; and nbgrader's validate finds no changed cell in the students' notebook."""
    import logging

    from nbgrader.validator import Validator

    from autograder.cli.exercises import generate
    from autograder.nbgrader.restore_cells import RestoreTestCells

    assignment = "ch01_bahdanau"
    db_url = f"sqlite:///{tmp_path}/gradebook.db"
    generate([assignment], into=tmp_path / "release", db_url=db_url, quiet=True)
    submission = nbformat.read(str(exported / course.exercise_path(assignment)), as_version=4)
    assert submission.cells[0].source == colab.cell_source(STUDENTS)
    assert Validator()._get_changed_cells(copy.deepcopy(submission)) == []

    records = []
    log = logging.getLogger("test-restore")
    log.addHandler(type("Keep", (logging.Handler,), {"emit": lambda self, record: records.append(record)})())
    resources = {"nbgrader": {"notebook": assignment, "assignment": assignment, "db_url": db_url}}
    restored, _ = RestoreTestCells(log=log).preprocess(submission, resources)
    instructors = nbformat.read(str(ROOT / "solutions" / assignment / f"{assignment}.ipynb"), as_version=4)
    assert restored.cells[0].source == instructors.cells[0].source
    assert not [r.getMessage() for r in records if "colab_setup" in r.getMessage()]
