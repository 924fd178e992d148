"""Published files with nothing secret in them: copies of public sources, of book/_static, of Sphinx's assets."""

from __future__ import annotations

import base64
import functools
import importlib.metadata
import re
from pathlib import Path

from course_site.leaks.files import digest as digest_of

_ASSET_DISTRIBUTIONS_RE = re.compile(r"sphinx|myst|jupyter.book|pydata|plotly", re.I)


@functools.lru_cache(maxsize=1)
def shipped_digests() -> frozenset[str]:
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


class KnownFiles:
    """Published files with nothing to look for in them: copies of the public sources (all their
    code is public), of the book's static files (``book/_static``, MathJax included) and of the
    assets that the Sphinx distributions ship (:func:`shipped_digests`)."""

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
            self.digests.setdefault(digest_of(path.read_bytes()), "a file of book/_static")
        if digest in self.digests:
            return self.digests[digest]
        if digest in shipped_digests():
            return "a file that Sphinx or its extensions ship"
        return None
