"""The student repository: what students clone, open on Colab and pip-install from.

    python -m course_site.export DEST        # make student-repo DEST=... [RELEASED=... EDITION=...]

The course lives in two repositories. The instructor's, private, holds everything: ``solutions/``
(reference solutions and hidden tests), the book's sources, the tests. The students', public, is
the one that a term names in ``term.yml`` (``students_repository:``, its ``url`` and the ``release``
that students install: a git tag or commit; :func:`autograder.release.course.students_repository`), or, in
the open edition, ``_config.yml``'s ``repository:``. The export refuses to name the instructor's own
repository (``_config.yml``'s in a term, and the checkout's git remote ``origin``). This module writes
that repository for the term's release (:func:`autograder.release.course.release`):

- ``exercises/``, as git tracks it, the first cell of each notebook (the Colab set-up cell) made to
  install the students' repository at the pinned release (:func:`autograder.release.colab.retarget`);
- the packages as students get them (:func:`autograder.release.packages.write`): the solution module of
  each released chapter and of no other, and no module that builds on an unreleased one;
- the instructor notebook of each released chapter (``solutions/<a>/<a>.ipynb``: its reference
  solution is released, and its hidden tests let ``make check`` give the instructor's verdicts; its
  first cell made the students' too), and ``term.yml`` saying which chapters those are;
- a README, a Makefile (``venv``, ``lab``, ``validate``, ``check``), ``requirements.txt`` (and the
  instructor's ``constraints.txt``, which its ``venv`` installs with),
  ``pyproject.toml`` and ``.gitignore`` written for students, from ``course_site/templates/student/``;
  the pins in ``requirements.txt`` are the instructor's own (one list of versions). Its ``venv`` turns
  nbgrader's instructor tools (Create Assignment, the formgrader, the course list) off in the venv's
  own Jupyter configuration; its ``lab`` passes ``--allow-root`` where it runs as root;
- ``.student-repo`` (:data:`MARKER`), the students' repository and release it was written for.

No instructor tool is in it (:data:`autograder.release.packages.INSTRUCTOR_ONLY`).

``DEST`` is a new or empty folder, or the git checkout of an earlier export (its ``.git`` and
:data:`MARKER`, for the same students' repository): the next release updates it in place. Everything
in it but ``.git`` is removed and written again, so that a file the new release no longer has (a
file deleted from the course, anything added there by hand, a virtual environment) is gone, and
``git add -A`` commits exactly what the leak check passed.

The book is not part of it: the instructor publishes the built site (``make book``, which follows
the same release). The export is then checked by the leak check of :mod:`course_site.leaks`; an
export that fails it is removed again (all but ``.git``).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import colab, course, packages

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
    "safetensors",  # published checkpoints in the course's layers (attention_course.published.pretrained, chapter 9)
    "huggingface_hub",
    "tokenizers",
    "transformers",
    "triton",  # chapter 11's kernels (in its interpreter without a GPU), at the version that torch's CUDA build needs
)


MARKER = ".student-repo"  # written into every export: an update in place recognises its DEST by it
KEPT = ".git"  # what an update in place keeps of DEST: the history; everything else is written again


class ExportError(Exception):
    """A problem with the arguments or the sources that stops the export."""


class LeakFound(ExportError):
    """The export holds something students must not get; it has been removed."""


def _git_files(root: Path, *paths: str) -> list[str]:
    result = _git("-C", str(root), "ls-files", "-z", "--", *paths)
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


def _values(root: Path, release: course.Release, repo: course.Repository) -> dict[str, str]:
    config = yaml.safe_load((root / "_config.yml").read_text())
    project = (root / "pyproject.toml").read_text()
    version = next(
        (line.split("=", 1)[1].strip().strip('"') for line in project.splitlines() if line.startswith("version")),
        "0.1.0",
    )
    released = release.of(course.assignments(root))
    return {
        "title": str(config.get("title", "the course")),
        "site_url": str((config.get("html") or {}).get("baseurl") or repo.url),
        "repository_url": repo.url,
        "repository_name": repo.slug.split("/")[1],
        "released": ", ".join(f"`{name}`" for name in released) if released else "none yet",
        "version": version,
    }


def _normalised(url: str) -> str:
    """A repository's address as ``host/owner/name`` in lower case, however git writes it (https or ssh,
    with or without ``.git`` or a user name): two addresses of one repository compare equal."""
    address = re.sub(r"^[a-z][a-z0-9+.-]*://", "", url.strip().rstrip("/").removesuffix(".git").lower())
    address = re.sub(r"^[^@/]+@", "", address)
    return re.sub(r"^([^/:]+):(\d+/)?", r"\1/", address)


def _git(*args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise ExportError("git is not installed: the export takes the files that git tracks") from None


def _origin(root: Path) -> str | None:
    """The address of the checkout's git remote ``origin``, or None where it has none."""
    result = _git("-C", str(root), "remote", "get-url", "origin")
    return result.stdout.strip() or None if result.returncode == 0 else None


