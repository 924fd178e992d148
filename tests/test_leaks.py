"""The leak check (course_site.leaks, `python -m course_site.leaks DIR`): it finds solutions/
files, nbgrader markers, hidden-test lines in every edition, and the code of the reference solutions
that the term's release settings do not release, renamed and laid out anew; it reports nothing
where students' own material and honest code are concerned. The book is not built here."""

from __future__ import annotations

import ast
import html
import json
import re
import shutil
from pathlib import Path

import nbformat
import pygments
import pytest
from myst_nb.core.read import read_myst_markdown_notebook
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from attention_course.tooling import notebooks
from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.release import course, packages, reference
from autograder.release.course import Release
from autograder.similarity import clones
from course_site import export, leaks
from course_site.leaks import cache, index, targets

ROOT = COURSE_ROOT
SOLUTION = ROOT / "solutions" / "ch02_scaled_dot_product" / "ch02_scaled_dot_product.ipynb"
ASSIGNMENTS = course.assignments(ROOT)

# ch03 and ch04 not released: their reference solutions are secrets.
TERM = Release("term", {"ch01_bahdanau"})
STUDENTS = course.Repository("https://github.com/a-university/attention-2026", "week-1")  # the term's students'
PUBLISHED = export.published_tests(TERM, COURSE_ROOT)  # what the export of TERM ships of solutions/
# The same chapters released, in the term edition and in the open one.
RELEASED = [
    Release("term", {"ch01_bahdanau", "ch02_scaled_dot_product", "ch03_multi_head", "ch04_masking"}),
    Release("term", {"ch03_multi_head", "ch04_masking"}),
    Release("open"),
]
EVERY_EDITION = [Release("open"), Release("term"), TERM, Release("term", set(ASSIGNMENTS))]


# --- material -------------------------------------------------------------------------------------

# MultiHeadAttention of ch03 and decoder_self_attention_mask of ch04 as a student might republish
# them: every local name changed, other line breaks and spacing, comments removed, docstrings
# changed. The names that the graded items' interfaces fix (attributes, the course's functions)
# stay, as they must for the code to pass the tests.
RENAMED_MHA = '''
class MHA(nn.Module):
    """Several attention heads side by side."""

    def __init__(self, dim, n_heads, use_bias=True):
        super().__init__()
        if dim % n_heads != 0:
            raise ValueError("bad head count")
        self.num_heads = n_heads
        self.W_q = nn.Linear(dim, dim, bias=use_bias)
        self.W_k = nn.Linear(dim, dim, bias=use_bias)
        self.W_v = nn.Linear(dim, dim, bias=use_bias)
        self.W_o = nn.Linear(dim, dim, bias=use_bias)

    def forward(self, qry, kys, vals, m=None):
        Q = split_heads(self.W_q(qry),
                        self.num_heads)
        K = split_heads(self.W_k(kys), self.num_heads)
        V = split_heads(
            self.W_v(vals), self.num_heads
        )
        s = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
        if m is not None:
            s = s.masked_fill(~m, float('-inf'))
        attn = torch.softmax(s, dim=-1)
        if m is not None:
            attn = attn.masked_fill(~m, 0.0)
        out = self.W_o(merge_heads(attn @ V))
        return out, attn
'''
RENAMED_FORWARD = RENAMED_MHA[RENAMED_MHA.index("    def forward") :]

RENAMED_MASK = """
def make_decoder_mask(ids, pad):
    '''Look-ahead and padding, combined.'''
    lookahead = causal_mask(ids.size(1), device=ids.device)
    not_pad = padding_mask(ids, pad)
    return (lookahead[None, None, :, :]
            & not_pad[:, None, None, :])
"""

# Honest code: the same items written differently.
EINSUM_MHA = """
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        assert d_model % num_heads == 0, "heads must divide the width"
        self.h, self.d = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        b, lq, _ = query.shape
        lk = key.shape[1]
        q = self.q_proj(query).reshape(b, lq, self.h, self.d)
        k = self.k_proj(key).reshape(b, lk, self.h, self.d)
        v = self.v_proj(value).reshape(b, lk, self.h, self.d)
        logits = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.d ** -0.5
        if mask is not None:
            logits = torch.where(mask, logits, torch.finfo(logits.dtype).min)
        probs = logits.softmax(-1)
        ctx = torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, lq, -1)
        return self.o_proj(ctx), probs
"""

