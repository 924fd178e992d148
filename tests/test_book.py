"""The book: it builds with -W -n --keep-going, and the built site works as a reader sees it.

The site is served on localhost and read in headless Chromium (tests/browser.py): every page
loads without console errors or failed requests, MathJax (served from the site itself) renders
the mathematics, every image loads and has alt text, search finds "softmax", internal links
resolve, and each chapter's download and Colab links name the exercise notebook in the
repository. The book is built cold, in a copy of the repository's files in a temporary folder (its own
execution cache, nothing written into the checkout), by the repository's `make book` with this venv;
screenshots of the landing page and of a chapter are saved beside it (the path is printed).
"""

import ast
import contextlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.grading.classroom import fill
from autograder.grading.notebook import grade_notebook
from autograder.release import colab, course, reference
from autograder.release.course import exercise_path, repository
from course_site import leaks, links, logo, paths
from tests.support import browser

pytestmark = [pytest.mark.slow]


def toc_chapters() -> list[str]:
    """The chapters, in the order of the table of contents: the files of its part "Chapters"."""
    toc = yaml.safe_load((COURSE_ROOT / "_toc.yml").read_text())
    return [
        entry["file"].rsplit("/", 1)[-1]
        for part in toc["parts"]
        if part.get("caption") == "Chapters"
        for entry in part["chapters"]
    ]


CHAPTERS = toc_chapters()
# The chapters that end with an exercise: those with an assignment (solutions/<chapter>/). Chapter 9, on
# real models, has none; chapter 10, after it, has one (the course contract's order).
EXERCISES = [chapter for chapter in CHAPTERS if chapter in course.assignments()]
WITHOUT_EXERCISE = ["ch09_real_models"]
# The code cells of the chapters keep to this many characters a line, so that they read without
# scrolling sideways in most windows (a wider block scrolls inside itself; book/_static/course.css).
CODE_LINE_LENGTH = 80
# The references that the course's bibliography must hold, by author and year.
REQUIRED_REFERENCES = [("Bahdanau", "2015"), ("Luong", "2015"), ("Vaswani", "2017"), ("Su", "2021"), ("Dao", "2022")]


TERM = course.Release("term", {"ch01_bahdanau"})
EXAMPLE = "ch02_scaled_dot_product"  # the example class of the instructor guide's class report
MATHJAX = Path("book") / "_static" / "mathjax"  # fetched once by `make test` (ignored by git), copied


def temporary_folder(book: Path) -> Path:
    """The TMPDIR of the builds in ``book``: a folder of their own beside it, which they must leave empty."""
    folder = book.with_name(f"{book.name}-tmp")
    folder.mkdir(exist_ok=True)
    return folder


