"""nbgrader's feedback page with the course's MathJax inlined (``FeedbackHTMLExporter``): it renders offline."""

from __future__ import annotations

import re
from pathlib import Path

from nbconvert.exporters import HTMLExporter

from autograder import course

# nbconvert's template loads MathJax 2 from a CDN, between these two comments; a feedback page opened
# offline (or where that CDN is blocked) shows raw $...$ then.
_CDN_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL)
# A feedback page shows the student's own mathematics, typeset through MathJax's safe mode (ui/safe), whatever
# the TeX (\mmlToken's attributes, \bbox's CSS, \enclose's): no link (URLs: none), no CSS, class or id of the
# student's (styles, classes, cssIDs: none), and a colour only by name or #hex (safe mode leaves colours alone,
# and SVG's fill="url(...)" fetches it). The html extension's macros (\href, \style, \class, \cssId) are never
# autoloaded, and \require, which loads any extension, is removed: they stay undefined and show as written,
# in red. The loader fetches nothing: it runs the parts carried inline (safe mode and the TeX extensions it
# autoloads, put in place of __PARTS__), keyed by the URL it asks for, and refuses any other.
_MATHJAX_CONFIG = r"""<script>(function () {
  var parts = {__PARTS__};
  window.MathJax = {
    loader: {load: ['ui/safe'], paths: {mathjax: 'mathjax'}, require: function (url) {
      if (!Object.prototype.hasOwnProperty.call(parts, url)) throw new Error('not in this page: ' + url);
      parts[url]();
    }},
    tex: {inlineMath: [['$', '$'], ['\\(', '\\)']], displayMath: [['$$', '$$'], ['\\[', '\\]']],
          processEscapes: true, packages: {'[-]': ['require']}, autoload: {html: []}},
    svg: {fontCache: 'global'},
    options: {enableMenu: false, safeOptions: {allow: {URLs: 'none', classes: 'none', cssIDs: 'none', styles: 'none'}}},
    startup: {ready: function () {
      class SafeColours extends MathJax._.ui.safe.safe.Safe {
        constructor(document, options) {
          super(document, options);
          for (const name of ['mathcolor', 'mathbackground', 'color', 'background']) {
            this.filterAttributes.set(name, 'filterColour');
          }
          this.filterMethods.filterColour = (safe, colour) =>
            /^(#[0-9a-f]{3,8}|[a-z]+)$/i.test(colour) ? colour : null;
        }
      }
      MathJax.config.options.SafeClass = SafeColours;
      MathJax.startup.defaultReady();
    }}
  };
})();</script>"""


class FeedbackHTMLExporter(HTMLExporter):
    """nbgrader's feedback page, its mathematics rendered by the course's own MathJax, inlined
    (:data:`autograder.course.FEEDBACK_MATHJAX`, fetched by ``make book``): nbgrader releases the page
    alone, and it renders offline, in MathJax's safe mode. Without the local copy (all of
    :data:`autograder.course.FEEDBACK_MATHJAX_PARTS` too), the page keeps nbconvert's CDN (MathJax 2, safe mode)."""

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
    """``page`` with nbconvert's CDN MathJax replaced by ``script``'s code and the parts it loads
    (:data:`autograder.course.FEEDBACK_MATHJAX_PARTS`, beside it), where all are installed."""
    try:
        code = script.read_text()
        parts = {part: (script.parent / f"{part}.js").read_text() for part in course.FEEDBACK_MATHJAX_PARTS}
    except OSError:
        return page
    inlined = ",\n".join(
        f"'mathjax/{part}.js': function () {{\n{_one_script(text)}\n}}" for part, text in parts.items()
    )
    block = f"{_MATHJAX_CONFIG.replace('__PARTS__', inlined)}\n<script>{_one_script(code)}</script>"
    return _CDN_MATHJAX.sub(lambda _: block, page, count=1)


def _one_script(code: str) -> str:
    """JavaScript ``code`` that stays one script element when put in a page."""
    return code.replace("</script", "<\\/script").replace("<!--", "<\\!--")