LOOP_MHA = """
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be a multiple of num_heads")
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        heads, maps = [], []
        q_all, k_all, v_all = self.W_q(query), self.W_k(key), self.W_v(value)
        for h in range(self.num_heads):
            part = slice(h * self.d_head, (h + 1) * self.d_head)
            head_mask = None if mask is None else mask[:, 0]
            out, w = scaled_dot_product_attention(q_all[..., part], k_all[..., part], v_all[..., part], head_mask)
            heads.append(out)
            maps.append(w)
        return self.W_o(torch.cat(heads, dim=-1)), torch.stack(maps, dim=1)
"""

HONEST_MASK = """
def decoder_self_attention_mask(tgt, pad_id):
    length = tgt.shape[1]
    future = torch.triu(torch.ones(length, length, dtype=torch.bool, device=tgt.device), diagonal=1)
    keep = (tgt != pad_id).unsqueeze(1).unsqueeze(2)
    return ~future.unsqueeze(0).unsqueeze(0) & keep
"""


def _cell(assignment: str, item: str) -> str:
    nb = notebooks.read(course.notebook_path(assignment, "solutions", ROOT))
    return next(cell.source for cell in nb.cells if notebooks.cell_id(cell) == item)


def _regions(assignment: str, item: str) -> list[str]:
    return [r.code for r in leaks.solution_regions(ROOT) if r.assignment == assignment and r.item == item]


def _local_names(code: str) -> set[str]:
    """The names that a piece of code binds: arguments, assignments, loop variables."""
    tree = ast.parse(code if not code.startswith(" ") else "if True:\n" + code)
    names = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names - {"self"}


def _secret_lines_of(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines() if len(line.strip()) >= 12]


def highlighted_page(code: str) -> str:
    """``code`` in a page as the built book shows it: Pygments puts each token in a span and escapes it."""
    block = pygments.highlight(code, PythonLexer(), HtmlFormatter())
    return (
        f"<!DOCTYPE html><html><head><title>Notes</title></head><body><main><h1>My notes</h1>"
        f'<p>Here&#39;s how I did it.</p><div class="highlight-ipython3 notranslate">{block}</div>'
        "</main></body></html>\n"
    )


