"""No build plumbing on a reader's page (issue 69): the code cells that a reader sees hand no value to the text,
redirect no stream, and assert nothing that only guards the build.

What a reader sees of a page's code: every code cell but those tagged ``remove-cell`` or ``remove-input`` (a cell
tagged ``hide-input`` is folded, and one click shows it; a Colab cell tagged ``skip-execution`` is shown and not run).
In those cells:

- no ``glue(...)`` call (myst-nb's, which hands a value to the text): it goes in a cell tagged ``remove-cell``, which
  still runs in the build;
- no ``redirect_stdout`` or ``redirect_stderr``: a helper that keeps a program's printing aside is defined in a hidden
  cell, and the text says what it does;
- no import of ``myst_nb`` or of a private module (a dotted name with a part that begins with ``_``, such as
  ``torch.utils._pytree``), no ``__file__`` (a path of the machine that builds the book: the course's records are
  read with ``attention_course.records.measured``), and no line that prints how long the page took to build
  (``this chapter ran in``);
- no ``assert`` that only guards the build. An assert that a reader sees must teach, by a simple rule: it carries a
  message written for the reader (a string or an f-string), or it checks that two computations agree, each of its
  ``and``-ed parts an equality (``==``, ``is``; ``torch.equal``, ``allclose``, ``isclose``, ``array_equal``,
  ``assert_close``) or a difference below a tolerance written as a number of at most ``1e-3`` (``gap < 1e-5``).
  A range that a measured figure must fall in (``rate > 0.5``), a count the text quotes, a record's arguments: those
  go in a hidden cell.

The rule is read off the pages' MyST sources here (the unit tier, every page of the book), and off the built HTML
pages by ``tests/test_book.py`` (``test_no_built_page_shows_build_plumbing``, where the book is built); both apply
:func:`plumbing` to the code a reader sees.
"""

from __future__ import annotations

import ast
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attention_course.tooling.notebooks import COURSE_ROOT
from tests.support.myst import HEADER
from tests.test_book import code_cells

PAGES = sorted((COURSE_ROOT / "book").glob("*.md"))
# An assert's difference below a tolerance: the tolerance, a number written in the code, at most this.
TOLERANCE = 1e-3
# The calls that check that two computations agree.
AGREEMENT = {"equal", "allclose", "isclose", "array_equal", "assert_close"}
REDIRECTIONS = {"redirect_stdout", "redirect_stderr"}
BUILD_TIME = re.compile(r"chapter ran in", re.I)
# The same rule on a cell that is not Python, as text.
TEXT = re.compile(
    r"\bglue\(|\bredirect_std(out|err)\b|^\s*assert\b|\bmyst_nb\b|\b__file__\b|chapter ran in"
    r"|^\s*(from|import)\s+[\w.]*\b_[a-z]"
)


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _small_number(node: ast.AST) -> bool:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return False
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= TOLERANCE


def agreement(test: ast.expr) -> bool:
    """Whether an assert's condition checks that computations agree (see the module's rule)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(agreement(part) for part in test.values)
    if isinstance(test, ast.Call):
        return _name(test.func) in AGREEMENT
    if isinstance(test, ast.Compare):
        if all(isinstance(op, (ast.Eq, ast.Is)) for op in test.ops):
            return True
        return len(test.ops) == 1 and isinstance(test.ops[0], (ast.Lt, ast.LtE)) and _small_number(test.comparators[0])
    return False


def teaches(statement: ast.Assert) -> bool:
    """Whether an assert is written for the reader: a message in words, or a check that computations agree."""
    message = statement.msg
    worded = isinstance(message, ast.JoinedStr) or (
        isinstance(message, ast.Constant) and isinstance(message.value, str)
    )
    return worded or agreement(statement.test)


def _private(module: str | None) -> bool:
    return module is not None and any(part.startswith("_") for part in module.split(".") if part != "__future__")


def _build_import(node: ast.AST) -> bool:
    """An import of myst_nb (the build's glue) or of a private module."""
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "myst_nb" or _private(alias.name) for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "myst_nb" or _private(node.module)
    return False


def _build_time(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and BUILD_TIME.search(node.value) is not None


def plumbing(code: str) -> list[str]:
    """The build's plumbing in the code of a cell a reader sees: each line (its first) that glues, redirects a
    stream, asserts without teaching, imports the build's or a private module, names ``__file__`` or prints the
    page's build time. A line of IPython's (``%magic``, ``!command``) is left out; code that is
    not Python even then is searched as text."""
    lines = code.splitlines()
    try:
        tree = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines))
    except SyntaxError:
        return [line.strip() for line in lines if TEXT.search(line)]
    found = []
    for node in ast.walk(tree):
        flagged = (
            (isinstance(node, ast.Call) and _name(node.func) == "glue")
            or (isinstance(node, (ast.Name, ast.Attribute)) and _name(node) in REDIRECTIONS)
            or (isinstance(node, ast.alias) and node.name in REDIRECTIONS)
            or (isinstance(node, ast.Assert) and not teaches(node))
            or _build_import(node)
            or (isinstance(node, (ast.Name, ast.Attribute)) and _name(node) == "__file__")
            or _build_time(node)
        )
        if flagged:
            found.append((node.lineno, lines[node.lineno - 1].strip()))
    return [line for _, line in sorted(found)]


