"""Figures the chapters share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
    ax.set_xticks(range(n_keys), labels=keys if keys is not None else range(n_keys))
    ax.set_yticks(range(n_queries), labels=queries if queries is not None else range(n_queries))
    if keys is not None and max((len(str(k)) for k in keys), default=0) > 3:
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


def show_figure(fig, name: str, alt: str, caption: str) -> None:
    """Show ``fig`` in a book page as the numbered figure ``name``, with its alt text and caption.

    The chapters call it for figures whose descriptions quote computed results, so that the alt
    text and the caption are written from the same values as the figure. It only works in a page
    that Jupyter Book executes (it emits a MyST ``glue:figure`` directive).
    """
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display
    from myst_nb import glue

    glue(name, fig, display=False)
    plt.close(fig)
    alt = " ".join(alt.split())  # an option of a directive is one line
    display(Markdown(f"```{{glue:figure}} {name}\n:alt: {alt}\n:name: {name}\n\n{caption}\n```"))


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
        figure = go.Figure(traces)
        figure.update_layout(
            title={"text": self._title(next(iter(self.maps))), "x": 0.0, "xanchor": "left", "font": {"size": 14}},
            updatemenus=[{"buttons": menu, "x": 1.0, "xanchor": "right", "y": 1.12, "yanchor": "bottom"}],
            xaxis={"tickvals": list(range(columns)), "ticktext": self.keys, "title": "key", "tickangle": 0},
            yaxis={"tickvals": list(range(rows)), "ticktext": self.queries, "title": "query", "autorange": "reversed"},
            height=180 + 22 * rows,
            margin={"l": 60, "r": 20, "t": 80, "b": 50},
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
