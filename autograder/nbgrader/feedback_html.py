"""nbgrader's feedback page with the course's MathJax inlined (``FeedbackHTMLExporter``): it renders offline.

It loads nothing that a student named: its cells' HTML goes through :mod:`autograder.nbgrader.inert`'s filters,
and a Content-Security-Policy holds the page to it (:func:`loads_nothing`).

A written answer that the instructor has not graded yet (:class:`AwaitingGrading` finds them in the gradebook)
shows "awaiting grading", and the page's total says that it is partial (:func:`awaiting_grading`), where
nbgrader's template shows a score of 0 and a total out of every point.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbgrader.preprocessors import NbGraderPreprocessor

from attention_course.tooling import notebooks
from autograder.grading.gradesheet import (
    AWAITING,
    AWAITING_WORDS,
    BLANK,
    awaiting_words,
    unanswered_note,
    written_state,
)
from autograder.grading.lateness import note_for
from autograder.grading.sandboxed import nothing_answered
from autograder.nbgrader import inert
from autograder.release import course

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
    (:data:`autograder.release.course.FEEDBACK_MATHJAX`, fetched by ``make book``): nbgrader releases the page
    alone, and it renders offline, in MathJax's safe mode. Without the local copy (all of
    :data:`autograder.release.course.FEEDBACK_MATHJAX_PARTS` too), the page keeps nbconvert's CDN (MathJax 2,
    safe mode). Its cells' HTML goes through :mod:`autograder.nbgrader.inert`'s filters (its own defaults, which
    ``nbgrader_config.py`` names for every ``HTMLExporter``: an image a student named is shown as text), and a page
    with the course's MathJax forbids loading from elsewhere (:func:`loads_nothing`)."""

    def default_filters(self):
        yield from super().default_filters()
        yield ("strip_files_prefix", inert.strip_files_prefix)
        yield ("clean_html", inert.clean_html)

    def from_notebook_node(self, nb, resources=None, **kw):
        output, resources = self.page(nb, resources, **kw)
        page = awaiting_grading(named_index(output), (resources or {}).get("nbgrader") or {})
        inlined = inline_mathjax(page)
        return (loads_nothing(inlined) if inlined != page else inlined), resources

    def page(self, nb, resources=None, **kw):
        """nbconvert's HTML page of ``nb``, as :meth:`HTMLExporter.from_notebook_node` makes it, without its last
        step: that parses the whole page with BeautifulSoup, only to give each image without alt text the words
        :data:`NO_DESCRIPTION` (and JupyterLab's cells a tabindex, of which the classic page that nbgrader's feedback
        extends has none), and writes it out again. That is about 40% of the time a feedback page takes; here the
        images get the same words without the page being parsed (:func:`described_images`), and a test holds the
        two pages the same, element by element (tests/test_inert_pages.py)."""
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name"))
        resources = self._init_resources(resources)
        self.register_filter(
            "highlight_code", self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
        )
        self.register_filter(
            "filter_data_type",
            WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources),
        )
        output, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return described_images(output), resources


NO_DESCRIPTION = "No description has been provided for this image"  # nbconvert's words for an image's alt text
# an <img> tag, its quoted attribute values whole (a ">" inside one does not end it)
_IMG_TAG = re.compile(r"""<img\b(?:[^>"']|"[^"]*"|'[^']*')*>""", re.IGNORECASE)


