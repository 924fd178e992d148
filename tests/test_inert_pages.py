"""What the feedback page and the formgrader's page of a submission load: nothing that a student named.

A student's markdown image (``![alt](url)``: remote, protocol-relative, relative, by reference), HTML that
would load something (``<img>``, ``srcset``, ``poster``, ``background``, ``style="background:url(...)"``, SVG's
``<image href>``, ``<iframe>``, ``<object>``, a prefetch link), in a markdown cell, a raw cell or a code cell's
saved outputs, is shown as text, and the page that shows it fetches nothing for it
(:mod:`autograder.nbgrader.inert`, :class:`autograder.nbgrader.sanitize.SanitizeStudentHTML`, and the feedback's
Content-Security-Policy). Unit tests of the filters; then one submission graded by `make grade`'s phases, its
feedback page opened offline in Chromium and the formgrader's page of it opened from `make formgrader`'s server,
every request logged; and the same submission's pages rendered as they were before (nbconvert's filters, no
policy), which the same log catches fetching the student's URLs.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output, new_raw_cell

from attention_course.tooling import notebooks
from autograder.nbgrader import inert
from autograder.nbgrader.feedback_html import (
    CONTENT_SECURITY_POLICY,
    NO_DESCRIPTION,
    FeedbackHTMLExporter,
    described_images,
)
from autograder.nbgrader.sanitize import SanitizeStudentHTML
from autograder.release import course
from tests.support import formgrader as running_formgrader
from tests.support.browser import chromium

A = "ch02_scaled_dot_product"
BEACON = "beacon.invalid"  # in every URL the student names: a request for any of them names it

# A written answer with markdown's images in each form, and HTML that loads something in each way.
MARKDOWN = f"""My answer, with pictures.

