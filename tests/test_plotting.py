"""Heatmaps label as many positions as can be read (attention_course/plotting.py): 48 keys are not a smear."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attention_course.plotting import plot_attention, tick_step


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def drawn_labels(ax, axis: str) -> list:
    """The tick labels of ``ax``'s ``axis`` ("x" or "y") that the drawn figure shows (text not empty)."""
    ax.figure.canvas.draw()
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [label for label in labels if label.get_visible() and label.get_text()]


def assert_apart(labels, axis: str) -> None:
    """Drawn labels along ``axis`` leave at least 0.3 of their font's size between them (x: side by side, or
    slanted; y: one above the next, rows going down)."""
    boxes = [label.get_window_extent() for label in labels]
    size = labels[0].get_size() * labels[0].figure.dpi / 72  # the font's size, in the figure's pixels
    for first, second in zip(boxes, boxes[1:]):
        gap = second.x0 - first.x1 if axis == "x" else first.y0 - second.y1
        if axis == "x" and labels[0].get_rotation():  # slanted at 45 degrees: across them, less a line's height
            gap = ((second.x0 + second.x1) - (first.x0 + first.x1)) / 2 * 0.7071 - 1.2 * size
        assert gap >= 0.3 * size, f"{axis} labels {gap:.1f} px apart: they run together"


def test_tick_step_labels_every_position_that_fits_and_thins_the_rest():
    assert tick_step(6, 300, 16) == 1  # 50 points a position
    assert tick_step(48, 48 * 16, 16) == 1  # exactly far enough apart
    assert tick_step(48, 280, 16) == 3  # 5.8 points a position: every third is 17.5 points apart
    assert tick_step(48, 280, 16, numbers=True) == 5  # and positions that are numbers: 0, 5, 10, ...
    assert tick_step(48, 100, 16, numbers=True) == 10
    assert tick_step(1000, 100, 16, numbers=True) == 200
    assert tick_step(1, 10, 16) == tick_step(48, 0, 16) == 1


@pytest.mark.parametrize("count", [2, 5, 12, 48, 100, 1000])
@pytest.mark.parametrize("length", [40, 150, 300, 700])
def test_tick_step_keeps_labels_apart(count, length):
    step = tick_step(count, length, 16, numbers=True)
    spacing = length / count * step
    assert step == 1 or spacing >= 16, f"{count} positions on {length} points: every {step}th is {spacing:.1f} apart"
    smaller = tick_step(count, length, 16)  # not rounded: the smallest step that keeps them apart
    assert smaller == 1 or length / count * (smaller - 1) < 16


def test_chapter_10s_heatmaps_of_48_positions_label_a_readable_few():
    """Chapter 10's figure: two heatmaps of 48 queries and 48 keys side by side, 11 by 5 inches."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax in axes:
        plot_attention(np.random.default_rng(0).random((48, 48)), ax=ax, annotate=False, title="a head")
    fig.tight_layout()
    for ax in axes:
        for axis in "xy":
            labels = drawn_labels(ax, axis)
            assert 4 <= len(labels) <= 12, f"{len(labels)} labels on the {axis} axis of 48 positions"
            assert [label.get_text() for label in labels][:3] == ["0", "5", "10"]
            assert_apart(labels, axis)


def test_a_small_heatmap_labels_every_token():
    tokens = ["<bos>", "the", "cat", "sat", "on", "mat"]
    ax = plot_attention(np.eye(6), queries=tokens, keys=tokens)
    assert [label.get_text() for label in drawn_labels(ax, "x")] == tokens
    assert [label.get_text() for label in drawn_labels(ax, "y")] == tokens


def test_a_crowded_heatmap_of_tokens_labels_every_kth_token_and_says_which():
    tokens = [f"tok{i}" for i in range(40)]
    fig, ax = plt.subplots(figsize=(3, 3))
    plot_attention(np.random.default_rng(0).random((40, 40)), queries=tokens, keys=tokens, ax=ax, annotate=False)
    for axis in "xy":
        shown = [label.get_text() for label in drawn_labels(ax, axis)]
        assert 2 <= len(shown) < 40, shown
        step = int(shown[1].removeprefix("tok"))
        assert shown == tokens[::step], "each label names the position it stands at"
        assert_apart(drawn_labels(ax, axis), axis)
