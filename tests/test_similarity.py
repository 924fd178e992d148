"""`make similarity`: copydetect over the graded answer cells finds planted copies, and only those.

A class of ch03_multi_head (and a smaller one of ch02_scaled_dot_product) is written into a course
folder in tmp_path: two independent, correct solutions written differently; a classmate's copy of
one of them, renamed and reformatted; a renamed and reformatted copy of the published solutions;
blank submissions; an unreadable notebook; a student with a second notebook. Nothing is graded.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
from pathlib import Path

import pytest

from attention_course.tooling import notebooks
from autograder.cli import similarity as similarity_cli
from autograder.grading.classroom import fill, make_course, released, submit
from autograder.similarity import report as similarity
from autograder.similarity import written

MHA = "ch03_multi_head"
SDPA = "ch02_scaled_dot_product"

# Two honest solutions of ch03, written independently. Alice: a head at a time, slices and
# stack/cat, a loop over the heads. Carol: unflatten/movedim, and the heads batched with einsum.
ALICE = {
    "split_heads": '''def split_heads(x, num_heads):
    """(B, L, D) -> (B, H, L, D // H); head h holds features h*dh:(h+1)*dh of every position."""
    n_batch, n_pos, n_feat = x.shape
    if n_feat % num_heads:
        raise ValueError("num_heads=%d does not divide %d features" % (num_heads, n_feat))
    per_head = n_feat // num_heads
    pieces = [x[:, :, h * per_head:(h + 1) * per_head] for h in range(num_heads)]
    return torch.stack(pieces, dim=1)
''',
    "merge_heads": '''def merge_heads(x):
    """(B, H, L, dh) -> (B, L, H * dh), the inverse of split_heads."""
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)
''',
    "MultiHeadAttention": '''class MultiHeadAttention(nn.Module):
    """num_heads scaled dot-product attentions in parallel, each on d_model // num_heads features."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("num_heads=%d does not divide d_model=%d" % (num_heads, d_model))
        self.heads = num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        qs = split_heads(self.W_q(query), self.heads)
        ks = split_heads(self.W_k(key), self.heads)
        vs = split_heads(self.W_v(value), self.heads)
        batch, _, n_q, d_head = qs.shape
        n_k = ks.shape[2]
        if mask is not None:
            mask = torch.broadcast_to(mask, (batch, self.heads, n_q, n_k))
        outs, probs = [], []
        for h in range(self.heads):
            s = torch.matmul(qs[:, h], ks[:, h].transpose(1, 2)) * d_head ** -0.5
            if mask is not None:
                s = torch.where(mask[:, h], s, torch.full_like(s, -float("inf")))
            p = F.softmax(s, dim=-1)
            if mask is not None:
                p = torch.where(mask[:, h], p, torch.zeros_like(p))
            outs.append(torch.matmul(p, vs[:, h]))
            probs.append(p)
        return self.W_o(merge_heads(torch.stack(outs, dim=1))), torch.stack(probs, dim=1)
''',
}

CAROL = {
    "split_heads": '''def split_heads(x, num_heads):
    """(B, L, D) -> (B, H, L, D // H); head h holds features h*dh:(h+1)*dh of every position."""
    size = x.size(-1)
    if size % num_heads != 0:
        raise ValueError(f"cannot cut {size} features into num_heads={num_heads} equal parts")
    return x.unflatten(-1, (num_heads, -1)).movedim(-2, 1)
''',
    "merge_heads": '''def merge_heads(x):
    """(B, H, L, dh) -> (B, L, H * dh), the inverse of split_heads."""
    return x.movedim(1, -2).flatten(start_dim=-2)
''',
    "MultiHeadAttention": '''class MultiHeadAttention(nn.Module):
    """num_heads scaled dot-product attentions in parallel, each on d_model // num_heads features."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        for name in ("W_q", "W_k", "W_v", "W_o"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))

    def forward(self, query, key, value, mask=None):
        B, Lq, D = query.shape
        Lk = key.shape[1]
        q = self.W_q(query).reshape(B, Lq, self.num_heads, self.d_head)
        k = self.W_k(key).reshape(B, Lk, self.num_heads, self.d_head)
        v = self.W_v(value).reshape(B, Lk, self.num_heads, self.d_head)
        logits = torch.einsum("bqhd,bkhd->bhqk", q, k) / self.d_head ** 0.5
        if mask is not None:
            logits = logits.masked_fill(mask.logical_not(), -math.inf)
        attn = torch.nan_to_num(logits.softmax(dim=-1), nan=0.0)
        context = torch.einsum("bhqk,bkhd->bqhd", attn, v).reshape(B, Lq, D)
        return self.W_o(context), attn
''',
}

# Bob hands in Alice's work with every variable renamed, other messages and another layout.
BOB_COPIES_ALICE = {
    "split_heads": '''def split_heads(x, num_heads):
    """(B, L, D) -> (B, H, L, D // H); head h holds features h*dh:(h+1)*dh of every position."""
    b, l, d = x.shape
    if d % num_heads:
        raise ValueError('num_heads=%d must divide %d' % (num_heads, d))
    dh = d // num_heads
    chunks = [
        x[:, :, i * dh:(i + 1) * dh]
        for i in range(num_heads)
    ]
    return torch.stack(chunks, dim=1)
''',
    "merge_heads": '''def merge_heads(x):
    """(B, H, L, dh) -> (B, L, H * dh), the inverse of split_heads."""
    return torch.cat(
        [x[:, i] for i in range(x.shape[1])],
        dim=-1,
    )
''',
    "MultiHeadAttention": '''class MultiHeadAttention(nn.Module):
    """num_heads scaled dot-product attentions in parallel, each on d_model // num_heads features."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError('num_heads=%d must divide d_model=%d' % (num_heads, d_model))
        self.n = num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (
            nn.Linear(d_model, d_model, bias=bias) for _ in range(4)
        )

    def forward(self, query, key, value, mask=None):
        Q = split_heads(self.W_q(query), self.n)
        K = split_heads(self.W_k(key), self.n)
        V = split_heads(self.W_v(value), self.n)
        bsz, _, lq, dh = Q.shape
        lk = K.shape[2]
        if mask is not None:
            mask = torch.broadcast_to(mask, (bsz, self.n, lq, lk))
        results, attn = [], []
        for i in range(self.n):
            scores = torch.matmul(Q[:, i], K[:, i].transpose(1, 2)) * dh ** -0.5
            if mask is not None:
                scores = torch.where(mask[:, i], scores, torch.full_like(scores, -float('inf')))
            w = F.softmax(scores, dim=-1)
            if mask is not None:
                w = torch.where(mask[:, i], w, torch.zeros_like(w))
            results.append(torch.matmul(w, V[:, i]))
            attn.append(w)
        out = self.W_o(merge_heads(torch.stack(results, dim=1)))
        return out, torch.stack(attn, dim=1)
''',
}

# Dave hands in the open edition's solutions, renamed and reformatted.
DAVE_COPIES_SOLUTIONS = {
    "split_heads": '''def split_heads(x, num_heads):
    """(B, L, D) -> (B, H, L, D // H); head h holds features h*dh:(h+1)*dh of every position."""
    bs, seq_len, dim = x.shape
    if dim % num_heads != 0:
        raise ValueError(
            f"can't split: num_heads={num_heads} doesn't divide {dim}"
        )
    return x.view(
        bs, seq_len, num_heads, dim // num_heads
    ).transpose(1, 2)
''',
    "merge_heads": '''def merge_heads(x):
    """(B, H, L, dh) -> (B, L, H * dh), the inverse of split_heads."""
    bs, n_heads, seq_len, head_dim = x.shape
    return x.transpose(1, 2).reshape(bs, seq_len, n_heads * head_dim)
''',
    "MultiHeadAttention": '''class MultiHeadAttention(nn.Module):
    """num_heads scaled dot-product attentions in parallel, each on d_model // num_heads features."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f'num_heads={num_heads} should divide d_model={d_model}')
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        Q = split_heads(self.W_q(query), self.num_heads)
        K = split_heads(self.W_k(key), self.num_heads)
        V = split_heads(self.W_v(value), self.num_heads)
        att = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
        if mask is not None:
            att = att.masked_fill(~mask, float('-inf'))
        p = torch.softmax(att, dim=-1)
        if mask is not None:
            p = p.masked_fill(~mask, 0.0)
        y = self.W_o(merge_heads(p @ V))
        return y, p
''',
}

# ch02: two honest solutions, a copy of the first and a copy of the published solutions.
SDPA_HONEST_1 = {
    "softmax": '''def softmax(x, axis=-1):
    """Softmax of the NumPy array `x` along `axis`, safe for large and very negative inputs."""
    z = x - x.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)
''',
    "attention_numpy": '''def attention_numpy(Q, K, V):
    """Scaled dot-product attention of queries Q (Lq, dk), keys K (Lk, dk) and values V (Lk, dv)."""
    scale = 1.0 / math.sqrt(Q.shape[1])
    w = softmax(Q.dot(K.T) * scale)
    return w.dot(V), w
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """Attention over the last two dimensions of q (..., Lq, dk), k (..., Lk, dk), v (..., Lk, dv).

    mask: None or a boolean tensor broadcastable to (..., Lq, Lk); True = may attend.
    Returns (output (..., Lq, dv), weights (..., Lq, Lk)).
    """
    scale = q.shape[-1] ** -0.5
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if mask is not None:
        s = torch.where(mask, s, torch.full_like(s, float("-inf")))
    w = torch.softmax(s, dim=-1)
    if mask is not None:
        w = torch.where(mask, w, torch.zeros_like(w))
    return torch.matmul(w, v), w
''',
}

SDPA_HONEST_2 = {
    "softmax": '''def softmax(x, axis=-1):
    """Softmax of the NumPy array `x` along `axis`, safe for large and very negative inputs."""
    m = np.amax(x, axis, keepdims=True)
    unnormalised = np.exp(x - m)
    total = unnormalised.sum(axis, keepdims=True)
    return unnormalised / total
''',
    "attention_numpy": '''def attention_numpy(Q, K, V):
    """Scaled dot-product attention of queries Q (Lq, dk), keys K (Lk, dk) and values V (Lk, dv)."""
    weights = softmax(np.matmul(Q, K.transpose()) / np.sqrt(K.shape[-1]), axis=-1)
    output = np.matmul(weights, V)
    return output, weights
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """Attention over the last two dimensions of q (..., Lq, dk), k (..., Lk, dk), v (..., Lk, dv).

    mask: None or a boolean tensor broadcastable to (..., Lq, Lk); True = may attend.
    Returns (output (..., Lq, dv), weights (..., Lq, Lk)).
    """
    d = q.shape[-1]
    logits = torch.einsum("...qd,...kd->...qk", q, k) / d ** 0.5
    if mask is None:
        weights = logits.softmax(-1)
    else:
        weights = logits.masked_fill(mask.logical_not(), -torch.inf).softmax(-1).nan_to_num(0.0)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights
''',
}

SDPA_COPY_OF_1 = {
    "softmax": '''def softmax(x, axis=-1):
    """Softmax of the NumPy array `x` along `axis`, safe for large and very negative inputs."""
    shifted = x - x.max(axis=axis, keepdims=True)
    ex = np.exp(shifted)
    return ex / ex.sum(axis=axis,
                       keepdims=True)
''',
    "attention_numpy": '''def attention_numpy(Q, K, V):
    """Scaled dot-product attention of queries Q (Lq, dk), keys K (Lk, dk) and values V (Lk, dv)."""
    factor = 1.0 / math.sqrt(Q.shape[1])
    attn = softmax(Q.dot(K.T) * factor)
    return attn.dot(V), attn
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """Attention over the last two dimensions of q (..., Lq, dk), k (..., Lk, dk), v (..., Lk, dv).

    mask: None or a boolean tensor broadcastable to (..., Lq, Lk); True = may attend.
    Returns (output (..., Lq, dv), weights (..., Lq, Lk)).
    """
    factor = q.shape[-1] ** -0.5
    scores = torch.matmul(q, k.transpose(-1, -2)) * factor
    if mask is not None:
        scores = torch.where(mask, scores,
                             torch.full_like(scores, float('-inf')))
    attn = torch.softmax(scores, dim=-1)
    if mask is not None:
        attn = torch.where(mask, attn, torch.zeros_like(attn))
    return torch.matmul(attn, v), attn
''',
}

SDPA_COPY_OF_SOLUTIONS = {
    "softmax": '''def softmax(x, axis=-1):
    """Softmax of the NumPy array `x` along `axis`, safe for large and very negative inputs."""
    y = x - np.max(x, axis=axis, keepdims=True)
    num = np.exp(y)
    return num / np.sum(num, axis=axis, keepdims=True)
''',
    "attention_numpy": '''def attention_numpy(Q, K, V):
    """Scaled dot-product attention of queries Q (Lq, dk), keys K (Lk, dk) and values V (Lk, dv)."""
    dim = K.shape[-1]
    s = Q @ K.T / np.sqrt(dim)
    a = softmax(s, axis=-1)
    return a @ V, a
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, mask=None):
    """Attention over the last two dimensions of q (..., Lq, dk), k (..., Lk, dk), v (..., Lk, dv).

    mask: None or a boolean tensor broadcastable to (..., Lq, Lk); True = may attend.
    Returns (output (..., Lq, dv), weights (..., Lq, Lk)).
    """
    dim = q.size(-1)
    s = q @ k.transpose(-2, -1) / math.sqrt(dim)
    if mask is not None:
        s = s.masked_fill(~mask, float('-inf'))
    a = torch.softmax(s, dim=-1)
    if mask is not None:
        a = a.masked_fill(~mask, 0.0)  # all-masked rows
    return a @ v, a
''',
}


def left_unanswered(assignment: str, body: str) -> dict[str, str]:
    """Every answer cell as released, with ``body`` in place of ``raise NotImplementedError()``."""
    return {
        notebooks.cell_id(cell): cell.source.replace("raise NotImplementedError()", body)
        for cell in released(assignment).cells
        if notebooks.is_solution(cell)
    }


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but the similarity reports (linked folders not followed)."""
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            relative = path.relative_to(root).as_posix()
            if not relative.startswith("grades/similarity/") and path.is_file() and not path.is_symlink():
                files[relative] = path.read_bytes()
    return files


def plant_grading_state(root: Path, assignment: str) -> None:
    """What `make grade` leaves behind: a gradebook, grades/<assignment>.csv and feedback."""
    (root / "gradebook.db").write_bytes(b"SQLite format 3\x00 not to be touched")
    (root / "grades").mkdir(exist_ok=True)
    (root / "grades" / f"{assignment}.csv").write_text("student,score,max_score,note\nalice,15.0,15.0,\n")
    feedback = root / "feedback" / "alice" / assignment
    feedback.mkdir(parents=True)
    (feedback / f"{assignment}.html").write_text("<html>15 / 15</html>")


@pytest.fixture(scope="module")
def mha(tmp_path_factory):
    """The ch03 class, compared once: (course folder, report, files before, files after)."""
    course = make_course(tmp_path_factory.mktemp("course"))
    submit(course, "alice", MHA, fill(MHA, ALICE))
    submit(course, "bob", MHA, fill(MHA, BOB_COPIES_ALICE))
    submit(course, "carol", MHA, fill(MHA, CAROL))
    submit(course, "dave", MHA, fill(MHA, DAVE_COPIES_SOLUTIONS))
    submit(course, "erin", MHA, fill(MHA, blank=True))
    submit(course, "frank", MHA, fill(MHA, blank=True))
    submit(course, "grace", MHA, fill(MHA, left_unanswered(MHA, "pass")))
    submit(course, "heidi", MHA, fill(MHA, CAROL))
    (course / "submitted" / "heidi" / MHA / f"{MHA}.ipynb").write_text('{"cells": [')  # cut off mid-upload
    # Ivan's graded notebook is blank; a draft beside it holds the published solutions.
    submit(course, "ivan", MHA, fill(MHA))
    folder = course / "submitted" / "ivan" / MHA
    (folder / f"{MHA}.ipynb").rename(folder / "draft.ipynb")
    submit(course, "ivan", MHA, fill(MHA, blank=True))
    plant_grading_state(course, MHA)
    before = snapshot(course)
    report = similarity.similarity(MHA, root=course)
    return course, report, before, snapshot(course)


def find(report, first: str, second: str):
    """The listed pair of ``first`` and ``second`` (either order), or None."""
    return next((p for p in report.pairs if {p.first, p.second} == {first, second}), None)


def flagged(report) -> set[frozenset[str]]:
    return {frozenset((p.first, p.second)) for p in report.flagged}


def test_flags_a_renamed_and_reformatted_copy_of_a_classmate(mha):
    _, report, _, _ = mha
    pair = find(report, "alice", "bob")
    assert pair is not None and pair.flagged, report.pairs
    assert pair.kind == "classmates"
    assert min(pair.first_share, pair.second_share) >= similarity.THRESHOLD
    assert pair.shared_tokens >= similarity.MIN_SHARED_TOKENS


def test_flags_a_renamed_and_reformatted_copy_of_the_published_solutions(mha):
    _, report, _, _ = mha
    published = f"solutions/{MHA}"
    pair = find(report, "dave", published)
    assert pair is not None and pair.flagged, report.pairs
    assert (pair.first, pair.second, pair.kind) == ("dave", published, "reference")
    assert pair.first_share >= similarity.THRESHOLD


def test_flags_nothing_else(mha):
    """Two honest solutions written differently, blank submissions and an ignored draft: no flag."""
    _, report, _, _ = mha
    assert flagged(report) == {frozenset(("alice", "bob")), frozenset(("dave", f"solutions/{MHA}"))}


def test_independent_honest_solutions_are_not_even_near(mha):
    _, report, _, _ = mha
    for first, second in [
        ("alice", "carol"),
        ("bob", "carol"),
        ("alice", f"solutions/{MHA}"),
        ("carol", f"solutions/{MHA}"),
        ("carol", "dave"),
    ]:
        assert find(report, first, second) is None, (first, second, report.pairs)


def test_blank_submissions_are_compared_but_never_match(mha):
    _, report, _, _ = mha
    assert report.blank == ["erin", "frank", "grace", "ivan"]
    for student in report.blank:
        assert student in report.compared
        assert not [p for p in report.pairs if student in (p.first, p.second)], student


def test_only_the_assignment_notebook_counts(mha):
    _, report, _, _ = mha
    assert "ivan" in report.blank  # the draft with the published solutions is not compared
    assert any("draft.ipynb" in note for note in report.notes["ivan"])


def test_an_unreadable_notebook_is_reported_and_skipped(mha):
    _, report, _, _ = mha
    assert "heidi" not in report.compared
    assert any(note.startswith("unreadable notebook") for note in report.notes["heidi"])
    assert "heidi" in similarity.summary(report)
    assert report.compared == ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "ivan"]


def test_writes_the_html_report_and_the_csv(mha):
    course, report, _, _ = mha
    assert report.html == course / "grades" / "similarity" / f"{MHA}.html"
    assert report.csv == course / "grades" / "similarity" / f"{MHA}.csv"
    html = report.html.read_text()
    assert "highlight-red" in html and "alice.py" in html and "bob.py" in html and "dave.py" in html
    with report.csv.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0]) == similarity.CSV_FIELDS
    assert len(rows) == len(report.pairs) + len(report.written)
    by_names = {frozenset((r["first"], r["second"])): r for r in rows if r["answer"] == similarity.CODE}
    copy = by_names[frozenset(("alice", "bob"))]
    assert copy["flagged"] == "yes" and copy["kind"] == "classmates"
    assert float(copy["first_share"]) >= similarity.THRESHOLD and int(copy["shared_tokens"]) > 0
    assert by_names[frozenset(("dave", f"solutions/{MHA}"))]["flagged"] == "yes"
    for row in rows:
        assert max(float(row["first_share"]), float(row["second_share"])) > similarity.DISPLAY_THRESHOLD
    # the compared code is kept beside the report, the stubs among the boilerplate
    work = course / "grades" / "similarity" / MHA
    assert (work / "students" / "alice.py").read_text().count("def ") == 4
    assert "raise NotImplementedError()" in (work / "stubs" / f"{MHA}.py").read_text()


