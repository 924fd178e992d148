"""The secrets of a course under a release, made once, and again only when a public source or a solution changes."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course
from course_site.leaks.files import posix, source_files
from course_site.leaks.regions import Secret
from course_site.leaks.release import release_of
from course_site.leaks.sources import PUBLIC_SOURCES
from course_site.leaks.targets import Secrets

_CACHE: dict[tuple, Secrets] = {}


def _state(root: Path) -> tuple:
    """What the secrets of ``root`` depend on: its public sources' and solutions' files, as stat."""
    stamp = []
    files = [rel for rel in source_files(root) if PurePosixPath(rel).parts[0] in PUBLIC_SOURCES]
    files += [posix(p.relative_to(root)) for p in sorted((root / "solutions").rglob("*.ipynb"))]
    for rel in sorted(set(files)):
        try:
            info = (root / rel).stat()
        except OSError:
            continue
        stamp.append((rel, info.st_mtime_ns, info.st_size))
    return tuple(stamp)


def secrets(root: Path = COURSE_ROOT, release: course.Release | None = None) -> Secrets:
    """:class:`Secrets` of ``root`` under ``release``, made again when a source changes."""
    root = Path(root).resolve()
    release = release_of(root, release)
    key = (str(root), release.key, hash(_state(root)))
    if key not in _CACHE:
        if len(_CACHE) >= 4:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = Secrets(root, release)
    return _CACHE[key]


def secret_lines(root: Path = COURSE_ROOT, release: course.Release | None = None) -> list[Secret]:
    """The secret lines of the notebooks under ``root/solutions`` (empty where there is none):
    the hidden tests' lines, and the reference solutions' lines of the assignments that
    ``release`` (default: the course's setting) does not release, that no public source shows."""
    return list(secrets(root, release).lines)