![a cat](https://{BEACON}/remote.png "a title") ![](//{BEACON}/protocol-relative.png)
![relative](files/{BEACON}-relative.png) ![api](/api/contents/{BEACON}.png) ![by reference][ref]
[![linked](https://{BEACON}/linked.png)](https://example.org/) [a script](javascript:alert(1))

<img src="https://{BEACON}/html.png" srcset="https://{BEACON}/srcset.png 2x" alt="raw">
<video poster="https://{BEACON}/poster.png" src="https://{BEACON}/video.mp4"></video>
<table background="https://{BEACON}/background.png"><tr><td>a table</td></tr></table>
<p style="background:url(https://{BEACON}/style.png)">styled</p>
<svg><image href="https://{BEACON}/svg.png" /></svg>
<iframe src="https://{BEACON}/frame"></iframe> <object data="https://{BEACON}/object"></object>
<link rel="prefetch" href="https://{BEACON}/prefetch"> <audio src="https://{BEACON}/audio.mp3"></audio>
<picture><source srcset="https://{BEACON}/source.png"></picture> <input type="image" src="/{BEACON}-input.png">

The end of my answer.

[ref]: https://{BEACON}/reference.png
"""
RAW = (
    f'<img src="https://{BEACON}/raw-cell.png"> <img src="files/{BEACON}-raw-relative.png"> '
    f'<div style="background-image:url(/{BEACON}-raw-style.png)">raw text</div>'
)
# What the pages show for the markdown images: the alt text and the URL, as text.
SHOWN = [
    f"[image: a cat — https://{BEACON}/remote.png]",
    f"[image: //{BEACON}/protocol-relative.png]",
    f"[image: relative — {BEACON}-relative.png]",  # nbconvert's strip_files_prefix takes files/ away
    f"[image: api — /api/contents/{BEACON}.png]",
    f"[image: by reference — https://{BEACON}/reference.png]",
    f"[image: linked — https://{BEACON}/linked.png]",
]


def outputs() -> list:
    """A code cell's saved outputs, each of which would load one of the student's URLs."""
    return [
        new_output("display_data", data={"text/html": f'<img src="https://{BEACON}/output.png"> html output'}),
        new_output("display_data", data={"text/markdown": f"markdown output ![md](https://{BEACON}/md-output.png)"}),
        new_output("display_data", data={"image/svg+xml": f'<svg><image href="https://{BEACON}/output.svg"/></svg>'}),
        new_output(
            "display_data",
            data={"image/png": "iVBORw0KGgo="},
            metadata={"filenames": {"image/png": f"https://{BEACON}/filename.png"}},
        ),
        new_output(
            "display_data",
            data={"text/html": f"<p>isolated</p><img src=//{BEACON}/isolated.png>"},
            metadata={"text/html": {"isolated": True}},
        ),
    ]


def render_markdown(source: str) -> str:
    """``source`` as nbconvert's HTMLExporter renders a markdown cell (before the templates' filters)."""
    return MarkdownWithMath(renderer=IPythonRenderer(escape=False, attachments={}, anchor_link_text="¶")).render(source)


# What a browser loads on its own: elements, and the attributes (with a URL, or CSS with url()) that load.
LOADERS = {"img", "image", "picture", "source", "video", "audio", "track", "iframe", "frame", "object", "embed"}
LOADERS |= {"link", "script", "style", "svg", "use", "base", "meta"}
LOADING = {"src", "srcset", "poster", "background", "data", "style", "xlink:href", "ping", "action", "formaction"}


def loading(html: str) -> list[str]:
    """Each element of ``html`` that loads something, or has an attribute that does, named."""
    found = []
    for element in BeautifulSoup(html, "html.parser").find_all(True):
        names = [name for name in element.attrs if name in LOADING or (name == "href" and element.name != "a")]
        if element.name in LOADERS or (element.name == "input" and element.get("type") == "image"):
            found.append(str(element)[:120])
        elif names:
            found.append(f"{element.name} {names}")
    return found


# ----------------------------------------------------------------------------- the filters


def test_a_markdown_image_becomes_text_and_nothing_else_loads():
    """Each markdown image shows as ``[image: alt — url]`` in a ``<code>`` of its class; the HTML a student wrote
    (escaped before markdown renders, as SanitizeStudentHTML does) stays text; a javascript: link loses its URL;
    the student's words stay."""
    sanitiser = SanitizeStudentHTML(enabled=True, strip=False)
    cell = new_markdown_cell(MARKDOWN)
    sanitiser.preprocess(new_notebook(cells=[cell]), {})
    before = render_markdown(cell.source)
    assert "<img" in before and loading(before), "nbconvert renders markdown's images as <img>"
    page = inert.strip_files_prefix(before)
    assert loading(page) == [], loading(page)
    text = BeautifulSoup(page, "html.parser").get_text()
    for shown in SHOWN:
        assert shown in text, (shown, text)
    assert page.count(f'<code class="{inert.INERT_IMAGE}">') == len(SHOWN)
    assert f'<img src="https://{BEACON}/html.png"' in text and "My answer" in text and "The end of my answer" in text
    assert "javascript:" not in page and "a script" in text
    assert '<a href="https://example.org/">' in page  # a link stays one


def test_html_that_loads_is_escaped_or_made_text_wherever_it_comes_from():
    """:func:`inert.inert_html` on HTML that no sanitiser saw (an output's, a raw cell's, a template's) keeps no
    element or attribute that loads: an image becomes text, any other such tag is shown escaped; data: and
    javascript: URLs are not shown; a very long URL is cut."""
    for html in (RAW, MARKDOWN, *(o.data.get("text/html", "") for o in outputs())):
        made = inert.inert_html(html)
        assert loading(made) == [], (html, loading(made))
        assert loading(inert.clean_html(html)) == []
    assert inert.inert_html('<img src="data:image/png;base64,AAAA" alt="plot">') == (
        f'<code class="{inert.INERT_IMAGE}">[image: plot]</code>'
    )
    long = inert.inert_html(f'<img src="https://{BEACON}/{"x" * 1000}">')
    assert len(long) < 300 and long.endswith("…]</code>"), long
    styled = '<table><tbody><tr><th style="text-align:left;background:url(x);cursor:url(y)">a</th></tr></tbody></table>'
    assert inert.inert_html(styled) == '<table><tbody><tr><th style="text-align:left;">a</th></tr></tbody></table>'


def test_the_courses_markdown_names_nothing_to_load_and_renders_unchanged():
    """The course's own markdown is left as written by the sanitiser: it holds no image (nor any HTML that loads),
    in the released notebooks and the instructor's (whose rubrics the formgrader shows), and the inert filter
    changes nothing of what it renders to (its tags, attributes and text)."""

    def shape(html: str) -> list:
        soup = BeautifulSoup(html, "html.parser")
        return [(e.name, sorted(e.attrs.items(), key=str)) for e in soup.find_all(True)] + [soup.get_text()]

    cells = 0
    for assignment in course.assignments():
        for kind in ("exercises", "solutions"):
            for cell in notebooks.read(course.notebook_path(assignment, kind)).cells:
                if cell.cell_type not in ("markdown", "raw"):
                    continue
                cells += 1
                html = render_markdown(cell.source) if cell.cell_type == "markdown" else cell.source
                assert "![" not in cell.source and loading(html) == [], (assignment, kind, cell.source[:200])
                assert shape(inert.strip_files_prefix(html)) == shape(html), (assignment, cell.source[:200])
    assert cells > 100


def test_an_outputs_metadata_is_dropped_so_that_it_names_no_file_to_load():
    """nbconvert's template loads the file an image output's metadata names, and frames an isolated HTML output:
    the autograded notebook's outputs (and the feedback's) keep no metadata."""
    nb = new_notebook(cells=[new_code_cell("x", outputs=outputs())])
    SanitizeStudentHTML(enabled=True, strip=False).preprocess(nb, {})
    assert all(output.metadata == {} for output in nb.cells[0].outputs)
    assert "image/svg+xml" not in json.dumps(nb.cells[0].outputs)  # nbconvert's SanitizeHTML drops SVG


def test_a_feedback_page_with_the_courses_mathjax_forbids_loading_from_elsewhere(tmp_path, monkeypatch):
    """The policy comes first in the page's head, before anything that the page loads, where the page carries the
    course's MathJax (here a stand-in of its files); a page left with nbconvert's CDN, which the policy would
    block, has none. The exporter's own filters show an image as text, unconfigured."""
    from autograder.nbgrader import feedback_html

    script = tmp_path / "tex-svg.js"
    for path in [script, *(tmp_path / f"{part}.js" for part in course.FEEDBACK_MATHJAX_PARTS)]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("var stand_in = 1;")
    inline = feedback_html.inline_mathjax
    nb = new_notebook(cells=[new_markdown_cell(MARKDOWN)])
    monkeypatch.setattr(feedback_html, "inline_mathjax", lambda page: inline(page, script))
    page, _ = _feedback_exporter().from_notebook_node(nb, {"nbgrader": _INFO})
    head = page[page.index("<head>") :]
    assert head.startswith(f'<head>\n<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">')
    assert "img-src data:" in CONTENT_SECURITY_POLICY and "default-src 'none'" in CONTENT_SECURITY_POLICY
    assert "stand_in" in page and page.count("Content-Security-Policy") == 1
    assert f'<code class="{inert.INERT_IMAGE}">[image: a cat' in page
    monkeypatch.setattr(feedback_html, "inline_mathjax", lambda page: inline(page, tmp_path / "absent.js"))
    page, _ = _feedback_exporter().from_notebook_node(nb, {"nbgrader": _INFO})
    assert "Content-Security-Policy" not in page and "cdnjs" in page


_INFO = {"notebook": A, "score": 0, "max_score": 1, "late_penalty": 0}


def _elements(page: str) -> list[tuple]:
    """Each element of ``page`` as the browser reads it: its name, attributes and the text directly in it."""
    soup = BeautifulSoup(page, "html.parser")
    return [
        (
            element.name,
            {name: tuple(v) if isinstance(v, list) else v for name, v in element.attrs.items()},
            tuple(str(text) for text in element.find_all(string=True, recursive=False)),
        )
        for element in soup.find_all(True)
    ]


def test_the_feedback_page_is_nbconverts_page_element_by_element():
    """The feedback's exporter leaves out nbconvert's last step (BeautifulSoup parses and writes out the whole page,
    for the alt text of images that have none) and gives those images the same words: the two pages hold the same
    elements, attributes and text, images of the notebook's outputs and cells of every kind included."""
    plot = new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    described = new_output("display_data", data={"text/html": '<img src="data:image/png;base64,AAAA" alt="a plot">'})
    nb = new_notebook(
        cells=[
            new_markdown_cell(MARKDOWN),
            new_raw_cell(RAW),
            new_code_cell("shown = 1", outputs=[*outputs(), plot, described], execution_count=1),
            new_code_cell("1 / 0", outputs=[new_output("error", ename="ZeroDivisionError", evalue="no", traceback=[])]),
        ]
    )
    ours, _ = _feedback_exporter().page(nb, {"nbgrader": _INFO})
    theirs, _ = HTMLExporter.from_notebook_node(_feedback_exporter(), nb, {"nbgrader": _INFO})
    assert _elements(ours) == _elements(theirs)
    assert ours.count(f'alt="{NO_DESCRIPTION}"') == theirs.count(f'alt="{NO_DESCRIPTION}"') >= 1


def test_only_images_without_alt_text_are_described():
    page = '<p>x</p><img src="a.png"><IMG title="1 > 0" src=b.png/><img alt="mine" src="c.png"><img alt src=d>'
    assert described_images(page) == (
        f'<p>x</p><img alt="{NO_DESCRIPTION}" src="a.png"><IMG alt="{NO_DESCRIPTION}" title="1 > 0" src=b.png/>'
        '<img alt="mine" src="c.png"><img alt src=d>'
    )


def _nbgrader_templates() -> Path:
    import nbgrader.server_extensions.formgrader.handlers as handlers

    return Path(handlers.template_path)


def _feedback_exporter(cls=FeedbackHTMLExporter, **config):
    """The feedback's exporter with nbgrader's feedback template, as ``nbgrader generate_feedback`` makes it."""
    templates = _nbgrader_templates()
    return cls(
        template_name="feedback",
        extra_template_basedirs=[str(templates)],
        extra_template_paths=[str(templates.parent / "static" / "node_modules" / "bootstrap" / "dist" / "css")],
        **config,
    )


# ----------------------------------------------------------------------------- the pages, in Chromium


def submission():
    """The released notebook answered with the reference's code, its written answer :data:`MARKDOWN`, with a
    markdown cell, a raw cell and a code cell with saved :func:`outputs` of the student's own after it."""
    from autograder.grading.classroom import fill

    released = notebooks.read(course.notebook_path(A, "exercises"))
    (written,) = notebooks.written_cells(released)
    nb = fill(A, {written: MARKDOWN})
    at = next(i for i, cell in enumerate(nb.cells) if notebooks.cell_id(cell) == written) + 1
    nb.cells[at:at] = [
        new_markdown_cell(f"More of mine: ![another](https://{BEACON}/another.png)"),
        new_raw_cell(RAW),
        new_code_cell("shown = 1", outputs=outputs(), execution_count=1),
    ]
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A course folder (its exchange a folder of its own) where `make grade`'s phases graded :func:`submission`."""
    from autograder.cli import grade
    from autograder.grading.classroom import make_course, submit

    folder = make_course(tmp_path_factory.mktemp("course") / "instructor")
    with (folder / "nbgrader_config.py").open("a") as f:
        f.write(f"\nc.Exchange.root = {str(folder.parent / 'exchange')!r}\n")
    submit(folder, "mallory", A, submission())
    term = course.Release("term", set(course.assignments()) - {A})
    (result,) = grade.grade(A, root=folder, quiet=True, jobs=1, settings=term)
    assert (folder / "feedback" / "mallory" / A / f"{A}.html").is_file(), result
    return folder


def visit(browser, url: str, *, local: str | None = None, token: str = "") -> tuple[list[str], list[str], str]:
    """``url`` opened in a fresh context, offline (``local``: only that host:port reached, every other request
    aborted; ``token``: Jupyter's, sent with each): the URL of every request the page made, its console's errors
    and the text it shows."""
    headers = {"Authorization": f"token {token}"} if token else {}
    context = browser.new_context(offline=local is None, extra_http_headers=headers)
    if local:
        context.route(
            "**/*", lambda route: route.continue_() if urlsplit(route.request.url).netloc == local else route.abort()
        )
    page = context.new_page()
    requests, errors = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    try:
        page.goto(url, wait_until="load")
        page.wait_for_load_state("networkidle")
        return requests, errors, page.inner_text("body")
    finally:
        context.close()


def assert_shows_the_students_text(text: str) -> None:
    for shown in SHOWN:
        assert shown in text, shown
    assert "My answer, with pictures." in text and "The end of my answer." in text
    assert f'<img src="https://{BEACON}/html.png"' in text  # the HTML the student wrote, as text
    assert f"[image: another — https://{BEACON}/another.png]" in text
    assert f'<img src="https://{BEACON}/raw-cell.png">' in text and "raw text" in text


def named(requests: list[str]) -> list[str]:
    return [url for url in requests if BEACON in url]


@pytest.mark.slow
@pytest.mark.browser
def test_the_feedback_page_loads_nothing_a_student_named(graded):
    """The student's feedback page, as `make grade` wrote it, opened offline: no request but for the page's own
    file (bootstrap's font, beside it) and data: URLs, none of the student's URLs, nothing that its policy had to
    block; the student's text shown, each image as text."""
    page = graded / "feedback" / "mallory" / A / f"{A}.html"
    assert f'content="{CONTENT_SECURITY_POLICY}"' in page.read_text()
    with chromium() as browser:
        requests, errors, text = visit(browser, page.as_uri())
    assert named(requests) == [], named(requests)
    assert [url for url in requests if not url.startswith(("file:", "data:"))] == [], requests
    assert not [e for e in errors if "Content Security Policy" in e], errors
    assert_shows_the_students_text(text)


@contextmanager
def formgrader(folder: Path, tmp_path: Path):
    """`make formgrader`'s server for ``folder``: yields the formgrader's base URL and the token; then stopped."""
    with running_formgrader.running(folder, tmp_path) as (base, _):
        yield base, running_formgrader.TOKEN


@pytest.mark.slow
@pytest.mark.browser
def test_the_formgraders_page_of_the_submission_loads_nothing_a_student_named(graded, tmp_path):
    """The formgrader's page of the submission, from `make formgrader`'s server, in Chromium: no request for any
    of the student's URLs (remote, or the instructor's own server's), only the page's own (its scripts, styles and
    API on that server, and the course's MathJax, which that server serves: no CDN); the student's text shown, each
    image as text."""
    with formgrader(graded, tmp_path) as (base, token):
        url = f"{base}/submissions/{_submission_id(base, token)}/"
        with chromium() as browser:
            requests, errors, text = visit(browser, url, local=urlsplit(base).netloc, token=token)
    assert named(requests) == [], named(requests)
    mathjax = f"{base.removesuffix('/formgrader')}/static/mathjax/"  # the course's, as make formgrader serves it
    own = (f"{base}/static/", f"{base}/api/", mathjax)
    assert [r for r in requests if r != url and not r.startswith(own)] == [], requests
    assert f"{mathjax}tex-svg.js" in requests and f"{mathjax}ui/safe.js" in requests, "\n".join(requests)
    assert HTMLExporter().mathjax_url.split("?")[0] not in " ".join(requests), requests
    assert not [e for e in errors if "ERR_" in e or "Failed to load" in e], errors
    assert_shows_the_students_text(text)
    assert "Rubric for explain_" in text  # the formgrader's own page, with ShowRubric's rubric


# nbgrader_config.py's filters as they were: the course's linear strip_files_prefix, and nbconvert's clean_html.
FILTERS_AS_THEY_WERE = """
c.HTMLExporter.filters = {
    "strip_files_prefix": "autograder.nbgrader.files_prefix.strip_files_prefix",
    "clean_html": "nbconvert.filters.clean_html",
}
"""


@pytest.mark.slow
@pytest.mark.browser
def test_the_pages_as_they_were_fetch_the_students_urls_and_the_log_shows_it(graded, tmp_path):
    """The same submission's pages as they were: the feedback written again by `make grade`'s phase with the
    filters as they were and without its policy, and the formgrader's page served by `make formgrader`'s server
    with those filters. The request log catches the student's remote, protocol-relative and relative URLs on both,
    so the two tests above can fail."""
    from autograder.grading.feedback import write_feedback

    folder = tmp_path / "course"
    shutil.copytree(graded, folder, symlinks=True)
    with (folder / "nbgrader_config.py").open("a") as f:
        f.write(FILTERS_AS_THEY_WERE)
    notes, stopped = write_feedback(A, ["mallory"], folder, quiet=True, env=course.environment(course.Release()))
    assert not stopped, notes
    page = folder / "feedback" / "mallory" / A / f"{A}.html"
    page.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text()))
    with chromium() as browser:
        feedback, _, _ = visit(browser, page.as_uri())
        with formgrader(folder, tmp_path) as (base, token):
            url = f"{base}/submissions/{_submission_id(base, token)}/"
            formgrade, _, _ = visit(browser, url, local=urlsplit(base).netloc, token=token)
    origin = base.removesuffix("/formgrader")
    for requests, expected in (
        (feedback, [f"https://{BEACON}/remote.png", f"file://{BEACON}/", f"/{BEACON}-relative.png"]),
        (formgrade, [f"https://{BEACON}/remote.png", f"{url}{BEACON}-relative.png", f"{origin}/api/contents/"]),
    ):
        caught = named(requests)
        for part in expected:
            assert any(part in found for found in caught), (part, caught)


