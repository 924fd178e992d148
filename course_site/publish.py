"""Publishing the course without its answers: the student repository, and a check for leaks.

    python -m course_site.publish student-repo DEST   # write the student-facing copy of the repository
    python -m course_site.publish check DIR           # fail if DIR (a built site, an export) holds
                                                      # a solution or a hidden test

The course lives in two repositories. The instructor's, private, holds everything, ``solutions/``
(reference solutions and hidden tests) included. The students', public, is the one that
``_config.yml``'s ``repository:`` names: the book's "Open in Colab" links open its exercises and
the first cell of every exercise ``pip install``\\ s its packages. ``student-repo`` writes that
repository's files: an allow-list of paths (:data:`STUDENT_DIRS`, :data:`STUDENT_FILES`), taken
from what git tracks, so that nothing ignored or untracked slips in; then it runs ``check`` on the
result.

``check`` reads every text file under DIR (binary files are only compared with ``solutions/``)
and reports, without ever printing the secret text:

- a file of ``solutions/``: one in a folder named ``solutions``, or a byte-for-byte copy of one;
- an nbgrader marker (:data:`MARKERS`). The files that explain the markers are exempt: a file of
  an export that is identical to the repository's (``README.md``, ``autograder/notebooks.py``,
  this module), and the built page of a book page that shows them (the instructor guide). Never
  an exercise notebook;
- a *secret line*: a line (stripped, at least :data:`MIN_SECRET` characters) of a hidden-test
  region or a reference-solution region of a notebook under ``solutions/`` that appears nowhere
  in the public sources (:data:`PUBLIC_SOURCES`). From chapter 3 on the book shows the package's
  attention code, which the reference solutions share: those lines are public by design.
  Besides the file's raw text, the text of its HTML (tags dropped, entities decoded) and of its
  JSON strings (notebooks, search indexes) are searched, so highlighted code and escaped
  notebook sources are found too.

Where ``solutions/`` does not exist (a check run in the student repository itself) there is no
secret line to look for: ``check`` says so and checks the rest.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import nbformat

from autograder import notebooks
from course_site import COURSE_ROOT

# What the student repository holds: these folders, and these files where git tracks them.
STUDENT_DIRS = ("book", "exercises", "attention_course", "autograder", "course_site")
STUDENT_FILES = (
    "_config.yml", "_toc.yml", "requirements.txt", "pyproject.toml", "README.md", "Makefile",
    ".gitignore", ".github/workflows/pages.yml",
    # `make bench-transformer`; benchmarks/grading.py is left out: it needs tests/ and solutions/.
    "benchmarks/transformer.py",
)
LICENSE_RE = re.compile(r"^(LICEN[CS]E|COPYING)(\.[A-Za-z]+)?$")
# Never published, wherever they sit (a path with one of these folders in it is left out).
NEVER_DIRS = frozenset({"solutions", "tests", "submitted", "autograded", "feedback", "grades", "_build",
                        ".venv", "__pycache__", ".ipynb_checkpoints", ".pytest_cache", "runs"})
NEVER_FILES_RE = re.compile(r"^gradebook\.db.*$|^\.nbgrader\.log$")
NEVER_PREFIXES = ("book/_static/mathjax/", "book/_static/mathjax.partial/")  # fetched at build time

# What counts as public when deciding whether a solution's line is a secret.
PUBLIC_SOURCES = ("exercises", "book", "attention_course", "autograder", "course_site", "README.md")
MARKERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "BEGIN SOLUTION", "END SOLUTION")
MIN_SECRET = 25

HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".xml", ".svg"})
JSON_SUFFIXES = frozenset({".ipynb", ".json", ".js", ".map"})
_TAG_RE = re.compile(r"<[^>]*>")
_JSON_STRING_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"')


class PublishError(Exception):
    """A problem with the arguments or the sources that stops publishing."""


@dataclass(frozen=True)
class Secret:
    """A line that must not be published, and where it comes from (never printed)."""

    text: str
    notebook: str  # relative to the repository root
    cell: str  # the cell's nbgrader grade_id, or its number
    kind: str  # "hidden-test" or "reference-solution"


@dataclass(frozen=True)
class Problem:
    path: str  # relative to the checked folder
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class Report:
    """What :func:`check` found; ``ok`` when nothing."""

    directory: Path
    problems: list[Problem] = field(default_factory=list)
    files: int = 0  # text files scanned
    binary: int = 0  # binary files (compared with solutions/ only)
    secrets: int = 0  # secret lines looked for
    notebooks: int = 0  # solution notebooks they come from
    marker_exempt: list[str] = field(default_factory=list)
    has_solutions: bool = True

    @property
    def ok(self) -> bool:
        return not self.problems


# ---------------------------------------------------------------------------------------------
# Files


def _posix(path: Path) -> str:
    return PurePosixPath(*path.parts).as_posix()


def _git_files(root: Path, *args: str) -> list[str]:
    try:
        result = subprocess.run(["git", "-C", str(root), "ls-files", "-z", *args],
                                capture_output=True, text=True)
    except FileNotFoundError:
        raise PublishError("git is not installed: student-repo takes the files that git tracks") from None
    if result.returncode != 0:
        raise PublishError(f"{root} is not a git repository that git can read "
                           f"(student-repo takes the files that git tracks): {result.stderr.strip()}")
    return [name for name in result.stdout.split("\0") if name]


def is_published(path: str) -> bool:
    """Whether ``path`` (relative, with ``/``) belongs in the student repository."""
    parts = PurePosixPath(path).parts
    if not parts or any(part in NEVER_DIRS for part in parts) or NEVER_FILES_RE.match(parts[-1]):
        return False
    if path.startswith(NEVER_PREFIXES):
        return False
    return (parts[0] in STUDENT_DIRS and len(parts) > 1) or path in STUDENT_FILES \
        or (len(parts) == 1 and bool(LICENSE_RE.match(path)))


def student_files(root: Path = COURSE_ROOT) -> list[str]:
    """The files of the student repository: tracked by git, allowed by :func:`is_published`."""
    root = Path(root)
    return sorted(name for name in _git_files(root, "--cached") if is_published(name))


def left_out_untracked(root: Path = COURSE_ROOT) -> list[str]:
    """Files that would be published if git tracked them (untracked and not ignored)."""
    return sorted(name for name in _git_files(Path(root), "--others", "--exclude-standard") if is_published(name))


def _walk(directory: Path):
    """Every file under ``directory`` (links to files included), as (path, relative posix path)."""
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            yield path, _posix(path.relative_to(directory))


def _source_files(root: Path) -> list[str]:
    """The repository's files that are not ignored (tracked or not), or all of them outside git."""
    try:
        return _git_files(root, "--cached", "--others", "--exclude-standard")
    except PublishError:
        return [rel for _, rel in _walk(root)
                if not any(part in NEVER_DIRS or part.startswith(".") for part in PurePosixPath(rel).parts)]