def notebook_text(code: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells += [nbformat.v4.new_markdown_cell("My take on the exercise; it's short."), nbformat.v4.new_code_cell(code)]
    return nbformat.writes(nb)


def search_index(code: str) -> str:
    """A search index like Sphinx's searchindex.js, holding ``code`` in one of its strings."""
    return (
        "Search.setIndex("
        + json.dumps(
            {
                "docnames": ["book/intro", "book/notes"],
                "titles": ["Intro", "Notes"],
                "terms": {"attention": [0, 1]},
                "texts": ["Intro", code],
            }
        )
        + ")"
    )


FORMS = {
    "page.html": highlighted_page,
    "notes.ipynb": notebook_text,
    "notes.py": lambda code: code,
    "searchindex.js": search_index,
}


def plant(folder: Path, code: str) -> Path:
    """``code`` in every form a published file takes (FORMS), in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, render in FORMS.items():
        (folder / name).write_text(render(code))
    return folder


def _code_problems(report, assignments=None) -> list:
    return [p for p in report.problems if p.share is not None and (assignments is None or p.assignment in assignments)]


# --- the plants are what the task says ------------------------------------------------------------


def test_the_plants_are_renamed_and_laid_out_anew():
    for assignment, item, planted in (
        ("ch03_multi_head", "MultiHeadAttention", RENAMED_MHA),
        ("ch04_masking", "decoder_self_attention_mask", RENAMED_MASK),
    ):
        reference = _local_names(_cell(assignment, item))
        assert len(reference) >= 4
        assert not reference & _local_names(planted), "every local name is changed"
        assert "#" not in planted
        planted_lines = {line.strip() for line in planted.splitlines()}
        for region in _regions(assignment, item):
            assert not set(_secret_lines_of(region)) & planted_lines, "no line is left as it was"


# --- the normalized comparison ---------------------------------------------------------------------


def test_normalizer_ignores_names_comments_strings_and_layout():
    normalizer = clones.Normalizer()
    a = normalizer.code("scores = q @ k.transpose(-2, -1)  # (B, H, L, L)\nw = torch.softmax(scores, dim=-1)\n")
    b = normalizer.code('''s=Q @ K.transpose(
    -2,-1)
"""A docstring, which is dropped."""
attn = torch.softmax(s,
                     dim = -1,)''')
    assert a == b == normalizer.code("x = y @ z.transpose(-2, -1)\nv = t.softmax(x, dim=-1)")
    # Attribute names, keyword arguments and keywords are kept.
    assert normalizer.code("x.transpose(1)") != normalizer.code("x.view(1)")
    assert normalizer.code("f(x, dim=1)") != normalizer.code("f(x, axis=1)")
    assert normalizer.code("x is None") != normalizer.code("x is True")
    # Code in comments and strings is normalized too, as a form of its own.
    outside, inside = normalizer.views('# q = a.masked_fill(~m, 0.0)\ns = "w = b.masked_fill(~n, 0.0)"')
    assert outside == normalizer.code("s =")
    assert inside == normalizer.code("q = a.masked_fill(~m, 0.0)\nw = b.masked_fill(~n, 0.0)")


# --- unreleased solutions are found, renamed and reformatted --------------------------------------


@pytest.mark.parametrize("name", sorted(FORMS))
@pytest.mark.parametrize(
    "assignment, item, planted",
    [
        ("ch03_multi_head", "MultiHeadAttention", RENAMED_MHA),
        ("ch03_multi_head", "MultiHeadAttention", RENAMED_FORWARD),
        ("ch04_masking", "decoder_self_attention_mask", RENAMED_MASK),
    ],
    ids=["MultiHeadAttention", "MultiHeadAttention.forward", "decoder_self_attention_mask"],
)
def test_a_renamed_reformatted_solution_of_an_unreleased_chapter_is_found(tmp_path, name, assignment, item, planted):
    folder = plant(tmp_path / "site", planted)
    for other in set(FORMS) - {name}:
        (folder / other).unlink()
    report = leaks.scan(folder, ROOT, TERM)
    found = [p for p in _code_problems(report) if p.path == name and p.assignment == assignment and p.item == item]
    assert found, [str(p) for p in report.problems]
    assert found[0].share >= index.THRESHOLD
    assert f"{found[0].share:.0%} of the code of a reference solution of solutions/{assignment}/" in str(found[0])
    for problem in report.problems:  # the secret itself is never reported
        assert not any(
            line in str(problem) for region in _regions(assignment, item) for line in _secret_lines_of(region)
        )


def test_the_highlighted_page_really_splits_the_code_into_spans():
    page = highlighted_page(RENAMED_FORWARD)
    assert '<span class="n">masked_fill</span>' in page and '<span class="o">~</span>' in page
    assert "masked_fill(~m" not in page  # only the text of the page holds the code


def test_a_solution_kept_in_a_comment_or_a_string_is_found(tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    commented = "\n".join("# " + line for line in RENAMED_FORWARD.splitlines())
    (folder / "old.py").write_text(f"x = 1\n{commented}\n")
    (folder / "quoted.py").write_text(f'SNIPPET = """{RENAMED_FORWARD}"""\n')
    report = leaks.scan(folder, ROOT, TERM)
    assert {(p.path, p.item) for p in _code_problems(report, {"ch03_multi_head"})} == {
        ("old.py", "MultiHeadAttention"),
        ("quoted.py", "MultiHeadAttention"),
    }


COPIED_CAUSAL = "def lower(n, dev=None):\n    return torch.ones(n, n,\n        dtype=torch.bool, device=dev).tril()\n"
OWN_CAUSAL = (
    "def lower(n, dev=None):\n    positions = torch.arange(n, device=dev)\n"
    "    return positions[:, None] >= positions[None, :]\n"
)


def test_a_one_line_solution_is_found_and_an_honest_one_is_not(tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "copied.py").write_text(COPIED_CAUSAL)
    (folder / "own.py").write_text(OWN_CAUSAL)
    assert [(p.path, p.item) for p in _code_problems(leaks.scan(folder, ROOT, TERM))] == [("copied.py", "causal_mask")]


def test_a_region_with_few_own_shingles_is_compared_whole(monkeypatch):
    monkeypatch.setattr(index, "MIN_SHINGLES", 10**6)  # every region is compared whole
    found = leaks.Secrets(ROOT, TERM)
    assert found.code.fingerprints and all(f.whole for f in found.code.fingerprints) and not found.code.wanted

    def items(code):
        return [(region.item, share) for region, share in found.find(found.forms([code])[0])]

    assert items(COPIED_CAUSAL) == [("causal_mask", 1.0)]
    assert items(OWN_CAUSAL) == [] and items(HONEST_MASK) == []


def test_the_report_says_which_regions_are_too_short_to_tell():
    report = leaks.scan(ROOT / "exercises", ROOT, TERM)
    assert "ch04_masking/padding_mask" in report.unchecked  # `return tokens != pad_id`
    assert "ch03_multi_head/MultiHeadAttention" not in report.unchecked and report.regions >= 15
    assert "too short or too public" in leaks.summary(report) + _printed(report)


def _printed(report) -> str:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        leaks.print_report(report)
    return out.getvalue() + err.getvalue()


# --- released solutions are not secrets -------------------------------------------------------------


@pytest.mark.parametrize("release", RELEASED, ids=lambda r: r.key)
def test_the_same_plant_is_not_reported_once_its_chapter_is_released(tmp_path, release):
    folder = plant(tmp_path / "site", RENAMED_MHA + RENAMED_MASK)
    assert _code_problems(leaks.scan(folder, ROOT, TERM), {"ch03_multi_head"})
    report = leaks.scan(folder, ROOT, release)
    assert report.ok, [str(p) for p in report.problems]


def test_released_assignments_have_no_secret_solution_lines():
    kinds = {(s.notebook.split("/")[1], s.kind) for s in leaks.secret_lines(ROOT, TERM)}
    assert ("ch01_bahdanau", "reference-solution") not in kinds
    assert ("ch01_bahdanau", "hidden-test") in kinds and ("ch03_multi_head", "reference-solution") in kinds
    assert {kind for _, kind in {(s.notebook, s.kind) for s in leaks.secret_lines(ROOT, Release("open"))}} == {
        "hidden-test"
    }


# --- no false positives -------------------------------------------------------------------------------


def _direct_hits(folder: Path, release: Release) -> list[tuple[str, str, float]]:
    """Every file's code compared with the secrets, copies of public sources included."""
    found = leaks.secrets(ROOT, release)
    hits = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        views = leaks.text_views(path.read_text(errors="replace"), path.suffix.lower())
        hits += [(str(path.relative_to(folder)), r.item, share) for r, share in found.find(found.forms(views)[0])]
    return hits


def test_no_false_positive_on_the_exercises_and_the_students_packages(tmp_path):
    folder = tmp_path / "student"
    packages.write(folder, TERM)
    shutil.copytree(
        ROOT / "exercises", folder / "exercises", ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    )
    report = leaks.scan(folder, ROOT, TERM)
    assert report.ok, [str(p) for p in report.problems]
    assert report.files > 30 and report.regions > 15
    assert _direct_hits(folder, TERM) == []


def test_the_book_pages_sources_hold_no_unreleased_solution():
    """The term site's check of a built page, on the page's source in seconds: a chapter's own code can
    come to hold half of an earlier chapter's answer (chapter 11's precision recipe once held half of
    chapter 2's), which the built term site would refuse only after the book's build."""
    found = leaks.secrets(ROOT, TERM)
    hits = []
    for page in sorted((ROOT / "book").glob("*.md")):
        cells = read_myst_markdown_notebook(page.read_text()).cells
        shown = "\n\n".join(cell.source for cell in cells if not _withheld_in(cell, TERM))
        hits += [(page.name, r.item, share) for r, share in found.find(found.forms(leaks.text_views(shown, ".md"))[0])]
    assert hits == []


def _withheld_in(cell, release: Release) -> bool:
    """Whether the term site shows ``cell`` with its code withheld: tagged for an unreleased chapter."""
    tags = cell.metadata.get("tags", [])
    return any(tag.startswith("solution-") and not release.is_released(tag.removeprefix("solution-")) for tag in tags)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_no_false_positive_on_honest_code(tmp_path, name):
    folder = plant(tmp_path / "site", EINSUM_MHA + LOOP_MHA + HONEST_MASK)
    for other in set(FORMS) - {name}:
        (folder / other).unlink()
    for release in (TERM, Release("term")):
        report = leaks.scan(folder, ROOT, release)
        assert report.ok, [str(p) for p in report.problems]


# --- hidden tests and markers, in every edition --------------------------------------------------------


@pytest.fixture(scope="module")
def hidden_line() -> tuple[str, str]:
    """A line of a hidden-test region of a real solutions notebook that no public source shows,
    with quotes in it (so that a notebook escapes it), and its cell's grade_id."""
    secrets = {s.text for s in leaks.secret_lines(ROOT, Release("open"))}
    nb = nbformat.read(str(SOLUTION), as_version=4)
    for cell in nb.cells:
        match = re.search(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S)
        for line in match.group(1).splitlines() if match else []:
            line = line.strip()
            if line in secrets and '"' in line:
                return line, cell.metadata["nbgrader"]["grade_id"]
    raise AssertionError(f"no hidden-test line with quotes in {SOLUTION}")


def _highlighted(code: str) -> str:
    """``code`` as Pygments shows it in a built page: each token in a span, HTML-escaped."""
    tokens = re.findall(r"\w+|\s+|[^\w\s]", code)
    return "".join(tok if tok.isspace() else f'<span class="n">{html.escape(tok)}</span>' for tok in tokens)


@pytest.mark.parametrize("release", EVERY_EDITION, ids=lambda r: r.key)
def test_hidden_test_lines_and_markers_are_found_in_every_edition(tmp_path, hidden_line, release):
    line, cell = hidden_line
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "page.html").write_text(f"<pre>{_highlighted(line)}</pre>")
    (folder / "notes.md").write_text("### BEGIN HIDDEN TESTS\n")
    problems = [str(p) for p in leaks.scan(folder, ROOT, release).problems]
    assert any(p.startswith("page.html: ") and "hidden-test line" in p and cell in p for p in problems), problems
    assert "notes.md: line 1: holds the nbgrader marker 'BEGIN HIDDEN TESTS'" in problems
    assert all(line not in p for p in problems)


