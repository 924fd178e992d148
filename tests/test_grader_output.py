"""What a submission can put on the instructor's terminal, and how long its feedback may take.

Unit tests of the one filter (``clean_text``), of the relay of nbgrader's output
(:mod:`autograder.grading.run_nbgrader`), of the cell roles given back before nbgrader checks a notebook,
of the markdown cut for the feedback, of the linear ``strip_files_prefix``, of a notebook that answers
nothing and of a submission without the notebook's name; then three classes graded end to end by
`make grade` (``python -m autograder.cli.grade``, its terminal output captured):

* with the course's configuration: a student whose answer cell is an nbgrader "task" full of
  terminal escapes and forged lines, and one whose answer cell claims a schema version nbgrader
  does not know, are graded as the sandbox graded them (and the class goes on), a notebook
  nbgrader cannot read is reported refused with nbgrader's reason, and a markdown cell of 150,000
  ``[`` leaves the feedback phase fast, that student's feedback saying it was cut;
* with nbgrader's own behaviour put back (no cell roles given back, nbconvert's quadratic filter, no
  markdown cut): the attacks are real there, nbgrader refuses the "task" notebook and quotes the
  cell in its log, and the grader still shows none of it unfiltered, reports the refusal with its
  reason, and stops the slow feedback at its time limit while the class goes on;
* with the course's configuration again: a notebook as released is "nothing answered" in the CSV and
  the summary, and a notebook under another name (one, or several) is refused in one line that says
  what to rename it, with a feedback page that says the same and no traceback of nbgrader's.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from nbconvert.filters.strings import strip_files_prefix as nbconvert_strip_files_prefix
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.nbgraderformat import MetadataValidator, ValidationError

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.api import specs
from autograder.grading import run_nbgrader
from autograder.grading.classroom import fill, make_course, submit
from autograder.grading.feedback import FEEDBACK_PROGRESS
from autograder.grading.feedback_pages import _releasable, feedback_page, write_feedback_page
from autograder.grading.nbgrader_log import nbgrader_errors
from autograder.grading.source import Source, student_program, unanswered
from autograder.grading.submissions import misnamed
from autograder.nbgrader.cell_roles import give_instructor_roles, instructor_metadata
from autograder.nbgrader.files_prefix import strip_files_prefix
from autograder.nbgrader.limit_markdown import CUT_NOTE, LimitMarkdown
from autograder.release import course
from autograder.sandbox.bwrap import bwrap_available
from autograder.text.terminal import clean_text
from tests import attacks
from tests.support.points import full_marks

A = "ch02_scaled_dot_product"
FULL = full_marks(A)
# What a terminal acts on: C0 controls but tab and newline, DEL, C1 controls (8-bit CSI, OSC...), ESC.
TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
ZEROS = fill(A, attacks.ZEROS)


# ----------------------------------------------------------------------------- the one filter


def test_clean_text_removes_every_terminal_control_and_keeps_the_text():
    nasty = (
        "a\x1b]0;title\x07b\x1b]52;c;b3duZWQ=\x1b\\c\x1b[2J\x1b[31md\x1b[0m\x9b2J\x9d0;owned\x9ce"
        "\x1bPq#0;2;0;0;0\x1b\\f\x1bcg\x1b(Bh\x85i\x90payload\x9cj\x07\x08\r\u202eevil\u202ck"
    )
    assert clean_text(nasty, 1000) == "abcdefghijevilk"
    text = "café → 中文, a tab\tand a newline\n[6/6] as written"
    assert clean_text(text, 1000) == text  # right text passes unchanged
    assert clean_text("x" * 50, 10) == "x" * 10
    assert clean_text("lone \ud800 surrogate", 100) == "lone ? surrogate"


def test_clean_text_cleans_the_review_attacks_c0_and_c1_escapes():
    for payload in (attacks.TERMINAL_ESCAPES, attacks.C1_ESCAPES, attacks.TERMINAL_TAKEOVER):
        message = payload.encode().decode("unicode_escape") if "\\x" in payload else payload
        cleaned = clean_text(message, 10_000)
        assert not TERMINAL_CONTROL.search(cleaned), repr(cleaned)


# ----------------------------------------------------------------------------- the relay of nbgrader's output


def test_relayed_rows_start_with_the_prefix_fit_the_terminal_and_hold_no_control():
    line = attacks.TERMINAL_TAKEOVER.replace("\n", " ") + "x" * 150 + "中文" * 40 + "all submissions graded"
    for width in (40, 80, 132):
        rows = run_nbgrader.relayed(line, width)
        assert len(rows) > 1
        for row in rows:
            assert row.startswith(run_nbgrader.PREFIX), row
            assert sum(run_nbgrader._columns(c) for c in row) < width, row
            assert not TERMINAL_CONTROL.search(row) and not BIDI.search(row), repr(row)
    assert run_nbgrader.relayed("plain words", None) == ["nbgrader: plain words"]
    assert len(run_nbgrader.relayed("y" * 10**6, None)[0]) == len(run_nbgrader.PREFIX) + run_nbgrader.MAX_LINE_CHARS


PRINTER = r"""
import sys, time
sys.stdout.write("out \x1b]0;owned\x07\x9b2J line\n")
sys.stdout.flush()
sys.stderr.write("err " + "z" * 100000 + "\n" + "[6/6] writing grades: all submissions graded\n")
sys.stderr.flush()
"""


def test_a_commands_output_is_relayed_prefixed_and_cleaned_and_kept_cleaned():
    relay = io.StringIO()
    running = run_nbgrader.Running([sys.executable, "-c", PRINTER], Path.cwd(), dict(os.environ), relay)
    result = running.wait(timeout=60)
    assert result.returncode == 0
    shown = relay.getvalue().splitlines()
    assert shown and all(line.startswith(run_nbgrader.PREFIX) for line in shown), shown
    assert "nbgrader: out  line" in shown and "nbgrader: [6/6] writing grades: all submissions graded" in shown
    assert not TERMINAL_CONTROL.search(relay.getvalue())
    assert max(len(line) for line in shown) == len(run_nbgrader.PREFIX) + run_nbgrader.MAX_LINE_CHARS
    assert result.stdout == "out  line"  # what the caller keeps: cleaned, not prefixed
    assert result.stderr.splitlines()[1] == "[6/6] writing grades: all submissions graded"


def test_a_stopped_command_is_killed_with_what_it_started():
    code = "import subprocess, time\nsubprocess.Popen(['sleep', '4243'])\nprint('started', flush=True)\ntime.sleep(60)"
    running = run_nbgrader.Running([sys.executable, "-c", code], Path.cwd(), dict(os.environ), None)
    deadline = time.monotonic() + 30
    while "started" not in running.kept["stdout"] and time.monotonic() < deadline:
        time.sleep(0.05)
    running.stop()
    assert running.wait(timeout=30).returncode == -9
    time.sleep(0.2)
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    assert "sleep 4243" not in listing


def test_nbgraders_error_for_a_student_is_found_in_its_log():
    log = "\n".join(
        [
            "[AutogradeApp | ERROR] There was an error processing assignment: /c/submitted/mallory/" + A,
            "[AutogradeApp | ERROR] Traceback (most recent call last):",
            '      File "/x/base.py", line 390, in convert_notebooks',
            "        self.convert_single_notebook(notebook_filename)",
            "    jsonschema.exceptions.ValidationError: Task cells have to be markdown: x = 1",
            "    # all submissions graded",
            "    ",
            "[AutogradeApp | ERROR] There was an error processing assignment '" + A + "' for student 'mallory'",
        ]
    )
    found = nbgrader_errors(log, A, ["mallory", "alice"])
    assert found == {"mallory": "jsonschema.exceptions.ValidationError: Task cells have to be markdown: x = 1"}
    assert nbgrader_errors(log, A, ["alice"]) == {}


def test_the_courses_feedback_page_escapes_everything():
    page = feedback_page(A, "<nb>", ["<script>alert(1)</script> & \x1b[2J"])
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;nb&gt;.ipynb" in page
    assert "\x1b" not in page


def test_feedback_keeps_the_courses_markdown_as_written_and_sanitises_the_students(monkeypatch):
    """The course's own markdown (identical to the released notebook's) is not escaped before it is rendered,
    so a code span shows `->`, not `-&gt;`; a markdown or raw cell the student wrote or changed is sanitised."""
    from autograder.nbgrader.sanitize import SanitizeStudentHTML

    monkeypatch.chdir(COURSE_ROOT)
    released = notebooks.read(COURSE_ROOT / course.exercise_path(A))
    ours = next(c.source for c in released.cells if c.cell_type == "markdown" and "->" in c.source)
    theirs = "<script>window.owned = 1</script> -> <img src=x onerror=alert(1)>"
    nb = new_notebook(cells=[new_markdown_cell(ours), new_markdown_cell(theirs), new_markdown_cell(ours + " ")])
    sanitiser = SanitizeStudentHTML(enabled=True, strip=False)
    sanitiser.preprocess(nb, {"nbgrader": {"assignment": A}})
    assert nb.cells[0].source == ours
    for cell in nb.cells[1:]:
        assert "<script" not in cell.source and "<img" not in cell.source, cell.source
    assert "&gt;" in nb.cells[2].source  # changed by a space: the student's, sanitised
    elsewhere = new_notebook(cells=[new_markdown_cell(ours)])
    SanitizeStudentHTML(enabled=True, strip=False).preprocess(
        elsewhere, {"nbgrader": {"assignment": "not_an_assignment"}}
    )
    assert elsewhere.cells[0].source != ours  # no released notebook to trust: sanitised


def test_a_feedback_page_carries_the_courses_mathjax_in_place_of_the_cdn(tmp_path):
    """The CDN block of nbconvert's template becomes the course's MathJax and the parts it loads (safe mode
    first), inline and closed where they should be; without all of the course's copy the page is left as it was
    (nbconvert's MathJax 2, in its safe mode)."""
    from autograder.nbgrader.feedback_html import inline_mathjax

    page = (
        '<head><!-- Load mathjax -->\n<script src="https://cdnjs.cloudflare.com/mathjax.js"> </script>\n'
        "<script>init_mathjax();</script>\n<!-- End of mathjax configuration --></head><body>$x$</body>"
    )
    script = tmp_path / "tex-svg.js"
    script.write_text('var a = "</script>"; var b = /<!--.*?-->/g;')
    for part in course.FEEDBACK_MATHJAX_PARTS:
        (tmp_path / f"{part}.js").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"{part}.js").write_text(f'var part = "{part}</script>";')
    inlined = inline_mathjax(page, script)
    assert "cdnjs" not in inlined and "init_mathjax" not in inlined and "window.MathJax = {" in inlined
    assert "safeOptions: {allow: {URLs: 'none'" in inlined and course.FEEDBACK_MATHJAX_PARTS[0] == "ui/safe"
    assert 'var a = "<\\/script>"; var b = /<\\!--.*?-->/g;' in inlined
    for part in course.FEEDBACK_MATHJAX_PARTS:
        assert f"'mathjax/{part}.js': function () {{\nvar part = \"{part}<\\/script>\";\n}}" in inlined, part
    assert inlined.count("</script>") == 2 and inlined.endswith("</head><body>$x$</body>")
    (tmp_path / "ui" / "safe.js").unlink()
    assert inline_mathjax(page, script) == page
    assert inline_mathjax(page, tmp_path / "absent.js") == page


