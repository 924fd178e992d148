"""The book's own style sheet and script on a phone (390 x 844) and a desktop (1440 px), read in Chromium on a
small book built with the course's Sphinx extension and book/_static (the whole book takes many minutes): the
instructor guide's table of assignments and its paragraphs with long code names, as the guide writes them, and
figures as wide as chapter 6's diagrams (1040 and 1090 px) and chapter 10's map of heads by positions (915 px).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attention_course.tooling.notebooks import COURSE_ROOT
from tests.support import browser
from tests.support.myst import HEADER

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PHONE, DESKTOP = 390, 1440
HEIGHT = {PHONE: 844, DESKTOP: 900}
LEAST_LABEL = 10  # px: the least size of a figure's text as a reader sees it
GUIDE = COURSE_ROOT / "book" / "instructor_guide.md"
CONFIG = """\
title: Phone
only_build_toc_files: true
execute:
  execute_notebooks: force
  timeout: 300
sphinx:
  extra_extensions:
    - sphinx_exercise
    - course_site.sphinx_ext
  config:
    html_static_path: [_static]
    html_context:
      default_mode: light
"""
# Figures as wide as chapter 6's diagrams, their smallest text 8 points (11 px at 100 dpi) as there: drawn by a
# cell's own output (chapter 6's) and by show_figure (chapter 10's), each wide; and one not marked, scaled down.
FIGURES = """\
```{code-cell} ipython3
import matplotlib.pyplot as plt
from attention_course import show_figure


def diagram():
    fig, ax = plt.subplots(figsize=(10.5, 8.2), dpi=100)
    fig.subplots_adjust(left=0.02, right=0.98)
    for row in range(6):
        for col in range(3):
            ax.text(col / 3, row / 6, "add & layer norm, 128 parameters",
                    fontsize=8)
    return fig
```

```{code-cell} ipython3
---
mystnb:
  image:
    alt: "A cell's own diagram"
  figure:
    caption: A cell's own diagram.
    name: own-wide
    classes: course-wide
---
diagram()
plt.show()
```

```{code-cell} ipython3
---
mystnb:
  markdown_format: myst
---
show_figure(diagram(), "shown-wide", alt="A wide diagram", caption="Wide.", wide=True)
```

```{code-cell} ipython3
---
mystnb:
  markdown_format: myst
---
show_figure(diagram(), "scaled", alt="A scaled diagram", caption="Scaled.")
```
"""
SMALLEST_TEXT = 8 * 100 / 72  # px: the figures' smallest text in their own image


def title(chapter: str) -> str:
    """A chapter's title, its page's first heading."""
    text = (COURSE_ROOT / "book" / f"{chapter}.md").read_text()
    return re.search(r"^# (.+)$", text, re.MULTILINE).group(1).strip()


def guide_table() -> str:
    """The instructor guide's table of the assignments (chapter, assignment, graded items, points), as written, each
    chapter named by its title, as the guide's links to the chapters show it."""
    lines = GUIDE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| chapter | assignment | graded items"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return re.sub(r"\{doc\}`([a-z0-9_]+)`", lambda found: title(found.group(1)), "\n".join(lines[start:end]))