def test_the_line_prefilter_never_hides_a_line(hidden_line):
    # A text that holds a secret line holds the words the prefilter asks for.
    line, _ = hidden_line
    found = leaks.secrets(ROOT, Release("open"))
    for text, suffix in (
        (f"x{line}y", ".py"),
        (json.dumps({"a": f"prefix {line}"}), ".json"),
        (f"<p>{html.escape(line)}</p>", ".html"),
    ):
        views = leaks.text_views(text, suffix)
        assert any(line in view for view in views)
        assert targets.inner_words(line) <= found.forms(views)[1]


# --- the checks on a student export ----------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("leaks") / "student"
    files, report = export.student_repo(dest, TERM, ROOT, STUDENTS)
    assert report.ok and files
    return dest


@pytest.fixture
def copy(exported, tmp_path) -> Path:
    """A copy of the export, to plant things in."""
    folder = Path(shutil.copytree(exported, tmp_path / "copy", symlinks=True))
    (folder / "book").mkdir()
    return folder


def _problems(directory: Path, release: Release | None = None) -> list[str]:
    return [str(problem) for problem in leaks.scan(directory, ROOT, release, published=PUBLISHED).problems]


def test_check_passes_on_the_export(exported):
    report = leaks.scan(exported, ROOT, TERM, published=PUBLISHED)
    assert report.ok, report.problems
    assert report.has_solutions and report.secrets > 50 and report.notebooks >= 6 and report.regions > 10