def source_cells(text: str) -> list[tuple[int, str]]:
    """(line, code) of each code cell of a MyST page that a reader sees: not tagged remove-cell or remove-input."""
    return [
        (cell.line, "\n".join(line for _, line in cell.code))
        for cell in code_cells(text)
        if not re.search(r"\bremove-(cell|input)\b", cell.options)
    ]


CELL_INPUT = re.compile(
    r'<div class="cell_input[^"]*">\s*<div class="highlight-[^"]*"><div class="highlight"><pre>(.*?)</pre>', re.S
)


def html_cells(page: str) -> list[str]:
    """The code of each code cell that a built page shows (myst-nb's ``cell_input``; folded or not)."""
    return [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in CELL_INPUT.findall(page)]


def shown_plumbing_in_source(path: Path) -> list[str]:
    return [
        f"{path.relative_to(COURSE_ROOT)}:{line}: {found}"
        for line, code in source_cells(path.read_text())
        for found in plumbing(code)
    ]


def shown_plumbing_in_html(path: Path, root: Path) -> list[str]:
    return [f"{path.relative_to(root)}: {found}" for code in html_cells(path.read_text()) for found in plumbing(code)]


def test_the_book_has_pages_and_each_shows_code():
    assert len(PAGES) >= 15, [page.name for page in PAGES]
    assert sum(bool(source_cells(page.read_text())) for page in PAGES) >= 11  # the chapters


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_no_page_shows_build_plumbing(page):
    found = shown_plumbing_in_source(page)
    assert not found, "build plumbing in cells a reader sees (hide it: tag the cell remove-cell):\n" + "\n".join(found)


TEACHING = """\
from __future__ import annotations
from attention_course.records import measured
import torch.utils.checkpoint
print(f"trained in {seconds:.1f} s")
assert torch.allclose(ours, theirs, atol=1e-6)
assert gap < 1e-5 and torch.equal(a, b)
assert counted == formula
assert rate > 0.5, "more than half of the guesses are accepted"
assert rate > 0.5, f"accepted {rate:.0%}"
"""
PLUMBING = [
    'glue("ch00_rate", rate, display=False)',
    "myst_nb.glue('x', 1)",
    "with contextlib.redirect_stdout(io.StringIO()):\n    main()",
    "from contextlib import redirect_stderr",
    "assert rate > 0.5",
    "assert 0.5 < rate < 0.9",
    "assert gap < 0.1",  # a figure's range, not a tolerance
    "assert not torch.allclose(a, b)",
    "assert torch.equal(a, b) and rate > 0.5",
    "assert rate > 0.5, (rate, name)",
    "for name in names:\n    glue(name, 1, display=False)",
    "assert x > 0\n!ls",  # IPython's line left out
    "from myst_nb import glue",
    "import myst_nb",
    "from torch.utils._python_dispatch import TorchDispatchMode",
    "import torch.utils._pytree as pytree",
    "from torch._dynamo import config",
    "REPOSITORY = Path(attention_course.__file__).resolve().parent.parent",
    'print(f"this chapter ran in {time.perf_counter() - start:.0f} s")',
    'print("this chapter ran in", seconds)',
]


