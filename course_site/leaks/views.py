"""The texts of a published file that the leak check searches: HTML as text, JSON strings decoded, a module's prose."""

from __future__ import annotations

import ast
import functools
import io
import json
import re
import tokenize
from html.parser import HTMLParser

HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".xml", ".svg"})
JSON_SUFFIXES = frozenset({".ipynb", ".json", ".js", ".map"})
_JSON_STRING_RE = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')


def _json_strings(text: str) -> str:
    """The JSON string literals of ``text`` (a notebook, a JSON file, a script), decoded."""
    literals = _JSON_STRING_RE.findall(text)
    if not literals:
        return ""
    try:
        return "\n".join(json.loads("[" + ",".join(literals) + "]"))
    except ValueError:  # one literal is not JSON (a script's own escapes): decode them one by one
        out = []
        for literal in literals:
            if "\\" not in literal:
                out.append(literal[1:-1])
                continue
            try:
                out.append(json.loads(literal))
            except ValueError:
                continue
        return "\n".join(out)


class _HTMLViews(HTMLParser):
    """An HTML page read whole: its text (:attr:`text`, tags dropped and entities decoded, so that
    code split into highlighted spans is whole again) and what it holds outside its text
    (:attr:`hidden`: comments, scripts and styles, attribute values, declarations)."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self._text: list[str] = []
        self._hidden: list[str] = []
        self._raw = False  # inside a script or a style
        self.feed(page)
        self.close()
        self.text, self.hidden = "".join(self._text), "\n".join(self._hidden)

    def handle_starttag(self, tag, attrs):
        self._hidden.extend(value for _, value in attrs if value)
        self._raw = tag in ("script", "style")

    def handle_startendtag(self, tag, attrs):
        self._hidden.extend(value for _, value in attrs if value)

    def handle_endtag(self, tag):
        self._raw = False

    def handle_data(self, data):
        (self._hidden if self._raw else self._text).append(data)

    def handle_comment(self, data):
        self._hidden.append(data)

    handle_decl = handle_pi = unknown_decl = handle_comment


def text_views(text: str, suffix: str) -> list[str]:
    """The texts of a file that are searched.

    An HTML page (:data:`HTML_SUFFIXES`): its text (tags dropped, entities decoded) and what it
    holds outside its text (comments, scripts, styles, attribute values; their JSON strings
    decoded). A notebook, JSON file or script (:data:`JSON_SUFFIXES`): its raw text, its JSON
    strings decoded, and their HTML as text where they hold HTML. Any other file: its raw text, and
    its HTML as text where it has some.
    """
    if suffix in HTML_SUFFIXES:
        page = _HTMLViews(text)
        hidden = page.hidden + "\n" + _json_strings(page.hidden) if '"' in page.hidden else page.hidden
        return [page.text, hidden]
    views = [text]
    if suffix in JSON_SUFFIXES:
        strings = _json_strings(text)
        views.append(strings)
        if "<" in strings or "&" in strings:
            views.append(_HTMLViews(strings).text)
    elif "<" in text:
        views.append(_HTMLViews(text).text)
    return views


@functools.lru_cache(maxsize=128)  # scan() meets the same modules in every folder it checks
def prose_of_python(text: str) -> str:
    """The comments and string literals (docstrings included) of Python source, a line each; the whole
    text where it does not tokenize."""
    parts = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                parts.append(token.string.lstrip("#").strip())
            elif token.type == tokenize.STRING:
                try:
                    value = ast.literal_eval(token.string)
                except (ValueError, SyntaxError):
                    value = token.string
                parts.append(value if isinstance(value, str) else token.string)
    except (tokenize.TokenError, SyntaxError):
        return text
    return "\n".join(parts)
