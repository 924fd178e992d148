"""The course's packages as students get them: no reference solution of a chapter that is not released.

Students receive ``attention_course`` and ``autograder`` three ways: in the student repository
(``make student-repo``), in the package that an exercise's first cell installs on Colab (built
from that repository) and in the grading sandbox, where a submission runs. All three are written
by :func:`write`, for one :class:`~autograder.release.course.Release`:

- ``attention_course/solutions/<assignment>.py`` for each released assignment, generated from its
  solution notebook (:func:`attention_course.solutions.module_source`), and for no other;
- every other module of the two packages, except the instructor's tools (:data:`INSTRUCTOR_ONLY`)
  and those that need an unreleased solution: a module that imports
  ``attention_course.solutions.<assignment>``, directly or through another module of the course, is
  left out until that assignment is released (:func:`requirements`).

The sandbox's copies are written once per release, by a :class:`SandboxPackages` (a
:class:`~autograder.grading.grader.Grader`'s own, or the process's, :func:`shared`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import py_compile
import shutil
import sys
import tempfile
import threading
from pathlib import Path, PurePosixPath

from attention_course import solutions
from attention_course.tooling import syntax
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course, reference

PACKAGES = ("attention_course", "autograder")
SOLUTIONS = "attention_course/solutions"
# The instructor's tools: grading a class (make grade's phases, under grading/), nbgrader's plugins and
# exchange, the similarity report and its clone detector (the leak check's too), generating the exercises.
# No copy that students get holds them (nor needs them: make validate and make check do not), and they need
# packages that students do not install. An entry ending in "/" is a folder: every file under it.
INSTRUCTOR_ONLY = frozenset(
    {
        "autograder/grading/classroom.py",
        "autograder/grading/class_report.py",
        "autograder/grading/class_pages.py",
        "autograder/cli/class_report.py",
        "autograder/cli/grade.py",
        "autograder/cli/exercises.py",
        "autograder/grading/run_nbgrader.py",
        "autograder/cli/similarity.py",
        "autograder/release/colab_pins.py",
        "autograder/grading/feedback.py",
        "autograder/grading/feedback_pages.py",
        "autograder/grading/gradesheet.py",
        "autograder/grading/handoff.py",
        "autograder/grading/nbgrader_log.py",
        "autograder/grading/phases.py",
        "autograder/grading/sandboxed.py",
        "autograder/grading/submissions.py",
        "autograder/similarity/",
        "autograder/exchange/",
        "autograder/nbgrader/",
    }
)
SKIP_PARTS = frozenset({"__pycache__", ".ipynb_checkpoints"})


def package_files(root: Path | None = None) -> list[str]:
    """The files of the two packages under ``root`` (default: where this code is; posix paths
    relative to it), caches left out."""
    root = Path(root or course.COURSE_ROOT)
    files = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*")):
            rel = PurePosixPath(*path.relative_to(root).parts)
            if path.is_file() and not SKIP_PARTS & set(rel.parts) and path.suffix not in (".pyc", ".pyo"):
                files.append(rel.as_posix())
    return files


def _module_name(rel: str) -> str:
    parts = PurePosixPath(rel).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.lru_cache(maxsize=4096)
def _imported(source: str, module: str, is_package: bool) -> frozenset[str]:
    """The absolute names of the modules that ``source`` (the module ``module``) imports (each module parsed
    once per process: the leak check and the exports ask again for every copy of the course and release)."""
    names = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(syntax.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(names)


def requirements(root: Path | None = None, files: list[str] | None = None) -> dict[str, frozenset[str]]:
    """For every module of the packages (a path relative to ``root``), the assignments whose
    reference solutions it needs, directly or through the course's other modules."""
    root = Path(root or course.COURSE_ROOT)
    files = [f for f in (files if files is not None else package_files(root)) if f.endswith(".py")]
    by_module = {_module_name(rel): rel for rel in files}
    direct: dict[str, set[str]] = {}
    uses: dict[str, set[str]] = {}
    prefix = reference.PACKAGE + "."
    for module, rel in by_module.items():
        imported = _imported((root / rel).read_text(), module, rel.endswith("/__init__.py"))
        direct[module] = {name[len(prefix) :].split(".")[0] for name in imported if name.startswith(prefix)}
        uses[module] = {name for name in imported if name in by_module and name != module}
    needed: dict[str, frozenset[str]] = {}

    def visit(module: str, stack: tuple[str, ...] = ()) -> frozenset[str]:
        if module in needed:
            return needed[module]
        found = set(direct[module])
        for other in uses[module]:
            if other not in stack:
                found |= visit(other, stack + (module,))
        needed[module] = frozenset(found)
        return needed[module]

    return {rel: visit(module) for module, rel in by_module.items()}


def instructor_only(rel: str) -> bool:
    """Whether the package file ``rel`` is one of the instructor's tools (:data:`INSTRUCTOR_ONLY`)."""
    return any(rel == tool or (tool.endswith("/") and rel.startswith(tool)) for tool in INSTRUCTOR_ONLY)


