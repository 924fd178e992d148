"""The course's Markdown and TeX as plain text, for a terminal: a written answer's rubric as `make check` prints it.

A rubric is written for the notebook, which renders it: bold and italic words, code in backticks, bullets,
and mathematics between dollar signs (``$1/k$``, ``$\\sqrt{d_k}$``, ``$\\lfloor h / n_\\text{rep} \\rfloor$``).
On a terminal the marks are noise, and TeX is hard to read: :func:`plain_text` keeps the words and writes the
mathematics as one would type it (``1/k``, ``sqrt(d_k)``, ``floor(h / n_rep)``). It handles what the course's
rubrics use (tests/test_plain_text.py converts every one); any other TeX command loses its backslash only.
"""

from __future__ import annotations

import re
import textwrap

# TeX commands written as a word or a sign; a command not named here is written as its name.
_SYMBOLS = {
    "bmod": "mod",
    "mod": "mod",
    "ne": "!=",
    "neq": "!=",
    "le": "<=",
    "leq": "<=",
    "ge": ">=",
    "geq": ">=",
    "approx": "~",
    "sim": "~",
    "times": "x",
    "cdot": "*",
    "to": "->",
    "rightarrow": "->",
    "leftarrow": "<-",
    "infty": "inf",
    "dots": "...",
    "ldots": "...",
    "cdots": "...",
    "lfloor": "floor(",
    "rfloor": ")",
    "lceil": "ceil(",
    "rceil": ")",
    "left": "",
    "right": "",
    ",": " ",
    ";": " ",
    ":": " ",
    "!": "",
    "quad": "  ",
    "qquad": "  ",
    "{": "{",
    "}": "}",
    "_": "_",
    "%": "%",
    "$": "$",
}
# Commands whose one argument is text, written as it is: \text{eos\_steps} is eos_steps.
_TEXT_COMMAND = r"\\(?:text(?:rm|it|bf)?|math(?:rm|it|bf|sf|tt)|operatorname)"
# A formula up to this long stays on one line when a paragraph is filled again: its spaces are held apart
# (as this character, which no rubric holds) until the lines are made.
KEPT_WHOLE = 40
_KEPT = "\ue000"
_GROUP = r"\{((?:[^{}]|\{[^{}]*\})*)\}"  # a braced group, one level of braces inside it