def build(book: Path, *variables: str) -> None:
    """`make book` in ``book`` (a copy of the repository), with this venv and these make variables, no release
    settings from the environment, and a TMPDIR of its own (torch's compile cache, a cache, kept apart)."""
    env = {k: v for k, v in os.environ.items() if k not in ("EDITION", "RELEASED")}
    env["TMPDIR"] = str(temporary_folder(book))
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(book.with_name(f"{book.name}-torchinductor")))
    venv = Path(sys.prefix)
    command = ["make", "--no-print-directory", f"VENV={venv}", "-o", f"{venv}/.installed", "-o", f"{venv}/.bytecode"]
    result = subprocess.run([*command, "book", *variables], cwd=book, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    out = dict(variable.split("=", 1) for variable in variables).get("BOOK_OUT", ".")
    (book / out / "_build" / "make-book.log").write_text(result.stdout + result.stderr)  # beside the site


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    """A copy of the repository's files (those git does not ignore, and the local MathJax), where the book is
    built cold."""
    folder = tmp_path_factory.mktemp("book")
    listing = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    tracked = subprocess.run(listing, cwd=COURSE_ROOT, capture_output=True, check=True).stdout
    for name in [n for n in tracked.decode().split("\0") if n]:
        if (COURSE_ROOT / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(COURSE_ROOT / name, folder / name)
    shutil.copytree(COURSE_ROOT / MATHJAX, folder / MATHJAX)
    return folder


@pytest.fixture(scope="module")
def site(request):
    """The open edition (the committed term.yml), in the copy's _build/html; or the site already built in the folder
    that ``BOOK_SITE`` names, to read it again in the browser (``BOOK_SITE=_build/html pytest tests/test_book.py -k
    phone``) without building the book."""
    if os.environ.get("BOOK_SITE"):
        return Path(os.environ["BOOK_SITE"]).absolute()
    book = request.getfixturevalue("book")
    build(book)
    return book / "_build" / "html"


@pytest.fixture(scope="module")
def term_site(book, site):
    """The term edition with only chapter 1's solutions released, beside the open one (the executed
    chapters are shared, so this build executes nothing again)."""
    build(book, "EDITION=term", "RELEASED=ch01_bahdanau", "BOOK_OUT=_build/term")
    return book / "_build" / "term" / "_build" / "html"


def graded_items(assignment: str) -> list[str]:
    """The graded items that the chapter teaches with code (not the understanding questions)."""
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    return [
        name
        for cell in nb.cells
        if notebooks.is_solution(cell) and not notebooks.is_question(cell)
        for name in notebooks.defined_names(cell.source)
    ]


def code_blocks(page: str) -> list[str]:
    """The text of every highlighted code block of a built page."""
    return [
        html.unescape(re.sub(r"<[^>]+>", "", block))
        for block in re.findall(r'<div class="highlight"><pre>(.*?)</pre>', page, re.S)
    ]


def admonitions(page: str) -> list[tuple[str, str, str]]:
    """(kind, target, text) of the exercise and solution blocks of a built page, in order: an
    exercise's target is its own label, a solution's the label of the exercise it answers; the
    text is what the reader sees (tags dropped, until the next exercise or solution block)."""
    starts = list(re.finditer(r'<div class="(exercise|solution)[^"]*admonition"[^>]*id="([^"]+)"', page))
    found = []
    for match, following in zip(starts, starts[1:] + [None]):
        body = page[match.end() : following.start() if following else len(page)]
        if match.group(1) == "exercise":
            target = match.group(2)
        else:
            target = re.search(r'href="#([^"]+)"', body).group(1)
        found.append((match.group(1), target, html.unescape(re.sub(r"<[^>]+>", "", body))))
    return found


def squeezed(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.fixture(scope="module")
def chromium(site):
    with browser.serve(site) as base, browser.chromium() as chrome:
        yield base, chrome


def page_names(site):
    return [p.relative_to(site).as_posix() for p in links.pages(site)]


def test_book_builds_strictly(site):
    chapter = (site / "book" / "ch02_scaled_dot_product.html").read_text()
    # The four-word example's printed output, reproduced exactly.
    assert "[[0.98522025 1.74174051 0.75652026]" in chapter
    assert "[0.90965265 1.40965265 0.5       ]" in chapter
    # Chapter 1 trains its models at build time and asserts >= 99% exact match there.
    assert "exact match" in (site / "book" / "ch01_bahdanau.html").read_text()
    # Chapter 3 times its attention paths at build time and compares with nn.MultiheadAttention.
    multi_head = (site / "book" / "ch03_multi_head.html").read_text()
    assert "FusedMultiHeadAttention" in multi_head and "nn.MultiheadAttention" in multi_head
    # Chapter 4 shows the code of its masks (in solution blocks) and the NaN of a fully masked row.
    masking = (site / "book" / "ch04_masking.html").read_text()
    assert '<span class="nf">decoder_self_attention_mask</span>' in masking and "nan" in masking
    # Chapter 5 runs its extrapolation experiment at build time and shows the rotary code.
    positions = (site / "book" / "ch05_positional_encoding.html").read_text()
    assert '<span class="nf">apply_rotary</span>' in positions and "rotary" in positions
    # Chapter 6 trains the Transformer with the training program at build time.
    transformer = (site / "book" / "ch06_transformer.html").read_text()
    assert '<span class="nf">greedy_decode</span>' in transformer and "tokens_per_second" in transformer
    # Chapter 7 shows the code of its exercise's items, grouped-query attention and the online softmax.
    scale = (site / "book" / "ch07_efficient_attention.html").read_text()
    assert '<span class="nf">repeat_kv</span>' in scale and '<span class="nf">online_softmax_attention</span>' in scale
    # Chapter 8 counts FLOPs against FlopCounterMode, runs the benchmark and torchrun at build time.
    fast = (site / "book" / "ch08_training_fast.html").read_text()
    assert "FlopCounterMode" in fast and "course (fused attention)" in fast and "largest difference" in fast
    assert '<span class="nf">training_memory_bytes</span>' in fast and "AdamW moments" in fast
    # Chapter 7 shows its rotary grouped-query attention; chapter 9 loads checkpoints of both families,
    # checks them against transformers, maps their tensors and trains on BPE tokens at build time.
    assert '<span class="nc">RotaryGroupedQueryAttention</span>' in scale
    real = (site / "book" / "ch09_real_models.html").read_text()
    assert "as transformers': True" in real and "c_attn.weight" in real and "q_proj.weight" in real
    assert "bits a byte" in real and "rotate half: " in real
    # Chapter 11 runs its Triton kernels in the interpreter at build time and shows the reference kernels.
    kernels = (site / "book" / "ch11_flash_attention.html").read_text()
    assert "interpreter: True" in kernels and "largest difference" in kernels
    assert '<span class="nf">flash_forward_kernel</span>' in kernels
    assert '<span class="nf">flash_backward_q_kernel</span>' in kernels


def test_the_build_log_is_quiet(site):
    """`make book` says what it does (a line per chapter) and what is wrong: no kernel's warning about its
    transport, no dump of MyST's configuration."""
    log = (site.parent / "make-book.log").read_text()
    assert "[book] executed" in log and "build succeeded" in log
    noise = [line[:150] for line in log.splitlines() if "WARNING" in line or "ParserConfig(" in line]
    assert not noise, "\n".join(noise)


def test_the_builds_leave_nothing_in_their_temporary_folder(book, site, term_site):
    """What a chapter's code writes into TMPDIR (a model trained, torchrun's logs) is removed by the chapter."""
    left = sorted(path.name for path in temporary_folder(book).iterdir())
    assert not left, f"the book's builds left these in TMPDIR: {left}"


def test_every_page_of_the_table_of_contents_is_built(site):
    expected = {"index.html", "search.html", "genindex.html"} | {
        f"book/{name}.html"
        for name in CHAPTERS + ["intro", "working_on_exercises", "instructor_guide", "glossary", "bibliography"]
    }
    assert expected <= set(page_names(site)), sorted(expected - set(page_names(site)))


def test_internal_links_resolve(site):
    checked, broken = links.scan(site)
    assert checked > 500, f"only {checked} internal links found: is the site complete?"
    assert not broken, "broken internal links:\n" + "\n".join(map(str, broken))


def test_site_holds_no_solution_or_hidden_test(site):
    report = leaks.scan(site)
    assert report.secrets > 100 and report.files > 50, "the check looked for almost nothing"
    assert report.ok, "the built site must not be published:\n" + "\n".join(map(str, report.problems))


def test_nothing_published_names_a_machines_path(site):
    """The site's pages, sources and search index, README.md and benchmarks/figures.json (the records the book
    and README quote) hold no absolute path of the machine that built or measured them (course_site/paths.py)."""
    checked, found = paths.scan_site(site)
    assert checked > 30, f"only {checked} files read: is the site complete?"
    assert not found, "paths of a machine in what the course publishes:\n" + "\n".join(map(str, found))


def test_logo_is_generated(site):
    assert logo.main(["--check"]) == 0, "run `python -m course_site.logo` and commit book/_static/logo.svg"


@dataclass
class Visit:
    """What the site's tests read of one page, opened once as a reader at a desktop's width opens it."""

    problems: list[str]  # what the console showed: errors, failed requests, requests that leave the site
    images: list[dict]  # every image: its src, alt text and whether it loaded
    formulas: tuple[int, int, int] | None  # (formulas, rendered by MathJax, TeX errors); None: no mathematics
    overflows: dict | None  # a chapter's code blocks and equations that overflow (browser.overflows)
    outline: dict | None  # a chapter's headings, first admonition, figures drawn and exercise links
    widths: dict[int, dict]  # the page in a phone's window and a desktop's: its width and figures (resize_to)


@pytest.fixture(scope="module")
def visits(chromium, site) -> dict[str, Visit]:
    """Every page of the site, opened once in Chromium 1280 pixels wide (and laid out again in a phone's window and
    a desktop's), by its path in the site."""
    base, chrome = chromium
    chapters = {f"book/{p.stem}.html" for p in (site / "book").glob("ch*.html")}
    found = {}
    for name in page_names(site):
        has_math = 'class="math' in (site / name).read_text()
        with browser.open_page(chrome, base + name, width=1280) as (page, visit):
            formulas = None
            if has_math or name in chapters:
                browser.wait_for_mathjax(page)
            if has_math:
                formulas = tuple(
                    page.evaluate("""() => [
                        document.querySelectorAll('.math').length,
                        document.querySelectorAll('.math > mjx-container').length,
                        document.querySelectorAll('mjx-merror').length]""")
                )
            images = page.evaluate("""() => Array.from(document.images).map(img => ({
                src: img.getAttribute('src'), alt: img.alt, loaded: img.complete && img.naturalWidth > 0}))""")
            outline = chapter_outline(page) if name in chapters else None
            widths = {width: resize_to(page, width) for width in (PHONE, DESKTOP)}
            page.set_viewport_size({"width": 1280, "height": 900})
            overflows = browser.overflows(page) if name in chapters else None  # opens hidden blocks: last
        found[name] = Visit(visit.problems, images, formulas, overflows, outline, widths)
    return found


# A phone's window (a 6.1-inch phone in portrait, CSS pixels) and a desktop's: width and height.
PHONE, DESKTOP = 390, 1440
HEIGHT = {PHONE: 844, DESKTOP: 900}


# Every result figure drawn smaller than its own size can be opened (course.js), and no other.
SETTLED = """() => Array.from(document.querySelectorAll('article div.cell_output img'))
    .filter(img => img.naturalWidth > 0 && img.getClientRects().length)
    .every(img => (img.getBoundingClientRect().width < img.naturalWidth - 1)
                  === img.classList.contains('course-zoomable'))"""


def next_frame(page) -> None:
    """Wait until the page has been laid out and drawn again (its ResizeObservers and resize handlers have run)."""
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def resize_to(page, width: int) -> dict:
    """The page (loaded, its mathematics typeset) in a window ``width`` pixels wide: its width against the
    window's (browser.page_overflow), its figures (browser.figures) and its tables (browser.tables) as drawn. The
    page is laid out again, not loaded again: what decides its width is the style sheets' rules for that width."""
    page.set_viewport_size({"width": width, "height": HEIGHT.get(width, 900)})
    next_frame(page)
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    # course.js has marked the figures drawn smaller than their own size (the tests then check that it did)
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(SETTLED, timeout=5_000)
    return {**browser.page_overflow(page), "figures": browser.figures(page), "tables": browser.tables(page)}


def chapter_outline(page) -> dict:
    """What a chapter page shows of its structure: headings, the first admonition's title, the figures
    its code drew (images that loaded), and the exercise links' targets."""
    return {
        "headings": [h.strip().rstrip("#").strip() for h in page.locator("article h1, article h2").all_inner_texts()],
        "first_admonition": page.locator("article .admonition .admonition-title").first.inner_text().strip(),
        "figures": page.evaluate("""() => Array.from(document.querySelectorAll('.cell_output img'))
                                        .filter(img => img.naturalWidth > 0).length"""),
        "links": page.evaluate("""() => Object.fromEntries(
            ['exercise-download', 'exercise-colab', 'exercise-github'].map(cls => {
                const link = document.querySelector('.exercise-links a.' + cls);
                return [cls, link ? link.getAttribute('href') : null];
            }))"""),
    }


def test_pages_load_without_console_errors(visits):
    problems = {name: visit.problems for name, visit in visits.items() if visit.problems}
    assert not problems, "\n".join(f"{name}: {p}" for name, ps in problems.items() for p in ps)


def test_mathjax_renders_every_formula(visits):
    with_math = {name: visit.formulas for name, visit in visits.items() if visit.formulas is not None}
    for name, (formulas, rendered, errors) in with_math.items():
        assert formulas > 0 and rendered == formulas, f"{name}: MathJax rendered {rendered} of {formulas} formulas"
        assert errors == 0, f"{name}: {errors} formulas have TeX errors"
    assert len(with_math) >= len(CHAPTERS), f"only {len(with_math)} pages have mathematics"


def test_images_load_and_have_alt_text(visits):
    problems = []
    for name, visit in visits.items():
        for image in visit.images:
            if not image["loaded"]:
                problems.append(f"{name}: image {image['src']} did not load")
            alt = image["alt"].strip()
            if len(alt) < 10 or alt.startswith(("..", "_images")) or alt.endswith((".png", ".svg", ".jpg")):
                problems.append(f"{name}: image {image['src']} has no real alt text ({alt!r})")
    assert not problems, "\n".join(problems)


def test_no_code_block_or_equation_overflows_a_chapter_page(visits):
    """At a 1280-pixel-wide window nothing on a chapter page is cut off or pushed past the article:
    a code block wider than its text scrolls inside itself, and every display equation fits."""
    problems, scrolling = [], {}
    chapters = {name.removeprefix("book/").removesuffix(".html"): v for name, v in visits.items() if v.overflows}
    assert set(CHAPTERS) <= set(chapters), "a chapter of the table of contents was not built"
    for chapter, visit in sorted(chapters.items()):
        found = visit.overflows
        assert found["code"] > 0, f"{chapter}: no code block measured"
        problems += [f"{chapter}: {problem}" for problem in found["problems"]]
        scrolling[chapter] = f"{len(found['scrolling_code'])} of {found['code']} code blocks scroll"
    assert not problems, "\n".join(problems) + "\n(" + "; ".join(f"{c}: {n}" for c, n in scrolling.items()) + ")"


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_no_page_is_wider_than_the_window(visits, width):
    """No page scrolls sideways as a whole: what is wider than the window (a code block, an equation, a
    figure, a table) scrolls inside its own box."""
    wide = {name: v.widths[width] for name, v in visits.items() if v.widths[width]["width"] > v.widths[width]["view"]}
    assert not wide, "\n".join(
        f"{name}: {found['width']} px wide in a {found['view']} px window, because of {found['culprits']}"
        for name, found in wide.items()
    )


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_figures_fit_their_column_and_open_at_full_size(visits, width):
    """Every result figure is drawn whole within its column: at its own size where that fits, else scaled down to
    the column's width, and then a reader can open it at its full size (a button: click, tap, Enter or Space); or,
    a wide diagram on a phone, at its own size in its output's box, which scrolls sideways within the column."""
    wide, small, closed, seen = [], [], [], 0
    for name, visit in visits.items():
        for figure in visit.widths[width]["figures"]:
            seen += 1
            where = f"{name}: {figure['src']} drawn {figure['shown']:.0f} px wide of {figure['natural']}"
            box = figure["scrolls_in"]
            if box and (box["left"] < figure["column_left"] - 1 or box["right"] > figure["column_right"] + 1):
                wide.append(f"{where}, in a box that scrolls past its column")
            elif not box and (
                figure["shown"] > figure["column"] + 1
                or figure["left"] < figure["column_left"] - 1
                or figure["right"] > figure["column_right"] + 1
            ):
                wide.append(f"{where}, past its column of {figure['column']:.0f} px")
            if figure["shown"] < min(figure["natural"], figure["room"]) - 1:
                small.append(f"{where}, with {figure['room']:.0f} px of room")
            if figure["shown"] < figure["natural"] - 1 and not figure["opens"]:
                closed.append(where)
    assert seen >= len(CHAPTERS), f"only {seen} figures measured"
    assert not wide, f"figures wider than their column at {width} px:\n" + "\n".join(wide)
    assert not small, f"figures drawn smaller than their column needs at {width} px:\n" + "\n".join(small)
    assert not closed, f"figures scaled down that cannot be opened at full size at {width} px:\n" + "\n".join(closed)


def narrow_panels(figures: list[dict]) -> list[str]:
    """The panels of ``figures`` (browser.figures) drawn narrower than :data:`LEAST_FIGURE` pixels, and narrower than
    their own width (a panel drawn at its own size is as readable as it was drawn): a figure of panels side by side
    (panels_html's data), scaled to a phone's column, leaves each a fraction of it. Any other figure is one panel."""
    narrow = []
    for figure in figures:
        scale = figure["shown"] / figure["natural"]
        for i, width in enumerate(figure["panels"]):
            if width * scale < min(LEAST_FIGURE, width) - 1:
                where = f"panel {i + 1} of {len(figure['panels'])}" if len(figure["panels"]) > 1 else "the figure"
                narrow.append(f"{figure['src']}: {where} drawn {width * scale:.0f} px wide of {width}")
    return narrow


def test_no_figure_on_a_phone_is_narrower_than_its_text_allows(visits):
    """On a phone every panel of every result figure is drawn at least :data:`LEAST_FIGURE` pixels wide (or its own
    width, where that is less): a chart of several panels side by side, scaled to the column, would leave each panel
    a third of it, so its panels are stacked (attention_course.plotting.panels_html). Every chapter's page shows as
    many figures of panels, measured panel by panel, as its code draws unconditionally."""
    narrow, missing = [], []
    for name, visit in visits.items():
        figures = visit.widths[PHONE]["figures"]
        narrow += [f"{name}: {panel}" for panel in narrow_panels(figures)]
        source = COURSE_ROOT / name.replace(".html", ".md")
        if name.startswith("book/ch") and source.exists():
            drawn, shown = panel_figures_drawn(source.read_text()), sum(len(f["panels"]) > 1 for f in figures)
            if shown < drawn:
                missing.append(f"{name}: {shown} figures of panels measured, its code draws {drawn}")
    assert not missing and not narrow, "\n".join(missing + narrow)


@pytest.mark.parametrize("chapter", ["ch02_scaled_dot_product", "ch04_masking"])
def test_a_figure_of_panels_is_stacked_on_a_phone_and_side_by_side_on_a_desktop(chromium, chapter):
    """A chapter's figures of panels (chapter 2's line charts and heatmaps, chapter 4's masks and weights) opened at
    390 x 844: each shows its panels one under another, every one at least :data:`LEAST_FIGURE` px wide; the same
    figures side by side, as they were drawn before (the stacked image taken out of the page), leave panels
    narrower, and the check finds them. At a desktop's width each shows its panels side by side, as drawn."""
    base, chrome = chromium
    url = f"{base}book/{chapter}.html"
    with browser.open_page(chrome, url, width=PHONE, height=HEIGHT[PHONE]) as (page, visit):
        next_frame(page)
        phone = [f for f in browser.figures(page) if len(f["panels"]) > 1]
        page.evaluate(
            "() => document.querySelectorAll('article picture.course-panels source').forEach(s => s.remove())"
        )
        next_frame(page)
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('article picture.course-panels img')).every(i => i.complete)"
        )
        side_by_side = [f for f in browser.figures(page) if len(f["panels"]) > 1]
    with browser.open_page(chrome, url, width=DESKTOP, height=HEIGHT[DESKTOP]) as (page, _):
        next_frame(page)
        desktop = [f for f in browser.figures(page) if len(f["panels"]) > 1]
    assert len(phone) == len(side_by_side) == len(desktop) >= 2, (len(phone), len(side_by_side), len(desktop))
    assert {f["layout"] for f in phone} == {"stacked"} and not narrow_panels(phone), narrow_panels(phone)
    assert {f["layout"] for f in side_by_side} == {"wide"} and narrow_panels(side_by_side), "the check passed them"
    assert {f["layout"] for f in desktop} == {"wide"}
    assert not visit.problems, visit.problems


# Chapter 8's measurements on a GPU: one figure a panel (time in float32, in bfloat16, memory).
GPU_PANELS = ["ch08-fig-attention-gpu", "ch08-fig-attention-gpu-bf16", "ch08-fig-attention-gpu-memory"]
LEAST_FIGURE = 300  # px: the least width of a chart's panel on a phone


def test_chapter_8s_gpu_chart_gives_each_panel_the_phones_width(chromium):
    """At 390 x 844 each panel of chapter 8's chart of attention on a GPU is a figure of its own, at least 300 px
    wide and within the window (drawn as one figure of three panels, it was 342 x 98 px, 114 px a panel)."""
    base, chrome = chromium
    with browser.open_page(chrome, base + "book/ch08_training_fast.html", width=PHONE, height=HEIGHT[PHONE]) as (
        page,
        visit,
    ):
        next_frame(page)
        drawn = page.evaluate(
            """ids => ids.map(id => {
                const img = document.querySelector(`figure[id="${id}"] img, [id="${id}"] img`);
                if (!img) return null;
                const r = img.getBoundingClientRect();
                return {width: r.width, right: r.right, natural: img.naturalWidth};
            })""",
            GPU_PANELS,
        )
        view = page.evaluate("() => document.documentElement.clientWidth")
    assert all(drawn), dict(zip(GPU_PANELS, drawn))
    for name, panel in zip(GPU_PANELS, drawn):
        assert LEAST_FIGURE <= panel["width"] <= panel["natural"] + 1 and panel["right"] <= view + 1, (name, panel)
    assert not visit.problems, visit.problems


def test_a_figure_opens_at_full_size_on_a_phone_and_closes(chromium):
    """On a phone a figure of chapter 10 is scaled to the column; a tap opens it at its own size over the page
    (scrolling sideways where it is wider than the window), and Escape or a tap closes it. The keyboard does the
    same: the figure takes the focus, Enter opens it, and the focus comes back to it when it closes."""
    base, chrome = chromium
    url = base + "book/ch10_what_heads_learn.html"
    with browser.open_page(chrome, url, width=PHONE, height=HEIGHT[PHONE]) as (page, visit):
        figure = page.locator("article div.cell_output img.course-zoomable").first
        figure.wait_for(timeout=10_000)
        figure.scroll_into_view_if_needed()
        natural = figure.evaluate("img => img.naturalWidth")
        assert figure.bounding_box()["width"] <= PHONE and natural > PHONE, "the figure is not scaled to the phone"
        assert not dialog_open(page, "dialog.course-zoom")
        figure.click()
        page.wait_for_function("() => document.querySelector('dialog.course-zoom')?.open", timeout=5_000)
        full = page.locator("dialog.course-zoom img")
        full.wait_for(state="visible")
        page.wait_for_function("() => document.querySelector('dialog.course-zoom img').complete")
        assert abs(full.bounding_box()["width"] - natural) <= 1, "the figure is not shown at its full size"
        assert full.get_attribute("alt") == figure.get_attribute("alt")
        dialog = page.locator("dialog.course-zoom")
        sizes = dialog.evaluate("d => [d.clientWidth, d.scrollWidth, getComputedStyle(d).overflowX]")
        assert sizes[0] <= PHONE and sizes[1] >= natural and sizes[2] in ("auto", "scroll"), sizes
        close = page.get_by_role("button", name="Close")
        assert close.is_visible() and close.evaluate("b => b === document.activeElement")
        page.keyboard.press("Escape")
        page.wait_for_function("() => !document.querySelector('dialog.course-zoom').open", timeout=5_000)
        assert figure.evaluate("img => img === document.activeElement"), "the focus did not come back to the figure"
        page.keyboard.press("Enter")  # the figure has the focus
        page.wait_for_function("() => document.querySelector('dialog.course-zoom')?.open", timeout=5_000)
        full.click()
        page.wait_for_function("() => !document.querySelector('dialog.course-zoom').open", timeout=5_000)
        assert figure.get_attribute("role") == "button" and figure.get_attribute("tabindex") == "0"
    assert not visit.problems, visit.problems


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_tables_break_names_between_words_and_show_their_last_column(visits, width):
    """A code name in a table breaks across lines only between its words, never inside one ("ch05_positio /
    nal_encoding"), and every table's last column (the exercises' points) is in the window, or the table's box
    scrolls sideways and says so."""
    broken, cut, seen = [], [], 0
    for name, visit in visits.items():
        for table in visit.widths[width]["tables"]:
            seen += 1
            broken += [f"{name}: {code}" for code in table["broken"]]
            if not table["last_visible"] and not (table["scrolls"] and table["says_it_scrolls"]):
                cut.append(f"{name}: the table {table['first']!r}")
    assert seen >= 10, f"only {seen} tables measured"
    assert not broken, f"code names broken inside a word at {width} px:\n" + "\n".join(broken)
    assert not cut, f"tables whose last column is out of reach at {width} px:\n" + "\n".join(cut)


@pytest.mark.parametrize("chapter", ["ch06_transformer", "ch08_training_fast"])
def test_a_chapter_opened_on_a_phone_fits_it_and_its_tables_say_that_they_scroll(chromium, chapter):
    """A chapter opened at 390 x 844, as a phone opens it (laid out once, no resize), once MathJax has typeset the
    formulas of its tables: the page is no wider than the window, and each table fits or scrolls inside its own box
    and says so (chapters 6 and 8 each had a table of formulas that overflowed)."""
    base, chrome = chromium
    url = f"{base}book/{chapter}.html"
    with browser.open_page(chrome, url, width=PHONE, height=HEIGHT[PHONE]) as (page, visit):
        browser.wait_for_mathjax(page)
        next_frame(page)
        width, tables = browser.page_overflow(page), browser.tables(page)
        # A table that fits, made wider than the column after the page loaded (as typesetting makes one), with no
        # resize of the window: it says that it scrolls.
        fits = next(i for i, table in enumerate(tables) if table["last_visible"] and not table["scrolls"])
        page.evaluate(
            """i => { const tables = Array.from(document.querySelectorAll('article table'))
                          .filter(t => t.getClientRects().length);
                      const cell = tables[i].querySelector('td, th');
                      cell.style.whiteSpace = 'nowrap';
                      cell.append(' a cell widened after the page loaded, wider than any phone'); }""",
            fits,
        )
        next_frame(page)
        widened = browser.tables(page)[fits]
    assert width["width"] <= width["view"], width
    cut = [table["first"] for table in tables if not table["last_visible"] and not table["says_it_scrolls"]]
    assert tables and not cut, (cut, tables)
    assert widened["scrolls"] and widened["says_it_scrolls"], widened
    assert not visit.problems, visit.problems


# The diagrams too wide to read scaled to a phone's column (their labels were 5 to 6 px at 342 px): chapter 6's two
# block diagrams (1040 and 1090 px) and its bar chart of the target tokens (890 px), chapter 10's maps of 8 heads by
# 40 positions (915 px) and of 3 rows of the residual stream by 40 positions (932 px).
WIDE_DIAGRAMS = {
    "book/ch06_transformer.html": ["ch06-fig-architecture", "ch06-fig-label-smoothing", "ch06-fig-decoding-loop"],
    "book/ch10_what_heads_learn.html": ["ch10-fig-patching-positions", "ch10-fig-residual-patching"],
}


def test_wide_diagrams_are_drawn_at_their_own_size_on_a_phone_and_fit_a_desktops_column(visits):
    """On a phone each wide diagram is drawn at its own size, its labels as drawn, in its output's box, which
    scrolls sideways within the column (tests/test_phone_site.py measures the labels); on a desktop it is scaled to
    the column as any figure is."""
    for name, ids in WIDE_DIAGRAMS.items():
        for width in (PHONE, DESKTOP):
            figures = {f["id"]: f for f in visits[name].widths[width]["figures"] if f["id"] in ids}
            assert set(figures) == set(ids), (name, width, figures)
            for figure in figures.values():
                if width == PHONE:
                    assert figure["shown"] >= figure["natural"] - 1 > PHONE and figure["scrolls_in"], figure
                else:
                    assert figure["shown"] <= figure["column"] + 1 and not figure["scrolls_in"], figure


def test_the_exercises_table_shows_its_points_on_a_phone(visits):
    """The table of the exercises on "Working on the exercises" fits a phone whole: its points column is seen."""
    tables = visits["book/working_on_exercises.html"].widths[PHONE]["tables"]
    exercises = [table for table in tables if table["first"].startswith("exercise")]
    assert exercises and all(table["last_visible"] for table in exercises), exercises


def dialog_open(page, selector: str) -> bool:
    return page.evaluate("selector => Boolean(document.querySelector(selector)?.open)", selector)


def test_the_menu_buttons_open_the_chapters_and_the_contents_on_a_phone(chromium):
    """At a phone's width the sidebars are hidden; the header's two buttons open each as a dialog (the list of
    chapters, the headings of the page), and Escape closes it."""
    base, chrome = chromium
    with browser.open_page(chrome, base + "book/ch02_scaled_dot_product.html", width=PHONE) as (page, visit):
        for button, dialog, link in (
            (".primary-toggle", "#pst-primary-sidebar-modal", "Multi-head attention"),
            (".secondary-toggle", "#pst-secondary-sidebar-modal", "Key takeaways"),
        ):
            assert not dialog_open(page, dialog), f"{dialog} is open before {button} is pressed"
            browser.visible(page, button).click()
            page.wait_for_function("selector => document.querySelector(selector)?.open", arg=dialog, timeout=5_000)
            target = page.locator(dialog).get_by_role("link", name=link, exact=False).first
            assert target.is_visible(), f"{dialog} opened by {button} does not show the link {link!r}"
            page.keyboard.press("Escape")
            page.wait_for_function("selector => !document.querySelector(selector)?.open", arg=dialog, timeout=5_000)
    assert not visit.problems, visit.problems


def test_the_menu_button_hides_and_shows_the_chapters_on_a_desktop(chromium):
    """At a desktop's width the list of chapters is shown beside the page; the header's button hides it (the
    article takes the room) and shows it again."""
    base, chrome = chromium
    with browser.open_page(chrome, base + "book/ch02_scaled_dot_product.html", width=DESKTOP) as (page, visit):
        sidebar, article = page.locator("#pst-primary-sidebar"), page.locator("article.bd-article")

        def beside() -> bool:  # the sidebar is in the window, left of the article
            box = sidebar.bounding_box()
            return box["x"] >= 0 and box["x"] + box["width"] <= article.bounding_box()["x"] + 1

        assert sidebar.is_visible() and beside(), "the list of chapters is not shown beside the page on a desktop"
        width = article.bounding_box()["width"]
        browser.visible(page, ".primary-toggle").click()
        page.wait_for_function("() => document.querySelector('article.bd-article').getBoundingClientRect().x < 100")
        assert sidebar.bounding_box()["x"] < 0, "the list of chapters is still in the window"
        assert article.bounding_box()["width"] > width + 200, "the article did not take the sidebar's room"
        assert not dialog_open(page, "#pst-primary-sidebar-modal"), "the button opened a dialog on a desktop"
        browser.visible(page, ".primary-toggle").click()
        page.wait_for_function("() => document.querySelector('article.bd-article').getBoundingClientRect().x > 200")
        assert beside() and article.bounding_box()["width"] == width, "the list of chapters did not come back"
    assert not visit.problems, visit.problems


def overlap(a: dict, b: dict) -> bool:
    """Whether two bounding boxes (Playwright's: x, y, width, height) share any area."""
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


# The interactive maps of trained models' attention: page, element id, the maps in its menu, a token on its axes.
ATTENTION_MAPS = [
    ("book/ch06_transformer.html", "attention-maps-ch06-cross-attention", 8, "<bos>"),
    ("book/ch09_real_models.html", "attention-maps-ch09-bpe-model", 8, "The"),
]


@pytest.mark.parametrize("page_name, element, count, token", ATTENTION_MAPS)
def test_an_attention_map_draws_offline_and_its_menu_chooses_the_head(chromium, page_name, element, count, token):
    """The map is drawn by the site's own plotly.js (a request that leaves the site is a problem of the visit),
    the tokens label its axes, and choosing another entry of its menu shows that head's weights instead."""
    base, chrome = chromium
    shown = f"() => document.getElementById('{element}').data.map(trace => trace.visible === true)"
    with browser.open_page(chrome, base + page_name, width=DESKTOP) as (page, visit):
        maps = page.locator(f"#{element}")
        maps.locator("svg.main-svg").first.wait_for(timeout=10_000)
        ticks = maps.locator(".ytick text").evaluate_all("texts => texts.map(text => text.textContent)")
        assert token in ticks, f"{element}: {token!r} is not on its axis ({ticks})"
        assert page.evaluate(shown) == [True] + [False] * (count - 1)
        maps.locator(".updatemenu-header-group").click()
        entries = maps.locator(".updatemenu-dropdown-button")
        assert entries.count() == count, f"{element}: {entries.count()} entries in the menu, not {count}"
        entries.nth(count - 1).click()
        page.wait_for_function(f"() => ({shown})().indexOf(true) === {count - 1}", timeout=5_000)
    assert not visit.problems, visit.problems


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
@pytest.mark.parametrize("page_name, element", [(page, element) for page, element, _, _ in ATTENTION_MAPS])
def test_an_attention_maps_menu_and_toolbar_leave_its_title_clear(chromium, page_name, element, width):
    """Above the map, its toolbar (shown while the pointer is over the map), its title and its menu each have a
    row of their own: none covers another, in a phone's window as in a desktop's, and all are within the map."""
    base, chrome = chromium
    with browser.open_page(chrome, base + page_name, width=width, height=HEIGHT[width]) as (page, visit):
        maps = page.locator(f"#{element}")
        maps.locator("svg.main-svg").first.wait_for(timeout=10_000)
        maps.scroll_into_view_if_needed()
        maps.locator(".nsewdrag").first.hover()
        page.wait_for_function(
            "id => getComputedStyle(document.querySelector('#' + id + ' .modebar')).opacity === '1'",
            arg=element,
            timeout=5_000,
        )
        title = maps.locator(".gtitle").bounding_box()
        controls = {
            "menu": maps.locator(".updatemenu-header-group").bounding_box(),
            "toolbar": maps.locator(".modebar").bounding_box(),
        }
        whole = maps.bounding_box()
        assert title["width"] > 50, f"{element}: no title drawn"
        for name, box in {"title": title, **controls}.items():
            assert whole["x"] - 1 <= box["x"] and box["x"] + box["width"] <= whole["x"] + whole["width"] + 1, (
                f"{element}: its {name} reaches past the map at {width} px ({box} in {whole})"
            )
        for name, box in controls.items():
            assert not overlap(title, box), f"{element}: the {name} covers the title at {width} px ({box}, {title})"
        assert not overlap(*controls.values()), f"{element}: the menu and the toolbar overlap at {width} px"
    assert not visit.problems, visit.problems


@dataclass
class CodeCell:
    """A code cell of a MyST notebook: the line of its opening fence, its options' text and its code's lines."""

    line: int
    options: str
    code: list[tuple[int, str]]  # (line number, line)


def code_cells(text: str) -> list[CodeCell]:
    lines, found = text.splitlines(), []
    i = 0
    while i < len(lines):
        opening = re.match(r"^(`{3,})\{code-cell\}", lines[i])
        i += 1
        if not opening:
            continue
        start, options, code = i, [], []
        if i < len(lines) and lines[i].strip() == "---":  # options as a YAML block
            end = lines.index("---", i + 1)
            options, i = lines[i + 1 : end], end + 1
        while i < len(lines) and lines[i].startswith(":") and re.match(r"^:[\w-]+:", lines[i]):  # :tags: [...]
            options.append(lines[i])
            i += 1
        while i < len(lines) and lines[i].rstrip() != opening.group(1):
            code.append((i + 1, lines[i]))
            i += 1
        found.append(CodeCell(start, "\n".join(options), code))
        i += 1
    return found


def code_cell_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the code of every code cell of a MyST notebook, without cell options."""
    return [line for cell in code_cells(text) for line in cell.code]


# A cell whose code draws a figure; the reader sees the figure, and opens its code if they want it.
DRAWS = re.compile(r"\b(show_figure|plt\.subplots|plt\.figure)\(")


def test_cells_that_draw_a_figure_fold_their_code():
    """Plotting code is folded (tag hide-input: a "Show code" toggle above the figure); the computation a
    figure shows stays in a cell of its own, visible. Cells not executed (Colab's) are shown whole."""
    unfolded, folded = [], 0
    for chapter in CHAPTERS:
        for cell in code_cells((COURSE_ROOT / "book" / f"{chapter}.md").read_text()):
            if not any(DRAWS.search(line) for _, line in cell.code) or "skip-execution" in cell.options:
                continue
            tags = re.search(r"tags: \[(.*?)\]", cell.options)
            if tags and "hide-input" in tags.group(1).replace(" ", "").split(","):
                folded += 1
            else:
                unfolded.append(f"book/{chapter}.md:{cell.line}")
    assert not unfolded, "cells that draw a figure and show their code (tag them hide-input):\n" + "\n".join(unfolded)
    assert folded >= 40, f"only {folded} figure cells found"


def panels_side_by_side(code: str) -> bool:
    """Whether ``code`` draws a figure of panels side by side: ``plt.subplots(rows, columns)`` (or ``ncols=``) with
    columns not the number 1."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("plt.subplots", "plt.subplot_mosaic"):
            if ast.unparse(node.func) == "plt.subplot_mosaic":
                return True
            columns = (
                node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "ncols"), None)
            )
            if columns is not None and not (isinstance(columns, ast.Constant) and columns.value == 1):
                return True
    return False


def panel_figures_drawn(text: str) -> int:
    """How many figures of panels side by side the executed code cells of a MyST notebook draw whatever the machine:
    ``plt.subplots`` with a number of columns above 1, called outside any condition, loop or function."""
    count = 0
    for cell in code_cells(text):
        if "skip-execution" in cell.options:
            continue
        tree = ast.parse("\n".join(line for _, line in cell.code if not line.startswith("%")))
        for statement in tree.body:
            if isinstance(statement, (ast.Assign, ast.Expr)) and isinstance(statement.value, ast.Call):
                call = statement.value
                columns = call.args[1] if len(call.args) > 1 else None
                columns = next((k.value for k in call.keywords if k.arg == "ncols"), columns)
                if (
                    ast.unparse(call.func) == "plt.subplots"
                    and isinstance(columns, ast.Constant)
                    and isinstance(columns.value, int)
                    and columns.value > 1
                ):
                    count += 1
    return count


def panels_shown_plainly(text: str) -> list[int]:
    """The lines of the executed code cells of a MyST notebook that draw panels side by side and show them other than
    by ``show_figure`` (which stacks them on a phone)."""
    return [
        cell.line
        for cell in code_cells(text)
        if "skip-execution" not in cell.options
        and panels_side_by_side("\n".join(line for _, line in cell.code if not line.startswith("%")))
        and not re.search(r"\bshow_figure\(", "\n".join(line for _, line in cell.code))
    ]


def test_figures_of_panels_side_by_side_are_shown_by_show_figure():
    """A chapter's figure of panels side by side goes through ``show_figure``, which serves a phone its panels
    stacked; shown by ``plt.show()`` its panels would shrink to a fraction of a phone's column."""
    plain = "```{code-cell} ipython3\nfig, axes = plt.subplots(1, 2)\nplt.show()\n```\n"
    assert panels_shown_plainly(plain) == [1] and not panels_shown_plainly(plain.replace("(1, 2)", "(2, 1)"))
    assert not panels_shown_plainly(plain.replace("plt.show()", "show_figure(fig, 'f', alt='a', caption='c')"))
    assert panel_figures_drawn(plain) == 1 and panel_figures_drawn(plain.replace("fig,", "if GPU:\n    fig,")) == 0
    found = [
        f"book/{chapter}.md:{line}"
        for chapter in CHAPTERS
        for line in panels_shown_plainly((COURSE_ROOT / "book" / f"{chapter}.md").read_text())
    ]
    assert not found, "figures of panels side by side shown without show_figure:\n" + "\n".join(found)


def plumbing(statement: ast.stmt) -> bool:
    """Whether a statement of a cell only serves the build: a ``glue(...)`` call, an ``assert``, or a loop of them."""
    if isinstance(statement, ast.Assert):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        return getattr(statement.value.func, "id", None) == "glue"
    if isinstance(statement, (ast.For, ast.If)):
        return all(plumbing(s) for s in statement.body + statement.orelse)
    return False


def cell_tree(cell: CodeCell) -> ast.Module:
    """A cell's code as Python (a line of IPython's, ``%magic`` or ``!command``, left out)."""
    return ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line for _, line in cell.code))


