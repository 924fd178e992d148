"""The leak check of a folder (`check`): every file under it read once, each rule run on each text file."""

from __future__ import annotations

import time
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course
from course_site.leaks.cache import secrets
from course_site.leaks.files import digest, is_binary, walk
from course_site.leaks.known import KnownFiles
from course_site.leaks.markers import MarkerDocuments
from course_site.leaks.published import Reader
from course_site.leaks.release import release_of
from course_site.leaks.report import LeakReport, PublishError
from course_site.leaks.rules import RULES, markers
from course_site.leaks.shipped import Shipped
from course_site.leaks.solution_files import SolutionFiles


def scan(
    directory: Path,
    root: Path = COURSE_ROOT,
    release: course.Release | None = None,
    published: frozenset[str] = frozenset(),
) -> LeakReport:
    """Scan every file under ``directory`` for solutions, nbgrader markers, secret lines and the
    code of the reference solutions that ``release`` (default: :func:`autograder.release.course.release`
    of ``root``) does not release.

    ``published``: files of ``solutions/`` that the folder ships by design, each at its own path and
    identical to the course's but for the Colab set-up cell (the student export's instructor notebooks of
    released chapters, for ``make check``); a released assignment's only. Anything else of ``solutions/``
    is a problem."""
    started = time.perf_counter()
    directory, root = Path(directory), Path(root)
    _refuse_arguments(directory, root)
    release = release_of(root, release)
    report = LeakReport(directory, release=release)
    solution_files = SolutionFiles(root)
    report.has_solutions = solution_files.exists
    found = secrets(root, release)
    report.secrets, report.notebooks = len(found.lines), len({s.notebook for s in found.lines})
    report.regions = len(found.code.fingerprints)
    report.unchecked = sorted({f"{r.assignment}/{r.item}" for r in found.code.unchecked})
    reader = Reader(found, KnownFiles(root, found.public_digests), MarkerDocuments(root))
    shipped = Shipped(root, release, published)
    for path, rel in walk(directory):
        if shipped.holds(path, rel):
            report.known += 1  # a released chapter's notebook, shipped by design
            continue
        _check_file(report, path, rel, solution_files, reader)
    report.seconds = time.perf_counter() - started
    return report


def _refuse_arguments(directory: Path, root: Path) -> None:
    """:class:`PublishError` where ``directory`` or ``root`` is not a folder."""
    if not directory.exists():
        raise PublishError(
            f"check: DIR {directory} does not exist (expected a built site such as "
            "_build/html, or a folder written by student-repo)"
        )
    if not directory.is_dir():
        raise PublishError(
            f"check: DIR {directory} is not a folder (expected a built site such as "
            "_build/html, or a folder written by student-repo)"
        )
    if not root.is_dir():
        raise PublishError(f"check: --root {root} is not a folder (expected the course repository)")


def _check_file(report: LeakReport, path: Path, rel: str, solution_files: SolutionFiles, reader: Reader) -> None:
    """One published file: its path and bytes against ``solutions/``, then, a text file, every rule."""
    report.problems += solution_files.by_path(rel)
    try:
        data = path.read_bytes()
    except OSError:
        return  # a broken link, a file that vanished
    data_digest = digest(data)
    report.problems += solution_files.by_content(rel, data_digest)
    if is_binary(data):
        report.binary += 1
        return
    report.files += 1
    file = reader.read(rel, data, data_digest)
    for rule in RULES:
        report.problems += rule(file)
    if markers.allowed_here(file):
        report.marker_exempt.append(rel)
    if file.known:
        report.known += 1