def _feedback_page_in_chromium(tmp_path, markdown: str, inspect: str):
    """A feedback page of one markdown cell, as nbgrader's template and the course's exporter write it, opened in
    Chromium with no network once MathJax has typeset it: what the script ``inspect`` returns, the page's
    errors, and the URL of every request it made."""
    import nbgrader.converters.generate_feedback as nbgrader_feedback
    from playwright.sync_api import sync_playwright

    from autograder.nbgrader.feedback_html import FeedbackHTMLExporter
    from tests.support.browser import CHROMIUM_ARGS, chromium_path

    assert course.FEEDBACK_MATHJAX.is_file(), "make test fetches the course's MathJax (make book's $(MATHJAX))"
    formgrader = Path(nbgrader_feedback.__file__).resolve().parent.parent / "server_extensions" / "formgrader"
    exporter = FeedbackHTMLExporter(
        template_name="feedback",
        extra_template_basedirs=[str(formgrader / "templates")],
        extra_template_paths=[str(formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css")],
    )
    info = {"notebook": "ch02", "score": 0, "max_score": 1, "late_penalty": 0}
    html, _ = exporter.from_notebook_node(new_notebook(cells=[new_markdown_cell(markdown)]), {"nbgrader": info})
    assert "cdnjs" not in html
    path = tmp_path / "feedback.html"
    path.write_text(html)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_context(offline=True).new_page()
        errors, requests = [], []
        page.on("request", lambda request: requests.append(request.url))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.goto(path.as_uri())
        page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
        page.evaluate("MathJax.startup.promise")
        found = page.evaluate(inspect)
        browser.close()
    return found, errors, requests


@pytest.mark.slow
@pytest.mark.browser
def test_a_feedback_page_renders_its_mathematics_offline(tmp_path):
    """Every formula is typeset by the inlined MathJax, without an error, with no network."""
    (typeset, text), errors, requests = _feedback_page_in_chromium(
        tmp_path,
        "Scores $q \\cdot k / \\sqrt{d_k}$, weights $$\\sum_j w_j = 1$$",
        "[document.querySelectorAll('mjx-container').length, document.body.innerText]",
    )
    assert typeset == 2 and "$" not in text and errors == [], (typeset, errors)
    assert [url for url in requests if not url.startswith(("file:", "data:"))] == []


@pytest.mark.slow
@pytest.mark.browser
def test_a_feedback_page_typesets_the_tex_extensions_mathjax_loads_offline_in_safe_mode(tmp_path):
    """The TeX extensions that MathJax loads when a formula uses them (\\boldsymbol, \\cancel, \\bbox, \\color,
    ...) come with the page: typeset without an error, nothing fetched, colours by name or #hex kept."""
    markdown = (
        "$\\boldsymbol{q}^\\top \\cancel{k}$ $\\bbox[yellow,5px]{w}$ $\\color{blue}{x} + \\color[rgb]{1,0,0}{y}$ "
        "$\\bra{a}\\ket{b}$ $\\enclose{circle}{e}$ $\\xmapsto{f}$ $\\unicode{x41}$ "
        '$\\mmlToken{mi}[mathcolor="#0a0"]{g}$'
    )
    inspect = """[
        document.querySelectorAll('mjx-container').length,
        document.querySelectorAll('mjx-container [data-mml-node="merror"], mjx-container [fill="red"]').length,
        [...document.querySelectorAll('mjx-container svg [fill]')].map(e => e.getAttribute('fill'))
            .filter(fill => !['currentColor', 'none'].includes(fill)),
    ]"""
    (typeset, failed, colours), errors, requests = _feedback_page_in_chromium(tmp_path, markdown, inspect)
    assert (typeset, failed, errors) == (8, 0, []), (typeset, failed, errors)
    assert sorted(colours) == ["#0a0", "#ff0000", "blue", "yellow"], colours
    assert [url for url in requests if not url.startswith(("file:", "data:"))] == []


@pytest.mark.slow
@pytest.mark.browser
def test_a_students_tex_makes_no_link_and_no_style_on_a_feedback_page(tmp_path):
    """The TeX that makes HTML (MathJax's html extension: \\href, \\style, \\class, \\cssId, and \\require, which
    loads any extension) is not there for a student's cell: no javascript: link, no element laid over the page,
    nothing fetched; the macros show as written, and the rest of the formula is typeset."""
    markdown = (
        "$\\href{javascript:window.owned=1}{\\text{your grade}}$ "
        "$\\style{position:fixed;top:0;left:0;width:100vw;height:100vh;z-index:9}{\\text{over}}$ "
        "$\\class{modal}{x} + \\cssId{header}{y}$ $\\require{html}\\href{javascript:alert(1)}{z}$ "
        "$q \\cdot k$"
    )
    inspect = """[
        document.querySelectorAll('mjx-container').length,
        [...document.querySelectorAll('mjx-container *')].filter(e => e.localName === 'a'
            || [...e.attributes].some(a => a.localName === 'href' && !a.value.startsWith('#'))).length,
        [...document.querySelectorAll('mjx-container *')].filter(e => getComputedStyle(e).position === 'fixed').length,
        document.querySelectorAll('mjx-container .modal, mjx-container #header').length,
        document.querySelectorAll('mjx-container [data-mml-node="mtext"][fill="red"]').length,
    ]"""
    (typeset, links, fixed, classed, undefined), errors, _ = _feedback_page_in_chromium(tmp_path, markdown, inspect)
    assert typeset == 5 and (links, fixed, classed) == (0, 0, 0), (typeset, links, fixed, classed)
    assert errors == [], errors
    assert undefined == 6, undefined  # \\href, \\style, \\class, \\cssId, \\require, \\href, shown as written in red


BEACON = "http://beacon.invalid"
# TeX that puts the student's attributes on the page, in MathJax's base package (\mmlToken, the html extension's
# macros, \require), then in the extensions it loads when a formula uses them (\bbox's CSS, \unicode).
TEX_WITH_ATTRIBUTES = (
    f'$\\mmlToken{{mtext}}[href="javascript:window.owned=1",mathsize="3em"]{{your grade}}$ '
    f'$\\mmlToken{{mi}}[style="position:fixed;top:0;left:0;width:100vw;height:100vh;z-index:9;'
    f'background:url({BEACON}/style)"]{{over}}$ '
    '$\\mmlToken{mi}[class="modal",id="header"]{x}$ '
    f'$\\mmlToken{{mglyph}}[src="{BEACON}/glyph.png",width="1em",height="1em"]{{}}$ '
    f'$\\mmlToken{{mi}}[mathcolor="url({BEACON}/fill)",mathbackground="url({BEACON}/rect)"]{{c}}$ '
    "$\\href{javascript:window.owned=1}{\\text{your grade}}$ "
    "$\\style{position:fixed;top:0;left:0;width:100vw;height:100vh;z-index:9}{\\text{over}}$ "
    "$\\class{modal}{x} + \\cssId{header}{y}$ "
    f"$\\require{{html}}\\href{{{BEACON}}}{{z}}$ "
    "$q \\cdot k$",
    f"$\\bbox[background:url({BEACON}/bbox)]{{y}}$ $\\bbox[yellow,5px]{{w}}$ $\\unicode{{x41}}$",
)


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("extensions", [False, True], ids=["base", "with-extensions"])
def test_a_students_tex_makes_no_link_no_style_and_no_request_through_mathjaxs_own_attributes(tmp_path, extensions):
    """MathJax's safe mode filters what any TeX gives the page (\\mmlToken's attributes, colours, \\bbox's CSS,
    the html extension's macros, \\unicode, \\require): no link but the page's own, no element placed or named by
    the student's CSS, class or id, and no request but the page's own file (a beacon in CSS, a colour or an
    image, fetched when the page is opened)."""
    base, more = TEX_WITH_ATTRIBUTES
    markdown = f"{base} {more}" if extensions else base
    inspect = """[
        document.querySelectorAll('mjx-container').length,
        [...document.querySelectorAll('mjx-container *')].filter(e => e.localName === 'a'
            || [...e.attributes].some(a => a.localName === 'href' && !a.value.startsWith('#'))).length,
        [...document.querySelectorAll('a')].filter(a => !(a.getAttribute('href') || '#').startsWith('#')).length,
        [...document.querySelectorAll('mjx-container *')].filter(e => getComputedStyle(e).position === 'fixed'
            || /z-index|url\\(|100vw/.test(e.getAttribute('style') || '')).length,
        document.querySelectorAll('.modal, #header').length,
    ]"""
    (typeset, mathjax_links, links, placed, named), errors, requests = _feedback_page_in_chromium(
        tmp_path, markdown, inspect
    )
    assert typeset == (13 if extensions else 10), typeset
    assert (mathjax_links, links, placed, named) == (0, 0, 0, 0), (mathjax_links, links, placed, named)
    assert [url for url in requests if not url.startswith(("file:", "data:"))] == []


# ----------------------------------------------------------------------------- cell roles


def _gradebook_notebook(assignment: str):
    """The instructor notebook's cells as the gradebook records them (what InstructorCellRoles reads)."""
    nb = notebooks.read(course.notebook_path(assignment, "solutions"))
    cells = [(notebooks.cell_id(c), notebooks.nbgrader_meta(c)) for c in nb.cells if notebooks.cell_id(c)]
    kinds = {notebooks.cell_id(c): c.cell_type for c in nb.cells if notebooks.cell_id(c)}
    return SimpleNamespace(
        source_cells=[
            SimpleNamespace(name=name, locked=meta.get("locked", False), cell_type=kinds[name]) for name, meta in cells
        ],
        grade_cells=[SimpleNamespace(name=name, max_score=meta["points"]) for name, meta in cells if meta.get("grade")],
        solution_cells=[SimpleNamespace(name=name) for name, meta in cells if meta.get("solution")],
        task_cells=[],
    )


def task_attack(nb, item: str = "softmax", metadata: dict = attacks.TASK_METADATA):
    """``nb`` with its answer cell for ``item`` made an nbgrader task (or given other ``metadata``), led by
    the terminal takeover."""
    cell = next(c for c in nb.cells if notebooks.cell_id(c) == item)
    cell.source = attacks.TERMINAL_TAKEOVER + cell.source
    cell.metadata["nbgrader"].update(metadata)
    return nb


def test_a_course_page_gets_the_secret_and_time_release_feedback_reads_or_is_removed(tmp_path):
    """nbgrader release_feedback reads submission_secret.txt and timestamp.txt beside every page, and
    one page without them stops the release for the whole class: a refused submission without a
    readable secret leaves no page; one that never had a secret (not submitted through the exchange)
    keeps its page, as nbgrader's own pages would be."""
    submitted = tmp_path / "submitted" / "ann" / "a1"
    submitted.mkdir(parents=True)
    (submitted / "timestamp.txt").write_text("2030-01-01 00:00:00.000000 UTC")
    page = write_feedback_page(tmp_path, "ann", "a1", "a1", ["Your notebook was not graded."])
    assert _releasable(tmp_path, "ann", "a1", [page]) is None and page.is_file()
    (submitted / "collect_refused.txt").write_text("the submission in the exchange holds a symbolic link (x)\n")
    note = _releasable(tmp_path, "ann", "a1", [page])
    assert "no feedback page released" in note and not page.exists()
    (submitted / "submission_secret.txt").write_text("0f" * 64)
    page = write_feedback_page(tmp_path, "ann", "a1", "a1", ["Your submission was refused."])
    assert _releasable(tmp_path, "ann", "a1", [page]) is None and page.is_file()
    assert (page.parent / "submission_secret.txt").read_text() == "0f" * 64
    assert (page.parent / "timestamp.txt").read_text() == "2030-01-01 00:00:00.000000 UTC"


def test_a_submissions_cells_get_the_instructors_roles_and_the_same_program():
    roles = instructor_metadata(_gradebook_notebook(A))
    source = Source.load(A)
    nb = task_attack(fill(A))
    with pytest.raises(ValidationError, match="Task cells have to be markdown"):  # what nbgrader refused
        MetadataValidator().validate_nb(copy.deepcopy(nb))
    own = new_code_cell("extra = 1")
    own.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": False, "schema_version": 3}  # no grade_id
    odd = new_code_cell("other = 2")
    odd.metadata["nbgrader"] = "not even a dict"
    renamed = new_code_cell("third = 3")
    renamed.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False, "grade_id": "my_own"}
    nb.cells += [own, renamed]
    before = student_program(source, nb)
    nb.cells.append(odd)
    assert give_instructor_roles(nb, roles) == 4  # the task, and the three cells of the student's own
    MetadataValidator().validate_nb(nb)  # nbgrader accepts it now
    assert student_program(source, new_notebook(cells=nb.cells[:-1])) == before  # the grader runs the same
    for cell in (own, odd, renamed):
        assert "nbgrader" not in cell.metadata
    graded = {notebooks.cell_id(c): notebooks.nbgrader_meta(c) for c in nb.cells if notebooks.cell_id(c)}
    assert graded["softmax"] == roles["softmax"] and graded["softmax"]["task"] is False
    assert graded["test_softmax_values"]["points"] == 2 and graded["test_softmax_values"]["locked"]


def test_a_released_notebook_keeps_its_roles():
    roles = instructor_metadata(_gradebook_notebook(A))
    nb = fill(A)
    kinds = [(notebooks.cell_id(c), notebooks.is_test(c), notebooks.is_solution(c)) for c in nb.cells]
    assert give_instructor_roles(nb, roles) == 0  # no cell's role changed
    assert [(notebooks.cell_id(c), notebooks.is_test(c), notebooks.is_solution(c)) for c in nb.cells] == kinds
    MetadataValidator().validate_nb(nb)


# ----------------------------------------------------------------------------- markdown in the feedback


def test_long_markdown_is_cut_with_a_note_and_the_notebook_announced(tmp_path, monkeypatch):
    progress = tmp_path / "progress.jsonl"
    monkeypatch.setenv(FEEDBACK_PROGRESS, str(progress))
    nb = new_notebook(
        cells=[
            new_markdown_cell("short and right"),
            new_markdown_cell(attacks.BRACKET_BOMB),
            new_code_cell("x = 1"),
            new_markdown_cell("also short"),
        ]
    )
    limit = LimitMarkdown(max_cell_chars=1000, max_total_chars=5000)
    nb, _ = limit.preprocess(nb, {"nbgrader": {"student": "bob", "notebook": A}})
    sources = [c.source for c in nb.cells]
    assert sources[0] == CUT_NOTE.format(count=1, cell=1000, total=5000)
    assert sources[1] == "short and right" and sources[2] == "[" * 1000
    assert sources[3].startswith("*[The grader cut the cell above: it holds 150,000 characters")
    assert sources[4:] == ["x = 1", "also short"]
    assert [json.loads(line) for line in progress.read_text().splitlines()] == [
        {"student": "bob", "notebook": A, "cut": 1}
    ]
    honest, _ = LimitMarkdown().preprocess(fill(A), {"nbgrader": {"student": "alice", "notebook": A}})
    assert honest.cells == fill(A).cells  # a released notebook is shown whole
    assert json.loads(progress.read_text().splitlines()[-1]) == {"student": "alice", "notebook": A, "cut": 0}


def test_strip_files_prefix_gives_nbconverts_output():
    import random

    atoms = ["[", "]", "(", ")", "!", "/", "files/", "](files/", "](/files/", "\n", "a", "src=", 'href="', "'", " "]
    rng = random.Random(12)
    for _ in range(50_000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 24)))
        assert strip_files_prefix(text) == nbconvert_strip_files_prefix(text), text
    page = '<img src="files/a.png"> [see](files/b.png) ![fig](/files/c.png) [keep](other/d.png)'
    assert strip_files_prefix(page) == '<img src="a.png"> [see](b.png) ![fig](c.png) [keep](other/d.png)'