def _submission_id(base: str, token: str) -> str:
    """The id of the formgrader's one submission of the assignment."""
    with urllib.request.urlopen(f"{base}/api/submitted_notebooks/{A}/{A}?token={token}", timeout=10) as listed:
        (entry,) = json.loads(listed.read())
    return entry["id"]


# ----------------------------------------------------------------------------- the feedback page on a phone

PHONE = {"width": 390, "height": 844}  # a 6.1-inch phone in portrait, CSS pixels
READABLE = 4.5  # WCAG's least contrast of normal text with its background
CODE_WIDTH = 300  # px: the least width of a code box on the phone

# The page at the phone's width: its width against the window's; each grade cell's score (the heading's right
# part, "Score: 0.0 / 3.0 (Top)") with its colour, the colour drawn behind its text (the first opaque background at
# the text's middle) and whether the text is within the heading; the width of every code box and output shown.
_PHONE_LAYOUT = r"""() => {
  const rgba = c => (c.match(/[\d.]+/g) || []).map(Number);
  const behind = (x, y) => {
    for (const e of document.elementsFromPoint(x, y)) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const scores = [];
  for (const span of document.querySelectorAll('div.nbgrader_cell .panel-heading .pull-right')) {
    const text = Array.from(span.childNodes).find(n => n.nodeType === 3 && n.data.includes('Score'));
    if (!text) continue;
    span.scrollIntoView({block: 'center'});
    const range = document.createRange();
    range.selectNodeContents(text);
    const r = Array.from(range.getClientRects()).find(b => b.width > 0);
    const heading = span.closest('.panel-heading').getBoundingClientRect();
    scores.push({text: text.data.trim(), colour: rgba(getComputedStyle(span).color).slice(0, 3),
                 background: behind(r.left + r.width / 2, r.top + r.height / 2),
                 inside: r.top >= heading.top - 1 && r.bottom <= heading.bottom + 1
                         && r.left >= heading.left - 1 && r.right <= heading.right + 1});
  }
  const boxes = Array.from(document.querySelectorAll('div.input_area pre, div.output_subarea'))
    .filter(e => e.getClientRects().length)
    .map(e => ({width: e.getBoundingClientRect().width, first: (e.textContent || '').trim().slice(0, 40)}));
  window.scrollTo(0, 0);
  return {width: document.documentElement.scrollWidth, view: document.documentElement.clientWidth, scores, boxes};
}"""


