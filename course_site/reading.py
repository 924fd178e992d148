"""How the built site reads where a reader opens it: its home page's title, and its search from ``file://``.

A Sphinx extension that :mod:`course_site.sphinx_ext` sets up.

The home page's title once: Sphinx titles a page "<page title> — <the site's title>", and the home page's own
title is the site's (``book/intro.md``'s heading is ``_config.yml``'s ``title``), so its browser tab said the
course's name twice; a page whose title is the site's is titled by it alone. The sidebar's first entry, the
link to the home page, says "Introduction" (:data:`HOME_LINK`), not the course's name that the home page's
heading says right beside it.

Search from ``file://``: Sphinx's search page quotes each result's text, which it fetches from the result's
page (``fetch``), and a browser refuses any fetch of a ``file://`` address (a CORS error): a site opened from
its folder listed titles only. The build writes each page's text as the search reads it (the page's main
block, without scripts, styles, images, or any attribute but an element's ``id`` and a formula's class) into a
script of its own, ``_static/search-pages/<page>.js`` (``_static/search-pages/book/intro.html.js``); under
``file://`` only, ``book/_static/course.js`` loads the script of each result's page (a script loads where a fetch
may not) and hands the search its text. Served over HTTP (``make serve``), the search fetches the pages as
Sphinx does and no such script is loaded. The leak check reads each script as the page it is the text of
(``course_site.leaks.markers.page_key``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bs4 import BeautifulSoup

HOME_LINK = "Introduction"
SEARCH_PAGES = "_static/search-pages"  # <page>.js: the text of <page> (book/intro.html)
# What the search's quotes never show (Sphinx's ``htmlToText`` drops .headerlink, script and style itself).
DROPPED = ["script", "style", "svg", "img", "iframe", "object", "video", "audio", "noscript", "template", "button"]
MATH = "math"  # the class of a formula, whose TeX course.js gives as text in a quote
# The pages that are no chapter's: the search's own, the index, and the root's redirect.
NOT_SEARCHED = {"search.html", "genindex.html", "index.html"}


TEMPLATES = Path(__file__).parent / "templates" / "site"  # layout.html: the page's <title>


def add_templates(app, config) -> None:
    """The course's layout (``templates/site/layout.html``): a page whose title is the site's is titled by it alone."""
    config.templates_path = [*config.templates_path, str(TEMPLATES)]


def home_link(app, pagename, templatename, context, doctree) -> None:
    """The sidebar's link to the home page says :data:`HOME_LINK`."""
    if "root_title" in context:
        context["root_title"] = HOME_LINK


def searched_text(page: str) -> str:
    """The part of a built page that Sphinx's search quotes (its ``[role="main"]`` block), as bare HTML."""
    soup = BeautifulSoup(page, "html.parser")
    main = soup.find(attrs={"role": "main"})
    if main is None:
        return ""
    for element in main.find_all(DROPPED):
        element.decompose()
    for element in main.find_all(class_="headerlink"):
        element.decompose()
    for element in [main, *main.find_all(True)]:
        kept = {"id": element.attrs["id"]} if "id" in element.attrs else {}
        if MATH in element.get("class", []):
            kept["class"] = MATH
        element.attrs = kept
    main.attrs["role"] = "main"
    return str(main)


def search_pages(site: Path) -> dict[str, str]:
    """Each page of the built ``site`` (its path from the site's root) and the HTML that its search quotes."""
    return {
        path.relative_to(site).as_posix(): searched_text(path.read_text(encoding="utf-8"))
        for path in sorted(site.rglob("*.html"))
        if path.relative_to(site).as_posix() not in NOT_SEARCHED and not path.relative_to(site).parts[0].startswith("_")
    }


def write_search_pages(app, exception) -> None:
    """``_static/search-pages/<page>.js``: the text of each page, for the search of a site opened from ``file://``."""
    if exception is not None or app.builder.format != "html" or app.builder.name == "linkcheck":
        return
    site = Path(app.outdir)
    shutil.rmtree(site / SEARCH_PAGES, ignore_errors=True)  # no page's text from an earlier build stays
    for page, text in search_pages(site).items():
        script = site / SEARCH_PAGES / f"{page}.js"
        script.parent.mkdir(parents=True, exist_ok=True)
        key, value = json.dumps(page), json.dumps(text, ensure_ascii=False)
        script.write_text(f"(window.COURSE_SEARCH_PAGES ??= {{}})[{key}] = {value};\n", encoding="utf-8")


def setup(app):
    app.connect("config-inited", add_templates)
    app.connect("html-page-context", home_link, priority=900)  # after the book theme sets root_title
    app.connect("build-finished", write_search_pages, priority=950)  # after the pages are written and rewritten
    return {"parallel_read_safe": True, "parallel_write_safe": True}
