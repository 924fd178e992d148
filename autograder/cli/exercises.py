"""Generate ``exercises/`` from ``solutions/`` (``make exercises``), or check that it is up to date.

Every notebook starts with the Colab set-up cell for the repository that ``_config.yml`` names
(:mod:`autograder.release.colab`); generating writes it into ``solutions/`` first, and the check fails
while a solution notebook's cell is out of date. So with the notebook's kernel metadata
(:func:`kernel_metadata`): what JupyterLab writes into a notebook as its kernel starts, so that an exercise
opened and saved without an edit is the file that git tracks.

    python -m autograder.cli.exercises            # regenerate exercises/ (all assignments)
    python -m autograder.cli.exercises NAME ...   # only these assignments
    python -m autograder.cli.exercises --check    # exit 1 if exercises/ differs from a fresh generation
"""

from __future__ import annotations

import argparse
import copy
import filecmp
import sys
import tempfile
from pathlib import Path

import nbformat

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.grading.run_nbgrader import generate
from autograder.release import colab, course
from autograder.release.course import repository


def kernel_metadata() -> dict:
    """The notebook metadata that JupyterLab writes as a notebook's kernel starts: ``kernelspec`` as ipykernel
    installs it (its name, display name and language) and ``language_info`` as the kernel reports it. Lab marks
    a notebook whose metadata differs modified, and saves it so; only the Python ``version`` differs from one
    machine to another (a student on another Python sees that line change)."""
    from ipykernel.ipkernel import IPythonKernel
    from ipykernel.kernelspec import KERNEL_NAME, get_kernel_dict

    spec = get_kernel_dict()
    return {
        "kernelspec": {"display_name": spec["display_name"], "language": spec["language"], "name": KERNEL_NAME},
        "language_info": dict(IPythonKernel.language_info),
    }


def _without_version(metadata: dict) -> dict:
    return {**metadata, "language_info": {k: v for k, v in metadata.get("language_info", {}).items() if k != "version"}}


def holds_kernel_metadata(nb, kernel: dict) -> bool:
    """Whether ``nb`` holds ``kernel``'s metadata, whichever Python's version it records."""
    held = {key: nb.metadata.get(key) or {} for key in kernel}
    return "version" in held["language_info"] and _without_version(held) == _without_version(kernel)


def sync_colab_cells(assignments: list[str] | None = None, root: Path = COURSE_ROOT) -> list[str]:
    """Give each solution notebook the current Colab set-up cell as its first cell, and the kernel's metadata
    (:func:`kernel_metadata`, the version it records kept where the rest is current); return those changed."""
    repo = repository(root)
    kernel = kernel_metadata()
    changed = []
    for name in assignments or course.assignments(root):
        path = course.notebook_path(name, root=root)
        nb = notebooks.read(path)
        stale_kernel = not holds_kernel_metadata(nb, kernel)
        if stale_kernel:
            nb.metadata.update(copy.deepcopy(kernel))
        if colab.put_first(nb, repo) or stale_kernel:
            nbformat.write(nb, str(path))
            changed.append(name)
    return changed


def stale_colab_cells(root: Path = COURSE_ROOT) -> list[str]:
    repo = repository(root)
    kernel = kernel_metadata()
    problems = []
    for name in course.assignments(root):
        nb = notebooks.read(course.notebook_path(name, root=root))
        if not colab.is_current(nb, repo):
            problems.append(
                f"out of date: solutions/{name}/{name}.ipynb does not start with the Colab set-up cell for {repo.url}"
            )
        if not holds_kernel_metadata(nb, kernel):
            problems.append(
                f"out of date: solutions/{name}/{name}.ipynb does not hold the kernel's metadata (kernelspec, "
                "language_info) that JupyterLab writes as the kernel starts"
            )
    return problems


def released_files(folder: Path) -> set[Path]:
    """The files under ``folder`` (``exercises/``), relative to it, but for JupyterLab's checkpoints
    (``.ipynb_checkpoints/``, which saving a notebook there writes and git ignores)."""
    if not folder.exists():
        return set()
    return {
        p.relative_to(folder)
        for p in folder.rglob("*")
        if p.is_file() and ".ipynb_checkpoints" not in p.relative_to(folder).parts
    }


def differences(root: Path = COURSE_ROOT) -> list[str]:
    """Files of exercises/ that differ from a fresh generation (missing, extra or changed)."""
    root = Path(root)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "release"
        generate(into=fresh, db_url=f"sqlite:///{tmp}/gradebook.db", root=root, quiet=True)
        committed = root / "exercises"
        ours = {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
        theirs = released_files(committed)
        problems = stale_colab_cells(root)
        problems += [f"missing: exercises/{p}" for p in sorted(ours - theirs)]
        problems += [f"not generated from solutions/: exercises/{p}" for p in sorted(theirs - ours)]
        problems += [
            f"out of date: exercises/{p}"
            for p in sorted(ours & theirs)
            if not filecmp.cmp(fresh / p, committed / p, shallow=False)
        ]
        return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="assignment names (default: all under solutions/)")
    parser.add_argument("--check", action="store_true", help="only compare exercises/ with a fresh generation")
    args = parser.parse_args(argv)
    if args.check:
        problems = differences()
        for line in problems:
            print(line)
        if problems:
            print("exercises/ is not what solutions/ generates: run `make exercises` and commit the result.")
            return 1
        print("exercises/ is up to date with solutions/.")
        return 0
    unknown = sorted(set(args.assignments) - set(course.assignments()))
    if unknown:
        parser.error(f"no such assignment under solutions/: {', '.join(unknown)}")
    for name in sync_colab_cells(args.assignments or None):
        print(f"Updated the Colab set-up cell or kernel metadata of solutions/{name}/{name}.ipynb")
    generate(args.assignments or None)
    print(f"Generated exercises/ for: {', '.join(args.assignments or course.assignments())}")
    note = course.repository_note(course.release())
    if note:
        print(f"note: {note}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
