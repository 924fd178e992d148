"""Figures the chapters share."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# Tick labels of a heatmap are at least this many of their font's sizes apart, as the figure is drawn: a
# label's height and a gap along the y axis, and across a label slanted at 45 degrees along the x axis.
# Closer, the labels of 48 positions ran together into a smear.
TICK_SPACING = 1.6


def _as_matrix(weights) -> np.ndarray:
    if hasattr(weights, "detach"):  # a torch tensor, on any device
        weights = weights.detach().cpu().float().numpy()
    matrix = np.asarray(weights, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(
            f"weights must be one (queries, keys) matrix, got shape {matrix.shape}; "
            "select a batch element and head first, e.g. weights[0, 0]"
        )
    return matrix


def plot_attention(
    weights,
    *,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    ax=None,
    title: str | None = None,
    annotate: bool | None = None,
    cmap: str = "viridis",
):
    """Draw attention weights as a heatmap: one row per query, one column per key.

    ``weights`` is a 2-D array or tensor. ``queries`` and ``keys`` label the
    rows and columns. Cells are annotated with their values when the matrix is
    small (at most 12 x 12) unless ``annotate`` says otherwise. Returns the axes.
    """
    import matplotlib.pyplot as plt

    matrix = _as_matrix(weights)
    n_queries, n_keys = matrix.shape
    if queries is not None and len(queries) != n_queries:
        raise ValueError(f"queries has {len(queries)} labels but weights has {n_queries} rows")
    if keys is not None and len(keys) != n_keys:
        raise ValueError(f"keys has {len(keys)} labels but weights has {n_keys} columns")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.55 * n_keys, 0.8 + 0.5 * n_queries))
    image = ax.imshow(matrix, cmap=cmap, vmin=0.0, vmax=max(1e-12, float(matrix.max())))
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    slanted = keys is not None and max((len(str(k)) for k in keys), default=0) > 3
    label_ticks(ax.xaxis, keys if keys is not None else range(n_keys), slanted=slanted)
    label_ticks(ax.yaxis, queries if queries is not None else range(n_queries))
    if slanted:
        ax.tick_params(axis="x", labelrotation=45)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = n_queries <= 12 and n_keys <= 12
    if annotate:
        threshold = 0.6 * matrix.max()
        for i in range(n_queries):
            for j in range(n_keys):
                colour = "black" if matrix[i, j] > threshold else "white"
                ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", color=colour, fontsize=8)
    return ax


def tick_step(count: int, length_pt: float, spacing_pt: float, *, numbers: bool = False) -> int:
    """Label every ``step``-th of ``count`` positions along an axis ``length_pt`` points long (as drawn), so
    that labels are at least ``spacing_pt`` points apart: 1 where they all fit. Positions that are numbers
    themselves take a round step (1, 2, 5, 10, 20, 50, ...), so that the labels read 0, 5, 10, ..."""
    if count <= 1 or length_pt <= 0:
        return 1
    step = max(1, math.ceil(spacing_pt * count / length_pt))
    if numbers:
        step = min(r * 10**e for e in range(len(str(step)) + 1) for r in (1, 2, 5) if r * 10**e >= step)
    return step


def label_ticks(axis, labels: Sequence, *, slanted: bool = False) -> None:
    """Label the positions 0, 1, ... of a heatmap's ``axis`` (``ax.xaxis`` or ``ax.yaxis``) with ``labels``,
    every k-th of them: as many as can be read at the size the figure is drawn (:func:`tick_step`), chosen
    again whenever the figure is drawn (after ``tight_layout``, a colorbar, a figure size of its own)."""
    from matplotlib.ticker import FuncFormatter, Locator

    labels = [str(label) for label in labels]
    numbers = all(label.lstrip("-").isdigit() for label in labels)

    class EveryKth(Locator):
        def __call__(self):
            ax, vertical = self.axis.axes, self.axis.axis_name == "y"
            box = ax.get_window_extent()
            length_pt = (box.height if vertical else box.width) * 72 / ax.figure.dpi
            size = self.axis.majorTicks[0].label1.get_size()  # the labels' font, in points
            widest = max((len(label) for label in labels), default=1)
            if vertical or slanted:
                spacing = TICK_SPACING * size * (1.0 if vertical else math.sqrt(2))
            else:  # side by side: the widest label and a gap
                spacing = max(TICK_SPACING * size, (0.6 * widest + 0.8) * size)
            return list(range(0, len(labels), tick_step(len(labels), length_pt, spacing, numbers=numbers)))

        def tick_values(self, vmin, vmax):
            return self()

    axis.set_major_locator(EveryKth())
    axis.set_major_formatter(FuncFormatter(lambda x, _: labels[int(round(x))] if 0 <= round(x) < len(labels) else ""))


def show_figure(fig, name: str, alt: str, caption: str, *, wide: bool = False) -> None:
    """Show ``fig`` in a book page as the numbered figure ``name``, with its alt text and caption.

    The chapters call it for figures whose descriptions quote computed results, so that the alt
    text and the caption are written from the same values as the figure. It only works in a page
    that Jupyter Book executes (it emits a MyST ``glue:figure`` directive). A figure of several panels
    side by side is shown as :func:`panels_html` draws it: its panels stacked in a window too narrow
    for them. A ``wide`` figure, whose labels scaled to a phone's column would be too small to read, is
    drawn there at its own size in a box that scrolls sideways (its class ``course-wide``, book/_static/course.css).
    """
    import matplotlib.pyplot as plt
    from IPython.display import HTML, Markdown, display
    from myst_nb import glue

    alt = " ".join(alt.split())  # an option of a directive is one line
    if side_by_side(fig):
        glue(name, HTML(panels_html(fig, alt)), display=False)
        plt.close(fig)
        display(Markdown(f"```{{glue:figure}} {name}\n:name: {name}\n\n{caption}\n```"))
        return
    glue(name, fig, display=False)
    plt.close(fig)
    figclass = "\n:figclass: course-wide" if wide else ""
    display(Markdown(f"```{{glue:figure}} {name}\n:alt: {alt}\n:name: {name}{figclass}\n\n{caption}\n```"))


# A panel is drawn at least this many CSS pixels wide (or at its own size, where that is less) before its
# figure's panels are shown side by side; a narrower window shows them stacked, each across the column.
LEAST_PANEL = 300
# The page's margins around the column at the widths where the stacked layout is chosen (CSS pixels).
PAGE_MARGINS = 60
# From this window's width on (CSS pixels) the book's theme shows its sidebars, and a figure of panels keeps the
# look it was drawn with, side by side.
DESKTOP_FROM = 992


def side_by_side(fig) -> bool:
    """Whether ``fig`` has two panels side by side: one beside the other, at heights that overlap."""
    boxes = [ax.get_position() for ax in _panel_grid(fig)[0]]
    return any(
        (a.x1 <= b.x0 or b.x1 <= a.x0) and a.y0 < b.y1 and b.y0 < a.y1
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
    )


def _panel_grid(fig):
    """The figure's panels (its visible axes but colorbars), in reading order (by rows, then columns), and its
    colorbars."""
    colorbars = [ax for ax in fig.axes if hasattr(ax, "_colorbar") and ax.get_visible()]
    panels = [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]

    def place(ax):
        spec = ax.get_subplotspec()
        if spec is not None:
            return (spec.rowspan.start, spec.colspan.start)
        box = ax.get_position()
        return (-round(box.y1, 2), box.x0)

    return sorted(panels, key=place), colorbars


def _png(pixels: np.ndarray, dpi: float) -> bytes:
    import io

    from matplotlib.image import imsave

    buffer = io.BytesIO()
    imsave(buffer, pixels, format="png", dpi=dpi)
    return buffer.getvalue()


# A panel narrower than the widest of its figure is drawn again larger in the stacked image, up to this many times its
# size, so that every panel spans the column alike (a panel left narrower would be scaled down with the widest).
MOST_ENLARGED = 3.0


def panel_layouts(fig) -> dict:
    """``fig`` drawn as two PNG images: ``"wide"``, the figure as drawn (its panels side by side, cut to its drawn
    content as a notebook shows a figure), and ``"stacked"``, each panel cut out of the drawing with its labels,
    title, legend and own colorbar, and set one under another. A panel narrower than the widest is cut from the
    figure drawn again at a larger scale (at most :data:`MOST_ENLARGED` times), so that all are as wide and a page
    scales them alike. A colorbar drawn for several panels (``fig.colorbar(image, ax=axes)``) stands beside each of
    them in the stacked image, so that every panel keeps its colour scale; a figure's title, texts and legends head
    the stack. ``"wide_panels"`` and ``"stacked_panels"`` are the panels' widths in each image (pixels), in
    reading order; ``"wide_width"`` the wide image's width."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.transforms import Bbox

    panels, colorbars = _panel_grid(fig)
    if not panels:
        raise ValueError("fig has no panel: draw into at least one axes first")
    canvas = fig.canvas if hasattr(fig.canvas, "buffer_rgba") else FigureCanvasAgg(fig)
    dpi = fig.dpi

    # Each colorbar belongs to the panels it was drawn for (matplotlib records them); one placed by hand (cax=)
    # to the panel nearest on its left that it faces.
    own = {id(p): [p] for p in panels}
    shared = []
    for bar in colorbars:
        parents = [p for p in (getattr(bar, "_colorbar_info", None) or {}).get("parents", []) if id(p) in own]
        if not parents:
            bar_box = bar.get_position()
            facing = [p for p in panels if p.get_position().y0 < bar_box.y1 and bar_box.y0 < p.get_position().y1]
            left = [p for p in facing if p.get_position().x1 <= bar_box.x0 + 1e-6] or facing or panels
            parents = [max(left, key=lambda p: p.get_position().x1)]
        if len(parents) == 1:
            own[id(parents[0])].append(bar)
        else:
            shared.append((bar, parents))
    heads = []  # the figure's title and texts (its suptitle is one of its texts) and its legends
    for artist in [fig._suptitle, *fig.texts, *fig.legends]:
        if artist is not None and artist.get_visible() and all(artist is not h for h in heads):
            heads.append(artist)

    def drawn(scale: float):
        """The figure drawn at ``scale`` times its size: its pixels, the panels' boxes, the stack's rows (each
        panel with the colorbars it shares) and its heads, cut out of them."""
        fig.set_dpi(dpi * scale)
        try:
            canvas.draw()
            renderer = canvas.get_renderer()
            pixels = np.asarray(canvas.buffer_rgba()).copy()
            height, width = pixels.shape[:2]

            def cut(box: Bbox, margin: float = 2.0 * scale) -> np.ndarray:
                x0, x1 = max(0, math.floor(box.x0 - margin)), min(width, math.ceil(box.x1 + margin))
                y0, y1 = max(0, math.floor(box.y0 - margin)), min(height, math.ceil(box.y1 + margin))
                return pixels[height - y1 : height - y0, x0:x1]

            def box_of(artists) -> Bbox:
                return Bbox.union([a.get_tightbbox(renderer) for a in artists])

            boxes = [box_of(own[id(p)]) for p in panels]
            gap = int(round(0.1 * fig.dpi))
            rows = [
                _side_by_side(
                    [cut(box)] + [cut(box_of([bar])) for bar, parents in shared if any(panel is p for p in parents)],
                    pixels[0, 0],
                    gap,
                )
                for panel, box in zip(panels, boxes)
            ]
            tops = [cut(t.get_window_extent(renderer)) for t in heads]
            wide_box = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)
            return pixels[0, 0].copy(), cut(wide_box, margin=0.1 * fig.dpi), wide_box, boxes, rows, tops
        finally:
            fig.set_dpi(dpi)

    background, wide, wide_box, boxes, rows, tops = drawn(1.0)
    widest = max(row.shape[1] for row in rows)
    for i, row in enumerate(rows):
        if row.shape[1] < 0.95 * widest:
            scale = min(MOST_ENLARGED, widest / row.shape[1])
            rows[i] = drawn(scale)[4][i]
    stacked = _one_under_another(tops + rows, background, int(round(0.1 * dpi)))
    canvas.draw()  # as drawn at its own size again
    return {
        "wide": _png(wide, dpi),
        "stacked": _png(stacked, dpi),
        "wide_panels": [int(round(min(b.x1, wide_box.x1) - max(b.x0, wide_box.x0))) for b in boxes],
        "stacked_panels": [row.shape[1] for row in rows],
        "wide_width": wide.shape[1],
    }


