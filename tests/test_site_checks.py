"""The site checks themselves: the link checker and the browser harness find broken pages.

tests/test_book.py runs them on the real site; here they run on a small site made to be broken,
so that a check that could not fail would show.
"""

import pytest

from course_site import links
from tests import browser

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
    checked, broken = links.check(small_site)
    assert checked == 9 and broken == []


def test_link_check_finds_missing_pages_anchors_and_images(small_site):
    (small_site / "broken.html").write_text(BROKEN)
    _, broken = links.check(small_site)
    reasons = {(b.page, b.url): b.reason for b in broken}
    assert reasons == {
        ("broken.html", "missing.html"): "no such file",
        ("broken.html", "other.html#nowhere"): "no element with id 'nowhere' on that page",
        ("broken.html", "../../outside.html"): "points outside the site",
        ("broken.html", "missing.png"): "no such file",
    }
    assert links.main([str(small_site)]) == 1


def test_browser_sees_a_sound_page_as_sound(small_site):
    with browser.serve(small_site) as base, browser.chromium() as chrome:
        with browser.open_page(chrome, base + "good.html") as (page, visit):
            loaded = page.evaluate("() => Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    assert visit.problems == [] and loaded


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
