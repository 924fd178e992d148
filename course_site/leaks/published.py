"""A published text file as the leak rules read it (`TextFile`): its views, and the secrets it is checked against."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import PurePosixPath

from course_site.leaks.known import KnownFiles
from course_site.leaks.markers import MarkerDocuments
from course_site.leaks.sources import quotes_checked
from course_site.leaks.targets import Secrets
from course_site.leaks.views import prose_of_python, text_views


@dataclass(eq=False)
class TextFile:
    """One text file of the checked folder, with what the rules need to know of it."""

    rel: str  # relative to the checked folder
    text: str
    views: list[str]  # the texts searched
    secrets: Secrets  # what it is checked against
    known: bool  # a copy of a public source or a third-party asset: markers only
    module_prose: bool  # a package module's docstrings and comments, against what the other sources leave secret
    explains_markers: bool  # a package file that explains the markers, identical to the repository's
    shows_markers: bool  # the built page of a book page that shows them

    @property
    def markers_allowed(self) -> bool:
        """Whether markers in :attr:`views` are allowed (a module's are looked for in its whole text)."""
        return self.module_prose or self.explains_markers or self.shows_markers

    def line_of(self, needle: str) -> str:
        index = self.text.find(needle)
        return f"line {self.text.count(chr(10), 0, index) + 1}: " if index >= 0 else ""

    @functools.cached_property
    def _forms(self) -> tuple[list[str], set[str]]:
        return self.secrets.forms(self.views)

    @property
    def words(self) -> set[str]:
        """The words of :attr:`views` (a prefilter of the secret lines)."""
        return self._forms[1]

    @functools.cached_property
    def code_hits(self) -> dict[tuple[str, str], float]:
        """The unreleased solution regions whose code the file holds, by (notebook, item): the largest share."""
        hits: dict[tuple[str, str], float] = {}
        if self.secrets.code.fingerprints:
            for region, share in self.secrets.find(self._forms[0]):
                key = (region.notebook, region.item)
                hits[key] = max(share, hits.get(key, 0.0))
        return hits


@dataclass
class Reader:
    """Makes the :class:`TextFile` of each text file met: what it is known to be, its views, its secrets."""

    secrets: Secrets
    known: KnownFiles
    markers: MarkerDocuments

    def read(self, rel: str, data: bytes, digest: str) -> TextFile:
        text = data.decode("utf-8", errors="replace")
        is_known = self.known.what(data, digest) is not None
        source = self.secrets.public_by_digest.get(digest)
        own = self.secrets.without(source) if source and quotes_checked(source) else None
        explains, shows = self.markers.explains(rel, digest), self.markers.shows(rel)
        if own is not None:  # a module's docstrings and comments: against what the other sources leave secret
            return TextFile(rel, text, [prose_of_python(text)], own, False, True, explains, shows)
        views = [text] if is_known else text_views(text, PurePosixPath(rel).suffix.lower())
        return TextFile(rel, text, views, self.secrets, is_known, False, explains, shows)
