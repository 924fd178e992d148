"""The check that nothing a user gets names a folder of the machine that built or measured it.

A command recorded on a measuring machine, an error message or a printed path can carry that machine's own
absolute paths into what the course publishes: the root user's or a user's home (``/root/...``,
``/home/<user>/...``, ``/Users/<user>/...``), a temporary folder (``/tmp/...``, ``/var/tmp/...``, a random
``tmp.XXXXXXXXXX`` or ``tmpk3j4_9x2`` that mktemp or Python's tempfile makes), the build machines' working
tree (``/work/...``). They mean nothing to a reader, and tell of the machine. This check reads the built
site's pages, its sources and its search index, and any other files named (README.md and
benchmarks/figures.json by default: the records that the book and the README quote), and names each such path
with its file and line. A path inside a web address (``https://example.org/tmp/x``) or relative to the
repository (``benchmarks/gpu.py``, ``_build/html``) is no machine's, nor is a fixed folder that the course's own
software uses on every machine and its documents name (the grader's ``/tmp/attention-grader-uids``): a path
written as a string in the course's packages (:func:`software_paths`).

    python -m course_site.paths [_build/html] [FILE ...]     # exit 1 and list the paths found
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT

# Where a path starts: not inside a word, a web address or another path; or just after file://.
_START = r"(?:(?<![\w.~/:%@+-])|(?<=file://))"
_FOLDERS = r"(?:/root|/home/[\w.-]+|/Users/[\w.-]+|/tmp|/var/tmp|/private/var|/work|/scratch|/mnt/[\w.-]+)"
# A random temporary folder's name, wherever it is: mktemp's tmp.XXXXXXXXXX, Python's tmpXXXXXXXX (eight letters,
# digits or underscores, with at least one digit and one letter, so that words such as tmp_results are not one).
RANDOM_TMP = r"\btmp(?:\.[A-Za-z0-9]{6,}|(?=[a-z_]*[0-9])(?=[0-9_]*[a-z])[a-z0-9_]{8})\b"
MACHINE_PATH = re.compile(rf"{_START}{_FOLDERS}/[\w.~-]+|{RANDOM_TMP}")
# The files checked besides the site: what the README and the book quote of the measuring machines' records.
RECORDS = ("README.md", "benchmarks/figures.json")
# The packages whose own fixed folders a document may name.
PACKAGES = ("attention_course", "autograder", "course_site")


@cache
def software_paths() -> frozenset[str]:
    """The paths of this kind that the course's packages write as strings of their own (a folder that the software
    uses wherever it runs, such as the grader's lock folder), as :func:`find` names them."""
    found = set()
    for package in PACKAGES:
        for module in sorted((COURSE_ROOT / package).rglob("*.py")):
            if module == Path(__file__).resolve():
                continue
            for literal in re.findall(r"""["'](/[^"'\s]+)["']""", module.read_text(errors="replace")):
                found |= {match.group(0) for match in MACHINE_PATH.finditer(literal)}
    return frozenset(found)


@dataclass(frozen=True)
class MachinePath:
    file: str
    line: int
    path: str

    def __str__(self):
        return f"{self.file}:{self.line}: {self.path}"


def find(text: str) -> list[tuple[int, str]]:
    """(line, path) of each absolute path of a machine in ``text``: not those the course's software uses."""
    known = software_paths()
    return [
        (text.count("\n", 0, match.start()) + 1, match.group(0).rstrip("."))
        for match in MACHINE_PATH.finditer(text)
        if match.group(0).rstrip(".") not in known
    ]


def site_files(site: Path) -> list[Path]:
    """What a reader of the built site gets in words: its HTML pages, the page sources it publishes and its
    search index (not the JavaScript libraries and fonts under _static/)."""
    pages = [p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts]
    sources = [p for p in (site / "_sources").rglob("*") if p.is_file()] if (site / "_sources").is_dir() else []
    index = [site / "searchindex.js"] if (site / "searchindex.js").is_file() else []
    return sorted(pages + sources + index)


def scan(files: list[Path], root: Path | None = None) -> list[MachinePath]:
    """Every machine's path in ``files``, named relative to ``root`` where they are under it."""
    found = []
    for path in files:
        name = path.relative_to(root).as_posix() if root and path.is_relative_to(root) else str(path)
        found += [MachinePath(name, line, text) for line, text in find(path.read_text(errors="replace"))]
    return found


def scan_site(site: Path, records: list[Path] | None = None) -> tuple[int, list[MachinePath]]:
    """(files read, paths found) of the built ``site`` and the ``records`` (README.md and
    benchmarks/figures.json of the repository unless given)."""
    records = [COURSE_ROOT / name for name in RECORDS] if records is None else records
    files = site_files(site)
    return len(files) + len(records), scan(files, site) + scan(records, COURSE_ROOT)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    site = Path(args[0]) if args else COURSE_ROOT / "_build" / "html"
    if not (site / "index.html").is_file():
        print(f"{site}: no built site here (make book)", file=sys.stderr)
        return 2
    checked, found = scan_site(site, [Path(name) for name in args[1:]] or None)
    if found:
        print(f"{len(found)} absolute paths of a machine in what the course publishes:")
        print("\n".join(f"  {path}" for path in found))
        return 1
    print(f"no machine's path in {checked} files of {site} and the records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