def test_strip_files_prefix_takes_linear_time():
    """1.5 MB of "[" (nbconvert's own filter: hours) and as many links on one line, in well under a second each."""
    for text in ("<p>" + "[" * 1_500_000 + "</p>", "[a](files/b) " * 120_000):
        started = time.monotonic()
        strip_files_prefix(text)
        assert time.monotonic() - started < 2.0


# ----------------------------------------------------------------------------- `make grade`, end to end


@dataclass
class MakeGrade:
    """A run of `make grade`: its exit status, its output and when each phase started (seconds)."""

    returncode: int
    stdout: str
    stderr: str
    phases: dict[int, float] = field(default_factory=dict)
    seconds: float = 0.0

    def phase_seconds(self, number: int) -> float:
        return self.phases[number + 1] - self.phases[number]

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


PHASE = re.compile(r"^\[(\d)/6\] ")
# The grader's own replay of a known mistake (reference code, in the grader) on a wrong answer may warn.
# make grade's line per student in phases 3 and 4: what it did with their notebooks and why (grading/saved)
STUDENT_LINE = re.compile(r"^  [\w.@+-]+: (graded: |saved report used: |the score given by hand to )")
OWN_WARNING = re.compile(rf"^<{A}/\w+, a known mistake>:\d+: \w*Warning: ")


