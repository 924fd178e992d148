"""Files of solutions/ in a published folder: any in a folder named solutions, or a copy of one of the course's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from autograder.release import packages
from course_site.leaks.files import digest as digest_of
from course_site.leaks.files import posix
from course_site.leaks.report import Problem


def in_solutions_folder(rel: str) -> bool:
    """Whether ``rel`` lies in a folder named ``solutions``, other than the package of the
    released reference modules (``attention_course/solutions``, checked by its content)."""
    parts = PurePosixPath(rel).parts[:-1]
    package = tuple(PurePosixPath(packages.SOLUTIONS).parts)
    return any(
        part == "solutions" and tuple(parts[max(0, i - len(package) + 1) : i + 1]) != package
        for i, part in enumerate(parts)
    )


class SolutionFiles:
    """The course's ``solutions/`` (:attr:`exists`), and its files by digest (the first path of each)."""

    def __init__(self, root: Path):
        folder = root / "solutions"
        self.exists = folder.is_dir()
        self.digests: dict[str, str] = {}
        if self.exists:
            for path in folder.rglob("*"):
                if path.is_file():
                    self.digests.setdefault(digest_of(path.read_bytes()), posix(path.relative_to(root)))

    def by_path(self, rel: str) -> Iterator[Problem]:
        """A published file in a folder named ``solutions``."""
        if in_solutions_folder(rel):
            yield Problem(rel, "a file from a solutions/ folder")

    def by_content(self, rel: str, digest: str) -> Iterator[Problem]:
        """A published file identical to one of ``solutions/``, text or binary."""
        if digest in self.digests:
            yield Problem(rel, f"a copy of {self.digests[digest]}")