# ---------------------------------------------------------------------------------------------
# Text


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _json_strings(text: str) -> str:
    """The JSON string literals of ``text`` (a notebook, a JSON file, a script), decoded."""
    out = []
    for match in _JSON_STRING_RE.finditer(text):
        try:
            out.append(json.loads(match.group(0)))
        except ValueError:
            continue
    return "\n".join(out)


def _html_text(text: str) -> str:
    return html.unescape(_TAG_RE.sub("", text))


def text_views(text: str, suffix: str) -> list[str]:
    """The texts of a file that are searched: raw, its JSON strings decoded, its HTML as text."""
    views = [text]
    if suffix in JSON_SUFFIXES:
        views.append(_json_strings(text))
    if suffix in HTML_SUFFIXES or suffix in JSON_SUFFIXES or "<" in text:
        views += [_html_text(view) for view in list(views) if "<" in view or "&" in view]
    return views


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def _marked_regions(source: str, begin: str, end: str) -> list[str]:
    """The lines between each ``begin`` line and the next ``end`` line (an open region runs to the end)."""
    lines, inside = [], False
    for line in source.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside:
            lines.append(line)
    return lines


def _notebook_secrets(nb, notebook: str) -> list[tuple[str, str, str]]:
    """(line, cell, kind) for every line of a hidden-test or reference-solution region."""
    found = []
    for number, cell in enumerate(nb.cells, 1):
        name = notebooks.cell_id(cell) or f"cell {number}"
        source = cell.get("source", "")
        for line in _marked_regions(source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            found.append((line, name, "hidden-test"))
        if "BEGIN SOLUTION" in source:
            for line in _marked_regions(source, "BEGIN SOLUTION", "END SOLUTION"):
                found.append((line, name, "reference-solution"))
        elif notebooks.is_solution(cell):
            # A solution cell without markers is replaced whole when the exercise is generated.
            found += [(line, name, "reference-solution") for line in source.splitlines()]
    return found


def public_text(root: Path = COURSE_ROOT) -> str:
    """The public sources' text, one stripped line per line (notebooks: their JSON strings too)."""
    root = Path(root)
    parts = []
    for rel in _source_files(root):
        top = PurePosixPath(rel).parts[0]
        if top not in PUBLIC_SOURCES or rel.startswith(NEVER_PREFIXES) \
                or any(part in NEVER_DIRS for part in PurePosixPath(rel).parts):
            continue
        path = root / rel
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if _is_binary(data):
            continue
        text = data.decode("utf-8", errors="replace")
        for view in text_views(text, path.suffix.lower()):
            parts.append("\n".join(_lines(view)))
    return "\n".join(parts)


def secret_lines(root: Path = COURSE_ROOT) -> list[Secret]:
    """The secret lines of every notebook under ``root/solutions`` (empty where there is none)."""
    root = Path(root)
    solutions = root / "solutions"
    if not solutions.is_dir():
        return []
    public = public_text(root)
    secrets, seen = [], set()
    for path in sorted(solutions.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        rel = _posix(path.relative_to(root))
        try:
            nb = nbformat.read(str(path), as_version=4)
        except Exception as error:  # noqa: BLE001 - an unreadable notebook stops the check
            raise PublishError(f"cannot read {rel} to find its secret lines: {error}") from None
        for line, cell, kind in _notebook_secrets(nb, rel):
            text = line.strip()
            if len(text) < MIN_SECRET or text in seen or any(marker in text for marker in MARKERS):
                continue
            if text in public:
                continue
            seen.add(text)
            secrets.append(Secret(text, rel, cell, kind))
    return secrets


# ---------------------------------------------------------------------------------------------
# The check


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
    """Where the markers may appear: published files that show them (path -> digest), and the
    book pages that show them (``book/instructor_guide``)."""
    files, pages = {}, set()
    for rel in _source_files(root):
        if not is_published(rel) or rel.endswith(".ipynb") or rel.startswith("exercises/"):
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


def check(directory: Path, root: Path = COURSE_ROOT) -> Report:
    """Scan every file under ``directory`` for solutions, nbgrader markers and secret lines."""
    directory, root = Path(directory), Path(root)
    if not directory.exists():
        raise PublishError(f"check: DIR {directory} does not exist (expected a built site such as "
                           "_build/html, or a folder written by student-repo)")
    if not directory.is_dir():
        raise PublishError(f"check: DIR {directory} is not a folder (expected a built site such as "
                           "_build/html, or a folder written by student-repo)")
    if not root.is_dir():
        raise PublishError(f"check: --root {root} is not a folder (expected the course repository)")

    report = Report(directory)
    solutions = root / "solutions"
    report.has_solutions = solutions.is_dir()
    solution_digests = {}
    if report.has_solutions:
        for path in solutions.rglob("*"):
            if path.is_file():
                solution_digests.setdefault(_digest(path.read_bytes()), _posix(path.relative_to(root)))
    secrets = secret_lines(root)
    report.secrets, report.notebooks = len(secrets), len({s.notebook for s in secrets})
    exempt_files, exempt_pages = _marker_documents(root)

    for path, rel in _walk(directory):
        problems = report.problems
        if "solutions" in PurePosixPath(rel).parts[:-1]:
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
        views = text_views(text, path.suffix.lower())

        allowed = (exempt_files.get(rel) == digest) or (
            not rel.endswith(".ipynb") and _page_key(rel) in exempt_pages)
        if allowed:
            if any(marker in view for view in views for marker in MARKERS):
                report.marker_exempt.append(rel)
        else:
            for marker in MARKERS:
                if any(marker in view for view in views):
                    problems.append(Problem(rel, f"{_line_of(text, marker)}holds the nbgrader marker {marker!r}"))

        hits: dict[tuple[str, str, str], list[Secret]] = {}
        for secret in secrets:
            if any(secret.text in view for view in views):
                hits.setdefault((secret.notebook, secret.cell, secret.kind), []).append(secret)
        for (notebook, cell, kind), found in hits.items():
            count = f"{len(found)} {kind} lines" if len(found) > 1 else f"a {kind} line"
            problems.append(Problem(rel, f"{_line_of(text, found[0].text)}{count} of {notebook}, cell {cell}"))
    return report


# ---------------------------------------------------------------------------------------------
# The student repository


def student_repo(dest: Path, root: Path = COURSE_ROOT) -> tuple[list[str], Report]:
    """Write the student repository into ``dest`` (empty or absent) and check it.

    Returns the files written and the check's report. Raises :class:`PublishError` for a bad
    ``dest`` and when the check fails (the export is then removed again).
    """
    dest, root = Path(dest), Path(root).resolve()
    if dest.exists() and not dest.is_dir():
        raise PublishError(f"student-repo: DEST {dest} is a file; expected an empty folder or a new path")
    if dest.is_dir():
        entries = sorted(p.name for p in dest.iterdir())
        if entries:
            shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
            raise PublishError(f"student-repo: DEST {dest} is not empty ({len(entries)} entries: {shown}); "
                               "expected an empty folder or a new path, so that nothing else is published")
    resolved = dest.resolve()
    if resolved == root or root in resolved.parents:
        raise PublishError(f"student-repo: DEST {dest} is inside the course repository {root}; expected a "
                           "folder outside it (the student repository is a git repository of its own)")
    files = student_files(root)
    missing = [rel for rel in files if not (root / rel).exists() and not (root / rel).is_symlink()]
    files = [rel for rel in files if rel not in missing]
    if not any(rel.startswith("exercises/") for rel in files):
        raise PublishError(f"student-repo: git tracks no exercises/ in {root}; run `make exercises` and commit")

    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target, follow_symlinks=False)

    report = check(dest, root)
    if not report.ok:
        if created:
            shutil.rmtree(dest)
        else:
            for child in dest.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        raise PublishError("student-repo: the export failed the check and was removed; fix the sources:\n"
                           + "\n".join(f"  {problem}" for problem in report.problems))
    return files, report


# ---------------------------------------------------------------------------------------------
# Command line


def _summary(report: Report) -> str:
    secrets = (f"{report.secrets} secret lines of {report.notebooks} solution notebooks"
               if report.has_solutions else "no solutions/ to take secret lines from: markers and copies only")
    return (f"checked {report.files} text files and {report.binary} binary files under {report.directory} "
            f"({secrets})")


def _print_report(report: Report) -> None:
    print(_summary(report))
    if not report.has_solutions:
        print("note: the repository has no solutions/ folder (a student repository?): secret lines are "
              "checked where the export is made, in the instructor's repository")
    if report.marker_exempt:
        print("markers allowed (files that explain them): " + ", ".join(report.marker_exempt))
    if report.ok:
        print("OK: no solution, hidden test or nbgrader marker")
    else:
        print(f"FAIL: {len(report.problems)} problems", file=sys.stderr)
        for problem in report.problems:
            print(f"  {problem}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", type=Path, default=COURSE_ROOT,
                        help="the course repository, with solutions/ (default: %(default)s)")
    parser = argparse.ArgumentParser(prog="python -m course_site.publish", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    export = commands.add_parser("student-repo", parents=[common],
                                 help="write the student repository into DEST and check it")
    export.add_argument("dest", type=Path, metavar="DEST", help="an empty folder, or one that does not exist")
    scan = commands.add_parser("check", parents=[common],
                               help="fail if DIR holds a solution, a hidden test or an nbgrader marker")
    scan.add_argument("directory", type=Path, metavar="DIR", help="a built site (_build/html) or an export")
    args = parser.parse_args(argv)

    try:
        if args.command == "check":
            report = check(args.directory, args.root)
            _print_report(report)
            return 0 if report.ok else 1
        files, report = student_repo(args.dest, args.root)
    except PublishError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1 if "failed the check" in str(error) else 2
    untracked = left_out_untracked(args.root)
    if untracked:
        print(f"warning: {len(untracked)} files would be published but git does not track them; `git add` "
              "and commit them, then export again: " + ", ".join(untracked), file=sys.stderr)
    print(_summary(report))
    print(f"wrote {len(files)} files into {args.dest}. Next: cd {args.dest} && git init -b main && git add -A "
          "&& git commit -m 'Course release' && git remote add origin <student repository URL> && git push")
    return 0


if __name__ == "__main__":
    sys.exit(main())