def glues_or_asserts(cell: CodeCell) -> bool:
    """Whether a cell hands values to the text (``glue``) or checks what the text says (``assert``)."""
    tree = cell_tree(cell)
    return any(
        isinstance(node, ast.Assert) or getattr(getattr(node, "func", None), "id", None) == "glue"
        for node in ast.walk(tree)
    )


def shown(cell: CodeCell) -> bool:
    """Whether a reader sees a cell's code: not removed, and executed (Colab's cells are not)."""
    return not re.search(r"\bremove-(cell|input)\b", cell.options) and "skip-execution" not in cell.options


def test_cells_that_only_glue_and_assert_are_hidden():
    """A cell whose code only hands values to the text and checks them (glue, assert, and the names they need) is
    the build's plumbing: tagged remove-cell (or remove-input), it still runs in the build. A cell that computes,
    prints or draws what the reader reads stays shown, and keeps its plumbing in a hidden cell of its own where it
    has much (chapter 8's GPU sections: the records of a GPU, read and checked)."""
    shown_plumbing, hidden = [], 0
    for chapter in CHAPTERS:
        for cell in code_cells((COURSE_ROOT / "book" / f"{chapter}.md").read_text()):
            if not shown(cell):
                hidden += bool(glues_or_asserts(cell)) if "skip-execution" not in cell.options else 0
                continue
            body = cell_tree(cell).body
            gluing = any(plumbing(s) and "glue" in ast.unparse(s) for s in body)
            if gluing and all(plumbing(s) or isinstance(s, (ast.Assign, ast.Import, ast.ImportFrom)) for s in body):
                shown_plumbing.append(f"book/{chapter}.md:{cell.line}")
    assert not shown_plumbing, "cells that only glue and assert, shown to readers:\n" + "\n".join(shown_plumbing)
    assert hidden >= 10, f"only {hidden} hidden cells glue or assert"


