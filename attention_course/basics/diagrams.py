"""Diagrams of the course's mechanisms, drawn by code so that every chapter's pictures share one style.

Each function returns a matplotlib figure of one mechanism, sized to stay legible at phone width (few
labels, large type); the chapters show it with :func:`attention_course.plotting.show_figure`, which
gives it an alt text and a caption. The sizes a diagram draws are its arguments, and the boolean masks
it shows come from the course's own reference functions, so a picture cannot drift from the code.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

COLOURS = {
    "query": "#4C72B0",
    "key": "#DD8452",
    "value": "#55A868",
    "visible": "#4C72B0",
    "hidden": "#EEEEEE",
    "cached": "#BBBBBB",
    "new": "#DD8452",
    "norm": "#8172B3",
    "block": "#55A868",
}
FONT = 12


def _box(ax, x, y, width, height, text, colour, text_colour="white"):
    """A rounded box centred at (x, y) with ``text`` in it."""
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=colour,
            edgecolor="none",
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=FONT, color=text_colour)


def _arrow(ax, start, end, colour="#444444", style="-|>", curve=0.0):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle=style,
            mutation_scale=14,
            color=colour,
            linewidth=1.4,
            connectionstyle=f"arc3,rad={curve}",
        )
    )


def _blank(ax, xlim, ylim):
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")


def mask_grids(masks: dict[str, np.ndarray]):
    """One panel per boolean mask (query rows, key columns; True = may attend), side by side."""
    fig, axes = plt.subplots(1, len(masks), figsize=(3.0 * len(masks), 3.4))
    for ax, (title, mask) in zip(np.atleast_1d(axes), masks.items()):
        mask = np.asarray(mask, dtype=bool)
        colours = np.where(mask[..., None], _rgb(COLOURS["visible"]), _rgb(COLOURS["hidden"]))
        ax.imshow(colours, interpolation="nearest")
        ax.set_xticks(np.arange(-0.5, mask.shape[1]), minor=True)
        ax.set_yticks(np.arange(-0.5, mask.shape[0]), minor=True)
        ax.grid(which="minor", color="white", linewidth=1.5)
        ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
        ax.set_title(title, fontsize=FONT)
        ax.set_xlabel("key j", fontsize=FONT - 1)
        ax.set_ylabel("query i", fontsize=FONT - 1)
    fig.tight_layout()
    return fig


def _rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])


def head_sharing(num_heads: int, kv_heads: tuple[int, ...]):
    """For each number of key/value heads, which key/value head each query head reads (h // n_rep)."""
    fig, axes = plt.subplots(len(kv_heads), 1, figsize=(7.0, 1.9 * len(kv_heads)))
    for ax, groups in zip(np.atleast_1d(axes), kv_heads):
        if num_heads % groups:
            raise ValueError(f"kv_heads: {groups} key/value heads do not divide num_heads={num_heads}")
        _blank(ax, (-0.7, num_heads - 0.3), (-0.6, 2.0))
        share = num_heads // groups
        name = {num_heads: "multi-head", 1: "multi-query"}.get(groups, "grouped-query")
        ax.set_title(f"{name}: {num_heads} query heads, {groups} key/value head{'s' * (groups > 1)}", fontsize=FONT)
        for h in range(num_heads):
            _box(ax, h, 1.5, 0.7, 0.6, f"q{h}", COLOURS["query"])
        for g in range(groups):
            centre = g * share + (share - 1) / 2
            _box(ax, centre, 0.0, 0.7 + 0.95 * (share - 1), 0.6, f"k,v {g}", COLOURS["key"])
            for h in range(g * share, (g + 1) * share):
                _arrow(ax, (h, 1.18), (h, 0.32), style="-")
    fig.tight_layout()
    return fig


def cache_steps(prompt: int, steps: int):
    """Generation with a key/value cache: the prompt at once, then one new position a step, whose query
    attends over every cached key and its own."""
    fig, ax = plt.subplots(figsize=(7.0, 0.9 * (steps + 1) + 0.6))
    total = prompt + steps
    _blank(ax, (-2.6, total), (-0.6 - steps, 0.9))
    for row in range(steps + 1):
        y = -row
        new = range(prompt) if row == 0 else [prompt + row - 1]
        label = "prompt" if row == 0 else f"step {row}"
        ax.text(-2.4, y, label, ha="left", va="center", fontsize=FONT)
        for position in range(prompt + row):
            fresh = position in new
            _box(ax, position, y, 0.8, 0.6, str(position), COLOURS["new" if fresh else "cached"])
    ax.text(
        total / 2 - 0.5, 0.75, "positions (grey: keys and values read from the cache)", ha="center", fontsize=FONT - 1
    )
    fig.tight_layout()
    return fig


def norm_placement():
    """A post-norm layer (norm after the residual sum) beside a pre-norm layer (norm inside the branch)."""
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 4.2))
    for ax, arrangement in zip(axes, ("post-norm", "pre-norm")):
        _blank(ax, (-1.6, 1.6), (-0.6, 4.6))
        ax.set_title(arrangement, fontsize=FONT)
        _box(ax, 0, 0, 1.4, 0.5, "x", "#666666")
        if arrangement == "post-norm":
            _box(ax, 0, 1.4, 1.6, 0.6, "sublayer", COLOURS["block"])
            _box(ax, 0, 2.6, 0.6, 0.6, "+", "#666666")
            _box(ax, 0, 3.8, 1.6, 0.6, "layer norm", COLOURS["norm"])
            for a, b in ((0.25, 1.1), (1.7, 2.3), (2.9, 3.5)):
                _arrow(ax, (0, a), (0, b))
        else:
            _box(ax, 0, 1.1, 1.6, 0.6, "layer norm", COLOURS["norm"])
            _box(ax, 0, 2.3, 1.6, 0.6, "sublayer", COLOURS["block"])
            _box(ax, 0, 3.5, 0.6, 0.6, "+", "#666666")
            for a, b in ((0.25, 0.8), (1.4, 2.0), (2.6, 3.2)):
                _arrow(ax, (0, a), (0, b))
            _arrow(ax, (0, 3.8), (0, 4.5))
        residual_end = 2.6 if arrangement == "post-norm" else 3.5
        _arrow(ax, (-0.7, 0.0), (-0.3, residual_end), curve=-1.3 / residual_end)  # the same bulge for both
        ax.text(-1.25, residual_end / 2, "residual", fontsize=FONT - 1, rotation=90, va="center", ha="right")
    fig.tight_layout()
    return fig


