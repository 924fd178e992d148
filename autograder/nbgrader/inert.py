"""What the feedback page and the formgrader's page of a submission show of a cell: nothing that loads.

nbconvert renders a markdown image (``![alt](url)``, a reference ``![alt][r]``, in a markdown cell or a
``text/markdown`` output) as an ``<img>``, which the page fetches when it is opened: from the student's server
(which learns when, from where and with which browser the page was read), or, for a relative URL, from the
instructor's own Jupyter server with the instructor's cookies. The sanitiser (:mod:`autograder.nbgrader.sanitize`)
escapes the HTML a student writes, but markdown's own image syntax is not HTML until it is rendered.

Both pages' templates (nbgrader's *feedback* and *formgrade*) pass a markdown cell's rendered HTML through the
``strip_files_prefix`` filter last, and outputs and raw cells through ``clean_html``: ``nbgrader_config.py`` gives
nbgrader's ``HTMLExporter`` this module's filters of those names (:func:`strip_files_prefix`,
:func:`clean_html`), and the feedback's exporter takes them as its own. Each passes the HTML through
:func:`inert_html`: only tags and attributes that load nothing are kept (an ``<img>`` becomes inert text, any other
tag is shown escaped, as written), and a link keeps its URL only where it is http, https, mailto or relative
(``javascript:`` is dropped). The course's own markdown renders to nothing that this changes
(``tests/test_inert_pages.py`` holds it to that).
"""

from __future__ import annotations

from bleach.css_sanitizer import CSSSanitizer
from bleach.html5lib_shim import Filter
from bleach.sanitizer import ALLOWED_PROTOCOLS, Cleaner
from nbconvert.filters.strings import clean_html as nbconvert_clean_html

from autograder.nbgrader import files_prefix

INERT_IMAGE = "inert-image"  # the class of the <code> an image becomes (the feedback page's CSS marks it)
SHOWN_URL = 200  # characters of an image's URL shown; the rest is cut (a data: URL can be megabytes)

# What rendered markdown is made of (mistune, with nbconvert's plugins: tables, task lists, definition lists,
# strikethrough; pygments' highlighted code), with what bleach lets a student write and nbconvert's clean_html
# keeps: none loads anything. Every other tag is escaped: shown as written, as text.
_SHOWN_TAGS = frozenset(
    {"a", "abbr", "acronym", "b", "blockquote", "br", "caption", "code", "dd", "del", "div", "dl", "dt", "em"}
    | {"h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "input", "ins", "kbd", "li", "mark", "ol", "p", "pre"}
    | {"q", "s", "samp", "small", "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th"}
    | {"thead", "tr", "u", "ul", "var"}
)
_EVERYWHERE = frozenset({"class", "id", "title", "lang", "dir"})
_ATTRIBUTES = {
    "a": {"href", "name"},
    "img": {"src", "alt"},  # read by _ImagesAsText, never left on the page
    "ol": {"start", "type", "reversed"},
    "li": {"value"},
    "th": {"style", "colspan", "rowspan", "align", "scope"},
    "td": {"style", "colspan", "rowspan", "align"},
    "input": {"type", "checked", "disabled"},  # a task list's checkbox
}
# A table's alignment is the only CSS kept: no property that takes a url() (background, cursor, list-style...).
_CSS = frozenset({"text-align"})


def _kept(tag: str, name: str, value: str) -> bool:
    if tag == "input" and name == "type":
        return value == "checkbox"  # an input of type image loads its src
    return name in _EVERYWHERE or name in _ATTRIBUTES.get(tag, ())


def image_text(alt: str, url: str) -> str:
    """What an image shows in place of itself: ``[image: alt — url]``, the URL cut to :data:`SHOWN_URL`."""
    if len(url) > SHOWN_URL:
        url = url[:SHOWN_URL] + "…"
    return f"[image: {' — '.join(part for part in (alt.strip(), url) if part) or 'no description'}]"


class _ImagesAsText(Filter):
    """Each ``<img>`` left by the sanitiser (its URL checked: a ``data:`` or ``javascript:`` one is dropped)
    replaced by a ``<code class="inert-image">`` holding :func:`image_text`: the URL as text, not a link."""

    def __iter__(self):
        for token in Filter.__iter__(self):
            if token["type"] in ("StartTag", "EmptyTag") and token["name"] == "img":
                attributes = {name: value for (_, name), value in token["data"].items()}
                yield {"type": "StartTag", "name": "code", "namespace": None, "data": {(None, "class"): INERT_IMAGE}}
                yield {"type": "Characters", "data": image_text(attributes.get("alt", ""), attributes.get("src", ""))}
                yield {"type": "EndTag", "name": "code", "namespace": None}
            elif not (token["type"] == "EndTag" and token["name"] == "img"):
                yield token


def inert_html(html: str) -> str:
    """``html`` (a cell's, as nbconvert renders it) with nothing that a browser loads: parsed as a browser parses
    it (bleach's html5lib), each tag of :data:`_SHOWN_TAGS` kept with attributes that load nothing, each image
    shown as inert text (:class:`_ImagesAsText`), every other tag escaped, comments dropped."""
    cleaner = Cleaner(  # one a call: a Cleaner's parser keeps state, and the formgrader serves pages in threads
        tags=_SHOWN_TAGS | {"img"},
        attributes=_kept,
        protocols=ALLOWED_PROTOCOLS,
        strip=False,
        strip_comments=True,
        filters=[_ImagesAsText],
        css_sanitizer=CSSSanitizer(allowed_css_properties=_CSS),
    )
    return cleaner.clean(html)


def strip_files_prefix(text: str) -> str:
    """The templates' last filter of a markdown cell's HTML: nbconvert's ``strip_files_prefix`` (the course's, in
    linear time: :mod:`autograder.nbgrader.files_prefix`), then :func:`inert_html`."""
    return inert_html(files_prefix.strip_files_prefix(text))


def clean_html(element) -> str:
    """The templates' filter of an output's HTML (``text/html``, rendered ``text/markdown``, an SVG shown
    inline) and of a raw cell: :func:`inert_html`, then nbconvert's ``clean_html``."""
    element = element.decode() if isinstance(element, bytes) else str(element)
    return nbconvert_clean_html(inert_html(element))