def students_target(release: course.Release, root: Path = COURSE_ROOT, environ=None) -> course.Repository:
    """The students' repository that the export names, at its release: in a term, ``term.yml``'s
    ``students_repository`` (or ``STUDENTS_REPOSITORY`` and ``STUDENTS_RELEASE``), which must be set;
    in the open edition, ``_config.yml``'s repository, as the committed notebooks name it."""
    if release.edition == "term" and course.students_repository(root, environ) is None:
        raise ExportError(
            f"student-repo: {course.SETTINGS_FILE} names no {course.STUDENTS_REPOSITORY}; set its url (your "
            "students' public repository) and release (the git tag you will give this export, such as "
            "'week-1'), or give STUDENTS_REPOSITORY=... STUDENTS_RELEASE=..."
        )
    return course.exercise_repository(release, root, environ)


def refuse_instructors_own(repo: course.Repository, release: course.Release, root: Path = COURSE_ROOT) -> None:
    """Raise :class:`ExportError` where ``repo`` is the instructor's own repository: ``_config.yml``'s in a
    term (the open edition publishes from it), or this checkout's git remote ``origin``."""
    own = {"_config.yml's repository.url": course.repository(root).url} if release.edition == "term" else {}
    origin = _origin(root)
    if origin:
        own["the git remote origin of this checkout"] = origin
    setting = (
        f"{course.STUDENTS_REPOSITORY}.url in {course.SETTINGS_FILE} (or STUDENTS_REPOSITORY)"
        if release.edition == "term"
        else "_config.yml's repository.url"
    )
    for what, url in own.items():
        if _normalised(url) == _normalised(repo.url):
            raise ExportError(
                f"student-repo: {repo.url} is {what}, the instructor's repository, not the students'; "
                f"set {setting} to the public repository your students clone"
            )


def _earlier_export(dest: Path) -> dict | None:
    """What the marker of the earlier export that ``dest`` is a git checkout of says, or None."""
    if not (dest / KEPT).exists() or not (dest / MARKER).is_file():
        return None
    try:
        said = yaml.safe_load((dest / MARKER).read_text())
    except yaml.YAMLError:
        return None
    return said if isinstance(said, dict) else None


def _check_dest(dest: Path, root: Path, repo: course.Repository) -> bool:
    """Refuse a ``dest`` that the export must not write; return whether it is an earlier export to update."""
    if dest.exists() and not dest.is_dir():
        raise ExportError(f"student-repo: DEST {dest} is a file; expected an empty folder or a new path")
    resolved = dest.resolve()
    if resolved == root or root in resolved.parents:
        raise ExportError(
            f"student-repo: DEST {dest} is inside the course repository {root}; expected a folder "
            "outside it (the student repository is a git repository of its own)"
        )
    entries = sorted(p.name for p in dest.iterdir()) if dest.is_dir() else []
    if not entries:
        return False
    earlier = _earlier_export(dest)
    if earlier is None:
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise ExportError(
            f"student-repo: DEST {dest} is not empty ({len(entries)} entries: {shown}); expected an empty "
            f"folder, a new path, or the git checkout of an earlier export (with {KEPT} and {MARKER}), so that "
            "nothing else is published"
        )
    if _normalised(str(earlier.get("repository", ""))) != _normalised(repo.url):
        raise ExportError(
            f"student-repo: DEST {dest} is the export for {earlier.get('repository')!r}, not for {repo.url}; "
            "expected a checkout of the students' repository that the settings name"
        )
    if _git("-C", str(dest), "rev-parse", "--quiet", "--verify", f"refs/tags/{repo.ref}").returncode == 0:
        raise ExportError(
            f"student-repo: DEST {dest} already has a tag {repo.ref}, an earlier release that students install; "
            f"name this release's new tag in {course.STUDENTS_REPOSITORY}.release (or STUDENTS_RELEASE)"
        )
    return True


def _clear(dest: Path) -> None:
    """Remove everything in ``dest`` but its git folder."""
    for child in dest.iterdir():
        if child.name == KEPT:
            continue
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()


def marker(repo: course.Repository) -> str:
    """The export's :data:`MARKER`: the students' repository and the release it was written for."""
    return (
        "# Written by the course's `make student-repo`: the students' repository and the release of this\n"
        "# export. The next `make student-repo DEST=<this checkout>` replaces every file here but .git.\n"
        + yaml.safe_dump({"repository": repo.url, "release": repo.ref})
    )


def _copy_notebook(root: Path, rel: str, dest: Path, repo: course.Repository) -> None:
    """Copy the notebook ``rel``, its Colab set-up cell made to install ``repo``."""
    (dest / rel).parent.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(str(root / rel), as_version=4)
    if colab.retarget(nb, repo):
        nbformat.write(nb, str(dest / rel))
    else:
        shutil.copy2(root / rel, dest / rel)


