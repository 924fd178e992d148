"""nbconvert's ``strip_files_prefix`` filter, with the same output, in linear time.

:func:`strip_files_prefix` replaces nbconvert's filter of that name, whose regular expression takes
quadratic time on a line of ``[`` (150,000 of them: minutes).
"""

from __future__ import annotations

import re

_FILES_URL = re.compile(r"""(src|href)\=(['"]?)/?files/""")  # as nbconvert's; linear
_FILES_LINK_TARGET = re.compile(r"\]\(/?files/")


def strip_files_prefix(text: str) -> str:
    """nbconvert's ``strip_files_prefix`` filter (``src="files/a.png"`` and ``[a](files/a.png)`` lose their
    ``files/``), with the same output, in linear time.

    nbconvert finds markdown links with ``(!?)\\[(?P<caption>.*?)\\]\\(/?files/(?P<location>.*?)\\)``,
    which tries every ``[`` against the rest of its line: a line of 150,000 ``[`` took minutes. A match
    from a ``[`` ends at the first ``](files/`` (or ``](/files/``) after it on its line, if a ``)``
    follows that on the line; if none does, no later ``[`` of the line matches either, so the line
    is done. Each character is looked at a bounded number of times.
    """
    text = _FILES_URL.sub(r"\1=\2", text)
    pieces, done, start, line_end = [], 0, 0, -1  # text[:done] is in pieces; the search goes on from start
    while True:
        opening = text.find("[", start)
        if opening < 0:
            break
        if opening > line_end:  # on a line not seen yet: where it ends (looked for once per line)
            line_end = text.find("\n", opening)
            line_end = len(text) if line_end < 0 else line_end
        target = _FILES_LINK_TARGET.search(text, opening + 1, line_end)
        closing = text.find(")", target.end(), line_end) if target else -1
        if closing < 0:
            start = line_end + 1
            continue
        pieces += [text[done : target.start() + 2], text[target.end() : closing + 1]]
        done = start = closing + 1
    pieces.append(text[done:])
    return "".join(pieces)