def make_grade(course_folder: Path, *args: str) -> MakeGrade:
    """``python -m autograder.cli.grade`` on ``course_folder`` (a term before chapter 2's release), as `make
    grade` runs it; each phase's start timed from its output."""
    env = {**run_nbgrader.environment(), "RELEASED": "ch01_bahdanau"}
    env.pop("EDITION", None)
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "autograder.cli.grade", A, "--root", str(course_folder), "--jobs", "2", *args],
        cwd=COURSE_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    run = MakeGrade(0, "", "")
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(process.stdout.read()), daemon=True)
    reader.start()
    err = []
    for raw in process.stderr:
        line = raw.decode("utf-8", "surrogateescape")
        err.append(line)
        if match := PHASE.match(line):
            run.phases[int(match.group(1))] = time.monotonic() - started
    run.returncode = process.wait(timeout=1200)
    reader.join()
    run.seconds = run.phases[7] = time.monotonic() - started
    run.stdout, run.stderr = out[0].decode("utf-8", "surrogateescape"), "".join(err)
    return run


def assert_nothing_reaches_the_terminal_unfiltered(run: MakeGrade) -> None:
    """No control character or escape in what `make grade` printed (tqdm's carriage returns aside), and
    every line of stderr is the grader's own (a phase, the progress bar) or nbgrader's, prefixed."""
    without_bar = re.sub(r"\r(?=grading ch02_scaled_dot_product: )", "", run.output)
    assert not TERMINAL_CONTROL.search(without_bar), TERMINAL_CONTROL.findall(without_bar)[:10]
    assert not BIDI.search(run.output)
    for line in run.stderr.splitlines():
        line = line.split("\r")[-1]
        ours = PHASE.match(line) or OWN_WARNING.match(line) or STUDENT_LINE.match(line)
        ours = ours or line.startswith(("grading ch02", run_nbgrader.PREFIX))
        assert line == "" or ours, line
    for forged in attacks.FORGED_LINES:
        for line in run.output.replace("\r", "\n").splitlines():
            assert not line.lstrip().startswith(forged), line


