"""The public sources: what students get legitimately under a release, against which secrets are discounted."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from attention_course import solutions
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course, packages
from course_site.leaks.files import PRIVATE_DIRS, read_text, source_files
from course_site.leaks.release import release_of

# The folders of the repository whose files students get (public_sources): the exercises, and the
# packages as autograder.release.packages gives them for the release. Not the book's sources (the term
# edition publishes no page sources), not the instructor's README or tools.
PUBLIC_SOURCES = ("exercises", "attention_course", "autograder")
FETCHED = ("book/_static/mathjax/", "book/_static/mathjax.partial/")  # third-party, fetched at build time


def public_sources(root: Path = COURSE_ROOT, release: course.Release | None = None) -> list[tuple[str, str]]:
    """(path, text) of what students get legitimately under ``release`` (default: the course's
    setting): the exercises, the package files that :func:`autograder.release.packages.allowed` gives, and
    the reference modules of the released assignments."""
    root = Path(root)
    release = release_of(root, release)
    has_packages = all((root / package).is_dir() for package in packages.PACKAGES)
    allowed = set(packages.allowed(release, root)) if has_packages else set()
    sources = []
    for rel in source_files(root):
        pure = PurePosixPath(rel)
        top = pure.parts[0]
        if top not in PUBLIC_SOURCES or rel.startswith(FETCHED):
            continue
        if top in packages.PACKAGES:
            if rel not in allowed:
                continue
        elif any(part in PRIVATE_DIRS for part in pure.parts):
            continue
        text = read_text(root / rel)
        if text is None:
            continue
        sources.append((rel, text))
    for assignment in release.of(course.assignments(root)):
        sources.append((f"{packages.SOLUTIONS}/{assignment}.py", solutions.module_source(assignment, root)))
    return sources


def quotes_checked(source: str) -> bool:
    """Whether a public source is a hand-written module of the packages, whose docstrings and comments
    are checked for quoted answers (the exercises and the generated reference modules of released
    chapters are public by design, whole)."""
    return (
        source.endswith(".py")
        and PurePosixPath(source).parts[0] in packages.PACKAGES
        and not source.startswith(packages.SOLUTIONS + "/")
    )