def test_what_students_get_is_public_and_never_reported():
    # The exercises and the students' packages share lines with the reference solutions (the
    # stubs' signatures, a released chapter's module): those are never secret.
    for release in (Release("open"), TERM):
        public = "\n".join(
            view
            for rel, text in leaks.public_sources(ROOT, release)
            for view in leaks.text_views(text, Path(rel).suffix.lower())
        )
        assert all(secret.text not in public for secret in leaks.secret_lines(ROOT, release))
    sources = {rel for rel, _ in leaks.public_sources(ROOT, TERM)}
    assert not any(rel.startswith(("book/", "course_site/", "solutions/", "tests/")) for rel in sources)
    assert "attention_course/solutions/ch01_bahdanau.py" in sources
    assert "attention_course/models/transformer.py" not in sources  # it builds on unreleased chapters


def test_check_names_a_missing_dir(tmp_path):
    with pytest.raises(leaks.PublishError, match="DIR .* does not exist"):
        leaks.scan(tmp_path / "nowhere", ROOT)


@pytest.mark.parametrize("highlight", [False, True], ids=["plain", "highlighted"])
def test_check_fails_on_a_hidden_test_line_in_html(copy, hidden_line, highlight, capsys):
    line, cell = hidden_line
    shown = _highlighted(line) if highlight else html.escape(line)
    (copy / "book" / "leak.html").write_text(f"<html><body><pre>{shown}</pre></body></html>\n")
    problems = _problems(copy)
    assert any(
        p.startswith("book/leak.html: ") and "hidden-test line" in p and SOLUTION.name in p and cell in p
        for p in problems
    ), problems
    # The command line fails too, and never prints the secret itself.
    assert leaks.main([str(copy), "--released", "ch01_bahdanau"]) == 1
    out = capsys.readouterr()
    assert "book/leak.html" in out.err and line not in out.out + out.err