def guide_paragraphs() -> list[str]:
    """The instructor guide's paragraphs that name a long code name (30 characters or more, no space)."""
    return [
        block
        for block in re.split(r"\n\s*\n", GUIDE.read_text())
        if not block.lstrip().startswith(("|", "```", ":", "#", "-", "(", "{"))
        and any(len(name) >= 30 for name in re.findall(r"`([^`\s]+)`", block))
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The small book, built by jupyter-book with the course's extension and book/_static."""
    book = tmp_path_factory.mktemp("phone-book")
    course_config = yaml.safe_load((COURSE_ROOT / "_config.yml").read_text())
    repository = yaml.safe_dump({"repository": course_config["repository"]})
    (book / "_config.yml").write_text(CONFIG + repository)
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: guide\n  - file: figures\n")
    (book / "intro.md").write_text("# Phone\n\nA small book.\n")
    paragraphs = guide_paragraphs()
    assert len(paragraphs) >= 5, paragraphs
    (book / "guide.md").write_text("# The guide\n\n" + guide_table() + "\n\n" + "\n\n".join(paragraphs) + "\n")
    (book / "figures.md").write_text(f"{HEADER}\n# Figures\n\n{FIGURES}")
    static = book / "_static"
    static.mkdir()
    for name in ("course.css", "course.js", "logo.svg"):
        shutil.copy2(COURSE_ROOT / "book" / "_static" / name, static / name)
    env = {**os.environ, "PYTHONPATH": str(COURSE_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}  # nothing written here
    jupyter_book = str(Path(sys.executable).with_name("jupyter-book"))
    built = subprocess.run([jupyter_book, "build", "."], cwd=book, env=env, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout[-5000:] + built.stderr[-5000:]
    return book / "_build" / "html"


@pytest.fixture(scope="module")
def chrome(site):
    with browser.serve(site) as base, browser.chromium() as opened:
        yield base, opened


# Inline code in the text (not in a code block) broken across lines elsewhere than between two words: after an
# underscore, a dot, a slash, a comma, a hyphen, a plus, a bracket or a space, or where a lower-case letter or a
# digit meets a capital.
_BROKEN_CODE = r"""() => {
  const sensible = (before, after) => /[_./,+\-(\s]/.test(before) || /\s/.test(after)
    || (/[a-z0-9]/.test(before) && /[A-Z]/.test(after));
  const broken = [];
  let seen = 0;
  for (const code of document.querySelectorAll('article code')) {
    if (code.closest('pre, table') || !code.getClientRects().length) continue;
    seen++;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let before = null, line = null;
    while (walker.nextNode()) {
      const node = walker.currentNode;
      for (let i = 0; i < node.data.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rects = range.getClientRects();
        if (rects.length) {
          if (line !== null && rects[0].top > line + 2 && !sensible(before, node.data[i])) {
            broken.push(code.textContent.slice(0, 60) + ` (between "${before}" and "${node.data[i]}")`);
          }
          line = rects[0].top;
        }
        before = node.data[i];
      }
    }
  }
  return {seen, broken};
}"""


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_the_guides_table_of_assignments_shows_its_points_whole(chrome, width):
    """The instructor guide's table of assignments fits the column whole, its last column (the points) seen: at
    390 px it was 378 px wide in a 358 px box, its points cut to "poin"; no code name in it is broken in a word."""
    base, opened = chrome
    with browser.open_page(opened, base + "guide.html", width=width, height=HEIGHT[width]) as (page, _):
        page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        tables, overflow = browser.tables(page), browser.page_overflow(page)
    (table,) = tables
    assert table["first"].startswith("chapter") and table["last_visible"] and not table["scrolls"], table
    assert table["broken"] == [], table["broken"]
    assert overflow["width"] <= overflow["view"], overflow


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_the_guides_code_names_break_only_between_their_words(chrome, width):
    """The guide's paragraphs with long code names (attention_course.kernels.timing.time_on_gpu, paths of the
    exchange): each name breaks across lines only between its words, never inside one (at 390 px ten were cut
    inside a word, "tim / ing"), and the page is no wider than the window."""
    base, opened = chrome
    with browser.open_page(opened, base + "guide.html", width=width, height=HEIGHT[width]) as (page, _):
        found, overflow = page.evaluate(_BROKEN_CODE), browser.page_overflow(page)
    assert found["seen"] >= 10, found
    assert found["broken"] == [], "\n".join(found["broken"])
    assert overflow["width"] <= overflow["view"], overflow


# Each figure drawn by the page's code: its figure's id and class, its width drawn and its own, and whether the
# box holding it (the cell's output) scrolls sideways, within the column.
_FIGURES = r"""() => Array.from(document.querySelectorAll('article figure img')).map(img => {
  const figure = img.closest('figure'), box = img.closest('div.cell_output');
  const article = document.querySelector('article.bd-article').getBoundingClientRect();
  const r = box.getBoundingClientRect();
  return {id: figure.id, wide: figure.classList.contains('course-wide'), shown: img.getBoundingClientRect().width,
          natural: img.naturalWidth, scrolls: getComputedStyle(box).overflowX === 'auto'
            && box.scrollWidth > box.clientWidth + 1,
          within: r.left >= article.left - 1 && r.right <= article.right + 1};
})"""


def test_a_wide_diagram_on_a_phone_is_drawn_at_its_own_size_in_a_box_that_scrolls(chrome):
    """At 390 px a diagram 1040 px wide, marked wide (figure.course-wide: by a cell's own figure metadata, as
    chapter 6's, or by show_figure(wide=True), as chapter 10's), is drawn at its own size, its smallest text at
    least 10 px (scaled to the 358 px column it was 3.8 px), in its output's box, which scrolls sideways within the
    column; the page is no wider than the window. The same diagram not marked is scaled to the column, its text
    under 10 px: the measurement can fail."""
    base, opened = chrome
    with browser.open_page(opened, base + "figures.html", width=PHONE, height=HEIGHT[PHONE]) as (page, _):
        page.wait_for_function("() => Array.from(document.images).every(i => i.complete)")
        figures, overflow = page.evaluate(_FIGURES), browser.page_overflow(page)
    by_id = {figure["id"]: figure for figure in figures}
    assert set(by_id) == {"own-wide", "shown-wide", "scaled"}, figures
    for name in ("own-wide", "shown-wide"):
        figure = by_id[name]
        label = SMALLEST_TEXT * figure["shown"] / figure["natural"]
        assert figure["wide"] and figure["natural"] > 2 * 358 and label >= LEAST_LABEL, (figure, label)
        assert figure["scrolls"] and figure["within"], figure
    scaled = by_id["scaled"]
    assert SMALLEST_TEXT * scaled["shown"] / scaled["natural"] < LEAST_LABEL and not scaled["scrolls"], scaled
    assert overflow["width"] <= overflow["view"], overflow


def test_a_wide_diagram_on_a_desktop_fits_its_column(chrome):
    """At 1440 px the wide diagrams are scaled to the column as any figure is: no box scrolls."""
    base, opened = chrome
    with browser.open_page(opened, base + "figures.html", width=DESKTOP, height=HEIGHT[DESKTOP]) as (page, _):
        page.wait_for_function("() => Array.from(document.images).every(i => i.complete)")
        figures = page.evaluate(_FIGURES)
    assert len(figures) == 3 and all(f["within"] and not f["scrolls"] for f in figures), figures
    assert all(f["shown"] < f["natural"] for f in figures), figures