def csv_rows(course_folder: Path) -> dict[str, dict]:
    with (course_folder / "grades" / f"{A}.csv").open() as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def summary_line(run: MakeGrade, student: str) -> str:
    return next(line for line in run.stdout.splitlines() if line.startswith(f"{student} "))


def feedback(course_folder: Path, student: str) -> str:
    return (course_folder / "feedback" / student / A / f"{A}.html").read_text()


def unreadable(course_folder: Path, student: str) -> None:
    folder = course_folder / "submitted" / student / A
    folder.mkdir(parents=True)
    (folder / f"{A}.ipynb").write_text('{"cells": [ not json at all \x1b]0;owned\x07')


needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")


# An honest mistake that raises: the values multiplied by the transpose of v (torch's error names the shapes).
SDPA_SHAPE_ERROR = """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v.transpose(-2, -1), weights
"""


@pytest.fixture(scope="module")
def protected(tmp_path_factory):
    """A class graded with the course's configuration."""
    folder = make_course(tmp_path_factory.mktemp("protected"))
    submit(folder, "alice", A, fill(A))
    submit(folder, "bob_zeros", A, copy.deepcopy(ZEROS))  # wrong answers: must lose points
    submit(folder, "mallory_task", A, task_attack(fill(A)))
    submit(folder, "mallory_schema", A, task_attack(fill(A), "attention_numpy", attacks.NEWER_SCHEMA))
    bomb = fill(A)
    bomb.cells.insert(1, new_markdown_cell(attacks.BRACKET_BOMB))
    submit(folder, "mallory_brackets", A, bomb)
    recorder = {"softmax": attacks.RECORDED_INPUTS, "scaled_dot_product_attention": SDPA_SHAPE_ERROR}
    submit(folder, "mallory_recorder", A, fill(A, recorder))
    unreadable(folder, "broken_json")
    return folder, make_grade(folder)


