"""The instructor notebooks of released chapters that an export ships by design, recognised but for their Colab cell."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import nbformat

from autograder.release import colab, course
from course_site.leaks.files import digest
from course_site.leaks.report import PublishError


def shipped_digest(data: bytes) -> str:
    """The digest of an instructor notebook that an export ships, but for its Colab set-up cell, which the
    export writes for the students' repository (:func:`autograder.release.colab.retarget`): a set-up cell of any
    repository, exactly as the course writes one, digests alike; anything else in it counts."""
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception:  # not a notebook that nbformat reads: compared as bytes
        return digest(data)
    if nb.cells and colab.is_colab_cell(nb.cells[0]) and colab.repository_of(nb.cells[0].source) is not None:
        nb.cells[0].source = ""
        nb.cells[0].metadata.get("nbgrader", {}).pop("checksum", None)
    return digest(nbformat.writes(nb).encode())


class Shipped:
    """The files of ``solutions/`` that a folder ships by design (``published``), each at its own path:
    a released assignment's instructor notebook only, else :class:`PublishError`."""

    def __init__(self, root: Path, release: course.Release, published: frozenset[str]):
        self.digests: dict[str, str] = {}
        for rel in published:
            parts = PurePosixPath(rel).parts
            if len(parts) != 3 or parts[0] != "solutions" or not release.is_released(parts[1]):
                raise PublishError(f"check: {rel} is not the instructor notebook of a released assignment")
            self.digests[rel] = shipped_digest((root / rel).read_bytes())

    def holds(self, path: Path, rel: str) -> bool:
        """Whether the published ``path`` is one of them, identical to the course's but for the Colab cell."""
        return (
            rel in self.digests
            and path.is_file()
            and not path.is_symlink()
            and shipped_digest(path.read_bytes()) == self.digests[rel]
        )
