"""A headless Chromium, driven by Playwright, reading a built site served on localhost.

Used by tests/test_book.py. Chromium is Debian's ``chromium`` package (``make browser`` installs
it); set ``CHROMIUM`` to use another binary.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

# Without these, Chromium tries to reach Google's services at start-up, which a closed network
# turns into console noise; none of them changes how a page renders.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if candidate and (found := shutil.which(candidate)):
            return found
    raise RuntimeError("no Chromium found: run `make browser` (Debian's chromium package) or set CHROMIUM")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(directory: Path):
    """Serve ``directory`` on 127.0.0.1; yield its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class PageVisit:
    """What happened while a page loaded: the problems a reader's console would show."""

    url: str
    problems: list[str] = field(default_factory=list)


@contextmanager
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def open_page(browser, url: str, *, width: int = 1280, height: int = 900):
    """Open ``url`` in a fresh context, closed on leaving; yield (page, visit) with console errors,
    uncaught exceptions, failed requests, HTTP errors and requests that leave localhost recorded."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    visit = PageVisit(url)
    problems = visit.problems
    host = urlsplit(url).netloc

    def on_console(message):
        if message.type == "error":
            problems.append(f"console error: {message.text}")

    def on_request(request):
        if urlsplit(request.url).scheme in ("http", "https") and urlsplit(request.url).netloc != host:
            problems.append(f"request leaves the site: {request.url}")

    def on_response(response):
        if response.status >= 400:
            problems.append(f"HTTP {response.status}: {response.url}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: problems.append(f"uncaught exception: {error}"))
    page.on("requestfailed", lambda request: problems.append(f"request failed ({request.failure}): {request.url}"))
    page.on("request", on_request)
    page.on("response", on_response)
    try:
        page.goto(url, wait_until="load")
        page.wait_for_load_state("networkidle")
        yield page, visit
    finally:
        visit.problems = list(problems)  # what closing the page aborts is not the page's problem
        context.close()


def wait_for_mathjax(page, timeout_ms: int = 30_000) -> None:
    """Wait until MathJax has typeset the page (its start-up promise has resolved)."""
    page.wait_for_function(
        "() => Boolean(window.MathJax && MathJax.startup && MathJax.startup.promise)", timeout=timeout_ms
    )
    page.evaluate("() => MathJax.startup.promise.then(() => true)")


# What a reader at this width would find cut off or pushed sideways. Code blocks (every <pre> of
# the article, cell inputs and outputs alike): text wider than the block while the block does not
# scroll, or a box reaching past the article. A code block that scrolls is allowed (a long printed
# table), and counted. Display equations (MathJax's containers): a formula wider than its box,
# even where the box scrolls (a scrollbar that the system hides until one scrolls leaves the
# formula looking cut), or a box reaching past the article. Collapsed blocks (solutions, hidden
# details) are opened first, so that their code is measured too.
_OVERFLOWS = r"""() => {
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const article = document.querySelector('article.bd-article') || document.querySelector('article')
    || document.body;
  const edge = article.getBoundingClientRect();
  const scrolls = e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
  const beyond = e => {
    const r = e.getBoundingClientRect();
    return r.left < edge.left - 1 || r.right > edge.right + 1;
  };
  const first = text => (text || '').trim().split('\n')[0].slice(0, 70);
  const found = {code: 0, scrolling_code: [], equations: 0, problems: []};
  for (const pre of article.querySelectorAll('pre')) {
    if (!pre.getClientRects().length) continue;
    found.code++;
    const wide = pre.scrollWidth > pre.clientWidth + 1;
    if (wide && !scrolls(pre)) {
      found.problems.push(`code block cut off (${pre.scrollWidth} px of text in ${pre.clientWidth} px): `
                          + first(pre.textContent));
    } else if (beyond(pre)) {
      found.problems.push(`code block wider than the article: ${first(pre.textContent)}`);
    } else if (wide) {
      found.scrolling_code.push(first(pre.textContent));
    }
  }
  for (const eq of article.querySelectorAll('mjx-container[display="true"]')) {
    if (!eq.getClientRects().length) continue;
    found.equations++;
    const block = eq.closest('.math') || eq.parentElement;
    const tex = first(block.getAttribute('data-tex') || block.textContent);
    if (eq.scrollWidth > eq.clientWidth + 1 || (block !== article && block.scrollWidth > block.clientWidth + 1)) {
      const how = scrolls(eq) || scrolls(block) ? 'needs scrolling' : 'cut off';
      found.problems.push(`equation ${how} (${eq.scrollWidth} px in ${eq.clientWidth} px): ${tex}`);
    } else if (beyond(eq)) {
      found.problems.push(`equation wider than the article: ${tex}`);
    }
  }
  return found;
}"""


def overflows(page) -> dict:
    """The code blocks and display equations of an opened page that overflow sideways.

    Returns ``{"code": n, "equations": m, "problems": [...], "scrolling_code": [...]}``: how many
    code blocks and display equations were measured, a line for each that a reader would see cut
    off or pushed past the article (an equation that needs scrolling counts), and the first line
    of each code block that scrolls inside its own box (allowed).
    """
    return page.evaluate(_OVERFLOWS)


# What makes a page wider than the window (it then scrolls sideways as a whole): the document's width against
# the window's, and the outermost elements that reach past the window's right edge while no box around them
# scrolls or clips them (at most five named, by tag, class and first words).
_PAGE_OVERFLOW = r"""() => {
  const view = document.documentElement.clientWidth;
  const held = e => {
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    }
    return false;
  };
  const culprits = [];
  for (const e of document.querySelectorAll('body *')) {
    if (culprits.length >= 5 || !e.getClientRects().length) continue;
    if (e.getBoundingClientRect().right <= view + 1 || held(e)) continue;
    if (culprits.some(c => c.element.contains(e))) continue;
    culprits.push({element: e, text: `<${e.tagName.toLowerCase()} class="${e.className}"> `
                   + (e.textContent || e.getAttribute('src') || '').trim().slice(0, 50)});
  }
  return {width: document.documentElement.scrollWidth, view, culprits: culprits.map(c => c.text)};
}"""


def page_overflow(page) -> dict:
    """``{"width": document width, "view": window width, "culprits": [...]}`` for an opened page."""
    return page.evaluate(_PAGE_OVERFLOW)


# The figures a chapter's code drew, as a reader sees them: the width drawn against the image's own, its edges
# against its column's (the article's content box), the room that the box holding it leaves (within the
# output's padding), the edges of its output's box where that scrolls sideways (a wide diagram on a phone, drawn at
# its own size: figure.course-wide), its figure's id, and whether a reader can open it at full size (course.js makes
# a figure drawn smaller than its own size a button: .course-zoomable, role=button, in the order of tabs). A figure
# of panels (attention_course.plotting.panels_html) says which of its two images the browser chose ("wide", the
# panels side by side, or "stacked") and its panels' widths in that image; any other figure is one panel.
_FIGURES = r"""() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('article');
  if (!article) return [];  // a page with no article (the redirecting index) has no figure
  const box = article.getBoundingClientRect(), style = getComputedStyle(article);
  const left = box.left + parseFloat(style.paddingLeft), right = box.right - parseFloat(style.paddingRight);
  // the box an image is drawn in: its parent, or the parent of its <picture> (an inline box, no width of its own)
  const holder = img => img.parentElement.tagName === 'PICTURE' ? img.parentElement.parentElement : img.parentElement;
  return Array.from(document.querySelectorAll('article div.cell_output img'))
    .filter(img => img.getClientRects().length && img.naturalWidth > 0)
    .map(img => {
      const r = img.getBoundingClientRect(), inner = getComputedStyle(holder(img));
      const room = holder(img).clientWidth - parseFloat(inner.paddingLeft) - parseFloat(inner.paddingRight);
      const drawn = img.dataset.panels ? JSON.parse(img.dataset.panels) : null;
      const layout = drawn ? (img.currentSrc && img.currentSrc !== img.src ? 'stacked' : 'wide') : null;
      const src = img.getAttribute('src');
      // the cell's output box, which scrolls sideways where a wide diagram is drawn at its own size (course.css)
      const output = img.closest('div.cell_output') || holder(img), o = output.getBoundingClientRect();
      const scrolls = ['auto', 'scroll'].includes(getComputedStyle(output).overflowX)
        && output.scrollWidth > output.clientWidth + 1;
      return {src: src.startsWith('data:') ? (img.alt || '').slice(0, 60) : src, shown: r.width,
              natural: img.naturalWidth, left: r.left, right: r.right, layout,
              id: img.closest('figure') ? img.closest('figure').id : '',
              scrolls_in: scrolls ? {left: o.left, right: o.right} : null,
              panels: drawn ? drawn[layout] : [img.naturalWidth],
              column: right - left, column_left: left, column_right: right, room,
              opens: img.classList.contains('course-zoomable') && img.getAttribute('role') === 'button'
                     && img.tabIndex === 0};
    });
}"""


def figures(page) -> list[dict]:
    return page.evaluate(_FIGURES)


# The tables of a page as a reader sees them: the code names of their cells broken across lines elsewhere than
# between two words (after an underscore, a dot, a slash, a comma, a hyphen, a bracket or a space, or where a
# lower-case letter or a digit meets a capital), and whether the last column can be reached: within the window and
# the table's box, or in a box that scrolls sideways and says so (course.js marks it .course-scrolls, and the
# style sheet writes a line above the table).
_TABLES = r"""() => {
  const sensible = (before, after) => /[_./,\-(\s]/.test(before) || /\s/.test(after)
    || (/[a-z0-9]/.test(before) && /[A-Z]/.test(after));
  const tables = [];
  for (const table of document.querySelectorAll('article table')) {
    if (!table.getClientRects().length) continue;
    const broken = [];
    for (const code of table.querySelectorAll('code')) {
      const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
      let before = null, line = null;  // the character before, and the top of the line of the last one drawn
      while (walker.nextNode()) {
        const node = walker.currentNode;
        for (let i = 0; i < node.data.length; i++) {
          const range = document.createRange();
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          const rects = range.getClientRects();  // none for a space where the line breaks
          if (rects.length) {
            const top = rects[0].top;
            if (line !== null && top > line + 2 && !sensible(before, node.data[i])) {
              broken.push(code.textContent.slice(0, 60) + ` (between "${before}" and "${node.data[i]}")`);
            }
            line = top;
          }
          before = node.data[i];
        }
      }
    }
    const box = table.closest('.pst-scrollable-table-container') || table.parentElement;
    const row = table.querySelector('tr');
    const last = row.cells[row.cells.length - 1].getBoundingClientRect();
    const edge = Math.min(box.getBoundingClientRect().right, document.documentElement.clientWidth);
    const scrolls = ['auto', 'scroll'].includes(getComputedStyle(box).overflowX)
      && box.scrollWidth > box.clientWidth + 1;
    const cue = getComputedStyle(box, '::before').content;
    tables.push({first: (table.textContent || '').trim().slice(0, 40), broken,
                 last_visible: last.right <= edge + 1, scrolls,
                 says_it_scrolls: box.classList.contains('course-scrolls') && cue !== 'none' && cue !== 'normal'});
  }
  return tables;
}"""


def tables(page) -> list[dict]:
    """``[{"first", "broken": [...], "last_visible", "scrolls", "says_it_scrolls"}]`` for each table shown."""
    return page.evaluate(_TABLES)


def visible(page, selector: str):
    """The one element matching ``selector`` that a reader can see (the themes render some buttons twice)."""
    found = [e for e in page.locator(selector).all() if e.is_visible()]
    assert len(found) == 1, f"{len(found)} visible elements match {selector}"
    return found[0]