@pytest.mark.slow
@needs_bwrap
def test_a_task_cell_full_of_escapes_is_graded_as_the_sandbox_graded_it(protected):
    """Hole 12: the cells' roles are the instructor's, so nbgrader accepts the notebooks (a task cell, an
    unknown schema version); the escapes and forged lines reach no terminal, and the attackers get what
    their answers earn (full marks here, as honest alice, where wrong answers lose points)."""
    folder, run = protected
    assert run.returncode == 0, run.stderr[-3000:]
    assert_nothing_reaches_the_terminal_unfiltered(run)
    rows = csv_rows(folder)
    assert rows["alice"]["score"] == rows["mallory_task"]["score"] == str(FULL), rows["mallory_task"]
    assert float(rows["bob_zeros"]["score"]) < FULL
    assert "refused" not in rows["mallory_task"]["note"]
    assert "all tests passed" in summary_line(run, "mallory_task")
    # A schema version nbgrader does not know stopped its autograde for the class: mallory_task, after it, is graded.
    assert rows["mallory_schema"]["score"] == str(FULL) and "all tests passed" in summary_line(run, "mallory_schema")
    assert (folder / "autograded" / "mallory_task" / A / f"{A}.ipynb").is_file()
    assert "test_softmax_values" in feedback(folder, "mallory_task")


@pytest.mark.slow
@needs_bwrap
def test_a_notebook_nbgrader_refuses_is_reported_refused_with_its_reason(protected):
    """A notebook nbgrader cannot read scores 0 as refused, with nbgrader's reason, in the summary, the CSV and
    a feedback page of the course's (never a silent 0 with every test failed)."""
    folder, run = protected
    row = csv_rows(folder)["broken_json"]
    assert row["score"] == "0.0" and "refused by nbgrader: " in row["note"] and "NotJSONError" in row["note"]
    assert all(row[test] == "" for test in row if test.startswith("test_")), row  # no test "failed"
    line = summary_line(run, "broken_json")
    assert "refused by nbgrader: " in line and "test_softmax_values" not in line
    page = feedback(folder, "broken_json")
    assert "refused it (NotJSONError)" in page and "owned" not in page and "\x1b" not in page


@pytest.mark.slow
@needs_bwrap
def test_a_markdown_cell_of_brackets_leaves_the_feedback_phase_fast(protected):
    """Hole 13: 150,000 "[" in a markdown cell held `generate_feedback` for 151 to 310 s; now the phase takes
    seconds, that student's feedback says the cell was cut, and the others' feedback is as usual."""
    folder, run = protected
    assert run.phase_seconds(5) < 60, run.phases
    page = feedback(folder, "mallory_brackets")
    assert "Note from the grader:" in page and "The grader cut the cell above: it holds 150,000 characters" in page
    assert "[" * 20_001 not in page
    assert "cut" in csv_rows(folder)["mallory_brackets"]["note"]
    assert csv_rows(folder)["mallory_brackets"]["score"] == str(FULL)
    for student in ("alice", "bob_zeros", "mallory_task", "mallory_schema"):
        page = feedback(folder, student)
        assert "Note from the grader" not in page and "test_sdpa_values" in page, student