def test_the_rule_passes_teaching_checks_and_flags_each_kind_of_plumbing():
    assert plumbing(TEACHING) == []
    for code in PLUMBING:
        assert plumbing(code), code
    assert plumbing("%%time\nassert torch.equal(a, b)\nglue('a', 1)") == ["glue('a', 1)"]
    assert plumbing("not python at all: glue(x)") == ["not python at all: glue(x)"]
    assert plumbing("from torch.utils._pytree import x: not python") == [
        "from torch.utils._pytree import x: not python"
    ]
    assert plumbing("not python at all: print(__file__)") == ["not python at all: print(__file__)"]


def page_of(*cells: tuple[str, str]) -> str:
    """A MyST page of code cells, each (tags, code)."""
    body = "".join(
        f"\n```{{code-cell}} ipython3\n{f':tags: [{tags}]' + chr(10) if tags else ''}{code}\n```\n"
        for tags, code in cells
    )
    return f"# A page\n{body}"


def test_a_page_with_a_visible_glue_call_fails_and_the_same_call_hidden_passes(tmp_path):
    glued = 'x = 1\nglue("x", x, display=False)'
    shown = tmp_path / "shown.md"
    shown.write_text(page_of(("", glued), ("hide-input", "y = 2")))
    hidden = tmp_path / "hidden.md"
    hidden.write_text(page_of(("", "x = 1"), ("remove-cell", 'glue("x", x, display=False)')))
    folded = tmp_path / "folded.md"
    folded.write_text(page_of(("hide-input", glued)))  # folded code is still shown
    no_input = tmp_path / "no_input.md"
    no_input.write_text(page_of(("remove-input", glued)))
    assert [found.split(": ", 1)[1] for found in shown_plumbing_in_source_at(shown, tmp_path)] == [
        'glue("x", x, display=False)'
    ]
    assert shown_plumbing_in_source_at(folded, tmp_path)
    assert shown_plumbing_in_source_at(hidden, tmp_path) == []
    assert shown_plumbing_in_source_at(no_input, tmp_path) == []


def shown_plumbing_in_source_at(path: Path, root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{line}: {found}"
        for line, code in source_cells(path.read_text())
        for found in plumbing(code)
    ]


@pytest.mark.slow
def test_a_built_page_with_a_visible_glue_call_fails_the_html_check(tmp_path):
    """A two-page book built by jupyter-book: the page that shows a glue call, an assert that guards the build and
    a redirection is flagged, each line; the page with the same cells hidden (and a teaching assert shown) is not."""
    (tmp_path / "_config.yml").write_text("title: Plumbing\nonly_build_toc_files: true\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: shown\n  - file: hidden\n")
    (tmp_path / "intro.md").write_text("# Plumbing\n\nNo code here.\n")
    setup = "import contextlib, io\nfrom myst_nb import glue\nx = 1"
    glued = 'glue("x", x, display=False)\nassert x > 0'
    redirected = "with contextlib.redirect_stdout(io.StringIO()):\n    print(x)"
    (tmp_path / "shown.md").write_text(
        HEADER + page_of(("remove-cell", setup), ("", glued), ("hide-input", redirected)) + "\n{glue:text}`x`\n"
    )
    (tmp_path / "hidden.md").write_text(
        HEADER
        + page_of(
            ("remove-cell", setup.replace('"x"', '"y"')),
            ("remove-cell", glued.replace('"x"', '"y"')),
            ("remove-input", redirected),
            ("", "assert x == 1"),
        )
        + "\n{glue:text}`y`\n"
    )
    jupyter_book = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    build = subprocess.run(
        [jupyter_book, "build", "-W", "-n", "--keep-going", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    site = tmp_path / "_build" / "html"
    assert len(html_cells((site / "hidden.html").read_text())) == 1  # the teaching assert, shown
    assert shown_plumbing_in_html(site / "hidden.html", site) == []
    assert [found.split(": ", 1)[1] for found in shown_plumbing_in_html(site / "shown.html", site)] == [
        'glue("x", x, display=False)',
        "assert x > 0",
        "with contextlib.redirect_stdout(io.StringIO()):",
    ]
