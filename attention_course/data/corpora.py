"""Text for the character-level language model.

- :func:`course_text`: the course's own chapters as a kept snapshot (no download, the default);
  :func:`chapters_text` is the same chapters as the pages hold them now, and :func:`write_snapshot`
  (``python -m attention_course.data.corpora``) makes the snapshot again from them;
- :func:`tiny_shakespeare`: the 1.1 MB Shakespeare collection of the char-rnn project,
  downloaded once and cached, and checked against its SHA-256 digest;
- :func:`download_cached`: the download-and-verify step that any other corpus can use.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import tempfile
import urllib.request
from pathlib import Path

BOOK = Path(__file__).resolve().parents[2] / "book"
TINY_SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


class ChecksumError(RuntimeError):
    """A downloaded file is not the file that was asked for."""


def cache_dir() -> Path:
    """Where downloads are kept: $ATTENTION_COURSE_CACHE, else ~/.cache/attention_course."""
    return Path(os.environ.get("ATTENTION_COURSE_CACHE", Path.home() / ".cache" / "attention_course"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_cached(url: str, sha256: str, filename: str, directory: Path | None = None) -> Path:
    """The file at ``url``, downloaded into ``directory`` (default :func:`cache_dir`) unless it is there.

    The file's SHA-256 must equal ``sha256``, both for a new download (which is
    kept only if it does) and for a file already in the cache.
    """
    directory = Path(directory or cache_dir())
    target = directory / filename
    if target.exists():
        if _sha256(target) != sha256:
            raise ChecksumError(
                f"{target} is in the cache but its SHA-256 is not {sha256}; delete it to download it again"
            )
        return target
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=directory, delete=False, suffix=".part") as part:
        partial = Path(part.name)
    try:
        with urllib.request.urlopen(url, timeout=60) as response, partial.open("wb") as out:
            for block in iter(lambda: response.read(1 << 20), b""):
                out.write(block)
        found = _sha256(partial)
        if found != sha256:
            raise ChecksumError(f"{url} downloaded with SHA-256 {found}, expected {sha256}")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def tiny_shakespeare(directory: Path | None = None, url: str = TINY_SHAKESPEARE_URL) -> str:
    """The text of tiny Shakespeare (1,115,394 characters), downloaded on first use."""
    return download_cached(url, TINY_SHAKESPEARE_SHA256, "tinyshakespeare.txt", directory).read_text()


# The chapters whose text chapters 9 and 10 train on and hold out (their last tenth): a chapter added after them
# would become the held-out text and change what those chapters measure (chapter 11's kernels, mostly code, moved
# chapter 10's in-context learning score out of the range it states).
CORPUS_CHAPTERS = range(1, 11)
# Chapters 9 and 10 and `make train` read those chapters from this snapshot, not from the pages: a page edited
# (an instructor's change for a term, a faster cell) would otherwise change the text their models train on, and
# with it figures their prose states (chapter 9's speculative guesses fell below half of those judged after one
# code cell of chapter 5 changed). It is made again by `python -m attention_course.data.corpora`, and then chapters 9
# and 10 are built again (make book) and their prose checked against their new figures.
SNAPSHOT = BOOK / "_corpus" / "chapters_01_10.txt.gz"


def chapters_text(book: Path = BOOK) -> str:
    """Chapters 1 to 10 (:data:`CORPUS_CHAPTERS`) as the pages in ``book`` hold them now, as one text."""
    chapters = sorted(path for path in Path(book).glob("ch*.md") if int(path.name[2:4]) in CORPUS_CHAPTERS)
    if not chapters:
        raise FileNotFoundError(f"no chapters found in {book}; pass a text file instead")
    return "\n\n".join(path.read_text(encoding="utf-8") for path in chapters)


def course_text(snapshot: Path = SNAPSHOT) -> str:
    """Chapters 1 to 10 of this course as one text (about 800,000 characters; no download), from the snapshot
    that chapters 9 and 10 measured (:data:`SNAPSHOT`), whatever the pages say since."""
    snapshot = Path(snapshot)
    if not snapshot.is_file():
        raise FileNotFoundError(f"no snapshot of the course's text at {snapshot}; pass a text file instead")
    return gzip.decompress(snapshot.read_bytes()).decode("utf-8")


def write_snapshot(book: Path = BOOK, snapshot: Path = SNAPSHOT) -> str:
    """The snapshot made again from the pages in ``book`` (the same bytes for the same text); its SHA-256."""
    data = chapters_text(book).encode("utf-8")
    snapshot = Path(snapshot)
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    return hashlib.sha256(data).hexdigest()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Make the snapshot of chapters 1 to 10 that chapters 9 and 10 train on again from the pages; "
        "then build the book (make book) and check those chapters' prose against their new figures."
    )
    parser.parse_args(argv)
    digest = write_snapshot()
    print(f"{SNAPSHOT.relative_to(BOOK.parent)}: chapters 1 to 10 as the pages hold them now (SHA-256 {digest})")


if __name__ == "__main__":
    main()
