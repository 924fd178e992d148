"""The log of ``make book``'s jupyter-book build, shortened: one line per chapter, MyST's configuration dumps left out.

    jupyter-book build ... 2>&1 | python -m course_site.build_log

The build finds every chapter's outputs in the cache (one line each, from myst-nb's log), and would
execute, one after another, a page whose outputs are not there: myst-nb's lines about a page become
``[book] executing <page> ...``, ``[book] executed <page> in <seconds> s`` and ``[book] rendering <page>
with its outputs from the cache`` (its line that the cache was written is left out), the page named by the
last ``book/<page>.md: `` seen. MyST's two configuration dumps (``myst v...: MdParserConfig(...``, a line of
thousands of characters each) are left out. Every other line is passed on as it came, colours included;
each line is written as soon as it is read. Lines are bytes, compared without their colour codes; the
build's own exit status is the pipeline's (``set -o pipefail``): this filter always ends with 0.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from typing import BinaryIO

_COLOUR = re.compile(rb"\033\[[0-9;]*m")
_PAGE = re.compile(rb"book/([A-Za-z0-9_]+)\.md: ")
_CONFIG_DUMP = re.compile(rb"^myst(-nb)? v[0-9.]+: (Md|Nb)ParserConfig\(")


def shortened(lines: Iterable[bytes]) -> Iterator[bytes]:
    """The lines to show of the build's ``lines`` (each without its newline)."""
    page = b""
    for line in lines:
        plain = _COLOUR.sub(b"", line)
        named = _PAGE.search(plain)
        if named:
            page = named.group(1)
        if b".md: Executing notebook" in plain:
            yield b"[book] executing " + page + b" ..."
        elif b".md: Executed notebook in " in plain:
            seconds = re.sub(rb" seconds.*", b" s", re.sub(rb".* in ", b"", plain, count=1), count=1)
            yield b"[book] executed " + page + b" in " + seconds
        elif b".md: Using cached notebook" in plain:
            yield b"[book] rendering " + page + b" with its outputs from the cache"
        elif b".md: Cached executed notebook" in plain or _CONFIG_DUMP.match(plain):
            continue
        else:
            yield line


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    for line in iter(stream.readline, b""):
        yield line[:-1] if line.endswith(b"\n") else line


def main(source: BinaryIO | None = None, out: BinaryIO | None = None) -> int:
    """Filter ``source`` (default: standard input) into ``out`` (default: standard output), a line at a time."""
    source = source if source is not None else sys.stdin.buffer
    out = out if out is not None else sys.stdout.buffer
    for line in shortened(_lines(source)):
        out.write(line + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