def contrast(one: list[float], two: list[float]) -> float:
    """WCAG's contrast ratio of two sRGB colours (0 to 255 each)."""

    def luminance(rgb):
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (v / 255 for v in rgb)]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    bright, dark = sorted((luminance(one), luminance(two)), reverse=True)
    return (bright + 0.05) / (dark + 0.05)


def phone_problems(browser, url: str) -> tuple[list[str], dict]:
    """What a reader of the page at ``url`` on a phone cannot read: the page scrolling sideways, a score out of its
    heading or unreadable against what is drawn behind it, a code box narrower than :data:`CODE_WIDTH`; and what
    was measured. The page is opened offline: a request its policy blocks is a problem too."""
    context = browser.new_context(viewport=PHONE, offline=True)
    page = context.new_page()
    blocked = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    try:
        page.goto(url, wait_until="load")
        layout = page.evaluate(_PHONE_LAYOUT)
    finally:
        context.close()
    problems = [f"blocked by the page's policy: {text}" for text in blocked]
    if layout["width"] > layout["view"]:
        problems.append(f"the page is {layout['width']} px wide in a {layout['view']} px window")
    for score in layout["scores"]:
        ratio = contrast(score["colour"], score["background"])
        if not score["inside"] or ratio < READABLE:
            problems.append(
                f"{score['text']!r}: {'in' if score['inside'] else 'out of'} its heading, "
                f"{score['colour']} on {score['background']}, contrast {ratio:.1f}"
            )
    problems += [f"a box {b['width']:.0f} px wide: {b['first']!r}" for b in layout["boxes"] if b["width"] < CODE_WIDTH]
    return problems, layout