def test_leaves_grades_gradebook_feedback_and_submissions_untouched(mha):
    _, _, before, after = mha
    assert f"grades/{MHA}.csv" in before and "gradebook.db" in before
    assert after == before


def test_no_submissions_is_a_clear_error(tmp_path):
    course = make_course(tmp_path / "course")
    (course / "submitted" / "alice" / "ch04_masking").mkdir(parents=True)  # another assignment only
    with pytest.raises(similarity.SimilarityError, match=f"submitted/<student>/{MHA}/"):
        similarity.similarity(MHA, root=course)
    assert not (course / "grades").exists()
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        assert similarity_cli.main([MHA, "--root", str(course)]) == 1
    assert f"submitted/<student>/{MHA}/" in stderr.getvalue()


def test_only_unreadable_notebooks_is_a_clear_error(tmp_path):
    course = make_course(tmp_path / "course")
    folder = course / "submitted" / "alice" / MHA
    folder.mkdir(parents=True)
    (folder / f"{MHA}.ipynb").write_text("not a notebook")
    with pytest.raises(similarity.SimilarityError, match="alice: unreadable notebook"):
        similarity.similarity(MHA, root=course)


def test_one_more_assignment(tmp_path):
    """ch02: the copy of a classmate and the copy of the published solutions are flagged, and only they."""
    course = make_course(tmp_path / "course")
    for student, answers in [
        ("ana", SDPA_HONEST_1),
        ("ben", SDPA_HONEST_2),
        ("cy", SDPA_COPY_OF_1),
        ("dee", SDPA_COPY_OF_SOLUTIONS),
    ]:
        submit(course, student, SDPA, fill(SDPA, answers))
    submit(course, "eve", SDPA, fill(SDPA, blank=True))
    submit(course, "fay", SDPA, fill(SDPA, left_unanswered(SDPA, "pass")))
    report = similarity.similarity(SDPA, root=course)
    assert flagged(report) == {frozenset(("ana", "cy")), frozenset(("dee", f"solutions/{SDPA}"))}, report.pairs
    assert report.blank == ["eve", "fay"]
    assert find(report, "ana", "ben") is None and find(report, "ben", f"solutions/{SDPA}") is None


