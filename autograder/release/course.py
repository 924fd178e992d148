"""The course's layout, repositories and release settings.

Where each assignment lives, which public repository
students use, and whose solutions are released.

Every assignment is a folder ``solutions/<name>/`` holding the instructor notebook
``<name>.ipynb`` (nbgrader's source) and ``exercises/<name>/<name>.ipynb`` (its release).

The public repository that students open exercises from (Colab links, ``pip install`` on Colab)
is the open edition's, ``repository:`` in ``_config.yml`` (:func:`repository`), which the committed
notebooks name; a term names its students' repository and the release they install in ``term.yml``
(:func:`students_repository`), and the term's book and export name that one instead
(:func:`exercise_repository`).

Which reference solutions students may see is one setting, :class:`Release`: the committed
defaults in ``term.yml``, overridden by the environment variables ``EDITION`` and ``RELEASED``
(which ``make VAR=...`` sets). The book, the student export, the grading sandbox and the
exercises' Colab install all ask :func:`release`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.text.terminal import clean_text

# The course's local MathJax (make book fetches it: course_site.mathjax): the component that feedback
# pages carry inline, so that their mathematics renders where the page is opened, offline too.
FEEDBACK_MATHJAX = COURSE_ROOT / "book" / "_static" / "mathjax" / "tex-svg.js"
# What that component loads on demand, carried inline beside it (its loader fetches nothing): MathJax's safe
# mode, and the TeX extensions it autoloads for their macros, all but html's (links, styles, classes, ids).
_TEX_AUTOLOADED = "action amscd bbox boldsymbol braket bussproofs cancel color enclose extpfeil mhchem unicode verb"
FEEDBACK_MATHJAX_PARTS = ("ui/safe", *(f"input/tex/extensions/{name}" for name in _TEX_AUTOLOADED.split()))
SETTINGS_FILE = "term.yml"
EDITIONS = ("open", "term")


def assignments(root: Path | None = None) -> list[str]:
    """Every assignment: a folder ``solutions/<name>/`` holding ``<name>.ipynb``."""
    root = Path(root or COURSE_ROOT)
    return sorted(p.parent.name for p in (root / "solutions").glob("*/*.ipynb") if p.stem == p.parent.name)


def exercise_path(assignment: str) -> str:
    """The released notebook of an assignment, relative to the course folder."""
    return f"exercises/{assignment}/{assignment}.ipynb"


def not_graded_under(path: Path, assignment: str) -> str | None:
    """What ``make check`` and ``make validate`` say first of a notebook at ``path`` that grading would not read
    under its name (a browser's ``... (1).ipynb``, Colab's ``Copy of ...``, Jupyter's ``...-Copy1.ipynb``), and
    what to rename it to; None where it is named ``<assignment>.ipynb``, the only name grading reads (a
    submission without it is refused: ``autograder.grading.submissions.misnamed``)."""
    expected = f"{assignment}.ipynb"
    if Path(path).name == expected:
        return None
    return (
        f"{clean_text(Path(path).name, 80)} would not be graded under its name: the only name grading reads is "
        f"{expected}. Rename it {expected} before you submit (a submission without it scores 0)."
    )


def assignment_names(path: Path, root: Path | None = None) -> list[str]:
    """The assignments that the notebook at ``path`` may be, most likely first, each one of the course's (an
    instructor notebook or a released exercise under ``root``): its file's name, the name its setup cells
    declare (:func:`attention_course.tooling.notebooks.declared_assignment`: a browser's ``... (1).ipynb`` and Colab's
    ``Copy of ...`` keep it), its folder's name. A name that is not one of the course's is dropped, so nothing a
    notebook says names a path; empty where none is."""
    root = Path(root or COURSE_ROOT)
    known = set(assignments(root)) | {
        p.parent.name for p in (root / "exercises").glob("*/*.ipynb") if p.stem == p.parent.name
    }
    path = Path(path)
    try:
        declared = notebooks.declared_assignment(notebooks.read(path))
    except Exception:  # not a notebook: named by its file or folder alone
        declared = None
    names = []
    for name in (path.stem, declared, path.resolve().parent.name):
        if isinstance(name, str) and name in known and name not in names:
            names.append(name)
    return names


def released_notebook(assignment: str, root: Path | None = None):
    """The notebook of ``assignment`` as students received it (:func:`exercise_path` under ``root``, default
    the course folder; a students' copy holds it too), read; None where there is none, or it cannot be read."""
    path = Path(root or COURSE_ROOT) / exercise_path(assignment)
    try:
        return notebooks.read(path) if path.is_file() else None
    except Exception:  # not a notebook's JSON: compared with nothing, as a copy that has none
        return None


def notebook_path(assignment: str, folder: str = "solutions", root: Path | None = None) -> Path:
    """``<root>/<folder>/<assignment>/<assignment>.ipynb``, which must exist."""
    path = Path(root or COURSE_ROOT) / folder / assignment / f"{assignment}.ipynb"
    if not path.is_file():
        raise FileNotFoundError(f"no notebook for assignment {assignment!r} at {path}")
    return path


@dataclass(frozen=True)
class Repository:
    """A public GitHub repository that students open exercises from, at one git ref: ``_config.yml``'s
    (the open edition's, at its branch) or a term's students' repository (at a pinned release)."""

    url: str  # https://github.com/<owner>/<name>
    ref: str  # a branch, or, for a term, the release's tag or commit

    @property
    def slug(self) -> str:
        """``owner/name``."""
        return self.url.removeprefix("https://github.com/").strip("/")

    def colab_url(self, path: str) -> str:
        """The address that opens ``path`` (a notebook in the repository) in Google Colab."""
        return f"https://colab.research.google.com/github/{self.slug}/blob/{self.ref}/{path}"

    def blob_url(self, path: str) -> str:
        """The address of ``path`` on GitHub."""
        return f"{self.url}/blob/{self.ref}/{path}"

    def raw_url(self, path: str) -> str:
        """The address of ``path``'s content at the ref (what pip reads a constraints file from)."""
        return f"https://raw.githubusercontent.com/{self.slug}/{self.ref}/{path}"

    def pip_spec(self) -> str:
        """What ``pip install`` takes to install the course's packages from the repository at its ref."""
        return f"attention-course @ git+{self.url}@{self.ref}"


def _github_url(url, where: str) -> str:
    """``url`` without a trailing slash, if it is ``https://github.com/<owner>/<name>``."""
    if not isinstance(url, str) or not url.startswith("https://github.com/") or url.rstrip("/").count("/") != 4:
        raise ValueError(f"{where} must be https://github.com/<owner>/<name>, got {url!r}")
    return url.rstrip("/")


def repository(root: Path | None = None) -> Repository:
    """``_config.yml``'s ``repository:``: the open edition's repository and branch."""
    config = yaml.safe_load((Path(root or COURSE_ROOT) / "_config.yml").read_text())
    repo = config.get("repository") or {}
    return Repository(_github_url(repo.get("url"), "_config.yml: repository.url"), str(repo.get("branch", "main")))


class SettingsError(ValueError):
    """``term.yml``, ``EDITION`` or ``RELEASED`` says something the course cannot do."""


@dataclass(frozen=True)
class Release:
    """Which reference solutions are published to students.

    ``edition="open"`` publishes every solution (self-learners); ``edition="term"`` publishes
    those of the assignments in ``released`` only.
    """

    edition: str = "open"
    released: frozenset[str] = frozenset()

    def __post_init__(self):
        if self.edition not in EDITIONS:
            raise SettingsError(f"edition must be one of {', '.join(EDITIONS)}, got {self.edition!r}")
        object.__setattr__(self, "released", frozenset(self.released))

    def is_released(self, assignment: str) -> bool:
        return self.edition == "open" or assignment in self.released

    def of(self, names) -> list[str]:
        """The released ones among ``names``, in their order."""
        return [name for name in names if self.is_released(name)]

    @property
    def key(self) -> str:
        """A short, stable text for caches and configuration: ``open`` or ``term:a,b``."""
        return "open" if self.edition == "open" else "term:" + ",".join(sorted(self.released))

    @classmethod
    def from_key(cls, key: str) -> Release:
        """The release that :attr:`key` describes."""
        if key == "open":
            return cls("open")
        if not key.startswith("term:"):
            raise SettingsError(f"not a release key: {key!r}")
        return cls("term", frozenset(filter(None, key[len("term:") :].split(","))))

    def describe(self) -> str:
        if self.edition == "open":
            return "the open edition: every chapter's solutions are published"
        shown = ", ".join(sorted(self.released)) or "none yet"
        return f"the term edition: solutions released for {shown}"


def _split(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in re.split(r"[\s,]+", value) if part]
    if isinstance(value, (list, tuple)):
        return [str(part) for part in value]
    raise SettingsError(f"released must be a list of assignment names, got {value!r}")


def _settings(root: Path) -> dict:
    """``term.yml`` under ``root`` as a mapping (empty where there is none)."""
    path = root / SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        settings = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise SettingsError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(settings, dict):
        raise SettingsError(f"{path} must hold `edition:` and `released:`, got {type(settings).__name__}")
    return settings


def term_settings(root: Path | None = None) -> dict:
    """``term.yml`` under ``root`` (default: this course) as a mapping, empty where there is none; for the keys that
    other modules read (``deadlines``, ``late_policy``: :mod:`autograder.grading.deadlines`)."""
    return _settings(Path(root or COURSE_ROOT))


def release(root: Path | None = None, environ=None) -> Release:
    """The release settings: ``term.yml`` under ``root``, then ``EDITION``/``RELEASED`` from ``environ``.

    ``RELEASED`` is a list of assignment names separated by spaces or commas, ``all`` or
    ``none``; set without ``EDITION``, it means the term edition. Unknown names are an error,
    so that a typo never publishes or withholds the wrong chapter.
    """
    root = Path(root or COURSE_ROOT)
    environ = os.environ if environ is None else environ
    settings = _settings(root)
    edition = str(settings.get("edition", "open"))
    names = _split(settings.get("released"))
    source = f"{SETTINGS_FILE} released"
    if environ.get("RELEASED") is not None:
        names, source = _split(environ["RELEASED"]), "RELEASED"
        edition = "term"
    if environ.get("EDITION"):
        edition = environ["EDITION"].strip()
    if edition not in EDITIONS:
        raise SettingsError(f"EDITION must be one of {', '.join(EDITIONS)}, got {edition!r}")
    known = assignments(root)
    if [n.lower() for n in names] == ["all"]:
        names = known
    elif [n.lower() for n in names] == ["none"]:
        names = []
    unknown = [name for name in names if name not in known]
    if unknown and known:
        raise SettingsError(
            f"{source} names {', '.join(map(repr, unknown))}, which is not an assignment; "
            f"choose from: {', '.join(known)}"
        )
    return Release(edition, frozenset(names))


STUDENTS_REPOSITORY = "students_repository"  # term.yml's key: the term's students' repository
# Names that are branches (they move on every push), never a release.
BRANCH_NAMES = frozenset({"main", "master", "trunk", "develop", "HEAD"})
GIT_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")


def pinned_release(ref, branch: str = "main") -> str:
    """``ref`` if it names a release that never moves, a git tag or commit; ``branch`` is ``_config.yml``'s."""
    where = f"{SETTINGS_FILE}: {STUDENTS_REPOSITORY}.release (or STUDENTS_RELEASE)"
    if not isinstance(ref, str) or not ref.strip():
        raise SettingsError(
            f"{where} must name, in quotes, the git tag (or commit) of the students' repository that the "
            f"exercises install, such as 'week-3'; got {ref!r}"
        )
    ref = ref.strip()
    if not GIT_REF.fullmatch(ref) or ".." in ref or "//" in ref or ref.endswith((".", "/", ".lock")):
        raise SettingsError(f"{where} must be a git tag name or a commit, got {ref!r}")
    if ref in BRANCH_NAMES or ref == branch:
        raise SettingsError(
            f"{where} is {ref!r}, a branch, which changes with every push: name a tag (such as 'week-3') or a commit"
        )
    return ref


def students_repository(root: Path | None = None, environ=None) -> Repository | None:
    """A term's students' repository at the release they install: ``students_repository:`` in ``term.yml``
    (``url`` and ``release``), each overridden by ``STUDENTS_REPOSITORY`` and ``STUDENTS_RELEASE`` from
    ``environ``; None where no URL is set."""
    root = Path(root or COURSE_ROOT)
    environ = os.environ if environ is None else environ
    entry = _settings(root).get(STUDENTS_REPOSITORY) or {}
    if not isinstance(entry, dict):
        raise SettingsError(f"{SETTINGS_FILE}: {STUDENTS_REPOSITORY} must hold `url:` and `release:`, got {entry!r}")
    url = environ.get("STUDENTS_REPOSITORY") or entry.get("url")
    ref = environ.get("STUDENTS_RELEASE") or entry.get("release")
    if not url:
        if ref:
            raise SettingsError(
                f"{SETTINGS_FILE}: {STUDENTS_REPOSITORY} has a release but no url: set the url of your "
                "students' repository (or STUDENTS_REPOSITORY)"
            )
        return None
    try:
        url = _github_url(url, f"{SETTINGS_FILE}: {STUDENTS_REPOSITORY}.url (or STUDENTS_REPOSITORY)")
    except ValueError as error:
        raise SettingsError(str(error)) from None
    return Repository(url, pinned_release(ref, repository(root).ref))


def exercise_repository(settings: Release, root: Path | None = None, environ=None) -> Repository:
    """The repository that the exercises' links and Colab cells name under ``settings``: in a term, its
    students' repository at its release, where one is set; otherwise ``_config.yml``'s."""
    students = students_repository(root, environ) if settings.edition == "term" else None
    return students or repository(root)


def repository_note(settings: Release, root: Path | None = None, environ=None) -> str | None:
    """A warning for a term that names no students' repository, or None (the open edition is the course's
    own, published from ``_config.yml``'s repository)."""
    if settings.edition != "term" or students_repository(root, environ) is not None:
        return None
    return (
        f"{SETTINGS_FILE} names no {STUDENTS_REPOSITORY}: the term's book links the exercises in "
        f"_config.yml's repository ({repository(root).url}), your own, and `make student-repo` refuses to "
        f"export; set {STUDENTS_REPOSITORY}'s url and release in {SETTINGS_FILE} (instructor guide, "
        "'Making the student repository')."
    )


class ReleasedRefusal(SettingsError):
    """Grading a term's assignment whose solutions are already released, without the instructor's leave."""


ALLOW_RELEASED = "--allow-released"  # make grade's switch; nbgrader's: SandboxedExecute.allow_released


def grading_refusal(assignment: str, settings: Release, allow_released: bool = False) -> str | None:
    """Why ``assignment`` may not be graded under ``settings``, or None: in a term, a chapter whose
    solutions are released (a submission could import them) is graded only where the instructor
    allows it. ``make grade`` and plain ``nbgrader autograde`` (the course's plugin) both ask this,
    so that they refuse alike."""
    if settings.edition != "term" or not settings.is_released(assignment) or allow_released:
        return None
    return (
        f"the solutions of {assignment} are released ({settings.describe()}), so a submission could "
        f"import them: grade before the release, or name the releases without it for this command "
        f'(RELEASED="..."), or allow it: make grade ... ARGS={ALLOW_RELEASED}, or nbgrader autograde '
        f"... --SandboxedExecute.allow_released=True"
    )


def open_edition_note(settings: Release) -> str | None:
    """The note that grading in the open edition prints (every solution importable), or None in a term."""
    if settings.edition != "open":
        return None
    return (
        f"grading in {settings.describe()}; a submission may import every reference solution. "
        "For a graded class, run a term (term.yml, see the instructor guide's 'Running a term')."
    )


def environment(settings: Release) -> dict[str, str]:
    """``EDITION`` and ``RELEASED`` that make :func:`release` give ``settings`` in another process."""
    return {"EDITION": settings.edition, "RELEASED": " ".join(sorted(settings.released)) or "none"}


def main() -> int:
    """Say which edition the settings give (``make book`` prints it); 2 when the settings are wrong."""
    import sys

    try:
        settings = release()
        print(f"Release settings ({SETTINGS_FILE}, EDITION, RELEASED): {settings.describe()}")
        note = repository_note(settings)
        if note:
            print(f"note: {note}", file=sys.stderr)
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
