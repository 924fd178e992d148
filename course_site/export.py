"""The student repository: what students clone, open on Colab and pip-install from.

    python -m course_site.export DEST        # make student-repo DEST=... [RELEASED=... EDITION=...]

The course lives in two repositories. The instructor's, private, holds everything: ``solutions/``
(reference solutions and hidden tests), the book's sources, the tests. The students', public, is
the one that ``_config.yml``'s ``repository:`` names: the book's "Open in Colab" links open its
exercises, and the first cell of every exercise ``pip install``\\ s its packages. This module
writes that repository for the term's release (:func:`autograder.course.release`):

- ``exercises/``, as git tracks it;
- the packages as students get them (:func:`autograder.packages.write`): the solution module of
  each released chapter and of no other, and no module that builds on an unreleased one;
- the instructor notebook of each released chapter (``solutions/<a>/<a>.ipynb``: its reference
  solution is released, and its hidden tests let ``make check`` give the instructor's verdicts),
  and ``term.yml`` saying which chapters those are;
- a README, a Makefile (``venv``, ``lab``, ``validate``, ``check``), ``requirements.txt``,
  ``pyproject.toml`` and ``.gitignore`` written for students, from ``course_site/templates/student/``;
  the pins in ``requirements.txt`` are the instructor's own (one list of versions). Its ``venv`` turns
  nbgrader's instructor tools (Create Assignment, the formgrader, the course list) off in the venv's
  own Jupyter configuration; its ``lab`` passes ``--allow-root`` where it runs as root.

No instructor tool is in it (:data:`autograder.packages.INSTRUCTOR_ONLY`).

The book is not part of it: the instructor publishes the built site (``make book``, which follows
the same release). The export is then checked by the leak check of :mod:`course_site.leaks`; an
export that fails it is removed again.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from attention_course.notebooks import COURSE_ROOT
from autograder import course, packages
from autograder.course import repository

TEMPLATES = Path(__file__).resolve().parent / "templates" / "student"
GENERATED = {
    "README.md": "README.md",
    "Makefile": "Makefile",
    "pyproject.toml": "pyproject.toml",
    "gitignore": ".gitignore",
}
# The instructor's pins that students need: the exercises' libraries and Jupyter.
STUDENT_REQUIREMENTS = (
    "uv",  # first, by pip: it installs the rest (the students' Makefile)
    "torch",
    "numpy",
    "matplotlib",
    "tqdm",
    "pyyaml",
    "nbformat",
    "nbclient",
    "ipykernel",
    "jupyterlab",
    "nbgrader",  # the cells' roles (make validate, make check), and a hub's Validate button
    "msgspec",  # the sandbox's messages (make check grades in the sandbox)
    "safetensors",  # published checkpoints in the course's layers (attention_course.pretrained, chapter 9)
    "huggingface_hub",
    "tokenizers",
    "transformers",
)


class ExportError(Exception):
    """A problem with the arguments or the sources that stops the export."""


class LeakFound(ExportError):
    """The export holds something students must not get; it has been removed."""


def _git_files(root: Path, *paths: str) -> list[str]:
    try:
        result = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--", *paths], capture_output=True, text=True
        )
    except FileNotFoundError:
        raise ExportError("git is not installed: the export takes the files that git tracks") from None
    if result.returncode != 0:
        raise ExportError(
            f"{root} is not a git repository that git can read (the export takes the files that "
            f"git tracks): {result.stderr.strip()}"
        )
    return sorted(name for name in result.stdout.split("\0") if name and (root / name).is_file())


def student_requirements(root: Path) -> str:
    """The lines of the instructor's requirements.txt that students need, pins unchanged."""
    lines = [
        "# The exercises' libraries, pinned as in the course's own repository.",
        "# torch: on a machine with a GPU, pip installs the matching CUDA build of this version.",
    ]
    found = set()
    for line in (root / "requirements.txt").read_text().splitlines():
        name = line.split("==")[0].split(">=")[0].strip().lower()
        if name in STUDENT_REQUIREMENTS and not line.lstrip().startswith("#"):
            lines.append(line.strip())
            found.add(name)
    missing = sorted(set(STUDENT_REQUIREMENTS) - found)
    if missing:
        raise ExportError(
            f"requirements.txt pins no version of {', '.join(missing)}, which the students' requirements need"
        )
    lines += ["# This repository's packages (attention_course, autograder), editable.", "-e ."]
    return "\n".join(lines) + "\n"


def release_settings(release: course.Release) -> str:
    """The students' ``term.yml``: the release they have, so that their checks know it as the
    instructor's do (a visible test names a known mistake only in a released chapter)."""
    return (
        "# The release this repository was exported for (make student-repo): the chapters whose\n"
        "# solutions, and hidden tests for make check, are here.\n"
        + yaml.safe_dump({"edition": release.edition, "released": sorted(release.released)})
    )