def test_command_line(tmp_path):
    """`python -m autograder.cli.similarity A --root R --threshold T` prints the counts and the paths."""
    course = make_course(tmp_path / "course")
    submit(course, "alice", MHA, fill(MHA, ALICE))
    submit(course, "bob", MHA, fill(MHA, BOB_COPIES_ALICE))
    submit(course, "carol", MHA, fill(MHA, CAROL))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert similarity_cli.main([MHA, "--root", str(course), "--threshold", "0.99"]) == 0
    printed = out.getvalue()
    assert f"Similarity of {MHA}: 3 submission(s)" in printed
    assert "flagged (a share >= 0.99): 0 pair(s); near (a share > 0.65): 1 pair(s)" in printed
    assert str(course / "grades" / "similarity" / f"{MHA}.html") in printed
    assert str(course / "grades" / "similarity" / f"{MHA}.csv") in printed
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        similarity_cli.main(["ch99_nothing", "--root", str(course)])


# ----------------------------------------------------------------------------- written answers

EXPLAIN = "explain_right_slices"  # ch03's written answer, graded by hand
QUESTION = (
    "was your prediction right, and why or why not? Then say why exactly those slices come out right, and what "
    "the slip does to the attention of the other heads."
)
HONEST_1 = """My prediction was wrong: I expected only the first slice to match. Both reshapes read the same memory
in order, so the slice of head h at position l starts at offset (h L + l) dh in one and (l H + h) dh in the other.
These agree for the first and the last slice, and for others only when L - 1 and H - 1 share a factor. The other
slices mix features of several positions, so every other head averages the wrong vectors, silently."""
# A classmate's copy: bold and TeX added, punctuation, case and line breaks changed, one word swapped.
COPY_OF_HONEST_1 = """**My prediction was WRONG** - I expected only the *first* slice to match; both reshapes read the
same memory in order, so the slice of head $h$ at position $l$ starts at offset $(h L + l) d_h$ in one, and
$(l H + h) d_h$ in the other. These agree for the first and the last slice and for others only when $L - 1$ and
$H - 1$ share a factor. The remaining slices mix features of several positions, so every other head averages the
wrong vectors, silently."""
HONEST_2 = """I predicted two matching slices and that was right, though not for the reason I gave. Writing the flat
index of each element shows the two layouts coincide when h(L-1) equals l(H-1), which always holds at the corners
(0, 0) and (H-1, L-1). Elsewhere a head gets a jumble of neighbouring tokens' features: the shapes are fine and no
error is raised, but its attention weights and outputs are nonsense, so only comparing with a reference catches it."""


