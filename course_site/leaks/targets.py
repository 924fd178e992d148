"""What a leak check looks for under a release (`Secrets`): secret lines and unreleased code, the public discounted."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course
from autograder.similarity import clones
from course_site.leaks.files import digest
from course_site.leaks.index import CodeIndex, shingles
from course_site.leaks.markers import MARKERS
from course_site.leaks.regions import Region, Secret, notebook_secrets, solution_notebooks, solution_regions
from course_site.leaks.release import release_of
from course_site.leaks.sources import public_sources
from course_site.leaks.views import text_views

MIN_SECRET = 25  # characters of a secret line

_WORD_RE = re.compile(r"\w+")


def inner_words(line: str) -> frozenset[str]:
    """Words of a line that any text holding the line holds whole: all but the first and the last."""
    return frozenset(_WORD_RE.findall(line)[1:-1])


class Secrets:
    """What the check looks for in a course (``root``) under a release: the secret lines
    (:attr:`lines`), and the solution regions of the assignments that are not released as
    normalized code (:meth:`find`, :class:`~course_site.leaks.index.CodeIndex`), the shingles of the
    public sources discounted. :attr:`public_digests` are the digests of the public sources' files: a
    published copy of one holds nothing secret."""

    def __init__(self, root: Path = COURSE_ROOT, release: course.Release | None = None):
        root = Path(root)
        self.release = release_of(root, release)
        self.normalizer = clones.Normalizer()
        self.lines: list[Secret] = []
        self.code = CodeIndex([], [], set())
        self.public_digests: set[str] = set()
        self.public_by_digest: dict[str, str] = {}  # a public source's digest -> its path
        # What only one public source shows (a line, a sequence of a region's code): evidence against
        # that source itself, which is checked against what the *other* public sources leave secret.
        self._sole_lines: dict[str, list[Secret]] = {}
        self._sole_shingles: dict[str, set[int]] = {}
        self._regions: list[tuple[Region, str]] = []
        self._shared: set[int] = set()
        self._coded_by_source: dict[str, list[str]] = {}
        self._without: dict[str, Secrets | None] = {}  # source -> what the other sources leave secret
        self.line_words: list[frozenset[str]] = []  # the words of each of :attr:`lines` (a prefilter)
        found = solution_notebooks(root)
        if not found:
            return
        sources = public_sources(root, self.release)
        for rel, text in sources:
            path = root / rel
            data = text.encode()
            if path.is_file() and path.read_bytes() != data:
                continue
            self.public_digests.add(digest(data))
            self.public_by_digest[digest(data)] = rel
        self._find_lines(found, sources)
        self._index_code(root, sources)

    def _find_lines(self, found: list[tuple[str, str, object]], sources: list[tuple[str, str]]) -> None:
        """Secret lines: hidden tests always, solutions of the assignments that are not released."""
        public_by_source = {
            rel: "\n".join(
                "\n".join(line.strip() for line in view.splitlines())
                for view in text_views(text, PurePosixPath(rel).suffix.lower())
            )
            for rel, text in sources
        }
        public = "\n".join(public_by_source.values())
        seen = set()
        for rel, assignment, nb in found:
            for line, cell, kind in notebook_secrets(nb, rel):
                text = line.strip()
                if kind == "reference-solution" and self.release.is_released(assignment):
                    continue
                if len(text) < MIN_SECRET or text in seen or any(marker in text for marker in MARKERS):
                    continue
                seen.add(text)
                if text in public:
                    holders = [source for source, shown in public_by_source.items() if text in shown]
                    if len(holders) == 1:
                        self._sole_lines.setdefault(holders[0], []).append(Secret(text, rel, cell, kind))
                    continue
                self.lines.append(Secret(text, rel, cell, kind))
        self.line_words = [inner_words(secret.text) for secret in self.lines]

    def _index_code(self, root: Path, sources: list[tuple[str, str]]) -> None:
        """Solution code: the regions of the assignments that are not released, indexed with the
        sequences that the public sources hold discounted."""
        regions = [r for r in solution_regions(root) if not self.release.is_released(r.assignment)]
        coded = [self.normalizer.code(region.code) for region in regions]
        self.normalizer.freeze()
        every = set().union(*map(shingles, coded)) if coded else set()
        holders: dict[int, set[str]] = {}
        if regions:
            for rel, text in sources:
                coded_views = self._coded_by_source.setdefault(rel, [])
                for view in text_views(text, PurePosixPath(rel).suffix.lower()):
                    for form in self.normalizer.views(view):
                        for shingle in every.intersection(shingles(form)):
                            holders.setdefault(shingle, set()).add(rel)
                        coded_views.append(form)
        self._shared = set(holders)
        for shingle, where in holders.items():
            if len(where) == 1:
                self._sole_shingles.setdefault(next(iter(where)), set()).add(shingle)
        self._regions = list(zip(regions, coded))
        public_coded = [form for forms in self._coded_by_source.values() for form in forms]
        self.code = CodeIndex.of(self._regions, self._shared, public_coded)

    def without(self, source: str) -> Secrets | None:
        """What is secret for a file identical to the public source ``source``: what the *other* public
        sources leave secret (a docstring that quotes an answer is found in the file that quotes it). None
        where that is what every file is checked against (``source`` alone shows nothing secret)."""
        if source not in self._without:
            self._without[source] = self._made_without(source)
        return self._without[source]

    def _made_without(self, source: str) -> Secrets | None:
        lines, sole = self._sole_lines.get(source, []), self._sole_shingles.get(source, set())
        if not lines and not sole:
            return None
        other = object.__new__(Secrets)
        other.__dict__.update(self.__dict__)
        other._without = {}
        other.lines = self.lines + lines
        other.line_words = self.line_words + [inner_words(secret.text) for secret in lines]
        others_coded = [form for rel, forms in self._coded_by_source.items() if rel != source for form in forms]
        other.code = CodeIndex.of(self._regions, self._shared - sole, others_coded)
        return other

    def forms(self, views: list[str]) -> tuple[list[str], set[str]]:
        """A file's texts as normalized code (:meth:`find` takes them), and their words."""
        forms, words = [], set()
        for view in views:
            forms += self.normalizer.views(view)
            words.update(_WORD_RE.findall(view))
        return forms, words

    def find(self, forms: list[str]) -> list[tuple[Region, float]]:
        """The solution regions found in a file's normalized texts ``forms``, with the share found
        (:meth:`course_site.leaks.index.CodeIndex.find`)."""
        return self.code.find(forms)
