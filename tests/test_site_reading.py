"""The built site where a reader opens it (course_site.reading, course_site.serve): the home page says its title
once, and the search quotes each result's page both opened from the site's folder (``file://``, where a browser
refuses Sphinx's fetch of a page) and served by ``make serve``.

Tried on a small book built with the course's own configuration (``_config.yml``, its extension, its static
files): the home page (``book/intro.md``), a page of notes whose body, not its title, holds the word searched, and
the instructor guide, which shows nbgrader's markers (the leak check allows them in its page and in its text for
the search, and nowhere else).
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attention_course.tooling.notebooks import COURSE_ROOT
from course_site import leaks, reading, serve
from course_site.leaks.markers import page_key
from tests.support import browser

TITLE = "Attention: from Bahdanau to Transformers"  # _config.yml's title, and book/intro.md's heading
WORD = "quokka"  # in the notes' body only
NOTES = f"""# Notes on reading

A word that only this page's text holds: {WORD}, said near a formula, $\\sqrt{{d_k}}$, that the quote gives as text.
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The home page and the notes, built by ``jupyter-book build`` with the course's configuration."""
    book = tmp_path_factory.mktemp("book")
    shutil.copy2(COURSE_ROOT / "_config.yml", book / "_config.yml")
    (book / "book").mkdir()
    for name in ("intro.md", "references.bib", "instructor_guide.md"):
        shutil.copy2(COURSE_ROOT / "book" / name, book / "book" / name)
    shutil.copytree(
        COURSE_ROOT / "book" / "_static", book / "book" / "_static", ignore=shutil.ignore_patterns("mathjax")
    )
    (book / "book" / "notes.md").write_text(NOTES)
    (book / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nchapters:\n  - file: book/notes\n  - file: book/instructor_guide\n"
    )
    jupyter_book = str(Path(sys.executable).with_name("jupyter-book"))
    built = subprocess.run([jupyter_book, "build", "."], cwd=book, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, (built.stdout + built.stderr)[-4000:]
    return book / "_build" / "html"


def page_title(page: str) -> str:
    return html.unescape(re.search(r"<title>(.*?)</title>", page, re.S).group(1)).strip()


def test_the_home_page_is_titled_once_and_the_others_by_their_title_and_the_sites(site):
    home = (site / "book" / "intro.html").read_text()
    assert page_title(home) == TITLE, page_title(home)
    assert page_title((site / "book" / "notes.html").read_text()) == f"Notes on reading \u2014 {TITLE}"
    home_link = re.search(r'bd-sidenav__home-link">\s*<li[^>]*>\s*<a[^>]*>\s*([^<]*?)\s*</a>', home, re.S).group(1)
    assert home_link == reading.HOME_LINK, home_link
    assert re.search(rf"<h1>{re.escape(html.escape(TITLE, quote=False))}<a class=\"headerlink\"", home)


@pytest.mark.browser
def test_a_reader_sees_the_home_pages_title_once(site):
    with browser.chromium() as chrome, browser.open_page(chrome, (site / "book" / "intro.html").as_uri()) as (page, _):
        shown = page.evaluate("() => document.body.innerText")
        heading = page.locator("article h1").inner_text()
        tab = page.title()
    assert shown.count(TITLE) == 1, [line for line in shown.splitlines() if TITLE in line]
    assert TITLE in heading and tab == TITLE


def search(chrome, url: str) -> tuple[list[str], list[str], list[str], bool]:
    """The search page at ``url``: (its results' links, their quotes, the problems its console and requests
    showed, whether it loaded a page's text from its script in _static/search-pages)."""
    with browser.open_page(chrome, url) as (page, visit):
        page.wait_for_function(  # every result listed, each with its quote
            """() => document.querySelector('p.search-summary')?.textContent.includes('Search finished')
                && document.querySelectorAll('ul.search li p.context').length
                   === document.querySelectorAll('ul.search li').length""",
            timeout=30_000,
        )
        links = page.locator("ul.search li a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        quotes = page.locator("ul.search li p.context").all_inner_texts()
        loaded = page.evaluate("() => window.COURSE_SEARCH_PAGES !== undefined")
    return links, quotes, visit.problems, loaded


@pytest.mark.browser
def test_the_search_quotes_its_results_on_a_site_opened_from_its_folder(site):
    """From file:// a fetch of a page is refused (a CORS error, titles only); the quotes come from the pages'
    text that the build wrote, and the console shows no error."""
    with browser.chromium() as chrome:
        links, quotes, problems, loaded = search(chrome, (site / "search.html").as_uri() + f"?q={WORD}")
    assert problems == [], problems
    assert links == ["book/notes.html"], links
    assert len(quotes) == 1 and WORD in quotes[0] and "\u221ad_k" in quotes[0], quotes
    assert loaded


@pytest.mark.browser
def test_make_serve_serves_the_site_and_its_search_fetches_the_pages(site):
    """``make serve``'s command on a free port: the search fetches the pages, as on the published site, and never
    loads the text written for file://."""
    command = [sys.executable, "-m", "course_site.serve", str(site), "--port", "0"]
    server = subprocess.Popen(command, cwd=COURSE_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said = server.stdout.readline()
        match = re.fullmatch(r"The book is served at (http://127\.0\.0\.1:\d+/) \(Ctrl\+C stops\)\n", said)
        assert match, said + server.stderr.read() if server.poll() is not None else said
        with browser.chromium() as chrome:
            links, quotes, problems, loaded = search(chrome, match.group(1) + f"search.html?q={WORD}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert problems == [], problems
    assert links == ["book/notes.html"] and len(quotes) == 1 and WORD in quotes[0], (links, quotes)
    assert not loaded


def test_make_serve_refuses_a_folder_without_a_built_book(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        serve.main([str(tmp_path), "--port", "0"])
    assert refused.value.code == 2
    assert f"site: {tmp_path} holds no built book" in capsys.readouterr().err


def test_each_pages_text_for_the_search_is_a_script_of_its_own_that_the_leak_check_reads_as_the_page():
    assert page_key(f"{reading.SEARCH_PAGES}/book/instructor_guide.html.js") == "book/instructor_guide"
    assert page_key("_static/other/book/instructor_guide.html.js") is None


@pytest.mark.slow
def test_the_leak_check_allows_the_instructor_guides_markers_in_its_text_for_the_search(site):
    scripts = sorted(path.relative_to(site).as_posix() for path in (site / reading.SEARCH_PAGES).rglob("*.js"))
    assert scripts == [f"{reading.SEARCH_PAGES}/book/{name}.html.js" for name in ("instructor_guide", "intro", "notes")]
    guide = (site / reading.SEARCH_PAGES / "book" / "instructor_guide.html.js").read_text()
    assert "BEGIN HIDDEN TESTS" in guide
    report = leaks.scan(site)
    assert report.ok, [str(problem) for problem in report.problems]
