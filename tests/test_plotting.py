"""Figures a phone can read (attention_course/plotting.py): heatmaps label as many positions as can be read (48 keys
are not a smear), and a figure of panels side by side is also drawn with its panels one under another."""

import io
import json
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attention_course import plotting
from attention_course.plotting import panel_layouts, panels_html, plot_attention, tick_step


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


def image_of(png: bytes) -> np.ndarray:
    return plt.imread(io.BytesIO(png))


def three_heatmaps_one_colour_scale():
    """Three heatmaps side by side, sharing their rows' labels and one colorbar drawn for all three."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), sharey=True)
    rng = np.random.default_rng(0)
    for i, ax in enumerate(axes):
        image = ax.imshow(rng.random((5, 5)), vmin=0, vmax=1)
        ax.set_title(f"head {i}")
    fig.colorbar(image, ax=list(axes))
    return fig


def test_a_figure_of_panels_is_drawn_side_by_side_and_stacked_from_one_drawing():
    fig = three_heatmaps_one_colour_scale()
    drawn = panel_layouts(fig)
    wide, stacked = image_of(drawn["wide"]), image_of(drawn["stacked"])
    assert wide.shape[1] == drawn["wide_width"] and len(drawn["wide_panels"]) == 3
    # stacked: three rows, each a panel and the colour scale beside it, at the size the figure drew them
    assert len(drawn["stacked_panels"]) == 3
    assert stacked.shape[1] == max(drawn["stacked_panels"]) < wide.shape[1] / 2
    assert stacked.shape[0] > 3 * 0.8 * wide.shape[0]
    bar = fig.axes[-1].get_tightbbox(fig.canvas.get_renderer()).width
    for own, beside in zip(drawn["wide_panels"], drawn["stacked_panels"]):
        assert beside >= own + bar, "a panel stacked without the colour scale it shares"


def test_each_panel_keeps_its_own_colorbar_and_the_figures_title_heads_the_stack():
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for i, ax in enumerate(axes.flat):
        fig.colorbar(ax.imshow(np.full((3, 3), float(i))), ax=ax)
        ax.set_title(f"panel {i}")
    fig.suptitle("four panels")
    fig.tight_layout()
    drawn = panel_layouts(fig)
    assert len(drawn["stacked_panels"]) == 4
    title = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
    heights = image_of(drawn["stacked"]).shape[0]
    panel = axes[0, 0].get_tightbbox(fig.canvas.get_renderer()).height
    assert heights >= 4 * panel + title.height
    # each panel is cut out with its own colorbar, and all four are as wide (one drawn a little narrower is drawn
    # again larger)
    assert max(drawn["stacked_panels"]) - min(drawn["stacked_panels"]) <= 0.05 * max(drawn["stacked_panels"])
    assert all(stacked >= wide for stacked, wide in zip(drawn["stacked_panels"], drawn["wide_panels"]))


def test_a_narrower_panel_is_drawn_again_larger_in_the_stack():
    """A panel half as wide as its neighbour is drawn again at twice the size (not an image stretched): the stack's
    rows are as wide, and the narrow panel's row is twice as tall as it is in the figure."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3), gridspec_kw={"width_ratios": [2, 1]})
    for ax in axes:
        ax.plot([0, 1], [0, 1])
        ax.set_title("a title")
    drawn = panel_layouts(fig)
    wide_width, narrow_width = drawn["wide_panels"]
    assert narrow_width < 0.7 * wide_width
    assert abs(drawn["stacked_panels"][1] - drawn["stacked_panels"][0]) <= 0.05 * wide_width
    tall = image_of(drawn["stacked"]).shape[0] - image_of(drawn["wide"]).shape[0]
    assert tall > 1.5 * image_of(drawn["wide"]).shape[0] * 0.9, "the narrow panel's row is not drawn larger"
    assert fig.dpi == plt.rcParams["figure.dpi"], "the figure keeps its own size"


def test_a_figure_of_panels_in_a_page_shows_them_stacked_in_a_window_too_narrow_for_them():
    fig = three_heatmaps_one_colour_scale()
    page = panels_html(fig, "Three heatmaps, one per head.")
    narrowest = float(re.search(r'media="\(max-width: ([\d.]+)px\)"', page).group(1))
    drawn = panel_layouts(fig)
    panels = json.loads(re.search(r'data-panels="([^"]+)"', page).group(1).replace("&quot;", '"'))
    assert panels == {"wide": drawn["wide_panels"], "stacked": drawn["stacked_panels"]}
    # side by side from the width where each panel is drawn LEAST_PANEL px wide, or its own width where that is
    # less (the column, plus the page's margins), and no sooner; at a desktop's width in any case
    shown = min(1.0, (narrowest - plotting.PAGE_MARGINS) / drawn["wide_width"])
    short = [w * shown - min(plotting.LEAST_PANEL, w) for w in drawn["wide_panels"]]
    assert min(short) == pytest.approx(0, abs=2), short
    fig.set_size_inches(30, 8)
    assert f'media="(max-width: {plotting.DESKTOP_FROM - 0.02:.2f}px)"' in panels_html(fig, "Wider.")
    assert 'alt="Three heatmaps, one per head."' in page
    with pytest.raises(ValueError, match="alt"):
        panels_html(fig, " ")
    with pytest.raises(ValueError, match="no panel"):
        panel_layouts(plt.figure())


def test_only_panels_side_by_side_count_as_a_figure_of_panels():
    assert plotting.side_by_side(three_heatmaps_one_colour_scale())
    assert not plotting.side_by_side(plt.subplots(2, 1)[0])  # one under another already
    assert not plotting.side_by_side(plt.subplots()[0])
    single = plt.subplots()[0]
    single.colorbar(single.axes[0].imshow(np.eye(3)))  # a colorbar is no panel
    assert not plotting.side_by_side(single)


def test_the_sites_figure_of_panels_fetches_its_images_as_files(tmp_path):
    """The book's extension writes a figure of panels' two images (data URLs in the page) as files of the site's
    _images, named by their content, and points the page's <picture> at them; other raw HTML is left alone."""
    from types import SimpleNamespace

    from docutils import nodes
    from docutils.utils import new_document

    from course_site.sphinx_ext import panel_images_as_files

    page = panels_html(three_heatmaps_one_colour_scale(), "Three heatmaps, one per head.")
    other = '<img src="data:image/png;base64,iVBORw0KGgo=" alt="not a figure of panels">'
    doctree = new_document("page")
    doctree += nodes.raw("", page, format="html", classes=["output", "text_html"])
    doctree += nodes.raw("", other, format="html")
    app = SimpleNamespace(builder=SimpleNamespace(format="html"), outdir=str(tmp_path))
    panel_images_as_files(app, doctree, "book/ch03_multi_head")
    written, untouched = [raw.astext() for raw in doctree.findall(nodes.raw)]
    files = sorted((tmp_path / "_images").glob("panels-*.png"))
    assert len(files) == 2 and "data:" not in written and untouched == other
    for attribute, layout in (("srcset", "stacked"), ("src", "wide")):
        name = re.search(rf'\b{attribute}="\.\./_images/(panels-\w+\.png)"', written).group(1)
        assert (tmp_path / "_images" / name).read_bytes() == panel_layouts(three_heatmaps_one_colour_scale())[layout]
    assert 'alt="Three heatmaps, one per head."' in written and "output" in doctree.children[0]["classes"]
