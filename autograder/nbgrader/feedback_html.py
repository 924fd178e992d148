"""nbgrader's feedback page with the course's MathJax inlined (``FeedbackHTMLExporter``): it renders offline."""

from __future__ import annotations

import re
from pathlib import Path

from nbconvert.exporters import HTMLExporter

from autograder import course

# nbconvert's template loads MathJax 2 from a CDN, between these two comments; a feedback page opened
# offline (or where that CDN is blocked) shows raw $...$ then.
_CDN_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL)
# A feedback page shows the student's own mathematics, so the TeX that makes HTML is left out: MathJax's html
# extension (\href, a link to any URL, javascript: included; \style, \class and \cssId, CSS of the student's
# choosing) is never loaded for its macros, and \require, which would load it (or any extension), is removed.
# Those macros stay undefined and show as written, in red.
_MATHJAX_CONFIG = (
    "<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], "
    "displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true, "
    "packages: {'[-]': ['require']}, autoload: {html: []}}, "
    "svg: {fontCache: 'global'}, options: {enableMenu: false}};</script>"
)


class FeedbackHTMLExporter(HTMLExporter):
    """nbgrader's feedback page, its mathematics rendered by the course's own MathJax, inlined
    (:data:`autograder.course.FEEDBACK_MATHJAX`, fetched by ``make book``): nbgrader releases the page
    alone, and it renders offline. Without the local copy, the page keeps nbconvert's CDN."""

    def from_notebook_node(self, nb, resources=None, **kw):
        output, resources = super().from_notebook_node(nb, resources, **kw)
        return inline_mathjax(named_index(output)), resources


# nbgrader's feedback template lists every test cell as "Test cell" and every comment as "Comment"; the
# course's grade ids (the instructor's: InstructorCellRoles) name them. Tables of the course's markdown get
# room between their columns (the template's Bootstrap 3 gives them none).
_INDEX_TEST = re.compile(r'<li><a href="#([A-Za-z0-9_-]+)">Test cell</a>')
_INDEX_COMMENT = re.compile(r'<li><a href="#comment-([A-Za-z0-9_-]+)">Comment</a>')
_FEEDBACK_CSS = (
    "<style>.rendered_html table { border-collapse: collapse; margin: 0.5em 0; }\n"
    ".rendered_html th, .rendered_html td { padding: 0.3em 0.8em; border: 1px solid #ddd; text-align: left; }\n"
    "</style>\n</head>"
)


def named_index(page: str) -> str:
    """``page`` with each test and comment of its index named by its cell's grade id, and its tables spaced."""
    page = _INDEX_TEST.sub(r'<li><a href="#\1"><code>\1</code></a>', page)
    page = _INDEX_COMMENT.sub(r'<li><a href="#comment-\1">Comment on <code>\1</code></a>', page)
    return page.replace("</head>", _FEEDBACK_CSS, 1)


def inline_mathjax(page: str, script: Path = course.FEEDBACK_MATHJAX) -> str:
    """``page`` with nbconvert's CDN MathJax replaced by ``script``'s code, where it is installed."""
    try:
        code = script.read_text()
    except OSError:
        return page
    code = code.replace("</script", "<\\/script").replace("<!--", "<\\!--")  # stays one script element
    block = f"{_MATHJAX_CONFIG}\n<script>{code}</script>"
    return _CDN_MATHJAX.sub(lambda _: block, page, count=1)