def _column(ax, x, labels, colours, start=0.0, gap=1.0, width=2.2, height=0.6):
    """Boxes stacked upwards from ``start``, joined by arrows; returns the y of the last box."""
    y = start
    for k, (text, colour) in enumerate(zip(labels, colours)):
        y = start + k * gap
        _box(ax, x, y, width, height, text, colour)
        if k:
            _arrow(ax, (x, y - gap + height / 2), (x, y - height / 2))
    return y


def attention_block():
    """Scaled dot-product attention as a flow: Q and K to the scores, scaled, masked, softmax, times V."""
    fig, ax = plt.subplots(figsize=(4.8, 6.0))
    _blank(ax, (-2.4, 2.6), (-0.6, 6.8))
    _box(ax, -1.3, 0, 0.8, 0.6, "Q", COLOURS["query"])
    _box(ax, 0.1, 0, 0.8, 0.6, "K", COLOURS["key"])
    _box(ax, 1.7, 0, 0.8, 0.6, "V", COLOURS["value"])
    steps = [
        (r"scores $QK^\top$", "#666666"),
        (r"scale by $1/\sqrt{d_k}$", "#666666"),
        ("mask (optional)", "#999999"),
        ("softmax over keys", COLOURS["norm"]),
    ]
    top = _column(ax, -0.6, *zip(*steps), start=1.2, gap=1.15, width=2.6)
    _arrow(ax, (-1.3, 0.3), (-0.8, 0.9))
    _arrow(ax, (0.1, 0.3), (-0.4, 0.9))
    out = top + 1.3
    _box(ax, 0.55, out, 2.0, 0.6, r"weights $\times V$", COLOURS["value"])
    _arrow(ax, (-0.6, top + 0.3), (0.2, out - 0.3))
    _arrow(ax, (1.7, 0.3), (1.2, out - 0.3))
    _arrow(ax, (0.55, out + 0.3), (0.55, out + 0.85))
    ax.text(0.55, out + 1.0, "output", ha="center", va="bottom", fontsize=FONT)
    fig.tight_layout()
    return fig


def multi_head_split(d_model: int, num_heads: int):
    """One position's projected vector cut into heads of d_model / num_heads features, attention run in
    each head alone, and the heads' outputs concatenated back into one vector for W_O."""
    if d_model % num_heads:
        raise ValueError(f"num_heads: {num_heads} heads do not divide d_model={d_model}")
    d_k = d_model // num_heads
    palette = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]
    gap = 0.6
    width = d_model + gap * (num_heads - 1)
    left = 4.2  # room for the labels
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    _blank(ax, (-0.2, left + width + 0.2), (-0.3, 5.0))

    def row(y, split, label):
        for f in range(d_model):
            h = f // d_k
            x = left + f + (gap * h if split else gap * (num_heads - 1) / 2)
            ax.add_patch(plt.Rectangle((x, y), 0.9, 0.6, facecolor=palette[h % len(palette)], edgecolor="white"))
        ax.text(0, y + 0.3, label, ha="left", va="center", fontsize=FONT)

    row(4.0, False, f"x W_Q, x W_K, x W_V\n{d_model} features")
    row(2.0, True, f"{num_heads} heads of {d_k}:\nattention in each")
    row(0.0, False, "concatenated,\nthen W_O")
    shift = gap * (num_heads - 1) / 2
    for h in range(num_heads):
        centre = left + h * (d_k + gap) + d_k / 2 - 0.05
        _arrow(ax, (centre + shift - h * gap, 3.95), (centre, 2.65))
        _arrow(ax, (centre, 1.95), (centre + shift - h * gap, 0.65))
    fig.tight_layout()
    return fig