def test_chapter_8s_gpu_sections_show_no_glue_or_assert():
    """From "On a GPU" to "Several GPUs", the cells shown print what was measured; what hands the figures to the
    text and checks them is hidden."""
    text = (COURSE_ROOT / "book" / "ch08_training_fast.md").read_text()
    start, end = text.index("\n### On a GPU\n"), text.index("\n## Several GPUs")
    cells = [cell for cell in code_cells(text) if start < sum(map(len, text.splitlines(True)[: cell.line])) < end]
    assert len(cells) >= 8, f"only {len(cells)} cells found in chapter 8's GPU sections"
    shown_plumbing = [
        f"book/ch08_training_fast.md:{cell.line}" for cell in cells if shown(cell) and glues_or_asserts(cell)
    ]
    assert not shown_plumbing, "cells of the GPU sections that glue or assert, shown:\n" + "\n".join(shown_plumbing)
    assert any(not shown(cell) for cell in cells), "no hidden cell in the GPU sections"


def test_no_built_page_shows_build_plumbing(site):
    """No code that a reader sees on a built page glues a value into the text, redirects a stream, or asserts what
    only guards the build (tests/test_page_plumbing.py states the rule, and checks it on the sources too)."""
    from tests.test_page_plumbing import html_cells, shown_plumbing_in_html

    pages = sorted(site.rglob("*.html"))
    assert sum(bool(html_cells(page.read_text())) for page in pages) >= 11, "no page with code cells found"
    found = [line for page in pages for line in shown_plumbing_in_html(page, site)]
    assert not found, "build plumbing in cells a reader sees (tag them remove-cell):\n" + "\n".join(found)