def _side_by_side(pieces, background, gap: int) -> np.ndarray:
    height = max(p.shape[0] for p in pieces)
    out = []
    for i, piece in enumerate(pieces):
        column = np.empty((height, piece.shape[1] + (gap if i else 0), 4), dtype=piece.dtype)
        column[:] = background
        top = (height - piece.shape[0]) // 2
        column[top : top + piece.shape[0], column.shape[1] - piece.shape[1] :] = piece
        out.append(column)
    return np.concatenate(out, axis=1)


def _one_under_another(rows, background, gap: int) -> np.ndarray:
    width = max(r.shape[1] for r in rows)
    out = np.empty((sum(r.shape[0] for r in rows) + gap * (len(rows) - 1), width, 4), dtype=rows[0].dtype)
    out[:] = background
    top = 0
    for row in rows:
        out[top : top + row.shape[0], : row.shape[1]] = row
        top += row.shape[0] + gap
    return out


def panels_html(fig, alt: str) -> str:
    """``fig``, a figure of several panels, as an HTML ``<picture>`` that a browser draws side by side where the
    window lets every panel be at least :data:`LEAST_PANEL` CSS pixels wide (or its own width), as the notebook
    drew it, and in any window as wide as a desktop's (:data:`DESKTOP_FROM`); else stacked, one panel under
    another, each across the column (:func:`panel_layouts`). The
    images are in the page (data URLs), with the alt text ``alt``; ``data-panels`` gives the panels' widths in
    each image, in image pixels, for the book's tests."""
    import base64
    import html
    import json

    if not alt.strip():
        raise ValueError("alt is empty: describe the figure for a reader who cannot see it")
    drawn = panel_layouts(fig)
    # The narrowest window whose column shows the side-by-side image with every panel wide enough.
    scale = max(min(LEAST_PANEL, w) / w for w in drawn["wide_panels"] if w > 0)
    narrowest = min(math.ceil(min(1.0, scale) * drawn["wide_width"]) + PAGE_MARGINS, DESKTOP_FROM)

    def url(png: bytes) -> str:
        return "data:image/png;base64," + base64.b64encode(png).decode()

    panels = html.escape(json.dumps({"wide": drawn["wide_panels"], "stacked": drawn["stacked_panels"]}))
    return (
        f'<picture class="course-panels">'
        f'<source media="(max-width: {narrowest - 0.02:.2f}px)" srcset="{url(drawn["stacked"])}">'
        f'<img src="{url(drawn["wide"])}" alt="{html.escape(" ".join(alt.split()))}" data-panels="{panels}">'
        f"</picture>"
    )