def rotary_rotation(q, k, theta: float, positions: tuple[tuple[int, int], ...]):
    """A 2-D query and key rotated by m*theta and n*theta, one panel per (m, n): the angle between them,
    and so their dot product, depends on m - n only."""
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    fig, axes = plt.subplots(1, len(positions), figsize=(3.4 * len(positions), 3.8))
    for ax, (m, n) in zip(np.atleast_1d(axes), positions):
        _blank(ax, (-1.5, 1.5), (-1.5, 1.5))
        circle = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.cos(circle), np.sin(circle), color="#DDDDDD", linewidth=1)
        rotated = {}
        for name, vector, p in (("q", q, m), ("k", k, n)):
            c, s = np.cos(p * theta), np.sin(p * theta)
            rotated[name] = np.array([c * vector[0] - s * vector[1], s * vector[0] + c * vector[1]])
            colour = COLOURS["query" if name == "q" else "key"]
            ax.plot(*zip((0, 0), vector), color=colour, linestyle=":", linewidth=1.2)
            _arrow(ax, (0, 0), tuple(rotated[name]), colour=colour)
            ax.text(*(1.22 * rotated[name]), f"{name} at {p}", ha="center", va="center", fontsize=FONT, color=colour)
        score = round(float(rotated["q"] @ rotated["k"]), 2) + 0.0  # + 0.0: a rounding error never shows "-0.00"
        ax.set_title(f"m = {m}, n = {n}: score {score:.2f}", fontsize=FONT)
    fig.tight_layout()
    return fig


def model_stacks():
    """The encoder-decoder stack beside the decoder-only stack, each layer's blocks from the bottom up."""
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 5.6), gridspec_kw={"width_ratios": [2, 1]})
    grey, attention, ff = "#666666", COLOURS["query"], COLOURS["block"]
    ax = axes[0]
    _blank(ax, (-1.6, 4.6), (-0.6, 5.3))
    ax.set_title("encoder-decoder", fontsize=FONT)
    encoder = [("source + positions", grey), ("self-attention", attention), ("feed-forward", ff)]
    decoder = [
        ("target + positions", grey),
        ("masked self-att.", attention),
        ("cross-attention", COLOURS["key"]),
        ("feed-forward", ff),
        ("linear: logits", grey),
    ]
    _column(ax, 0, *zip(*encoder), gap=1.2, width=2.6)
    _column(ax, 3.0, *zip(*decoder), gap=1.2, width=2.6)
    _arrow(ax, (0, 2.7), (1.7, 2.4), curve=-0.4)
    ax.text(0, 3.0, "memory", ha="center", va="bottom", fontsize=FONT - 1)
    for x, top in ((0, 2.4), (3.0, 3.6)):
        ax.add_patch(
            plt.Rectangle((x - 1.5, 0.6), 3.0, top - 0.6 + 0.4, fill=False, edgecolor="#999999", linestyle="--")
        )
        ax.text(x + 1.45, 0.7, "×N", ha="right", va="bottom", fontsize=FONT - 1)
    ax = axes[1]
    _blank(ax, (-1.6, 1.6), (-0.6, 5.3))
    ax.set_title("decoder-only", fontsize=FONT)
    only = [("tokens + positions", grey), ("masked self-att.", attention), ("feed-forward", ff)]
    _column(ax, 0, *zip(*only, ("linear: logits", grey)), gap=1.2, width=2.6)
    ax.add_patch(plt.Rectangle((-1.5, 0.6), 3.0, 2.2, fill=False, edgecolor="#999999", linestyle="--"))
    ax.text(1.45, 0.7, "×N", ha="right", va="bottom", fontsize=FONT - 1)
    fig.tight_layout()
    return fig