def failed_submission():
    """The released notebook answered with the reference's code, as nbgrader's feedback sees it after a grading
    that failed every test cell: a score of 0 in each grade cell, and a wide error and a wide table in its output."""
    from autograder.grading.classroom import fill

    nb = fill(A, {})
    wide = "CheckFailed: the weights of each row should sum to 1, " + "and they sum to 0.73 in row 3 " * 8
    for cell in nb.cells:
        info = cell.metadata.get("nbgrader") or {}
        if info.get("grade"):
            info["score"] = 0.0
            if cell.cell_type == "code":
                cell.outputs = [
                    new_output("error", ename="CheckFailed", evalue=wide, traceback=[wide]),
                    new_output(
                        "display_data", data={"text/html": "<table><tr>" + "<td>0.125</td>" * 40 + "</tr></table>"}
                    ),
                ]
    return nb


@pytest.mark.browser
def test_a_feedback_page_fits_a_phone_its_scores_readable_and_code_wide(tmp_path, monkeypatch):
    """At 390 x 844 the feedback page of a submission that failed every test is as wide as the window (code,
    outputs and tables scroll inside their own box), each grade cell's score is inside its heading and readable
    there (WCAG's 4.5:1), and every code box and output is at least 300 px wide; its policy blocks nothing. The
    same page without the course's rules for a phone fails each of these, so the measurement can fail."""
    from autograder.nbgrader import feedback_html

    script = tmp_path / "mathjax" / "tex-svg.js"  # a stand-in of the course's MathJax: the page gets its policy
    for path in [script, *(script.parent / f"{part}.js" for part in course.FEEDBACK_MATHJAX_PARTS)]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("var stand_in = 1;")
    inline = feedback_html.inline_mathjax
    monkeypatch.setattr(feedback_html, "inline_mathjax", lambda page: inline(page, script))
    info = {"notebook": A, "score": 0, "max_score": 10, "late_penalty": 0}
    page, _ = _feedback_exporter().from_notebook_node(failed_submission(), {"nbgrader": info})
    assert f'content="{CONTENT_SECURITY_POLICY}"' in page and feedback_html.PHONE_CSS in page
    fits, before = tmp_path / "feedback.html", tmp_path / "as-it-was.html"
    fits.write_text(page)
    before.write_text(page.replace(feedback_html.PHONE_CSS, ""))
    with chromium() as browser:
        problems, layout = phone_problems(browser, fits.as_uri())
        old_problems, old = phone_problems(browser, before.as_uri())
    assert layout["scores"] and len(layout["boxes"]) > 20, layout
    assert problems == [], problems
    assert old["width"] > old["view"], old
    assert any("out of its heading" in problem for problem in old_problems), old_problems
    assert any(box["width"] < CODE_WIDTH for box in old["boxes"]), old_problems


