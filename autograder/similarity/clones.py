"""Python code as the course's clone detectors compare it: normalised token streams and their fingerprints.

Both detectors tokenise with pygments' Python lexer and fingerprint with copydetect, at two levels
of normalisation:

- :func:`compare_files` (``make similarity``): copydetect's own stream, in which every name is one
  letter (``V``, ``F``, ``O``) and every string ``S``: students may rename anything, attributes
  included;
- :class:`Normalizer` (the leak check): comments, strings and layout dropped, every name one
  placeholder but the names that renaming leaves alone in the course's code: attributes and
  methods (``.transpose``, ``.W_q``), keyword arguments' names (``dim=``) and keywords. They keep
  honest code that uses other methods from looking like a reference solution.

A stream is a string of one character per token; :func:`fingerprints` are copydetect's hashes of
its k-grams, every one kept (a window of 1).
"""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path

import numpy as np
from pygments import token
from pygments.lexers import PythonLexer

LANGUAGE = "python"
PLACEHOLDER = "<name>"  # the class of every name that renaming changes
_LEXER = PythonLexer(stripnl=False, ensurenl=False)
_CLOSING = frozenset(")]}")
_LAYOUT = frozenset({";", "\\"})  # punctuation that lays code out
_FIRST_CODE = 0x100  # token classes are characters from here on
_OTHER = "\x01"  # a token of a class met after the alphabet is frozen


@functools.cache
def _copydetect():
    """copydetect's detector module, imported on first use. It imports pyplot to draw its report's plots:
    where nothing has imported matplotlib yet, that import takes the Agg back end (no display needed), and
    the environment is left as it was."""
    before = os.environ.get("MPLBACKEND")
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        import copydetect
        import copydetect.utils
    finally:
        if before is None:
            os.environ.pop("MPLBACKEND", None)
    return copydetect


def fingerprints(stream: str, k: int) -> np.ndarray:
    """copydetect's hashes of the k-grams of ``stream``, the k-gram starting at each position."""
    return _copydetect().utils.hashed_kgrams(stream, k) if len(stream) >= k else np.array([], dtype=np.int64)


def _is_quote(text: str) -> bool:
    """Whether a string token is only a literal's quotes (with its prefix), not its content."""
    return text.lstrip("rRbBuUfF") in ('"""', "'''", '"', "'")


@functools.cache
def _role(kind) -> str:
    """What a pygments token type is to the detectors (asked once per type: pygments' ``in`` is slow)."""
    for role, parent in (
        ("interpolation", token.String.Interpol),
        ("comment", token.Comment),
        ("string", token.String),
        ("layout", token.Text),
        ("name", token.Name),
        ("number", token.Number),
    ):
        if kind in parent:
            return role
    return "code"


def split(code: str) -> tuple[tuple[tuple[object, str], ...], str]:
    """The tokens of ``code`` that are code (no comment, string or layout), and the text inside its
    comments and strings (a comment or string a line, without ``#`` and quotes).

    A text of up to :data:`CACHED_CHARS` characters is lexed once per process: the leak check meets
    the same public sources again for every release it checks."""
    return _split_cached(code) if len(code) <= CACHED_CHARS else _split(code)


CACHED_CHARS = 200_000


@functools.lru_cache(maxsize=2048)
def _split_cached(code: str) -> tuple[tuple[tuple[object, str], ...], str]:
    return _split(code)


def _split(code: str) -> tuple[tuple[tuple[object, str], ...], str]:
    tokens, inside, depth = [], [], 0
    for kind, text in _LEXER.get_tokens(code):
        role = _role(kind)
        if role == "interpolation":  # an f-string's {...}: part of the string
            depth += text.count("{") - text.count("}")
        elif role == "comment":
            inside.append("\n" + text.lstrip("#") + "\n")
        elif role == "string":
            inside.append("\n" if _is_quote(text) else text)
        elif depth <= 0 and role != "layout" and text not in _LAYOUT:
            tokens.append((kind, text))
    return tuple(tokens), "".join(inside)


def token_classes(tokens: tuple[tuple[object, str], ...]) -> list[str]:
    """What each token stands for: :data:`PLACEHOLDER` for a name, ``.name`` for an attribute or a
    keyword argument's name, a keyword, number or operator as written. The ``.`` before an attribute
    and a comma before a closing bracket (formatters add it) are left out."""
    classes = []
    count = len(tokens)
    for i, (kind, text) in enumerate(tokens):
        following = tokens[i + 1][1] if i + 1 < count else ""
        previous = tokens[i - 1][1] if i else ""
        if text == "." and i + 1 < count and _role(tokens[i + 1][0]) == "name":
            continue  # the attribute that follows carries its dot
        if text == "," and following in _CLOSING:
            continue
        role = _role(kind)
        if role == "name":
            named = previous == "." or (following == "=" and previous in ("(", ","))
            classes.append("." + text if named else PLACEHOLDER)
        elif role == "number":
            classes.append(text.lower())
        else:
            classes.append(text)
    return classes


class Normalizer:
    """Python code as a stream of one character per token class (:func:`token_classes`), for comparing
    code as code; any text is tokenised, prose included.

    Each class is one character, learnt from the code that is looked for (:meth:`code`) until
    :meth:`freeze`; after that, every class not learnt is one character that nothing looked for holds."""

    def __init__(self):
        self._alphabet: dict[str, str] = {}
        self._frozen = False

    def freeze(self) -> None:
        self._frozen = True

    def _char(self, kind: str) -> str:
        char = self._alphabet.get(kind)
        if char is None:
            if self._frozen:
                return _OTHER
            char = self._alphabet[kind] = chr(_FIRST_CODE + len(self._alphabet))
        return char

    def encode(self, tokens: tuple[tuple[object, str], ...]) -> str:
        return "".join(map(self._char, token_classes(tokens)))

    def code(self, text: str) -> str:
        """The stream of ``text``'s code, comments and strings left out."""
        return self.encode(split(text)[0])

    def views(self, text: str) -> list[str]:
        """The streams of ``text``: its code, and the code kept inside its comments and strings."""
        tokens, inside = split(text)
        return [self.encode(tokens), self.code(inside)]


def compare_files(files: list[str], boilerplate: str, k: int, display: float, report: Path):
    """copydetect over ``files``, each against all the others, on its own streams and :func:`fingerprints`
    of ``k`` characters (every one kept); ``boilerplate``'s fingerprints discounted. Writes copydetect's
    HTML report to ``report`` and returns the detector (its similarity and token overlap matrices)."""
    detector = _copydetect().CopyDetector(
        noise_t=k,
        guarantee_t=k,  # equal to noise_t: a window of 1
        display_t=display,
        extensions=["py"],
        force_language=LANGUAGE,
        autoopen=False,
        silent=True,
        out_file=str(report),
    )
    for path in files:
        detector.add_file(path)
    detector.add_file(boilerplate, "boilerplate")
    detector.run()
    with warnings.catch_warnings():  # copydetect 0.5 reads its template with a deprecated importlib call
        warnings.simplefilter("ignore", DeprecationWarning)
        detector.generate_html_report()
    return detector
