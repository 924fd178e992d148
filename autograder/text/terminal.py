"""The one filter of what a submission can put on a terminal or in the grader's files.

:func:`clean_text`. Plain standard library, so that every module that shows a submission's text (nbgrader's
plugins and log relay, ``make grade``'s summary, the grading session) can use it without importing the
sandbox or torch."""

from __future__ import annotations

import re

# What a terminal acts on, in text from a submission (ECMA-48). Sequences are removed whole, so that
# no parameter or payload is left behind as text; any introducer left over (a sequence cut short
# by the length limit) goes with the control characters.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI: cursor, erase (ESC[2J), colours (7-bit and 8-bit)
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC
    # (title, clipboard), DCS, SOS, PM and APC: strings that end with BEL or ST (or, here, the line)
    r"|\x1b[ -/]*[0-~]"  # every other escape (ESC c resets the terminal, ESC ( B picks a character set)
)
# C0 controls but tab and newline, DEL, the C1 controls (U+0080-U+009F, 8-bit CSI and OSC among
# them), and the bidirectional overrides and isolates, which reorder the text a terminal shows.
_CONTROL = dict.fromkeys(
    [*range(0, 9), *range(11, 32), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
)


def clean_text(text, limit: int) -> str:
    """Text that came from a submission, safe to keep, store and show on a terminal: at most ``limit``
    characters, valid UTF-8 (a lone surrogate becomes '?'), no terminal escape sequence (7-bit or
    8-bit: CSI, OSC, DCS and the others) and no control character but tabs and newlines (C0, DEL
    and C1), nor a bidirectional override. Every text of a submission that reaches the
    instructor's terminal or files goes through it, nbgrader's log included
    (:mod:`autograder.grading.run_nbgrader`)."""
    text = str(text)[:limit]
    text = text.encode("utf-8", "replace").decode("utf-8", "replace")
    return _ESCAPES.sub("", text).translate(_CONTROL)