@pytest.mark.slow
@pytest.mark.browser
def test_the_feedback_page_make_grade_wrote_fits_a_phone(graded):
    """The student's feedback page as `make grade` wrote it, at 390 x 844: no sideways scroll, each score readable
    inside its heading, every code box at least 300 px wide, nothing blocked by its policy."""
    page = graded / "feedback" / "mallory" / A / f"{A}.html"
    assert f'content="{CONTENT_SECURITY_POLICY}"' in page.read_text()
    with chromium() as browser:
        problems, layout = phone_problems(browser, page.as_uri())
    assert layout["scores"] and layout["boxes"], layout
    assert problems == [], problems


# Each failed check's message shown (an error output): the width of its text against its box's, and its first words.
_MESSAGES = r"""() => Array.from(document.querySelectorAll('div.output_error pre'))
  .filter(e => e.getClientRects().length)
  .map(e => ({text: e.scrollWidth, box: e.clientWidth, first: (e.textContent || '').trim().slice(0, 40)}))"""


def messages_on_a_phone(browser, page: Path) -> list[dict]:
    context = browser.new_context(viewport=PHONE, offline=True)
    try:
        opened = context.new_page()
        opened.goto(page.as_uri(), wait_until="load")
        return opened.evaluate(_MESSAGES)
    finally:
        context.close()