def test_code_cells_keep_to_the_line_length():
    """The code that chapters show in their code cells keeps to CODE_LINE_LENGTH characters a line."""
    long_lines = []
    for chapter in CHAPTERS:
        cells = code_cell_lines((COURSE_ROOT / "book" / f"{chapter}.md").read_text())
        assert cells, f"{chapter}: no code cell found"
        long_lines += [
            f"book/{chapter}.md:{n}: {len(line)} characters" for n, line in cells if len(line) > CODE_LINE_LENGTH
        ]
    assert not long_lines, f"{len(long_lines)} lines longer than {CODE_LINE_LENGTH}:\n" + "\n".join(long_lines)


def test_code_cell_lines_are_read_without_their_options():
    text = "\n".join(
        [
            "```{code-cell} ipython3",
            "---",
            "mystnb:",
            "  image:",
            "    alt: " + "a" * 100,
            "---",
            "x = 1",
            "```",
            "",
            "```{code-cell} ipython3",
            ":tags: [remove-cell]",
            "y = 2",
            "```",
            "```python",
            "not = 'a cell'",
            "```",
        ]
    )
    assert code_cell_lines(text) == [(7, "x = 1"), (12, "y = 2")]


def test_every_chapter_has_objectives_figures_takeaways_and_an_exercise(visits):
    assert [c for c in CHAPTERS if c not in WITHOUT_EXERCISE] == EXERCISES, "every other chapter has an exercise"
    assert CHAPTERS[-3:] == ["ch09_real_models", "ch10_what_heads_learn", "ch11_flash_attention"], (
        "chapters 10 and 11 follow chapter 9"
    )
    for chapter in CHAPTERS:
        outline = visits[f"book/{chapter}.html"].outline
        headings = outline["headings"]
        assert outline["first_admonition"] == "Learning objectives", f"{chapter}: no learning objectives at the top"
        ending = ["Key takeaways", "Exercise"] if chapter in EXERCISES else ["Key takeaways"]
        assert headings[-len(ending) :] == ending, (
            f"{chapter}: the page must end with {ending}, not {headings[-len(ending) :]}"
        )
        if chapter not in EXERCISES:
            assert "Exercise" not in headings, f"{chapter}: an exercise heading, but no assignment"
        assert outline["figures"] >= 1, f"{chapter}: no figure drawn by the chapter's code"


