"""The leak check: does a folder about to be published (a built site, the student export) hold
an answer that students must not see?

    python -m course_site.leaks DIR [--edition open|term] [--released "ch01_bahdanau ..."]

``make check-site`` runs it on the built site and ``make student-repo`` on the export.
:func:`check` reads every file under DIR and reports, without ever printing the secret text:

- a file of ``solutions/``: one in a folder named ``solutions`` (but the package of released
  reference modules, ``attention_course/solutions``), or a byte-for-byte copy of one (all that
  is looked for in a binary file);
- an nbgrader marker (:data:`MARKERS`). The files that explain the markers are exempt: a package
  file identical to the repository's (``attention_course/notebooks.py``, ``attention_course/solutions/__init__.py``),
  and the built page of a book page that shows them (the instructor guide). Never a notebook;
- a *secret line*: a line (stripped, at least :data:`MIN_SECRET` characters) of a hidden-test
  region, or of a reference-solution region of an assignment that is not released, that no public
  source shows. Hidden tests are secret in every edition;
- the *code* of a reference-solution region of an assignment that is not released, however it is
  renamed or laid out (:class:`Secrets`). A region (the code between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION``, or a whole solution cell without markers) and each text of the file
  become normalized token streams (:class:`autograder.clones.Normalizer`, pygments' tokens:
  comments, strings and layout dropped, every name one placeholder but attributes, keyword
  arguments and keywords), and each stream's sequences of :data:`SHINGLE` tokens copydetect's
  fingerprints (:func:`autograder.clones.fingerprints`, the clone detector of ``make similarity``
  too). The region's sequences that also occur in the public sources are no evidence and are left
  out; the rest are the region's own. It is reported when one passage of the file holds
  at least :data:`THRESHOLD` of them, with the share found; a region with too few own sequences
  is looked for whole, and one too short or too public even for that is listed as unchecked
  (its lines are still looked for).

The *public sources* (:func:`public_sources`) are what students get legitimately under the term's
release: the exercises, the package files that :func:`autograder.packages.allowed` gives, and the
reference modules of the released assignments. The book's sources are not among them: what a
chapter shows is checked on the built site, like any other published file. Which assignments are
released is the course's setting (:func:`autograder.course.release`: ``term.yml``, ``EDITION``,
``RELEASED``); their reference solutions are published by design and not looked for.

The texts of a file (:func:`text_views`): an HTML page's text (tags dropped, entities decoded,
so highlighted code is whole again) and its comments, scripts and attribute values; a notebook's,
a script's or a JSON file's raw text, its JSON strings decoded and their HTML as text; any other
file's raw text. Code inside comments and strings is compared too. A file identical to a public
source or to a third-party asset (``book/_static``, the files that Sphinx and its extensions
ship) is only checked for markers: it cannot hold more than its original.

Where ``solutions/`` does not exist (a check run in the student repository itself) there is no
secret to look for: ``check`` says so and checks the rest.
"""

from __future__ import annotations

import ast
import base64
import functools
import hashlib
import importlib.metadata
import io
import json
import os
import re
import subprocess
import sys
import time
import tokenize
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath

import nbformat
import numpy as np

from attention_course import notebooks, solutions
from attention_course.notebooks import COURSE_ROOT
from autograder import clones, colab, course, packages

# The folders of the repository whose files students get (public_sources): the exercises, and the
# packages as autograder.packages gives them for the release. Not the book's sources (the term
# edition publishes no page sources), not the instructor's README or tools.
PUBLIC_SOURCES = ("exercises", "attention_course", "autograder")
# Folders whose files are never public sources.
PRIVATE_DIRS = frozenset(
    {
        "solutions",
        "tests",
        "submitted",
        "autograded",
        "feedback",
        "grades",
        "_build",
        ".venv",
        "__pycache__",
        ".ipynb_checkpoints",
        ".pytest_cache",
        "runs",
    }
)
MARKERS = notebooks.MARKERS
MIN_SECRET = 25  # characters of a secret line

# Comparing solution code (measured on the course's solutions: see tests/test_leaks.py).
SHINGLE = 5  # tokens per compared sequence
THRESHOLD = 0.5  # the share of a region's own sequences that a file must hold to be reported
MIN_SHINGLES = 6  # fewer own sequences than this: the region is compared whole
MIN_EXACT = 12  # tokens that a region compared whole must have, else it is too short to tell
WINDOW = 8  # a passage: this many times a region's length, in tokens

HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".xml", ".svg"})
JSON_SUFFIXES = frozenset({".ipynb", ".json", ".js", ".map"})
_JSON_STRING_RE = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')


class PublishError(Exception):
    """A problem with the arguments or the sources that stops publishing or checking."""


@dataclass(frozen=True)
class Secret:
    """A line that must not be published, and where it comes from (never printed)."""

    text: str
    notebook: str  # relative to the repository root
    cell: str  # the cell's nbgrader grade_id, or its number
    kind: str  # "hidden-test" or "reference-solution"


@dataclass(frozen=True)
class Region:
    """The code of one reference-solution region (never printed)."""

    code: str
    notebook: str  # relative to the repository root
    assignment: str
    item: str  # the solution cell's grade_id, or its number


@dataclass(frozen=True)
class Problem:
    path: str  # relative to the checked folder
    reason: str
    assignment: str = ""  # for a solution or a hidden test: where it comes from
    item: str = ""  # the cell's grade_id
    share: float | None = None  # for solution code: the share of the region found

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class LeakReport:
    """What :func:`check` found; ``ok`` when nothing."""

    directory: Path
    problems: list[Problem] = field(default_factory=list)
    files: int = 0  # text files scanned
    binary: int = 0  # binary files (compared with solutions/ only)
    secrets: int = 0  # secret lines looked for
    notebooks: int = 0  # solution notebooks they come from
    regions: int = 0  # solution regions of unreleased assignments compared as code
    known: int = 0  # text files identical to a public source or a third-party asset (markers only)
    unchecked: list[str] = field(default_factory=list)  # "assignment/item" too short or public to tell
    marker_exempt: list[str] = field(default_factory=list)
    has_solutions: bool = True
    release: course.Release | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


# ---------------------------------------------------------------------------------------------
# Files


def _posix(path: Path) -> str:
    return PurePosixPath(*path.parts).as_posix()


def _walk(directory: Path):
    """Every file under ``directory`` (links to files included), as (path, relative posix path); not
    the files of a virtual environment (a folder holding ``pyvenv.cfg``: ``make venv`` in the student
    repository, never published) or of git's own folder."""
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(
            name for name in dirnames if name != ".git" and not (Path(dirpath) / name / "pyvenv.cfg").is_file()
        )
        for name in sorted(filenames):
            path = Path(dirpath) / name
            yield path, _posix(path.relative_to(directory))


def _source_files(root: Path) -> list[str]:
    """The repository's files that are not ignored (tracked or not), or all of them outside git."""
    try:
        result = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        result = None
    if result is not None and result.returncode == 0:
        return [name for name in result.stdout.split("\0") if name]
    return [
        rel
        for _, rel in _walk(root)
        if not any(part in PRIVATE_DIRS or part.startswith(".") for part in PurePosixPath(rel).parts)
    ]


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _shipped_digest(data: bytes) -> str:
    """The digest of an instructor notebook that an export ships, but for its Colab set-up cell, which the
    export writes for the students' repository (:func:`autograder.colab.retarget`): a set-up cell of any
    repository, exactly as the course writes one, digests alike; anything else in it counts."""
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception:  # not a notebook that nbformat reads: compared as bytes
        return _digest(data)
    if nb.cells and colab.is_colab_cell(nb.cells[0]) and colab.repository_of(nb.cells[0].source) is not None:
        nb.cells[0].source = ""
        nb.cells[0].metadata.get("nbgrader", {}).pop("checksum", None)
    return _digest(nbformat.writes(nb).encode())


def _read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return None if _is_binary(data) else data.decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------
# Text views


def _json_strings(text: str) -> str:
    """The JSON string literals of ``text`` (a notebook, a JSON file, a script), decoded."""
    literals = _JSON_STRING_RE.findall(text)
    if not literals:
        return ""
    try:
        return "\n".join(json.loads("[" + ",".join(literals) + "]"))
    except ValueError:  # one literal is not JSON (a script's own escapes): decode them one by one
        out = []
        for literal in literals:
            if "\\" not in literal:
                out.append(literal[1:-1])
                continue
            try:
                out.append(json.loads(literal))
            except ValueError:
                continue
        return "\n".join(out)