class AttentionMaps:
    """Attention weights of several heads (and layers), one at a time, in an interactive map of a book page:
    a menu chooses the map, the tokens label the axes, and hovering a cell gives its query, key and weight.

    ``maps`` is ``{name: 2-D weights}`` ("layer 1, head 2": one row per query, one column per key), in the
    menu's order; ``queries`` and ``keys`` label the rows and columns of every map. ``name`` makes the
    page's element id. Shown in a page that Jupyter Book executes, the map is drawn by plotly.js, which the
    course's site serves itself (``course_site.sphinx_ext``): it needs no network.
    """

    def __init__(self, maps: dict, *, queries: Sequence[str], keys: Sequence[str], name: str, title: str = ""):
        if not maps:
            raise ValueError("maps is empty: give at least one {name: weights}")
        self.maps = {label: _as_matrix(weights) for label, weights in maps.items()}
        for label, matrix in self.maps.items():
            if matrix.shape != (len(queries), len(keys)):
                raise ValueError(
                    f"maps[{label!r}] has shape {matrix.shape}, but there are {len(queries)} queries and "
                    f"{len(keys)} keys"
                )
        self.queries, self.keys, self.name, self.title = list(queries), list(keys), name, title

    def figure(self):
        """The plotly figure: one heatmap per map, the first shown, and the menu that shows another."""
        import plotly.graph_objects as go

        rows, columns = len(self.queries), len(self.keys)
        # The axes are positions, labelled with the tokens: a repeated token keeps a row and column of its own.
        labels = np.array([[(q, k) for k in self.keys] for q in self.queries], dtype=object)
        top = max(float(m.max()) for m in self.maps.values())
        traces = [
            go.Heatmap(
                z=matrix,
                customdata=labels,
                colorscale="Viridis",
                zmin=0.0,
                zmax=max(top, 1e-12),
                visible=i == 0,
                name=label,
                hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{z:.3f}<extra></extra>",
            )
            for i, (label, matrix) in enumerate(self.maps.items())
        ]
        menu = [
            {
                "label": label,
                "method": "update",
                "args": [{"visible": [j == i for j in range(len(traces))]}, {"title.text": self._title(label)}],
            }
            for i, label in enumerate(self.maps)
        ]
        # Above the map, one row each (pixels from the figure's top), so that none covers another in a window
        # as narrow as a phone's: plotly's toolbar (at the top right, its own), the title, the menu.
        top, bottom, title_at, menu_at = 104, 50, 34, 62
        height = top + bottom + 26 + 22 * rows
        plot_height = height - top - bottom
        figure = go.Figure(traces)
        figure.update_layout(
            title={
                "text": self._title(next(iter(self.maps))),
                "x": 0.0,
                "xanchor": "left",
                "xref": "paper",
                "y": 1 - title_at / height,
                "yanchor": "top",
                "yref": "container",
                "font": {"size": 14},
            },
            updatemenus=[
                {"buttons": menu, "x": 0.0, "xanchor": "left", "y": 1 + (top - menu_at) / plot_height, "yanchor": "top"}
            ],
            xaxis={"tickvals": list(range(columns)), "ticktext": self.keys, "title": "key", "tickangle": 0},
            yaxis={"tickvals": list(range(rows)), "ticktext": self.queries, "title": "query", "autorange": "reversed"},
            height=height,
            margin={"l": 60, "r": 20, "t": top, "b": bottom},
        )
        return figure

    def _title(self, label: str) -> str:
        return f"{self.title}: {label}" if self.title else label

    def _repr_html_(self) -> str:
        html = self.figure().to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"attention-maps-{self.name}",
            config={"responsive": True, "displaylogo": False},
        )
        return f'<div class="attention-maps">{html}</div>'