def plain_text(markdown: str, width: int = 100) -> str:
    """``markdown`` (a notebook's Markdown cell, with TeX between dollar signs) as plain text: marks of
    emphasis and code removed, headings as their words, links as ``text (address)``, mathematics as typed
    text (:func:`tex`); each paragraph and list item filled again to ``width`` columns, as the conversion
    changes the lengths of its lines, a list item's lines under its first word. Code in backticks is kept
    as written."""
    lines: list[str] = []
    block: list[str] = []  # the words of the paragraph or list item being read
    first = rest = ""  # its first line's indent (with its bullet) and the others'

    def flush():
        if block:
            lines.extend(
                textwrap.wrap(
                    " ".join(block),
                    width,
                    initial_indent=first,
                    subsequent_indent=rest,
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )
            block.clear()

    for line in _pieces_converted(markdown).split("\n"):
        heading = re.match(r"^\s{0,3}#{1,6}\s+(.*?)[\s#]*$", line)
        item = re.match(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$", line)
        if not line.strip():
            flush()
            if lines and lines[-1]:
                lines.append("")
        elif heading:
            flush()
            lines.append(heading.group(1))
        elif item:
            flush()
            indent, bullet = item.group(1), "-" if item.group(2) in "*+" else item.group(2)
            first, rest = f"{indent}{bullet} ", " " * (len(indent) + len(bullet) + 1)
            block.append(item.group(3).strip())
        else:
            if not block:
                first = rest = line[: len(line) - len(line.lstrip())]
            block.append(line.strip())
    flush()
    return "\n".join(lines).strip("\n").replace(_KEPT, " ")


def _pieces_converted(text: str) -> str:
    """``text`` with its code spans kept, its mathematics made plain (:func:`tex`) and its Markdown's marks
    removed elsewhere."""
    out = []
    # code in backticks, display mathematics, inline mathematics (a dollar sign escaped is not one)
    pattern = re.compile(r"(`+)(.+?)\1|\$\$(.+?)\$\$|(?<!\\)\$(.+?)(?<!\\)\$", re.S)
    start = 0
    for found in pattern.finditer(text):
        out.append(_markdown(text[start : found.start()]))
        code, display, inline = found.group(2), found.group(3), found.group(4)
        if code is not None:
            out.append(code.strip())
        else:
            math = tex(display if display is not None else inline)
            out.append(math.replace(" ", _KEPT) if len(math) <= KEPT_WHOLE else math)
        start = found.end()
    out.append(_markdown(text[start:]))
    return "".join(out)


def _markdown(text: str) -> str:
    """Markdown's marks removed from ``text`` that holds no code or mathematics."""
    text = re.sub(r"!?\[([^\]]*)\]\(([^)\s]+)[^)]*\)", r"\1 (\2)", text)  # links and images
    text = re.sub(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", r"\2", text, flags=re.S)  # bold
    text = re.sub(r"(?<!\w)(?<!\*)\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])", r"\1", text, flags=re.S)  # italic
    text = re.sub(r"(?<!\w)_(?=[^\s_])(.+?)(?<=[^\s_])_(?!\w)", r"\1", text, flags=re.S)
    return re.sub(r"\\([\\`*_{}\[\]()#+\-.!$])", r"\1", text)  # escaped characters


def tex(math: str) -> str:
    """TeX mathematics as one would type it: ``\\frac{a}{b}`` as ``a/b`` (parenthesised where a side is more
    than a word), ``\\sqrt{x}`` as ``sqrt(x)``, ``\\lfloor x \\rfloor`` as ``floor(x)``, ``e^{-t s}`` as
    ``e^(-t s)``, ``n_\\text{rep}`` as ``n_rep``, signs in words (``\\ne``: ``!=``, ``\\bmod``: ``mod``) and
    Greek letters by name (``\\theta``: ``theta``)."""
    text = re.sub(r"\s*\n\s*", " ", math.strip())
    text = re.sub(rf"{_TEXT_COMMAND}\s*{_GROUP}", lambda m: _unescaped(m.group(1)), text)
    for _ in range(3):  # nested fractions and roots, innermost first
        text = re.sub(
            rf"\\[dt]?frac\s*{_GROUP}\s*{_GROUP}",
            lambda m: f"{_grouped(tex(m.group(1)))}/{_grouped(tex(m.group(2)))}",
            text,
        )
        text = re.sub(r"\\sqrt\s*" + _GROUP, lambda m: f"sqrt({tex(m.group(1))})", text)
    text = re.sub(r"([_^])\s*" + _GROUP, lambda m: m.group(1) + _grouped(tex(m.group(2))), text)
    text = re.sub(r"\\([A-Za-z]+|[,;:!{}_%$])", _command, text)
    text = re.sub(r"([_^])\s+", r"\1", text)  # s_\max: s_ max, once its command is a word
    text = text.replace("{", "").replace("}", "")
    text = re.sub(r"\(\s+", "(", text)
    text = re.sub(r"\s+\)", ")", text)
    return re.sub(r"[ \t]+", " ", text)


def _command(found: re.Match) -> str:
    """A TeX command as text: its sign or word (:data:`_SYMBOLS`), else its name, apart from a letter or
    digit just before it (``m\\theta`` is ``m theta``)."""
    word = _SYMBOLS.get(found.group(1), found.group(1))
    before = found.string[found.start() - 1 : found.start()]
    return f" {word}" if word[:1].isalnum() and before.isalnum() else word


def _unescaped(text: str) -> str:
    return re.sub(r"\\([_%$&#{}])", r"\1", text)


def _grouped(text: str) -> str:
    """``text`` as one side of a fraction, a subscript or an exponent: parenthesised unless it is one word,
    number or call (``sqrt(d_k)``)."""
    text = text.strip()
    return text if re.fullmatch(r"[\w.]+(\([^()]*\))?", text) else f"({text})"
