"""The nbgrader markers, and where they may appear: package files that explain them, book pages that show them."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from attention_course.tooling import notebooks
from autograder.release import packages
from course_site.leaks.files import digest, is_binary, source_files
from course_site.leaks.sources import FETCHED
from course_site.reading import SEARCH_PAGES

MARKERS = notebooks.MARKERS


def page_key(rel: str) -> str | None:
    """``book/instructor_guide`` for ``book/instructor_guide.html``, ``_sources/book/instructor_guide.md``, or
    ``_static/search-pages/book/instructor_guide.html.js`` (the page's text, for the search: course_site.reading)."""
    path = PurePosixPath(rel)
    if rel.startswith(f"{SEARCH_PAGES}/") and path.suffix == ".js":
        path = PurePosixPath(rel[len(SEARCH_PAGES) + 1 :]).with_suffix("")
    if path.parts[0] == "_sources":
        path = PurePosixPath(*path.parts[1:])
        while path.suffix in (".txt", ".md", ".ipynb", ".rst"):
            path = path.with_suffix("")
        return path.as_posix()
    if path.suffix in (".html", ".htm"):
        return path.with_suffix("").as_posix()
    return None


class MarkerDocuments:
    """Where the markers may appear: the package files that explain them (:attr:`files`, path -> digest),
    and the book pages that show them (:attr:`pages`: ``book/instructor_guide``); never a notebook."""

    def __init__(self, root: Path):
        self.files: dict[str, str] = {}
        self.pages: set[str] = set()
        for rel in source_files(root):
            top = PurePosixPath(rel).parts[0]
            if top not in (*packages.PACKAGES, "book") or rel.endswith(".ipynb") or rel.startswith(FETCHED):
                continue
            try:
                data = (root / rel).read_bytes()
            except OSError:
                continue
            if is_binary(data) or not any(marker.encode() in data for marker in MARKERS):
                continue
            self.files[rel] = digest(data)
            if rel.startswith("book/") and rel.endswith((".md", ".rst", ".ipynb")):
                self.pages.add(PurePosixPath(rel).with_suffix("").as_posix())

    def explains(self, rel: str, digest: str) -> bool:
        """Whether the published ``rel`` is a file that explains the markers, identical to the repository's."""
        return self.files.get(rel) == digest

    def shows(self, rel: str) -> bool:
        """Whether the published ``rel`` is the built page (or page source) of a book page that shows them."""
        return not rel.endswith(".ipynb") and page_key(rel) in self.pages