def published_tests(release: course.Release, root: Path = COURSE_ROOT) -> frozenset[str]:
    """The instructor notebooks that the export ships: those of the released chapters (``make check``)."""
    return frozenset(f"solutions/{a}/{a}.ipynb" for a in release.of(course.assignments(root)))


def _fill(template: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        template = template.replace("{{" + key + "}}", value)
    if "{{" in template:
        raise ExportError(
            f"a student template has an unknown placeholder near {template[template.index('{{') :][:40]!r}"
        )
    return template


def _values(root: Path, release: course.Release) -> dict[str, str]:
    config = yaml.safe_load((root / "_config.yml").read_text())
    project = (root / "pyproject.toml").read_text()
    version = next(
        (line.split("=", 1)[1].strip().strip('"') for line in project.splitlines() if line.startswith("version")),
        "0.1.0",
    )
    repo = repository(root)
    released = release.of(course.assignments(root))
    return {
        "title": str(config.get("title", "the course")),
        "site_url": str((config.get("html") or {}).get("baseurl") or repo.url),
        "repository_url": repo.url,
        "repository_name": repo.slug.split("/")[1],
        "released": ", ".join(f"`{name}`" for name in released) if released else "none yet",
        "version": version,
    }


def _check_dest(dest: Path, root: Path) -> None:
    if dest.exists() and not dest.is_dir():
        raise ExportError(f"student-repo: DEST {dest} is a file; expected an empty folder or a new path")
    if dest.is_dir():
        entries = sorted(p.name for p in dest.iterdir())
        if entries:
            shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
            raise ExportError(
                f"student-repo: DEST {dest} is not empty ({len(entries)} entries: {shown}); "
                "expected an empty folder or a new path, so that nothing else is published"
            )
    resolved = dest.resolve()
    if resolved == root or root in resolved.parents:
        raise ExportError(
            f"student-repo: DEST {dest} is inside the course repository {root}; expected a folder "
            "outside it (the student repository is a git repository of its own)"
        )


def write(dest: Path, release: course.Release, root: Path = COURSE_ROOT) -> list[str]:
    """Write the student repository into ``dest`` (which must be empty or absent); return its files."""
    dest, root = Path(dest), Path(root).resolve()
    _check_dest(dest, root)
    exercises = _git_files(root, "exercises")
    if not exercises:
        raise ExportError(f"student-repo: git tracks no exercises/ in {root}; run `make exercises` and commit")
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for rel in exercises + [
        name for name in _git_files(root, ".") if name.upper().startswith(("LICENSE", "COPYING")) and "/" not in name
    ]:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)
        written.append(rel)
    written += packages.write(dest, release, root, files=_git_files(root, *packages.PACKAGES))
    for assignment in release.of(course.assignments(root)):  # make check: the released chapters' tests
        rel = f"solutions/{assignment}/{assignment}.ipynb"
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)
        written.append(rel)
    (dest / course.SETTINGS_FILE).write_text(release_settings(release))
    written.append(course.SETTINGS_FILE)
    values = _values(root, release)
    for template, name in GENERATED.items():
        (dest / name).write_text(_fill((TEMPLATES / template).read_text(), values))
        written.append(name)
    (dest / "requirements.txt").write_text(student_requirements(root))
    written.append("requirements.txt")
    return sorted(written)


def student_repo(dest: Path, release: course.Release | None = None, root: Path = COURSE_ROOT):
    """Write the student repository and run the leak check on it; returns (files, report).

    Raises :class:`ExportError` for a bad ``dest`` and when the check fails (the export is then
    removed again).
    """
    from course_site import leaks

    root = Path(root).resolve()
    release = release or course.release(root)
    dest = Path(dest)
    created = not dest.exists()
    files = write(dest, release, root)
    report = leaks.check(dest, root, release, published=published_tests(release, root))
    if not report.ok:
        if created:
            shutil.rmtree(dest)
        else:
            for child in dest.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        raise LeakFound(
            "student-repo: the export failed the leak check and was removed; fix the sources:\n"
            + "\n".join(f"  {problem}" for problem in report.problems)
        )
    return files, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_site.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, metavar="DEST", help="an empty folder, or one that does not exist")
    parser.add_argument("--root", type=Path, default=COURSE_ROOT, help="the course repository (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        release = course.release(args.root)
        files, report = student_repo(args.dest, release, args.root)
    except course.SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except LeakFound as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    note = course.repository_note(release, args.root)
    if note:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {len(files)} files into {args.dest} for {release.describe()}")
    print("the leak check found nothing to withhold in it")
    print(
        f"Next: cd {args.dest} && git init -b main && git add -A && git commit -m 'Course release' "
        "&& git remote add origin <student repository URL> && git push"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