def with_written(assignment: str, text: str, answers: dict[str, str] | None = None):
    """The reference's code, and ``text`` as the written answer."""
    return fill(assignment, {**(answers or {}), EXPLAIN: text})


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    """A ch03 class compared for its written answers: (course folder, report)."""
    course = make_course(tmp_path_factory.mktemp("course"))
    solution = notebooks.read(course / "solutions" / MHA / f"{MHA}.ipynb")
    rubric = next(cell.source for cell in solution.cells if notebooks.is_written(cell))
    for student, text in [
        ("alice", HONEST_1),
        ("bob", COPY_OF_HONEST_1),
        ("carol", HONEST_2),
        ("dave", "YOUR ANSWER HERE"),  # as released
        ("erin", "your answer here  "),  # the placeholder, retyped
        ("frank", ""),
        ("grace", rubric.replace("**", "")),  # the open edition's rubric, copied
        # the question quoted in full, with a few words of their own: the quotes never count
        ("heidi", f"The question: {QUESTION} I think the first slice only."),
        ("ivan", f"{QUESTION.upper()} No idea, sorry."),
    ]:
        submit(course, student, MHA, with_written(MHA, text, ALICE if student == "alice" else CAROL))
    return course, similarity.similarity(MHA, root=course)


def find_written(report, first: str, second: str):
    return next((p for p in report.written if {p.first, p.second} == {first, second}), None)