@pytest.mark.slow
@needs_bwrap
def test_a_students_error_is_quoted_to_its_first_line_so_it_carries_no_hidden_input(protected):
    """softmax records its inputs and, from its tenth call on, raises an error that prints them all: each failed
    check quotes its first line, cut to 200 characters with a note, so neither the feedback page nor the CSV and
    the summary hold a number of the hidden checks' inputs. An honest error (a shape mistake in
    scaled_dot_product_attention) is quoted whole, with the check's hint."""
    folder, run = protected
    page = " ".join(feedback(folder, "mallory_recorder").split())  # its lines as wrapped, joined
    hidden = [
        specs.materialize([spec], {}, seed)[0][0]
        for spec, seed in ((specs.array(7), 1), (specs.array(2, 3, 4), 2), (specs.array(4, 6, scale=10.0), 3))
    ]
    numbers = {repr(float(number)) for value in hidden for number in np.ravel(value)}
    assert len(numbers) == 7 + 24 + 24
    csv_text = (folder / "grades" / f"{A}.csv").read_text()
    for shown in (page, csv_text, run.stdout):
        assert [number for number in numbers if number in shown] == []
    quoted = page.split("it raised ValueError: ")[1:]
    assert len(quoted) == 3  # softmax's three test cells
    for error in quoted:
        assert error.startswith("recorded #1=[1.0, 2.0, 3.0]") and " [the rest of its message is not shown]" in error
        assert len(error.split(" [the rest of its message is not shown]")[0]) <= 200 - len("ValueError: "), error
    honest = "it raised RuntimeError: Expected size for first two dimensions of batch2 tensor to be: [2, 7] but got"
    assert f"{honest}: [2, 6]. hint: output is (..., Lq, dv)" in page
    assert float(csv_rows(folder)["mallory_recorder"]["score"]) < FULL


# What plain nbgrader does: cells keep the roles a student wrote, nbconvert's own filter, no markdown cut.
NBGRADERS_OWN = """
c.Autograde.sanitize_preprocessors = [
    p for p in c.Autograde.sanitize_preprocessors if not p.endswith("InstructorCellRoles")
]
c.HTMLExporter.filters = {"strip_files_prefix": "nbconvert.filters.strip_files_prefix"}
c.LimitMarkdown.max_cell_chars = 10**9
c.LimitMarkdown.max_total_chars = 10**9
"""
FEEDBACK_LIMIT = 10


@pytest.fixture(scope="module")
def unprotected(tmp_path_factory):
    """A class graded with nbgrader's own behaviour put back, and a feedback limit of FEEDBACK_LIMIT s."""
    folder = make_course(tmp_path_factory.mktemp("unprotected"))
    with (folder / "nbgrader_config.py").open("a") as f:
        f.write(NBGRADERS_OWN)
    submit(folder, "alice", A, fill(A))
    submit(folder, "mallory_task", A, task_attack(fill(A)))
    bomb = fill(A)
    bomb.cells.insert(1, new_markdown_cell(attacks.BRACKET_BOMB))
    submit(folder, "mallory_brackets", A, bomb)
    submit(folder, "zed", A, copy.deepcopy(ZEROS))  # after the slow one: the class goes on
    return folder, make_grade(folder, "--feedback-seconds", str(FEEDBACK_LIMIT))


@pytest.mark.slow
@needs_bwrap
def test_nbgraders_refusal_of_a_task_cell_is_filtered_and_reported(unprotected):
    """Hole 12, the attack is real: nbgrader refuses the notebook and its log quotes the cell. What reaches
    the terminal is filtered and prefixed, and the student is reported refused with nbgrader's reason
    (and the sandbox's score), never a silent 0 with every test failed."""
    folder, run = unprotected
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Task cells have to be markdown" in run.stderr  # nbgrader did quote the cell
    quoted = [line for line in run.stderr.splitlines() if "all submissions graded" in line]
    assert quoted and all(line.startswith(run_nbgrader.PREFIX) for line in quoted), quoted
    assert_nothing_reaches_the_terminal_unfiltered(run)
    row = csv_rows(folder)["mallory_task"]
    assert row["score"] == "0.0" and "refused by nbgrader: " in row["note"] and "ValidationError" in row["note"]
    assert f"the sandboxed grader's report gave {FULL:g} / {FULL:g}" in row["note"]
    assert "refused by nbgrader: " in summary_line(run, "mallory_task")
    page = feedback(folder, "mallory_task")
    assert "refused it (ValidationError)" in page and "Your score for" in page and "owned" not in page


@pytest.mark.slow
@needs_bwrap
def test_feedback_that_takes_too_long_is_stopped_and_the_class_goes_on(unprotected):
    """Hole 13 with nbconvert's quadratic filter: the slow notebook is stopped at the limit, its student's
    feedback is a page saying so, and the students after it get their feedback as usual."""
    folder, run = unprotected
    assert run.phase_seconds(5) < FEEDBACK_LIMIT + 60, run.phases  # unbounded, it takes minutes
    page = feedback(folder, "mallory_brackets")
    assert f"took more than {FEEDBACK_LIMIT:g} s, so it was stopped" in page and "[[[" not in page
    assert "Your score for" in page
    note = csv_rows(folder)["mallory_brackets"]["note"]
    assert f"not written: it took over {FEEDBACK_LIMIT:g} s and was stopped" in note
    assert csv_rows(folder)["mallory_brackets"]["score"] == str(FULL)
    for student in ("alice", "zed"):
        assert "test_sdpa_values" in feedback(folder, student) and "stopped" not in feedback(folder, student)
    assert float(csv_rows(folder)["zed"]["score"]) < FULL


