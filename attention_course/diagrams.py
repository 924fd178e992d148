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