def test_exercise_links_point_at_the_repository_notebooks(chromium, visits):
    base, _ = chromium
    repo = repository()
    for chapter in EXERCISES:
        hrefs = visits[f"book/{chapter}.html"].outline["links"]
        assert hrefs["exercise-download"], f"{chapter}: no download link"
        with urllib.request.urlopen(f"{base}book/{hrefs['exercise-download']}") as downloaded:
            status, body = downloaded.status, downloaded.read()
        notebook = COURSE_ROOT / exercise_path(chapter)
        assert notebook.is_file()
        assert status == 200 and body == notebook.read_bytes(), (
            f"{chapter}: the download link does not give {exercise_path(chapter)}"
        )
        for cls, expected in (
            ("exercise-colab", repo.colab_url(exercise_path(chapter))),
            ("exercise-github", repo.blob_url(exercise_path(chapter))),
        ):
            assert hrefs[cls] == expected, f"{chapter}: {cls} link is {hrefs[cls]}, expected {expected}"
            path = urlsplit(hrefs[cls]).path.split(f"/blob/{repo.ref}/", 1)[1]
            assert (COURSE_ROOT / path).is_file(), f"{chapter}: {cls} link names {path}, not in the repository"


def test_chapter_9_installs_from_the_exercises_repository_with_the_pins(site):
    page = html.unescape(re.sub(r"<[^>]+>", "", (site / "book" / "ch09_real_models.html").read_text()))
    assert colab.install_line(repository()) in page