def test_check_fails_on_a_hidden_test_line_in_a_notebook(copy, hidden_line):
    line, cell = hidden_line
    path = copy / "exercises" / "ch02_scaled_dot_product" / "ch02_scaled_dot_product.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"# an extra check\n{line}\n"))
    nbformat.write(nb, str(path))
    assert line not in path.read_text()  # the notebook escapes its quotes: the check decodes them
    problems = _problems(copy)
    assert any(
        p.startswith("exercises/ch02_scaled_dot_product/ch02_scaled_dot_product.ipynb: ")
        and "hidden-test line" in p
        and cell in p
        for p in problems
    ), problems
    assert all(line not in p for p in problems)


def test_check_fails_on_a_solutions_notebook(copy):
    (copy / "solutions" / "ch02_scaled_dot_product").mkdir(parents=True)
    shutil.copy(SOLUTION, copy / "solutions" / "ch02_scaled_dot_product" / SOLUTION.name)
    shutil.copy(SOLUTION, copy / "exercises" / "ch02_scaled_dot_product" / "answers.ipynb")
    problems = _problems(copy)
    inside = [p for p in problems if p.startswith("solutions/ch02_scaled_dot_product/")]
    renamed = [p for p in problems if p.startswith("exercises/ch02_scaled_dot_product/answers.ipynb: ")]
    for found in (inside, renamed):
        assert any("a copy of solutions/ch02_scaled_dot_product/" in p for p in found), problems
        assert any("marker 'BEGIN HIDDEN TESTS'" in p for p in found), problems
        assert any("hidden-test lines" in p for p in found), problems
    assert any("a file from a solutions/ folder" in p for p in inside)
    # The package that holds the released reference modules is not such a folder.
    assert not any(p.startswith("attention_course/solutions/") for p in problems)


def test_check_fails_on_the_marker_alone(copy):
    (copy / "book" / "notes.md").write_text("### BEGIN HIDDEN TESTS\n")
    assert _problems(copy) == ["book/notes.md: line 1: holds the nbgrader marker 'BEGIN HIDDEN TESTS'"]


def test_markers_are_allowed_only_in_the_files_that_explain_them(copy):
    # attention_course/tooling/notebooks.py explains the markers, and the export's copy is the repository's: allowed.
    explained = copy / "attention_course" / "tooling" / "notebooks.py"
    assert "### BEGIN SOLUTION" in explained.read_text() and leaks.scan(copy, ROOT, TERM, published=PUBLISHED).ok
    # Once it differs from the repository's, it is checked like any other file.
    explained.write_text(explained.read_text() + "\n# extra\n")
    assert any(p.startswith("attention_course/tooling/notebooks.py: ") and "marker" in p for p in _problems(copy, TERM))