# ----------------------------------------------------------------------------- nothing answered, or misnamed

WARNING_FREE_SOFTMAX = """
def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
"""


def test_a_notebook_answers_nothing_while_its_code_is_as_released():
    """Blank lines, an emptied answer cell or a deleted one answer nothing; one answer cell written in, or a
    cell of the student's own with code, does."""
    source, released = Source.load(A), notebooks.read(COURSE_ROOT / course.exercise_path(A))
    assert unanswered(source, fill(A, blank=True), released)
    assert not unanswered(source, fill(A), released)
    answer = fill(A, blank=True)
    cells = [cell for cell in answer.cells if notebooks.is_solution(cell)]
    cells[0].source, cells[1].source = "\n" + cells[0].source + "\n\n", ""
    answer.cells.remove(cells[2])
    assert unanswered(source, answer, released)
    assert not unanswered(source, fill(A, {"softmax": WARNING_FREE_SOFTMAX}, blank=True), released)
    own = fill(A, blank=True)
    own.cells.append(new_code_cell(WARNING_FREE_SOFTMAX))
    assert not unanswered(source, own, released)


def test_a_submission_without_the_notebooks_name_is_refused_with_what_to_rename():
    """What was found and what it must be named, the names cleaned and at most three of them; a notebook of
    the right name beside others is graded."""
    assert misnamed([A], [f"{A}.ipynb", "Untitled.ipynb"]) is None
    found = f"missing {A}.ipynb, the only name grading reads; the submission holds my_ch02.ipynb instead"
    assert misnamed([A], ["my_ch02.ipynb"]) == f"{found}: rename it {A}.ipynb"
    several = misnamed([A], ["a.ipynb", "b\x1b]0;owned\x07.ipynb", "c.ipynb", "d.ipynb"])
    assert "holds 4 other notebooks instead (a.ipynb, b.ipynb, c.ipynb and 1 more)" in several
    assert several.endswith(f"rename it {A}.ipynb") and not TERMINAL_CONTROL.search(several)
    assert misnamed([A], []) == f"missing {A}.ipynb: the submission holds no notebook; submit {A}.ipynb"


ESCAPED_NAME = "Copy \x1b]0;owned\x07of ch02.ipynb"


@pytest.fixture(scope="module")
def misfiled(tmp_path_factory):
    """A class graded with the course's configuration: a notebook as released, one renamed, two copies under
    other names (one of them named with a terminal escape), and a right one beside a copy."""
    folder = make_course(tmp_path_factory.mktemp("misfiled"))
    submit(folder, "blank", A, fill(A, blank=True))
    renamed = submit(folder, "renamed", A, fill(A))
    renamed.rename(renamed.with_name("my_ch02.ipynb"))
    copied = submit(folder, "copies", A, fill(A))
    shutil.copy(copied, copied.with_name(ESCAPED_NAME))
    copied.rename(copied.with_name(f"{A} (1).ipynb"))
    beside = submit(folder, "beside", A, fill(A))
    shutil.copy(beside, beside.with_name("Untitled.ipynb"))
    return folder, make_grade(folder)


@pytest.mark.slow
@needs_bwrap
def test_a_notebook_that_answers_nothing_says_so_in_the_csv_and_the_summary(misfiled):
    """Its row keeps every test's column (each 0) and says why in the note; its summary line says "nothing
    answered" instead of listing every test."""
    folder, run = misfiled
    assert run.returncode == 0, run.stderr[-3000:]
    rows = csv_rows(folder)
    tests = [gid for gid, _, _ in Source.load(A).tests]
    written = ["explain_saturated_attention"]  # graded by hand: an answer left as released scores 0
    assert list(rows["blank"]) == ["student", "score", "max_score", *tests, *written, "note"]
    assert rows["blank"]["score"] == "0.0" and all(rows["blank"][gid] == "0.0" for gid in tests)
    assert rows["blank"]["note"].startswith(f"nothing answered: {A}.ipynb is as released"), rows["blank"]
    line = summary_line(run, "blank")
    assert "nothing answered" in line and "test_softmax_values" not in line, line
    assert "nothing answered" not in rows["beside"]["note"]


@pytest.mark.slow
@needs_bwrap
def test_a_misnamed_notebook_is_refused_in_one_line_with_a_page_that_says_what_to_rename(misfiled):
    """No nbgrader traceback (it told the instructor to run generate_assignment); the summary says what was
    found and what it must be named, and so does the student's feedback page; the file names are cleaned."""
    folder, run = misfiled
    assert "Traceback" not in run.output and "generate_assignment" not in run.output, run.stderr[-3000:]
    assert_nothing_reaches_the_terminal_unfiltered(run)
    rows = csv_rows(folder)
    one = f"refused: missing {A}.ipynb, the only name grading reads; the submission holds my_ch02.ipynb instead"
    assert one in summary_line(run, "renamed") and f"rename it {A}.ipynb" in summary_line(run, "renamed")
    assert rows["renamed"]["score"] == "0.0" and rows["renamed"]["note"].startswith(one)
    copies = summary_line(run, "copies")
    assert f"holds 2 other notebooks instead (Copy of ch02.ipynb, {A} (1).ipynb)" in copies, copies
    for student in ("renamed", "copies"):
        page = feedback(folder, student)
        assert "Your submission was refused: missing" in page and f"rename it {A}.ipynb" in page, page
        assert "Submit again" in page and "\x1b" not in page


@pytest.mark.slow
@needs_bwrap
def test_a_notebook_beside_the_right_one_is_named_and_the_right_one_graded(misfiled):
    folder, run = misfiled
    row = csv_rows(folder)["beside"]
    assert row["score"] == str(FULL) and f"ignored Untitled.ipynb: grading reads {A}.ipynb only" in row["note"]