@pytest.mark.browser
def test_a_failed_checks_message_wraps_within_its_box_on_a_phone(tmp_path):
    """At 390 x 844 every line of a failed check's message, as the feedback shows it (its lines wrapped at 100
    characters by HideHiddenTests), is whole within its box: the text is no wider than the box. The same page
    without the rule that wraps it (:data:`feedback_html.MESSAGE_CSS`) shows the message's lines running past the
    box, which scrolls sideways and shows their ends cut at the screen's edge."""
    from autograder.nbgrader import feedback_html
    from autograder.nbgrader.hide_tests import FEEDBACK_WIDTH, HideHiddenTests

    nb, _ = HideHiddenTests().preprocess(failed_submission(), {})
    lines = [
        line for cell in nb.cells for o in cell.get("outputs", []) for line in o.get("traceback", [""])[0].split("\n")
    ]
    assert max(map(len, lines)) > 0.9 * FEEDBACK_WIDTH, "the messages' lines are not as long as the feedback's"
    page, _ = _feedback_exporter().from_notebook_node(nb, {"nbgrader": _INFO})
    assert feedback_html.MESSAGE_CSS in page
    wraps, before = tmp_path / "feedback.html", tmp_path / "as-it-was.html"
    wraps.write_text(page)
    before.write_text(page.replace(feedback_html.MESSAGE_CSS, ""))
    with chromium() as browser:
        shown, old = messages_on_a_phone(browser, wraps), messages_on_a_phone(browser, before)
    assert len(shown) == len(old) > 5, (shown, old)
    assert [m for m in shown if m["text"] > m["box"] + 1] == [], shown
    assert all(m["text"] > 1.5 * m["box"] for m in old), old