def flash_tiling(query_blocks: int, key_blocks: int, current: tuple[int, int]):
    """The score matrix in tiles: query block i visits the key blocks one after another, keeping a running
    max m, normaliser l and output a, so that no full row of scores is ever held."""
    i, j = current
    if not (0 <= i < query_blocks and 0 <= j < key_blocks):
        raise ValueError(f"current: tile {current} lies outside {query_blocks} x {key_blocks} tiles")
    fig, (grid, text) = plt.subplots(1, 2, figsize=(7.0, 3.6), gridspec_kw={"width_ratios": [1, 1.25]})
    state = np.zeros((query_blocks, key_blocks), dtype=int)  # 0 not yet, 1 done, 2 this step
    state[i, :j] = 1
    state[i, j] = 2
    colours = np.array([_rgb(COLOURS["hidden"]), _rgb(COLOURS["cached"]), _rgb(COLOURS["new"])])
    grid.imshow(colours[state], interpolation="nearest")
    grid.set_xticks(np.arange(-0.5, key_blocks), minor=True)
    grid.set_yticks(np.arange(-0.5, query_blocks), minor=True)
    grid.grid(which="minor", color="white", linewidth=2)
    grid.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
    grid.set_xlabel("key blocks j", fontsize=FONT)
    grid.set_ylabel("query blocks i", fontsize=FONT)
    grid.set_title(f"tile ({i}, {j}) of S = QKᵀ", fontsize=FONT)
    text.axis("off")
    lines = [
        r"$m' = \max(m,\ \mathrm{rowmax}\,S_{ij})$",
        r"$\ell' = e^{m - m'}\,\ell + \mathrm{rowsum}\,e^{S_{ij} - m'}$",
        r"$a' = e^{m - m'}\,a + e^{S_{ij} - m'}\,V_j$",
        r"after the last tile: $a / \ell$",
    ]
    for row, line in enumerate(lines):
        text.text(0.0, 0.85 - 0.22 * row, line, fontsize=FONT, transform=text.transAxes, va="center")
    fig.tight_layout()
    return fig


def _matrix(ax, x, y, rows, cols, label, colour, scale):
    """A rectangle of rows x cols cells (scaled), its bottom-left corner at (x, y), its shape under it."""
    ax.add_patch(plt.Rectangle((x, y), cols * scale, rows * scale, facecolor=colour, edgecolor="white"))
    ax.text(x + cols * scale / 2, y + rows * scale / 2, label, ha="center", va="center", fontsize=FONT, color="white")
    ax.text(x + cols * scale / 2, y - 0.15, f"{rows}×{cols}", ha="center", va="top", fontsize=FONT - 2)
    return x + cols * scale


def linear_reassociation(n: int, d: int):
    """(Q K^T) V against Q (K^T V): the same three factors, an n x n or a d x d matrix in the middle."""
    scale = 2.0 / max(n, d)
    fig, axes = plt.subplots(2, 1, figsize=(7.0, 4.8))
    panels = (
        (r"softmax attention: $(QK^\top)\,V$", r"$QK^\top$", n),
        (r"linear attention: $Q\,(K^\top V)$", r"$K^\top V$", d),
    )
    for ax, (title, name, middle) in zip(axes, panels):
        x = _matrix(ax, 0, 0, n, d, "Q", COLOURS["query"], scale)
        x = _matrix(ax, x + 0.2, 0, d, n, r"$K^\top$", COLOURS["key"], scale)
        x = _matrix(ax, x + 0.2, 0, n, d, "V", COLOURS["value"], scale)
        ax.text(x + 0.3, n * scale / 2, f"first: {name}", fontsize=FONT, va="center")
        end = _matrix(ax, x + 2.4, 0, middle, middle, "", "#C44E52", scale)
        _blank(ax, (-0.2, max(end, x + 2.4 + n * scale) + 0.2), (-0.6, n * scale + 0.2))
        ax.set_title(title, fontsize=FONT)
    fig.tight_layout()
    return fig


def all_reduce(workers: int):
    """Data parallelism: every worker runs the same model on its own share of the batch, an all-reduce
    averages the gradients, and every worker applies the same update."""
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    _blank(ax, (-0.8, 1.6 * workers - 0.8), (-0.5, 4.6))
    for w in range(workers):
        x = 1.6 * w
        _box(ax, x, 0, 1.3, 0.55, f"share {w}", "#666666")
        _box(ax, x, 1.2, 1.3, 0.55, "model", COLOURS["block"])
        _box(ax, x, 2.4, 1.3, 0.55, f"grad {w}", COLOURS["key"])
        _box(ax, x, 4.2, 1.3, 0.55, "update", COLOURS["query"])
        for a, b in ((0.28, 0.92), (1.48, 2.12)):
            _arrow(ax, (x, a), (x, b))
        _arrow(ax, (x, 2.68), (x, 3.05), style="-")
        _arrow(ax, (x, 3.55), (x, 3.92))
    span = 1.6 * (workers - 1)
    _box(ax, span / 2, 3.3, span + 1.3, 0.5, "all-reduce: mean of the gradients", "#444444")
    fig.tight_layout()
    return fig