def test_exercise_page_links_every_exercise(site):
    page = (site / "book" / "working_on_exercises.html").read_text()
    for chapter in EXERCISES:
        assert repository().colab_url(exercise_path(chapter)) in page, chapter


def test_search_finds_softmax_and_quotes_formulas_as_text(chromium):
    """The search finds the chapter; the quote under each result gives a formula as plain text, never as its TeX
    source (the quotes are read from the pages' HTML, where MathJax has not typeset it)."""
    base, chrome = chromium
    with browser.open_page(chrome, base + "search.html?q=softmax") as (page, visit):
        page.wait_for_selector("ul.search li a", timeout=20_000)
        page.wait_for_function(  # every result listed, and each with the quote that its page's text gives
            """() => document.querySelector('p.search-summary')?.textContent.includes('Search finished')
                && document.querySelectorAll('ul.search li p.context').length
                   === document.querySelectorAll('ul.search li').length""",
            timeout=30_000,
        )
        results = page.locator("ul.search li a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        quotes = page.locator("ul.search li p.context").all_inner_texts()
    assert not visit.problems, visit.problems
    assert any("ch02_scaled_dot_product" in href for href in results), results
    assert len(quotes) >= 10, quotes
    tex = [quote for quote in quotes if "\\" in quote]
    assert not tex, "search results quote TeX:\n" + "\n".join(tex)
    assert any("√d_k" in quote for quote in quotes), "no formula quoted as text (√d_k)"


def test_landing_page_glossary_and_bibliography(chromium, site):
    base, chrome = chromium
    with browser.open_page(chrome, base + "index.html") as (page, _):  # redirects to book/intro.html
        assert page.url.endswith("book/intro.html"), page.url
        landing = page.locator("article").inner_text()
        logo_loaded = page.evaluate("""() => Array.from(document.querySelectorAll('img.logo__image'))
                                            .some(img => img.naturalWidth > 0)""")
    assert logo_loaded, "the course logo is not shown"
    assert "Attention: from Bahdanau to Transformers" in landing
    for chapter_title in (
        "Bahdanau",
        "Multi-head attention",
        "Masking",
        "Positional encodings",
        "Transformer",
        "Attention at scale",
        "Training fast",
    ):
        assert chapter_title in landing, f"the landing page's learning path does not name {chapter_title!r}"
    assert "need to know" in landing.lower(), "the landing page has no prerequisites"

    glossary = (site / "book" / "glossary.html").read_text()
    for symbol in ("d_model", "d_k", "causal", "num_kv_heads", "grouped-query attention", "model FLOPs utilisation"):
        assert symbol in glossary, f"the glossary does not explain {symbol}"
    bibliography = (site / "book" / "bibliography.html").read_text()
    for author, year in REQUIRED_REFERENCES:
        assert author in bibliography and year in bibliography, f"the bibliography lacks {author} {year}"


def test_screenshots_of_landing_page_and_a_chapter(chromium, book):
    base, chrome = chromium
    artifacts = book / "_build" / "test-artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    for name, url in (("landing.png", "book/intro.html"), ("chapter.png", "book/ch02_scaled_dot_product.html")):
        with browser.open_page(chrome, base + url) as (page, _):
            browser.wait_for_mathjax(page)
            page.screenshot(path=str(artifacts / name), full_page=False)
        assert (artifacts / name).stat().st_size > 20_000, f"{name} is nearly empty"
    print(f"screenshots in {artifacts}")


def test_pages_workflow_builds_checks_and_uploads_the_site():
    workflow = yaml.safe_load((COURSE_ROOT / ".github" / "workflows" / "pages.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as True
    assert triggers["push"]["branches"] == ["main"] and "workflow_dispatch" in triggers
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert workflow["concurrency"]["group"]

    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    runs = [step.get("run", "") for step in steps]
    uses = [step.get("uses", "") for step in steps]

    def index(predicate):
        found = [i for i, step in enumerate(steps) if predicate(step)]
        assert found, "step not found"
        return found[0]

    torch = index(lambda s: "torch==2.13.0" in s.get("run", "") and "download.pytorch.org/whl/cpu" in s.get("run", ""))
    assert "python -m venv .venv" in runs[torch] and ".venv/bin/" in runs[torch]
    venv = index(lambda s: s.get("run", "").strip() == "make venv")
    book = index(lambda s: "make book" in s.get("run", ""))
    checked = index(lambda s: "make check-site" in s.get("run", ""))
    upload = index(lambda s: s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert torch < venv < book < checked < upload
    assert steps[upload]["with"]["path"] == "_build/html"
    python = steps[index(lambda s: s.get("uses", "").startswith("actions/setup-python@"))]
    assert str(python["with"]["python-version"]) == "3.11"
    assert any(u.startswith("actions/checkout@") for u in uses)
    assert any(u.startswith("actions/configure-pages@") for u in uses)
    assert any(u.startswith("actions/deploy-pages@") for u in uses)


# ----------------------------------------------------------------------------- the two editions


def test_the_open_edition_shows_every_solution_after_its_exercise(site):
    for assignment in EXERCISES:
        blocks = admonitions((site / "book" / f"{assignment}.html").read_text())
        for name in graded_items(assignment):
            code = squeezed(reference.item_source(assignment, name))
            shown = [i for i, (kind, _, text) in enumerate(blocks) if kind == "solution" and code in squeezed(text)]
            assert shown, f"{assignment}: no solution block shows the code of {name}"
            kind, target, _ = blocks[shown[0]]
            before = blocks[shown[0] - 1] if shown[0] else (None, None, None)
            assert before[0] == "exercise" and before[1] == target, (
                f"{assignment}: the solution of {name} does not follow the exercise prompt it answers"
            )
        assert 'class="solution dropdown' in (site / "book" / f"{assignment}.html").read_text()  # collapsed


def test_the_term_edition_holds_no_unreleased_solution(term_site):
    report = leaks.scan(term_site, COURSE_ROOT, TERM)
    assert report.regions > 10 and report.files > 50, "the check looked for almost nothing"
    assert report.ok, "the term site must not be published:\n" + "\n".join(map(str, report.problems))
    assert not (term_site / "_sources").exists(), "the term edition publishes no page sources"
    for assignment in EXERCISES:
        page = (term_site / "book" / f"{assignment}.html").read_text()
        codes = [squeezed(reference.item_source(assignment, name)) for name in graded_items(assignment)]
        texts = [squeezed(text) for kind, _, text in admonitions(page) if kind == "solution"]
        if TERM.is_released(assignment):
            assert all(any(code in text for text in texts) for code in codes), assignment
        else:
            assert texts and all("once your instructor releases the solutions" in text for text in texts)
            assert not any(code[:60] in squeezed(html.unescape(re.sub(r"<[^>]+>", "", page))) for code in codes)
    # Chapter 8 works out the online softmax of exercise 7 in a tagged cell: withheld, its output kept.
    fast = squeezed(html.unescape(re.sub(r"<[^>]+>", "", (term_site / "book" / "ch08_training_fast.html").read_text())))
    assert "def blocked_attention" not in fast and "largest score matrix held" in fast
    assert "once your instructor releases the solutions of exercise ch07_efficient_attention" in fast
    search = (term_site / "searchindex.js").read_text()
    assert "ch03_multi_head" in search  # the pages are indexed, without the withheld code


def test_the_guide_shows_the_example_class_report_where_its_chapter_is_released_and_nowhere_else(site, term_site):
    """The open edition's guide shows the example class's report (its figures, its causes, links to its two pages,
    which the site serves); the term's, where chapter 2 is not released, a note, and no page of it: its causes are
    the grader's hints of hidden checks."""
    data = json.loads((COURSE_ROOT / "book" / "_examples" / "class-report" / f"{EXAMPLE}-report.json").read_text())
    guide = (site / "book" / "instructor_guide.html").read_text()
    top = max(data["tests"], key=lambda t: t["lost"])
    assert f"{data['summary']['students']} students" in guide and top["grade_id"] in guide
    for name in (f"{EXAMPLE}-report.html", f"{EXAMPLE}-report-anonymous.html"):
        assert f'href="../_static/class-report-example/{name}"' in guide
        assert (site / "_static" / "class-report-example" / name).is_file()
    assert not TERM.is_released(EXAMPLE)
    term_guide = (term_site / "book" / "instructor_guide.html").read_text()
    cause = top["causes"][0]["words"]
    assert cause in html.unescape(guide).replace("\u2019", "'")
    assert "_static/class-report-example" not in term_guide and cause not in html.unescape(term_guide)
    assert "The report of the example class graded on" in term_guide
    assert not (term_site / "_static" / "class-report-example").exists()


def test_pasting_the_term_sites_code_scores_nothing(term_site):
    """A student in the term copies every function, class and import that the chapter shows."""
    page = (term_site / "book" / "ch03_multi_head.html").read_text()
    pasted = []
    for block in code_blocks(page):
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue
        pasted += [
            ast.get_source_segment(block, node)
            for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))
        ]
    assert len(pasted) > 5
    code = "\n\n".join(pasted)
    answers = dict.fromkeys(graded_items("ch03_multi_head"), code)
    # the understanding questions are left unanswered (their answers are in no published code)
    assert grade_notebook("ch03_multi_head", fill("ch03_multi_head", answers, blank=True), release=TERM).score == 0