def write(
    dest: Path, release: course.Release, root: Path = COURSE_ROOT, repo: course.Repository | None = None
) -> list[str]:
    """Write the student repository for ``repo`` (default: :func:`students_target`) into ``dest``: empty,
    absent, or an earlier export's checkout, whose files but ``.git`` are replaced; return its files."""
    dest, root = Path(dest), Path(root).resolve()
    repo = repo or students_target(release, root)
    update = _check_dest(dest, root, repo)
    exercises = _git_files(root, "exercises")
    if not exercises:
        raise ExportError(f"student-repo: git tracks no exercises/ in {root}; run `make exercises` and commit")
    if update:
        _clear(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for rel in exercises + [
        name for name in _git_files(root, ".") if name.upper().startswith(("LICENSE", "COPYING")) and "/" not in name
    ]:
        if rel.endswith(".ipynb"):
            _copy_notebook(root, rel, dest, repo)
        else:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, dest / rel)
        written.append(rel)
    written += packages.write(dest, release, root, files=_git_files(root, *packages.PACKAGES))
    for rel in sorted(published_tests(release, root)):  # make check: the released chapters' tests
        _copy_notebook(root, rel, dest, repo)
        written.append(rel)
    (dest / course.SETTINGS_FILE).write_text(release_settings(release))
    (dest / MARKER).write_text(marker(repo))
    written += [course.SETTINGS_FILE, MARKER]
    values = _values(root, release, repo)
    for template, name in GENERATED.items():
        (dest / name).write_text(_fill((TEMPLATES / template).read_text(), values))
        written.append(name)
    (dest / "requirements.txt").write_text(student_requirements(root))
    for pins in ("constraints.txt", colab.PINS_FILE):  # what those pins pull in, pinned (on Colab: what the cell reads)
        shutil.copy2(root / pins, dest / pins)
    written += ["requirements.txt", "constraints.txt", colab.PINS_FILE]
    return sorted(written)


def student_repo(
    dest: Path,
    release: course.Release | None = None,
    root: Path = COURSE_ROOT,
    repo: course.Repository | None = None,
):
    """Write the student repository for ``repo`` (default: :func:`students_target`) and run the leak check
    on it; returns (files, report).

    Raises :class:`ExportError` for the instructor's own repository, a bad ``dest`` and when the check
    fails (the export is then removed again, all but an earlier export's ``.git``).
    """
    from course_site import leaks

    root = Path(root).resolve()
    release = release or course.release(root)
    repo = repo or students_target(release, root)
    refuse_instructors_own(repo, release, root)
    dest = Path(dest)
    created = not dest.exists()
    files = write(dest, release, root, repo)
    report = leaks.scan(dest, root, release, published=published_tests(release, root))
    if not report.ok:
        shutil.rmtree(dest) if created else _clear(dest)
        raise LeakFound(
            "student-repo: the export failed the leak check and was removed; fix the sources:\n"
            + "\n".join(f"  {problem}" for problem in report.problems)
        )
    return files, report


def next_steps(dest: Path, repo: course.Repository, release: course.Release, update: bool) -> str:
    """The commands that publish the export: commit it, tag it with the release that its cells install
    (a term's), and push both to the term's students' repository. The open edition names no students'
    repository: its notebooks install from ``_config.yml``'s repository (``repo``), the course's own public one,
    which the export would overwrite; its copy goes to a new repository of the instructor's choosing."""
    if release.edition != "term":
        where = "" if update else " && git remote add origin https://github.com/<you>/<new-repository>.git"
        first = "" if update else " && git init -b main"
        return (
            f"cd {dest}{first} && git add -A && git commit -m 'Open edition'{where} && git push -u origin main\n"
            f"  (the open edition has no students' repository: its README and notebooks send students to "
            f"{repo.url}, the course's own (_config.yml's repository), whose packages they install at {repo.ref}. Push "
            f"this copy to a new repository of your own, never to {repo.url}, which it would replace; for a term, set "
            f"{course.STUDENTS_REPOSITORY} in {course.SETTINGS_FILE} and EDITION=term.)"
        )
    tag = f" && git tag {repo.ref}"
    pushed = f"main {repo.ref}"
    if update:
        return f"cd {dest} && git add -A && git commit -m 'Release {repo.ref}'{tag} && git push origin {pushed}"
    return (
        f"cd {dest} && git init -b main && git add -A && git commit -m 'Release {repo.ref}'{tag} "
        f"&& git remote add origin {repo.url}.git && git push -u origin {pushed}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_site.export", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "dest", type=Path, metavar="DEST", help="a new or empty folder, or an earlier export's checkout"
    )
    parser.add_argument("--root", type=Path, default=COURSE_ROOT, help="the course repository (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        release = course.release(args.root)
        repo = students_target(release, args.root)
        update = args.dest.is_dir() and _earlier_export(args.dest) is not None
        files, report = student_repo(args.dest, release, args.root, repo)
    except course.SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except LeakFound as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    done = "updated the earlier export in" if update else "wrote"
    print(f"{done} {args.dest}: {len(files)} files for {release.describe()}, installing {repo.pip_spec()}")
    print("the leak check found nothing to withhold in it")
    print(f"Next: {next_steps(args.dest, repo, release, update)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
