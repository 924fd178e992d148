"""Text for the character-level language model.

- :func:`course_text`: the course's own chapters (no download, the default);
- :func:`tiny_shakespeare`: the 1.1 MB Shakespeare collection of the char-rnn project,
  downloaded once and cached, and checked against its SHA-256 digest;
- :func:`download_cached`: the download-and-verify step that any other corpus can use.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from pathlib import Path

BOOK = Path(__file__).resolve().parent.parent / "book"
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


def course_text() -> str:
    """Chapters 1 to 10 of this course (:data:`CORPUS_CHAPTERS`), as one text (a few hundred thousand characters; no
    download)."""
    chapters = sorted(path for path in BOOK.glob("ch*.md") if int(path.name[2:4]) in CORPUS_CHAPTERS)
    if not chapters:
        raise FileNotFoundError(f"no chapters found in {BOOK}; pass a text file instead")
    return "\n\n".join(path.read_text() for path in chapters)