def allowed(release: course.Release, root: Path | None = None, files: list[str] | None = None) -> list[str]:
    """The package files that students get under ``release`` (generated solution modules aside)."""
    root = Path(root or course.COURSE_ROOT)
    files = files if files is not None else package_files(root)
    needs = requirements(root, files)
    kept = []
    for rel in files:
        if rel.startswith(SOLUTIONS + "/") and rel != f"{SOLUTIONS}/__init__.py":
            continue  # a solution module is generated from its notebook, never copied
        if instructor_only(rel):
            continue
        if all(release.is_released(a) for a in needs.get(rel, ())):
            kept.append(rel)
    return kept


def write(dest: Path, release: course.Release, root: Path | None = None, files: list[str] | None = None) -> list[str]:
    """Write the students' packages under ``dest``; return the files written (relative to ``dest``).

    The packages' code comes from ``root`` (default: where this code is), the solutions from
    ``root``'s ``solutions/`` (default: this course's).
    """
    code_root, dest = Path(root or course.COURSE_ROOT), Path(dest)
    notebooks_root = Path(root or COURSE_ROOT)
    written = []
    for rel in allowed(release, code_root, files):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(code_root / rel, target)
        written.append(rel)
    for assignment in release.of(course.assignments(notebooks_root)):
        rel = f"{SOLUTIONS}/{assignment}.py"
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(solutions.module_source(assignment, notebooks_root))
        written.append(rel)
    return sorted(written)


def compile_bytecode(folder: Path) -> None:
    """Compile every module under ``folder`` into the ``__pycache__`` beside it, where the sandbox's Python
    (which writes no bytecode, and has no ``PYTHONPYCACHEPREFIX``) finds it: else every sandbox compiles the
    course's packages again as it starts. Written there whatever this process's own prefix is."""
    for path in sorted(Path(folder).rglob("*.py")):
        cached = path.parent / "__pycache__" / f"{path.stem}.{sys.implementation.cache_tag}.pyc"
        py_compile.compile(str(path), cfile=str(cached), doraise=True)


TEMPORARY_PREFIX = "attention-packages-"  # then the pid of the process that made the folder


def remove_orphans(folder: Path | None = None) -> list[Path]:
    """Remove the packages' folders in ``folder`` (default: TMPDIR) that this user's processes made and that
    outlived them: a grader killed (a cluster worker its nanny ended, `make grade` killed) removes nothing itself.
    The folders removed."""
    removed = []
    for path in Path(folder or tempfile.gettempdir()).glob(f"{TEMPORARY_PREFIX}*-*"):
        pid = path.name[len(TEMPORARY_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or path.is_symlink() or not path.is_dir() or path.stat().st_uid != os.getuid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:  # its process has ended
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except PermissionError:  # another user's process holds the pid: still running
            pass
    return removed


class SandboxPackages:
    """The folders of the students' packages that the grading sandbox mounts, one per release, each written
    once, into a temporary folder of this object's (removed by :meth:`close`, or when the process ends; where
    the process is killed, by the next one that makes such a folder: :func:`remove_orphans`)."""

    def __init__(self):
        self._folders: dict[tuple[str, str], Path] = {}
        self._lock = threading.Lock()
        self._temporary: tempfile.TemporaryDirectory | None = None

    def folder(self, release: course.Release, root: Path | None = None) -> Path:
        """The students' packages for ``release`` (code and notebooks from ``root``, default: where this code
        is), written on the first request: what the grading sandbox mounts and puts on its ``sys.path``."""
        key = (release.key, str(root))
        with self._lock:
            folder = self._folders.get(key)
            if folder is None or not folder.is_dir():
                if self._temporary is None:
                    remove_orphans()
                    self._temporary = tempfile.TemporaryDirectory(prefix=f"{TEMPORARY_PREFIX}{os.getpid()}-")
                folder = Path(self._temporary.name) / hashlib.sha256(repr(key).encode()).hexdigest()[:16]
                if folder.exists():
                    shutil.rmtree(folder)
                write(folder, release, root)  # root None: code and notebooks here
                compile_bytecode(folder)
                for path in [folder, *folder.rglob("*")]:  # readable by the sandbox's unprivileged uid
                    path.chmod(0o755 if path.is_dir() else 0o644)
                self._folders[key] = folder
            return folder

    def close(self) -> None:
        """Remove every folder written (a sandbox still using one must have ended)."""
        with self._lock:
            if self._temporary is not None:
                self._temporary.cleanup()
            self._temporary, self._folders = None, {}


_shared: SandboxPackages | None = None  # the process's own, made by the first call of shared()
_shared_lock = threading.Lock()


def shared() -> SandboxPackages:
    """The process's one :class:`SandboxPackages`, for what holds none of its own: a grading without a
    :class:`~autograder.grading.grader.Grader`, the warm pool, a sandbox started on its own."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = SandboxPackages()
        return _shared


def sandbox_packages(release: course.Release, root: Path | None = None) -> Path:
    """A folder holding the students' packages for ``release``, written once per process (:func:`shared`):
    what the grading sandbox mounts and puts on its ``sys.path``."""
    return shared().folder(release, root)
