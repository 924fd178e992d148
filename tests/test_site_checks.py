"""The site checks themselves: the link checker and the browser harness find broken pages.

tests/test_book.py runs them on the real site; here they run on a small site made to be broken,
so that a check that could not fail would show.
"""

import pytest

from course_site import links
from tests.support import browser

GOOD = """<!doctype html><html><head><title>good</title><link rel="icon" href="dot.svg"></head><body>
<h1 id="top">Good</h1><a href="other.html#part">other</a><a href="#top">up</a>
<a href="https://example.org/">external</a><img src="dot.svg" alt="a dot"></body></html>"""
OTHER = """<!doctype html><html><body><h2 id="part">Part</h2><a href="good.html">back</a></body></html>"""
BROKEN = """<!doctype html><html><body>
<a href="missing.html">missing page</a><a href="other.html#nowhere">missing anchor</a>
<a href="../../outside.html">outside</a><img src="missing.png" alt="gone">
<script>undefinedFunction();</script><script>console.error("a reader would see this")</script>
</body></html>"""
DOT = '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>'


@pytest.fixture
def small_site(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    for name, text in {"index.html": GOOD, "good.html": GOOD, "other.html": OTHER, "dot.svg": DOT}.items():
        (site / name).write_text(text)
    return site


def test_link_check_passes_a_sound_site(small_site):
    checked, broken = links.scan(small_site)
    assert checked == 9 and broken == []


def test_link_check_finds_missing_pages_anchors_and_images(small_site):
    (small_site / "broken.html").write_text(BROKEN)
    _, broken = links.scan(small_site)
    reasons = {(b.page, b.url): b.reason for b in broken}
    assert reasons == {
        ("broken.html", "missing.html"): "no such file",
        ("broken.html", "other.html#nowhere"): "no element with id 'nowhere' on that page",
        ("broken.html", "../../outside.html"): "points outside the site",
        ("broken.html", "missing.png"): "no such file",
    }
    assert links.main([str(small_site)]) == 1


def test_link_check_finds_an_id_that_names_two_elements_of_a_page(small_site):
    """Two exercises that sphinx-exercise laid out with the same id for their bodies: the check names the id and
    the page; the same page with an id each passes."""
    twice = '<div id="ex-1"><section id="exercise-content">a</section></div>'
    twice += '<div id="ex-2"><section id="exercise-content">b</section></div><a name="exercise-content"></a>'
    (small_site / "twice.html").write_text(f"<!doctype html><html><body>{twice}</body></html>")
    _, broken = links.scan(small_site)
    assert [str(b) for b in broken] == ["twice.html: <id> #exercise-content: the id of 2 elements of the page"]
    once = twice.replace('"ex-2"><section id="exercise-content"', '"ex-2"><section id="ex-2-content"')
    (small_site / "twice.html").write_text(f"<!doctype html><html><body>{once}</body></html>")
    assert links.scan(small_site)[1] == []


@pytest.mark.browser
def test_browser_sees_a_sound_page_as_sound(small_site):
    with browser.serve(small_site) as base, browser.chromium() as chrome:
        with browser.open_page(chrome, base + "good.html") as (page, visit):
            loaded = page.evaluate("() => Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    assert visit.problems == [] and loaded


@pytest.mark.browser
def test_browser_reports_exceptions_console_errors_and_missing_files(small_site):
    (small_site / "broken.html").write_text(BROKEN)
    with browser.serve(small_site) as base, browser.chromium() as chrome:
        with browser.open_page(chrome, base + "broken.html") as (page, visit):
            loaded = page.evaluate("() => Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    problems = "\n".join(visit.problems)
    assert "uncaught exception" in problems and "undefinedFunction" in problems
    assert "console error: a reader would see this" in problems
    assert "HTTP 404" in problems and "missing.png" in problems
    assert not loaded


# A page laid out like a chapter: an article column, code blocks and display equations (MathJax's
# containers, written out here: the check measures boxes, not MathJax).
LAYOUT = """<!doctype html><html><head><style>
body {{ margin: 0; }} article {{ width: 600px; margin-left: 100px; }}
pre {{ font: 14px monospace; padding: 8px; margin: 0 0 8px 0; }}
mjx-container[display="true"] {{ display: block; }}
</style></head><body><article class="bd-article">
<pre>short = "fits"</pre>
<div class="math"><mjx-container display="true">
<span style="display:inline-block;width:200px">x</span></mjx-container></div>
<pre style="overflow-x: auto">{long}</pre>
{broken}
</article></body></html>"""
BROKEN_LAYOUT = """
<pre style="overflow: hidden">hidden = "{long}"</pre>
<pre style="width: 900px; overflow-x: auto">wide = "{long}"</pre>
<div class="math" style="overflow: hidden"><mjx-container display="true" style="overflow: hidden">
<span style="display:inline-block;width:900px">cut</span></mjx-container></div>
<div class="math"><mjx-container display="true" style="overflow-x: auto">
<span style="display:inline-block;width:900px">scrolls</span></mjx-container></div>"""


@pytest.mark.browser
def test_layout_check_passes_blocks_that_fit_or_scroll(small_site):
    (small_site / "layout.html").write_text(LAYOUT.format(long="x" * 200, broken=""))
    with browser.serve(small_site) as base, browser.chromium() as chrome:
        with browser.open_page(chrome, base + "layout.html") as (page, _):
            found = browser.overflows(page)
    assert found["problems"] == [] and (found["code"], found["equations"]) == (2, 1)
    assert found["scrolling_code"] == ["x" * 70]  # a long output may scroll inside its block


@pytest.mark.browser
def test_layout_check_finds_cut_off_and_wide_blocks_and_equations(small_site):
    long = "x" * 200
    (small_site / "layout.html").write_text(LAYOUT.format(long=long, broken=BROKEN_LAYOUT.format(long=long)))
    with browser.serve(small_site) as base, browser.chromium() as chrome:
        with browser.open_page(chrome, base + "layout.html") as (page, _):
            found = browser.overflows(page)
    problems = found["problems"]
    assert len(problems) == 4, problems
    assert problems[0].startswith("code block cut off") and 'hidden = "xxx' in problems[0]
    assert problems[1].startswith("code block wider than the article") and 'wide = "xxx' in problems[1]
    assert problems[2].startswith("equation cut off") and "cut" in problems[2]
    assert problems[3].startswith("equation needs scrolling") and "scrolls" in problems[3]