def test_a_copied_written_answer_is_flagged_and_only_it(explained):
    _, report = explained
    pair = find_written(report, "alice", "bob")
    assert pair is not None and pair.flagged and pair.kind == "classmates" and pair.answer == EXPLAIN, report.written
    assert min(pair.first_share, pair.second_share) >= similarity.THRESHOLD
    assert pair.shared_tokens >= written.MIN_SHARED_RUNS
    copied = find_written(report, "grace", f"solutions/{MHA}")
    assert copied is not None and copied.flagged and copied.kind == "reference", report.written
    assert {frozenset((p.first, p.second)) for p in report.written} == {
        frozenset(("alice", "bob")),
        frozenset(("grace", f"solutions/{MHA}")),
    }, report.written
    assert report.written_ids == [EXPLAIN]


def test_written_answers_left_as_released_or_quoting_the_question_match_nothing(explained):
    _, report = explained
    assert sorted(report.written_blank) == ["dave", "erin", "frank"], report.written_blank  # nothing of their own
    for student in ("carol", "dave", "erin", "frank", "heidi", "ivan"):
        assert not [p for p in report.written if student in (p.first, p.second)], student


def test_written_pairs_reach_the_csv_the_summary_and_their_page(explained):
    course, report = explained
    with report.csv.open(newline="") as f:
        rows = [row for row in csv.DictReader(f) if row["answer"] == EXPLAIN]
    assert {frozenset((r["first"], r["second"])) for r in rows if r["flagged"] == "yes"} == {
        frozenset(("alice", "bob")),
        frozenset(("grace", f"solutions/{MHA}")),
    }
    said = similarity.summary(report)
    assert f"written answers ({EXPLAIN}) compared" in said and "flagged 2 pair(s)" in said, said
    assert "3 left blank: dave, erin, frank" in said
    assert "FLAGGED  alice ~ bob" in said or "FLAGGED  bob ~ alice" in said
    page = report.written_html.read_text()
    assert "averages the" in page and "Why those slices" in page
    assert (course / "grades" / "similarity" / MHA / "written" / "alice.md").read_text().count("My prediction") == 1