class _HTMLViews(HTMLParser):
    """An HTML page read whole: its text (:attr:`text`, tags dropped and entities decoded, so that
    code split into highlighted spans is whole again) and what it holds outside its text
    (:attr:`hidden`: comments, scripts and styles, attribute values, declarations)."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self._text: list[str] = []
        self._hidden: list[str] = []
        self._raw = False  # inside a script or a style
        self.feed(page)
        self.close()
        self.text, self.hidden = "".join(self._text), "\n".join(self._hidden)

    def handle_starttag(self, tag, attrs):
        self._hidden.extend(value for _, value in attrs if value)
        self._raw = tag in ("script", "style")

    def handle_startendtag(self, tag, attrs):
        self._hidden.extend(value for _, value in attrs if value)

    def handle_endtag(self, tag):
        self._raw = False

    def handle_data(self, data):
        (self._hidden if self._raw else self._text).append(data)

    def handle_comment(self, data):
        self._hidden.append(data)

    handle_decl = handle_pi = unknown_decl = handle_comment


def text_views(text: str, suffix: str) -> list[str]:
    """The texts of a file that are searched.

    An HTML page (:data:`HTML_SUFFIXES`): its text (tags dropped, entities decoded) and what it
    holds outside its text (comments, scripts, styles, attribute values; their JSON strings
    decoded). A notebook, JSON file or script (:data:`JSON_SUFFIXES`): its raw text, its JSON
    strings decoded, and their HTML as text where they hold HTML. Any other file: its raw text, and
    its HTML as text where it has some.
    """
    if suffix in HTML_SUFFIXES:
        page = _HTMLViews(text)
        hidden = page.hidden + "\n" + _json_strings(page.hidden) if '"' in page.hidden else page.hidden
        return [page.text, hidden]
    views = [text]
    if suffix in JSON_SUFFIXES:
        strings = _json_strings(text)
        views.append(strings)
        if "<" in strings or "&" in strings:
            views.append(_HTMLViews(strings).text)
    elif "<" in text:
        views.append(_HTMLViews(text).text)
    return views


# ---------------------------------------------------------------------------------------------
# Compared code


def _shingles(coded: str) -> set[int]:
    """The fingerprints of a normalized stream's sequences of :data:`SHINGLE` tokens."""
    return set(clones.fingerprints(coded, SHINGLE).tolist())


_WORD_RE = re.compile(r"\w+")


def _inner_words(line: str) -> frozenset[str]:
    """Words of a line that any text holding the line holds whole: all but the first and the last."""
    return frozenset(_WORD_RE.findall(line)[1:-1])


# ---------------------------------------------------------------------------------------------
# The solution notebooks


def _notebook_secrets(nb, notebook: str) -> list[tuple[str, str, str]]:
    """(line, cell, kind) for every line of a hidden-test or reference-solution region."""
    found = []
    for number, cell in enumerate(nb.cells, 1):
        name = notebooks.cell_id(cell) or f"cell {number}"
        source = cell.get("source", "")
        for line in notebooks.region_lines(source, notebooks.HIDDEN_TESTS):
            found.append((line, name, "hidden-test"))
        if notebooks.SOLUTION[0] in source:
            for line in notebooks.region_lines(source, notebooks.SOLUTION):
                found.append((line, name, "reference-solution"))
        elif notebooks.is_solution(cell):
            # A solution cell without markers is replaced whole when the exercise is generated.
            found += [(line, name, "reference-solution") for line in source.splitlines()]
    return found