class _Attributes(HTMLParser):
    """The attribute names of the one start tag it is fed, as the browser reads them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.names: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.names.update(name for name, _ in attrs)

    handle_startendtag = handle_starttag


def described_images(page: str) -> str:
    """``page`` with :data:`NO_DESCRIPTION` as the alt text of each image that has none, as nbconvert gives it."""

    def described(found: re.Match) -> str:
        reader = _Attributes()
        reader.feed(found.group(0))
        reader.close()
        return (
            found.group(0)
            if "alt" in reader.names
            else f'{found.group(0)[:4]} alt="{NO_DESCRIPTION}"{found.group(0)[4:]}'
        )

    return _IMG_TAG.sub(described, page)


class AwaitingGrading(NbGraderPreprocessor):
    """Finds the notebook's written answers that the instructor has not graded yet, in the gradebook
    (``resources["nbgrader"]["awaiting"]``: grade_id -> points), and those left as released (``["blank"]``), for
    :func:`awaiting_grading`. A written answer has no score until the instructor gives one, except one left as
    released, which nbgrader scores 0 at once (its checksum rule): that one is graded, and shows its 0 as left
    blank. Whether the notebook answers nothing at all (``["unanswered"]``), as the summary says, and how late the
    submission was (``["late"]``: :func:`autograder.grading.lateness.late_note`'s words, '' on time)."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook, MissingEntry
        from nbgrader.utils import is_grade, is_solution

        info = resources["nbgrader"]
        awaiting, blank = {}, {}
        with Gradebook(info["db_url"]) as gradebook:
            for cell in nb.cells:
                if cell.cell_type != "markdown" or not (is_grade(cell) and is_solution(cell)):
                    continue
                grade_id = cell.metadata["nbgrader"]["grade_id"]
                try:
                    grade = gradebook.find_grade(grade_id, info["notebook"], info["assignment"], info["student"])
                except MissingEntry:  # GetGrades, before this, would have stopped at it
                    continue
                state = written_state(grade)
                if state in (AWAITING, BLANK):
                    (awaiting if state == AWAITING else blank)[grade_id] = float(grade.max_score or 0.0)
            info["late"] = note_for(gradebook, info["assignment"], info["student"], Path.cwd())
        info["awaiting"], info["blank"] = awaiting, blank
        # a notebook that answers nothing gets the summary's note (nbgrader's feedback runs in the course folder)
        info["unanswered"] = nothing_answered(info["assignment"], info["notebook"], info["student"], Path.cwd())
        return nb, resources


class TemplateChanged(RuntimeError):
    """nbgrader's feedback page is not as the course reads it: an answer awaiting grading would show a score."""


# nbgrader's feedback template (0.9): the page's total, each written answer in the index, and its score in the
# heading of its cell, each a number written by the template (never by the student, whose text is escaped).
_TOTAL = re.compile(r"<h4>([^<]*) \(Score: ([0-9.]+) / ([0-9.]+)\)</h4>")
_INDEX_WRITTEN = re.compile(r'<li><a href="#([A-Za-z0-9_-]+)">Written response</a> \(Score: ([0-9.]+ / [0-9.]+)\)')
_HEADING_SCORE = (
    r'(<a name="{}"></a><div class="panel-heading"><span class="nbgrader-label">Student\'s answer</span>'
    r'<span class="pull-right">\s*)Score: [0-9.]+ / [0-9.]+'
)


def awaiting_grading(page: str, info: dict) -> str:
    """``page`` with each written answer of ``info["awaiting"]`` (grade_id -> points, :class:`AwaitingGrading`)
    shown as awaiting grading, and each of ``info["blank"]`` as left blank, in the index and in its cell's heading,
    in the words of the summary and the CSV (:mod:`autograder.grading.gradesheet`); the total out of every point,
    as the summary, the CSV and `nbgrader export` give it, said to be so far where answers await the instructor;
    under it, the summary's words on lateness (``info["late"]``) and its note on a notebook that answers nothing
    (``info["unanswered"]``); each written answer
    named by its grade id in the index. Raises :class:`TemplateChanged` where an answer awaiting grading would
    still show a score."""
    awaiting = info.get("awaiting") or {}
    blank = info.get("blank") or {}

    def index(match):
        grade_id, score = match.group(1), match.group(2)
        if grade_id in awaiting:
            shown = f"{AWAITING_WORDS}: {notebooks.points_text(awaiting[grade_id])}"
        elif grade_id in blank:
            shown = f"left blank: 0 of {notebooks.points_text(blank[grade_id])}"
        else:
            shown = f"Score: {score}"
        return f'<li><a href="#{grade_id}">Written answer <code>{grade_id}</code></a> ({shown})'

    page, named = _INDEX_WRITTEN.subn(index, page)
    headings = {
        **{gid: f"Left blank: 0 of {notebooks.points_text(points)}" for gid, points in blank.items()},
        **{
            gid: f"{AWAITING_WORDS.capitalize()}: {notebooks.points_text(points)}, counted as 0 until graded"
            for gid, points in awaiting.items()
        },
    }
    for grade_id, heading in headings.items():
        page, found = re.subn(
            _HEADING_SCORE.format(re.escape(grade_id)),
            lambda match, heading=heading: f"{match.group(1)}{heading}",
            page,
            count=1,
        )
        if grade_id in awaiting and (not found or not named):
            raise TemplateChanged(
                f"the feedback page would show the written answer {grade_id}, which awaits grading, with a score: "
                "nbgrader's feedback template is not the one that autograder/nbgrader/feedback_html.py reads"
            )
    waiting = awaiting_words(awaiting)
    unanswered = unanswered_note(info["notebook"]) if info.get("unanswered") and info.get("notebook") else ""
    late = info.get("late") or ""  # the summary's words on lateness (AwaitingGrading), under the total they made

    def total(match):  # the template's own total (nbgrader's score and maximum), said to be so far
        so_far = f" so far; {waiting}" if waiting else ""
        line = f"<h4>{match.group(1)} (Score: {match.group(2)} / {match.group(3)}{so_far})</h4>"
        line += f'\n<p class="late-penalty"><b>{html.escape(late)}</b></p>' if late else ""
        return line + (f"\n<p><b>{html.escape(unanswered)}</b></p>" if unanswered else "")

    if not (awaiting or unanswered or late):
        return page
    page, found = _TOTAL.subn(total, page, count=1)
    if not found:
        raise TemplateChanged(
            "the feedback page's total would count the written answers that await grading as 0: nbgrader's feedback "
            "template is not the one that autograder/nbgrader/feedback_html.py reads"
        )
    return page


# nbgrader's feedback template lists every test cell as "Test cell" and every comment as "Comment"; the
# course's grade ids (the instructor's: InstructorCellRoles) name them. Tables of the course's markdown get
# room between their columns (the template's Bootstrap 3 gives them none).
_INDEX_TEST = re.compile(r'<li><a href="#([A-Za-z0-9_-]+)">Test cell</a>')
_INDEX_COMMENT = re.compile(r'<li><a href="#comment-([A-Za-z0-9_-]+)">Comment</a>')
# The page on a phone (the template sets no viewport and lays a cell out for a desktop): the page as wide as the
# screen; each grade cell's heading as tall as its text, so that its score, which wraps below the cell's name on a
# narrow screen, stays white on the heading's blue instead of falling out of it (white on the page's grey), and
# its "(Top)" link in the heading's own white; the prompt ("In [ ]:") above its cell rather than 21 characters
# beside it, and the nested containers' padding cut, so that a code box has the screen's width; code, outputs,
# tables and display equations wider than that scroll inside their own box, never the page. A failed check's
# message (an error output, its lines wrapped at 100 characters: nbgrader/hide_tests) is prose: its lines wrap
# again at the box's width, so that a phone shows all of it (scrolled sideways, its ends looked cut). A <style>
# in the page, which its Content-Security-Policy allows (style-src 'unsafe-inline'), as the table rules below.
FEEDBACK_VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'
PHONE_WIDTH = 600  # px: at most this wide, the page is laid out for a phone
MESSAGE_CSS = "div.output_error pre { white-space: pre-wrap; overflow-wrap: anywhere; }"
PHONE_CSS = (
    "<style>div.nbgrader_cell .panel-heading { height: auto; min-height: 37px; overflow: hidden; }\n"
    "div.nbgrader_cell .panel-heading a { color: inherit; text-decoration: underline; }\n"
    "div.nbgrader_cell .panel-heading code { overflow-wrap: anywhere; white-space: normal; }\n"
    "pre { overflow-x: auto; max-width: 100%; }\n"
    f"{MESSAGE_CSS}\n"
    "div.output_subarea, div.text_cell_render { min-width: 0; max-width: 100%; overflow-x: auto; }\n"
    'mjx-container[display="true"] { max-width: 100%; overflow-x: auto; overflow-y: hidden; }\n'
    f"@media (max-width: {PHONE_WIDTH}px) {{\n"
    "  body { padding-top: 0.5em; }\n"
    "  .container { width: auto; padding-left: 4px; padding-right: 4px; }\n"
    "  .panel-body { padding: 6px 4px; }\n"
    "  #toc ol { padding-left: 1.8em; }\n"
    "  div.input, div.output_area { display: block; }\n"
    "  div.prompt { min-width: 0; width: auto; text-align: left; padding: 0.2em 0; }\n"
    "  div.inner_cell, div.nbgrader_cell, div.output_subarea { width: 100%; max-width: 100%; }\n"
    "  div.nbgrader_cell .panel-heading .pull-right { float: none !important; display: block; }\n"
    "  .rendered_html table { display: block; max-width: 100%; overflow-x: auto; }\n"
    "}\n"
    f"</style>\n{FEEDBACK_VIEWPORT}\n"
)
_FEEDBACK_CSS = (
    "<style>.rendered_html table { border-collapse: collapse; margin: 0.5em 0; }\n"
    ".rendered_html th, .rendered_html td { padding: 0.3em 0.8em; border: 1px solid #ddd; text-align: left; }\n"
    f".rendered_html code.{inert.INERT_IMAGE} {{ color: #555; background: #f5f5f5; border: 1px dashed #999; "
    "padding: 0 0.3em; overflow-wrap: anywhere; }\n"
    f"</style>\n{PHONE_CSS}</head>"
)


def named_index(page: str) -> str:
    """``page`` with each test and comment of its index named by its cell's grade id, its tables spaced, and the
    rules that lay it out on a phone (:data:`PHONE_CSS`)."""
    page = _INDEX_TEST.sub(r'<li><a href="#\1"><code>\1</code></a>', page)
    page = _INDEX_COMMENT.sub(r'<li><a href="#comment-\1">Comment on <code>\1</code></a>', page)
    return page.replace("</head>", _FEEDBACK_CSS, 1)


def inline_mathjax(page: str, script: Path = course.FEEDBACK_MATHJAX) -> str:
    """``page`` with nbconvert's CDN MathJax replaced by ``script``'s code and the parts it loads
    (:data:`autograder.release.course.FEEDBACK_MATHJAX_PARTS`, beside it), where all are installed."""
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


# What a page with the course's MathJax inlined may load: its own inline scripts and styles, the fonts of its own
# origin (bootstrap's, beside the page where it is served), images of data: URLs (an output's figure); no image,
# style sheet, media, frame, object, prefetch or connection from anywhere else, no <base> and no form's target.
# The filters already leave a student's cells nothing that loads (autograder/nbgrader/inert.py): this holds the
# page to it, whatever a template or filter changes.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; font-src 'self'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)


def loads_nothing(page: str) -> str:
    """``page`` with :data:`CONTENT_SECURITY_POLICY` first in its head, before anything that the page loads.
    Raises :class:`TemplateChanged` where the page has no head."""
    meta = f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
    page, found = re.subn(r"<head>", lambda _: f"<head>\n{meta}", page, count=1)
    if not found:
        raise TemplateChanged("the feedback page has no <head> to hold its Content-Security-Policy")
    return page


def _one_script(code: str) -> str:
    """JavaScript ``code`` that stays one script element when put in a page."""
    return code.replace("</script", "<\\/script").replace("<!--", "<\\!--")