def test_the_instructor_guide_page_may_show_the_markers_and_no_other_page(tmp_path):
    site = tmp_path / "html"
    (site / "book").mkdir(parents=True)
    guide = (ROOT / "book" / "instructor_guide.md").read_text()
    assert "### BEGIN HIDDEN TESTS" in guide
    (site / "book" / "instructor_guide.html").write_text(f"<pre>{html.escape(guide)}</pre>")
    (site / "book" / "ch02_scaled_dot_product.html").write_text("<pre>### BEGIN SOLUTION</pre>")
    report = leaks.scan(site, ROOT, Release("open"))
    assert [str(p) for p in report.problems] == [
        "book/ch02_scaled_dot_product.html: line 1: holds the nbgrader marker 'BEGIN SOLUTION'"
    ]
    assert report.marker_exempt == ["book/instructor_guide.html"]


def test_check_in_a_repository_without_solutions_still_finds_markers(tmp_path):
    # A student repository before any release (no solutions/) checks a folder of its own: markers only.
    bare = tmp_path / "bare"
    export.write(bare, Release("term"), ROOT, STUDENTS)
    assert not (bare / "solutions").exists()
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.md").write_text("### BEGIN SOLUTION\n")
    report = leaks.scan(folder, bare)
    assert not report.has_solutions and report.secrets == 0 and report.regions == 0
    assert [str(p) for p in report.problems] == ["notes.md: line 1: holds the nbgrader marker 'BEGIN SOLUTION'"]


# --- the command line follows the release settings -----------------------------------------------------


def test_command_line_follows_the_release_settings(tmp_path, monkeypatch, capsys):
    folder = plant(tmp_path / "site", RENAMED_MHA)
    monkeypatch.delenv("EDITION", raising=False)
    monkeypatch.delenv("RELEASED", raising=False)
    assert leaks.main([str(folder), "--released", "ch01_bahdanau"]) == 1
    out = capsys.readouterr()
    assert "ch03_multi_head.ipynb, cell MultiHeadAttention" in out.err
    assert "solutions released for ch01_bahdanau" in out.out
    secret = [line for region in _regions("ch03_multi_head", "MultiHeadAttention") for line in _secret_lines_of(region)]
    assert secret and not any(line in out.out + out.err for line in secret)

    assert leaks.main([str(folder), "--edition", "open"]) == 0
    monkeypatch.setenv("RELEASED", "ch01_bahdanau ch03_multi_head")
    assert leaks.main([str(folder)]) == 0
    monkeypatch.setenv("RELEASED", "ch01_bahdanau")
    assert leaks.main([str(folder)]) == 1
    capsys.readouterr()
    assert leaks.main([str(folder), "--released", "ch99_nothing"]) == 2
    assert "not an assignment" in capsys.readouterr().err


# --- a large site ------------------------------------------------------------------------------------


@pytest.mark.slow  # a site of 4 MB, read whole: half a minute
def test_a_site_of_a_hundred_pages_of_public_code_is_clean(tmp_path):
    """Highlighted public code on every page and a large search index: nothing reported, every file read."""
    site = tmp_path / "html"
    (site / "book").mkdir(parents=True)
    sources = [ROOT / rel for rel in packages.allowed(TERM) if rel.endswith(".py")]
    # (not the modules that name nbgrader's markers: on a page of the site, a marker is a problem)
    sources = [path for path in sources if not any(marker in path.read_text() for marker in leaks.MARKERS)]
    blocks = [pygments.highlight((path.read_text()), PythonLexer(), HtmlFormatter()) for path in sources[:12]]
    nav = "".join(f'<li><a href="book/page{i}.html">Page {i} &amp; more</a></li>' for i in range(100))
    for i in range(100):
        code = blocks[i % len(blocks)] + blocks[(i + 5) % len(blocks)]
        (site / "book" / f"page{i}.html").write_text(
            f"<!DOCTYPE html><html><head><title>Page {i}</title></head><body><nav><ul>{nav}</ul></nav>"
            f"<main><p>Prose of page {i}, with an apostrophe: it's here.</p>{code}</main></body></html>"
        )
    words = sorted(set(re.findall(r"[A-Za-z_]{3,}", "".join(path.read_text() for path in sources))))
    terms = {f"{word}{n}": [n % 100, (n * 7) % 100] for n in range(40) for word in words}
    (site / "searchindex.js").write_text(
        "Search.setIndex(" + json.dumps({"docnames": [f"book/page{i}" for i in range(100)], "terms": terms}) + ")"
    )
    size = sum(p.stat().st_size for p in site.rglob("*"))
    assert size > 4_000_000

    report = leaks.scan(site, ROOT, TERM)
    assert report.ok and report.files == 101, [str(p) for p in report.problems]


