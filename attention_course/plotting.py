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