def _solution_notebooks(root: Path) -> list[tuple[str, str, object]]:
    """(relative path, assignment, notebook) of every notebook under ``root/solutions``."""
    found = []
    solutions = root / "solutions"
    if not solutions.is_dir():
        return found
    for path in sorted(solutions.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        rel = _posix(path.relative_to(root))
        try:
            nb = nbformat.read(str(path), as_version=4)
        except Exception as error:  # an unreadable notebook stops the check
            raise PublishError(f"cannot read {rel} to find its secrets: {error}") from None
        inside = path.relative_to(solutions).parts
        found.append((rel, inside[0] if len(inside) > 1 else path.stem, nb))
    return found


def solution_regions(root: Path = COURSE_ROOT) -> list[Region]:
    """The code of every reference-solution region of the notebooks under ``root/solutions``:
    the text between each pair of solution markers, or a whole solution cell without them."""
    regions = []
    for rel, assignment, nb in _solution_notebooks(Path(root)):
        for number, cell in enumerate(nb.cells, 1):
            if cell.cell_type != "code":
                continue
            name = notebooks.cell_id(cell) or f"cell {number}"
            source = cell.get("source", "")
            matches = [
                "\n".join(lines) for inside, lines in notebooks.split_regions(source, notebooks.SOLUTION) if inside
            ]
            if matches:
                regions += [Region(code, rel, assignment, name) for code in matches]
            elif notebooks.is_solution(cell):
                regions.append(Region(source, rel, assignment, name))
    return regions


def _release_of(root: Path, release: course.Release | None) -> course.Release:
    if release is not None:
        return release
    try:
        return course.release(root)
    except course.SettingsError as error:
        raise PublishError(f"the release settings: {error}") from None


# ---------------------------------------------------------------------------------------------
# The public sources


_FETCHED = ("book/_static/mathjax/", "book/_static/mathjax.partial/")  # third-party, fetched at build time


def public_sources(root: Path = COURSE_ROOT, release: course.Release | None = None) -> list[tuple[str, str]]:
    """(path, text) of what students get legitimately under ``release`` (default: the course's
    setting): the exercises, the package files that :func:`autograder.packages.allowed` gives, and
    the reference modules of the released assignments."""
    root = Path(root)
    release = _release_of(root, release)
    has_packages = all((root / package).is_dir() for package in packages.PACKAGES)
    allowed = set(packages.allowed(release, root)) if has_packages else set()
    sources = []
    for rel in _source_files(root):
        pure = PurePosixPath(rel)
        top = pure.parts[0]
        if top not in PUBLIC_SOURCES or rel.startswith(_FETCHED):
            continue
        if top in packages.PACKAGES:
            if rel not in allowed:
                continue
        elif any(part in PRIVATE_DIRS for part in pure.parts):
            continue
        text = _read_text(root / rel)
        if text is None:
            continue
        sources.append((rel, text))
    for assignment in release.of(course.assignments(root)):
        sources.append((f"{packages.SOLUTIONS}/{assignment}.py", solutions.module_source(assignment, root)))
    return sources


# ---------------------------------------------------------------------------------------------
# The secrets


@dataclass
class _Fingerprint:
    region: Region
    coded: str  # its normalized code
    own: frozenset[int]  # the fingerprints of its sequences that no public source holds
    whole: bool  # compared whole (too few own sequences)

    def local_share(self, hashes: np.ndarray) -> float:
        """The largest share of :attr:`own` found in one passage of a text, given its fingerprints
        ``hashes``: within :data:`WINDOW` times the region's length (a leak is one passage, not
        sequences scattered over a large file)."""
        positions = np.flatnonzero(np.isin(hashes, list(self.own)))
        hits = list(zip(positions.tolist(), hashes[positions].tolist()))
        width = WINDOW * len(self.coded) + SHINGLE
        best, counts, first = 0, {}, 0
        for position, shingle in hits:
            counts[shingle] = counts.get(shingle, 0) + 1
            while hits[first][0] < position - width:
                old = hits[first][1]
                counts[old] -= 1
                if not counts[old]:
                    del counts[old]
                first += 1
            best = max(best, len(counts))
        return best / len(self.own)


class Secrets:
    """What the check looks for in a course (``root``) under a release: the secret lines
    (:attr:`lines`), and the solution regions of the assignments that are not released as
    normalized code (:meth:`find`), the shingles of the public sources discounted.
    :attr:`public_digests` are the digests of the public sources' files: a published copy of one
    holds nothing secret."""

    def __init__(self, root: Path = COURSE_ROOT, release: course.Release | None = None):
        root = Path(root)
        self.release = _release_of(root, release)
        self.normalizer = clones.Normalizer()
        self.lines: list[Secret] = []
        self.fingerprints: list[_Fingerprint] = []
        self.unchecked: list[Region] = []
        self.wanted: set[int] = set()
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
        found = _solution_notebooks(root)
        if not found:
            return
        sources = public_sources(root, self.release)
        for rel, text in sources:
            path = root / rel
            data = text.encode()
            if path.is_file() and path.read_bytes() != data:
                continue
            self.public_digests.add(_digest(data))
            self.public_by_digest[_digest(data)] = rel

        # Secret lines: hidden tests always, solutions of the assignments that are not released.
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
            for line, cell, kind in _notebook_secrets(nb, rel):
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

        self.line_words = [_inner_words(secret.text) for secret in self.lines]

        # Solution code.
        regions = [r for r in solution_regions(root) if not self.release.is_released(r.assignment)]
        coded = [self.normalizer.code(region.code) for region in regions]
        self.normalizer.freeze()
        every = set().union(*map(_shingles, coded)) if coded else set()
        holders: dict[int, set[str]] = {}
        if regions:
            for rel, text in sources:
                coded_views = self._coded_by_source.setdefault(rel, [])
                for view in text_views(text, PurePosixPath(rel).suffix.lower()):
                    for form in self.normalizer.views(view):
                        for shingle in every.intersection(_shingles(form)):
                            holders.setdefault(shingle, set()).add(rel)
                        coded_views.append(form)
        self._shared = set(holders)
        for shingle, where in holders.items():
            if len(where) == 1:
                self._sole_shingles.setdefault(next(iter(where)), set()).add(shingle)
        self._regions = list(zip(regions, coded))
        self._fingerprint(self._shared, [form for forms in self._coded_by_source.values() for form in forms])

    def _fingerprint(self, shared: set[int], public_coded: list[str]) -> None:
        """:attr:`fingerprints`, :attr:`unchecked` and :attr:`wanted` of the regions, ``shared``
        (sequences that public sources hold) discounted."""
        self.fingerprints, self.unchecked = [], []
        for region, text in self._regions:
            own = frozenset(_shingles(text) - shared)
            if len(own) >= MIN_SHINGLES:
                self.fingerprints.append(_Fingerprint(region, text, own, False))
            elif len(text) >= MIN_EXACT and own and not any(text in form for form in public_coded):
                self.fingerprints.append(_Fingerprint(region, text, own, True))
            else:
                self.unchecked.append(region)
        self.wanted = set().union(*(f.own for f in self.fingerprints if not f.whole))

    def without(self, source: str) -> Secrets | None:
        """What is secret for a file identical to the public source ``source``: what the *other* public
        sources leave secret (a docstring that quotes an answer is found in the file that quotes it). None
        where that is what every file is checked against (``source`` alone shows nothing secret)."""
        if source not in self._without:
            self._without[source] = self._made_without(source)
        return self._without[source]

    def _made_without(self, source: str) -> Secrets | None:
        lines, shingles = self._sole_lines.get(source, []), self._sole_shingles.get(source, set())
        if not lines and not shingles:
            return None
        other = object.__new__(Secrets)
        other.__dict__.update(self.__dict__)
        other._without = {}
        other.lines = self.lines + lines
        other.line_words = self.line_words + [_inner_words(secret.text) for secret in lines]
        others_coded = [form for rel, forms in self._coded_by_source.items() if rel != source for form in forms]
        other._fingerprint(self._shared - shingles, others_coded)
        return other

    def forms(self, views: list[str]) -> tuple[list[str], set[str]]:
        """A file's texts as normalized code (:meth:`find` takes them), and their words."""
        forms, words = [], set()
        for view in views:
            forms += self.normalizer.views(view)
            words.update(_WORD_RE.findall(view))
        return forms, words

    def find(self, forms: list[str]) -> list[tuple[Region, float]]:
        """The solution regions found in a file's normalized texts ``forms``, with the share found:
        at least :data:`THRESHOLD` of a region's own shingles in one passage, or a region
        compared whole."""
        hashes = [clones.fingerprints(form, SHINGLE) for form in forms]
        found = set()
        for fingerprints in hashes:
            found |= self.wanted.intersection(fingerprints.tolist())
        hits = []
        for fingerprint in self.fingerprints:
            if fingerprint.whole:
                if any(fingerprint.coded in form for form in forms):
                    hits.append((fingerprint.region, 1.0))
                continue
            if len(fingerprint.own & found) < THRESHOLD * len(fingerprint.own):
                continue
            share = max(fingerprint.local_share(fingerprints) for fingerprints in hashes)
            if share >= THRESHOLD:
                hits.append((fingerprint.region, share))
        return hits


_ASSET_DISTRIBUTIONS_RE = re.compile(r"sphinx|myst|jupyter.book|pydata|plotly", re.I)


@functools.lru_cache(maxsize=1)
def _shipped_digests() -> frozenset[str]:
    """The sha256 digests (hex) of the files that the installed Sphinx, MyST and Jupyter Book
    distributions and their themes and extensions ship (and plotly, whose plotly.js the maps draw with),
    from their RECORDs: the site's third-party static files are byte-for-byte copies of them."""
    digests = set()
    for distribution in importlib.metadata.distributions():
        if not _ASSET_DISTRIBUTIONS_RE.search(distribution.metadata["Name"] or ""):
            continue
        for file in distribution.files or ():
            if file.hash is not None and file.hash.mode == "sha256":
                value = file.hash.value
                digests.add(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex())
    return frozenset(digests)


class _KnownFiles:
    """Published files with nothing to look for in them: copies of the public sources (all their
    code is public), of the book's static files (``book/_static``, MathJax included) and of the
    assets that the Sphinx distributions ship (:func:`_shipped_digests`)."""

    def __init__(self, root: Path, public_digests: set[str]):
        self.digests = dict.fromkeys(public_digests, "a public source")
        self.by_size: dict[int, list[Path]] = {}  # book/_static's files, hashed when a file of their size is met
        static = root / "book" / "_static"
        if static.is_dir():
            for path in static.rglob("*"):
                if path.is_file():
                    self.by_size.setdefault(path.stat().st_size, []).append(path)

    def what(self, data: bytes, digest: str) -> str | None:
        for path in self.by_size.pop(len(data), ()):
            self.digests.setdefault(_digest(path.read_bytes()), "a file of book/_static")
        if digest in self.digests:
            return self.digests[digest]
        if digest in _shipped_digests():
            return "a file that Sphinx or its extensions ship"
        return None


_CACHE: dict[tuple, Secrets] = {}


def _state(root: Path) -> tuple:
    """What the secrets of ``root`` depend on: its public sources' and solutions' files, as stat."""
    stamp = []
    files = [rel for rel in _source_files(root) if PurePosixPath(rel).parts[0] in PUBLIC_SOURCES]
    files += [_posix(p.relative_to(root)) for p in sorted((root / "solutions").rglob("*.ipynb"))]
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
    release = _release_of(root, release)
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


# ---------------------------------------------------------------------------------------------
# The check


def _page_key(rel: str) -> str | None:
    """``book/instructor_guide`` for ``book/instructor_guide.html`` or ``_sources/book/instructor_guide.md``."""
    path = PurePosixPath(rel)
    if path.parts[0] == "_sources":
        path = PurePosixPath(*path.parts[1:])
        while path.suffix in (".txt", ".md", ".ipynb", ".rst"):
            path = path.with_suffix("")
        return path.as_posix()
    if path.suffix in (".html", ".htm"):
        return path.with_suffix("").as_posix()
    return None


def _marker_documents(root: Path) -> tuple[dict[str, str], set[str]]:
    """Where the markers may appear: the package files that explain them (path -> digest), and
    the book pages that show them (``book/instructor_guide``); never a notebook."""
    files, pages = {}, set()
    for rel in _source_files(root):
        top = PurePosixPath(rel).parts[0]
        if top not in (*packages.PACKAGES, "book") or rel.endswith(".ipynb") or rel.startswith(_FETCHED):
            continue
        try:
            data = (root / rel).read_bytes()
        except OSError:
            continue
        if _is_binary(data) or not any(marker.encode() in data for marker in MARKERS):
            continue
        files[rel] = _digest(data)
        if rel.startswith("book/") and rel.endswith((".md", ".rst", ".ipynb")):
            pages.add(PurePosixPath(rel).with_suffix("").as_posix())
    return files, pages


def _line_of(text: str, needle: str) -> str:
    index = text.find(needle)
    return f"line {text.count(chr(10), 0, index) + 1}: " if index >= 0 else ""


def _in_solutions_folder(rel: str) -> bool:
    """Whether ``rel`` lies in a folder named ``solutions``, other than the package of the
    released reference modules (``attention_course/solutions``, checked by its content)."""
    parts = PurePosixPath(rel).parts[:-1]
    package = tuple(PurePosixPath(packages.SOLUTIONS).parts)
    return any(
        part == "solutions" and tuple(parts[max(0, i - len(package) + 1) : i + 1]) != package
        for i, part in enumerate(parts)
    )


def _assignment_of(notebook: str) -> str:
    parts = PurePosixPath(notebook).parts
    return parts[1] if len(parts) > 2 else PurePosixPath(notebook).stem


def _quotes_checked(source: str) -> bool:
    """Whether a public source is a hand-written module of the packages, whose docstrings and comments
    are checked for quoted answers (the exercises and the generated reference modules of released
    chapters are public by design, whole)."""
    return (
        source.endswith(".py")
        and PurePosixPath(source).parts[0] in packages.PACKAGES
        and not source.startswith(packages.SOLUTIONS + "/")
    )


@functools.lru_cache(maxsize=128)  # check() meets the same modules in every folder it checks
def _prose_of_python(text: str) -> str:
    """The comments and string literals (docstrings included) of Python source, a line each; the whole
    text where it does not tokenize."""
    parts = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                parts.append(token.string.lstrip("#").strip())
            elif token.type == tokenize.STRING:
                try:
                    value = ast.literal_eval(token.string)
                except (ValueError, SyntaxError):
                    value = token.string
                parts.append(value if isinstance(value, str) else token.string)
    except (tokenize.TokenError, SyntaxError):
        return text
    return "\n".join(parts)


def check(
    directory: Path,
    root: Path = COURSE_ROOT,
    release: course.Release | None = None,
    published: frozenset[str] = frozenset(),
) -> LeakReport:
    """Scan every file under ``directory`` for solutions, nbgrader markers, secret lines and the
    code of the reference solutions that ``release`` (default: :func:`autograder.course.release`
    of ``root``) does not release.

    ``published``: files of ``solutions/`` that the folder ships by design, each at its own path and
    identical to the course's but for the Colab set-up cell (the student export's instructor notebooks of
    released chapters, for ``make check``); a released assignment's only. Anything else of ``solutions/``
    is a problem."""
    started = time.perf_counter()
    directory, root = Path(directory), Path(root)
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

    release = _release_of(root, release)
    report = LeakReport(directory, release=release)
    solutions = root / "solutions"
    report.has_solutions = solutions.is_dir()
    solution_digests = {}
    if report.has_solutions:
        for path in solutions.rglob("*"):
            if path.is_file():
                solution_digests.setdefault(_digest(path.read_bytes()), _posix(path.relative_to(root)))
    found = secrets(root, release)
    report.secrets, report.notebooks = len(found.lines), len({s.notebook for s in found.lines})
    report.regions = len(found.fingerprints)
    report.unchecked = sorted({f"{r.assignment}/{r.item}" for r in found.unchecked})
    exempt_files, exempt_pages = _marker_documents(root)
    known = _KnownFiles(root, found.public_digests)

    shipped = {}
    for rel in published:
        parts = PurePosixPath(rel).parts
        if len(parts) != 3 or parts[0] != "solutions" or not release.is_released(parts[1]):
            raise PublishError(f"check: {rel} is not the instructor notebook of a released assignment")
        shipped[rel] = _shipped_digest((root / rel).read_bytes())
    for path, rel in _walk(directory):
        problems = report.problems
        if (
            rel in shipped
            and path.is_file()
            and not path.is_symlink()
            and _shipped_digest(path.read_bytes()) == shipped[rel]
        ):
            report.known += 1  # a released chapter's notebook, shipped by design
            continue
        if _in_solutions_folder(rel):
            problems.append(Problem(rel, "a file from a solutions/ folder"))
        try:
            data = path.read_bytes()
        except OSError:
            continue  # a broken link, a file that vanished
        digest = _digest(data)
        if digest in solution_digests:
            problems.append(Problem(rel, f"a copy of {solution_digests[digest]}"))
        if _is_binary(data):
            report.binary += 1
            continue
        report.files += 1
        text = data.decode("utf-8", errors="replace")
        is_known = known.what(data, digest) is not None
        source = found.public_by_digest.get(digest)
        own = found.without(source) if source and _quotes_checked(source) else None
        views = [text] if is_known else text_views(text, path.suffix.lower())
        secrets_here = found
        if own is not None:  # a module's docstrings and comments: against what the other sources leave secret
            secrets_here, views = own, [_prose_of_python(text)]
            for marker in MARKERS:  # markers, as in any known file
                if marker in text and exempt_files.get(rel) != digest:
                    problems.append(Problem(rel, f"{_line_of(text, marker)}holds the nbgrader marker {marker!r}"))
            is_known = False

        if own is not None:
            allowed = True  # its markers were checked above, in its whole text
        else:
            allowed = (exempt_files.get(rel) == digest) or (
                not rel.endswith(".ipynb") and _page_key(rel) in exempt_pages
            )
        if allowed:
            if any(marker in view for view in views for marker in MARKERS):
                report.marker_exempt.append(rel)
        else:
            for marker in MARKERS:
                if any(marker in view for view in views):
                    problems.append(Problem(rel, f"{_line_of(text, marker)}holds the nbgrader marker {marker!r}"))
        if is_known:
            report.known += 1
            continue

        code_hits: dict[tuple[str, str], float] = {}
        words: set[str] = set()
        if secrets_here.lines or secrets_here.fingerprints:
            forms, words = secrets_here.forms(views)
            for region, share in secrets_here.find(forms):
                key = (region.notebook, region.item)
                code_hits[key] = max(share, code_hits.get(key, 0.0))
        for (notebook, item), share in sorted(code_hits.items()):
            problems.append(
                Problem(
                    rel,
                    f"{share:.0%} of the code of a reference solution of {notebook}, cell {item} "
                    "(compared with names, comments and layout ignored)",
                    _assignment_of(notebook),
                    item,
                    share,
                )
            )

        hits: dict[tuple[str, str, str], list[Secret]] = {}
        for secret, inner in zip(secrets_here.lines, secrets_here.line_words):
            if not inner <= words:
                continue  # a word of the line is missing: the line is not there
            if any(secret.text in view for view in views):
                hits.setdefault((secret.notebook, secret.cell, secret.kind), []).append(secret)
        for (notebook, cell, kind), lines in hits.items():
            if kind == "reference-solution" and (notebook, cell) in code_hits:
                continue  # reported above
            count = f"{len(lines)} {kind} lines" if len(lines) > 1 else f"a {kind} line"
            problems.append(
                Problem(
                    rel,
                    f"{_line_of(text, lines[0].text)}{count} of {notebook}, cell {cell}",
                    _assignment_of(notebook),
                    cell,
                )
            )
    report.seconds = time.perf_counter() - started
    return report


# ---------------------------------------------------------------------------------------------
# Command line


def add_release_options(parser) -> None:
    parser.add_argument(
        "--edition", choices=course.EDITIONS, help="the edition to check for (default: EDITION, else term.yml)"
    )
    parser.add_argument(
        "--released",
        metavar="NAMES",
        help="the released assignments, separated by spaces or commas, `all` or `none` "
        "(default: RELEASED, else term.yml; given alone: the term edition)",
    )


def release_from_options(args, root: Path) -> course.Release:
    """The release that the options, the environment and ``root``'s ``term.yml`` give."""
    environ = dict(os.environ)
    if getattr(args, "released", None) is not None:
        environ["RELEASED"] = args.released
        environ.pop("EDITION", None)
    if getattr(args, "edition", None):
        environ["EDITION"] = args.edition
    try:
        return course.release(root, environ)
    except course.SettingsError as error:
        raise PublishError(f"the release settings: {error}") from None


def summary(report: LeakReport) -> str:
    if report.has_solutions:
        secrets = (
            f"{report.secrets} secret lines of {report.notebooks} solution notebooks and "
            f"{report.regions} solution regions compared as code"
        )
    else:
        secrets = "no solutions/ to take secrets from: markers and copies only"
    edition = f"; {report.release.describe()}" if report.release is not None else ""
    known = (
        f", {report.known} of them copies of public sources or third-party assets (markers only)"
        if report.known
        else ""
    )
    return (
        f"checked {report.files} text files{known} and {report.binary} binary files under "
        f"{report.directory} in {report.seconds:.1f} s ({secrets}{edition})"
    )


def print_report(report: LeakReport) -> None:
    print(summary(report))
    if not report.has_solutions:
        print(
            "note: the repository has no solutions/ folder (a student repository?): secrets are "
            "checked where the export is made, in the instructor's repository"
        )
    if report.unchecked:
        print(
            "note: too short or too public to be told from other code, compared line by line only: "
            + ", ".join(report.unchecked)
        )
    if report.marker_exempt:
        print("markers allowed (files that explain them): " + ", ".join(report.marker_exempt))
    if report.ok:
        print("OK: no solution, hidden test or nbgrader marker")
    else:
        print(f"FAIL: {len(report.problems)} problems", file=sys.stderr)
        for problem in report.problems:
            print(f"  {problem}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """``python -m course_site.leaks DIR``: 0 when DIR holds nothing to withhold, 1 when it does,
    2 for a bad argument or release setting."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m course_site.leaks", description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path, metavar="DIR", help="a built site (_build/html) or an export")
    parser.add_argument(
        "--root", type=Path, default=COURSE_ROOT, help="the course repository, with solutions/ (default: %(default)s)"
    )
    add_release_options(parser)
    args = parser.parse_args(argv)
    try:
        report = check(args.directory, args.root, release_from_options(args, args.root))
    except PublishError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print_report(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