def test_the_export_ships_a_released_chapters_notebook_as_it_is_and_nothing_else_of_solutions(copy):
    """The instructor notebook of a released chapter is shipped for make check, its Colab cell the students';
    changed elsewhere (its Colab cell too), or an unreleased one, it is a problem like any other file of
    solutions/."""
    assert _problems(copy, TERM) == []
    shipped = copy / "solutions" / "ch01_bahdanau" / "ch01_bahdanau.ipynb"
    as_exported = shipped.read_text()
    nb = nbformat.reads(as_exported, as_version=4)  # its Colab cell is the students' repository's ...
    nb.cells[0].source += "\n# a line that no set-up cell holds"  # ... and nothing else may differ there
    nbformat.write(nb, str(shipped))
    assert any(p.startswith("solutions/ch01_bahdanau/ch01_bahdanau.ipynb: ") for p in _problems(copy, TERM))
    shipped.write_text(as_exported.replace("BEGIN HIDDEN TESTS", "BEGIN HIDDEN TESTS ", 1))
    assert any(p.startswith("solutions/ch01_bahdanau/ch01_bahdanau.ipynb: ") for p in _problems(copy, TERM))
    with pytest.raises(leaks.PublishError, match="not the instructor notebook of a released assignment"):
        leaks.scan(copy, ROOT, TERM, published=export.published_tests(Release("term", {"ch02_scaled_dot_product"})))


def test_the_leak_check_skips_a_virtual_environment_inside_the_folder(copy):
    """`make venv` in the students' repository puts .venv inside it: never published, never read."""
    venv = copy / ".venv" / "lib"
    venv.mkdir(parents=True)
    (copy / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "notes.md").write_text("### BEGIN SOLUTION\n")
    assert _problems(copy, TERM) == []
    (copy / ".venv" / "pyvenv.cfg").unlink()  # a folder that only looks like one is read
    assert any(p.startswith(".venv/lib/notes.md: ") for p in _problems(copy, TERM))


def test_a_package_modules_docstring_that_quotes_an_answer_is_found_though_the_module_is_public(
    exported, tmp_path, monkeypatch
):
    """A module students get is a public source, so what it shows counts as public everywhere: its own
    docstrings and comments are checked against what the *other* public sources leave secret. A docstring
    quoting an unreleased answer line, or an unreleased item's code, is reported; the module's code is not."""
    quote = "return tgt[:, :-1], tgt[:, 1:]"
    assert quote in (ROOT / "solutions/ch04_masking/ch04_masking.ipynb").read_text()
    mha = reference.item_source("ch03_multi_head", "MultiHeadAttention")
    planted = {
        "autograder/quoting.py": f'"""Two students who answered only ``{quote}`` share 55 tokens."""\n',
        "autograder/example.py": '"""An example:\n\n' + mha.replace("\\", "\\\\") + '\n"""\n',
    }
    real = leaks.public_sources

    def with_planted(root=ROOT, release=None):
        return real(root, release) + list(planted.items())

    monkeypatch.setattr(targets, "public_sources", with_planted)
    monkeypatch.setattr(cache, "_CACHE", {})
    folder = Path(shutil.copytree(exported, tmp_path / "copy"))
    for rel, text in planted.items():
        (folder / rel).write_text(text)
    problems = [str(p) for p in leaks.scan(folder, ROOT, TERM, published=PUBLISHED).problems]
    assert any(p.startswith("autograder/quoting.py: ") and "solutions/ch04_masking" in p for p in problems), problems
    assert any(p.startswith("autograder/example.py: ") and "ch03_multi_head" in p for p in problems), problems
    assert all(p.startswith(("autograder/quoting.py", "autograder/example.py")) for p in problems), problems
    # What a module's own docstrings are checked against is made once per course and release, then reused.
    again = [str(p) for p in leaks.scan(folder, ROOT, TERM, published=PUBLISHED).problems]
    assert again == problems
    found = leaks.secrets(ROOT, TERM)
    assert found.without("autograder/quoting.py") is found.without("autograder/quoting.py") is not None
    assert len(found.without("autograder/quoting.py").line_words) == len(found.without("autograder/quoting.py").lines)
