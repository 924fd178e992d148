"""The diagrams of attention_course.diagrams: each draws its mechanism from its arguments."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attention_course import diagrams


def texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_mask_grids_colour_exactly_the_visible_cells():
    mask = np.tril(np.ones((4, 4), dtype=bool))
    fig = diagrams.mask_grids({"look-ahead": mask, "all": np.ones((4, 4), dtype=bool)})
    drawn = fig.axes[0].images[0].get_array()
    visible = np.all(np.isclose(drawn, diagrams._rgb(diagrams.COLOURS["visible"])), axis=-1)
    assert np.array_equal(visible, mask)
    assert [ax.get_title() for ax in fig.axes] == ["look-ahead", "all"]
    plt.close(fig)


def test_head_sharing_connects_query_head_h_to_key_value_head_h_over_n_rep():
    fig = diagrams.head_sharing(8, (8, 2, 1))
    rows = [list(ax.texts) for ax in fig.axes]
    for row, groups in zip(rows, (8, 2, 1)):
        shared = [t for t in row if t.get_text().startswith("k,v")]
        assert len(shared) == groups
        for g, box in enumerate(shared):  # each key/value head sits under the centre of its group
            share = 8 // groups
            assert box.get_position()[0] == pytest.approx(g * share + (share - 1) / 2)
    assert "grouped-query" in fig.axes[1].get_title() and "multi-query" in fig.axes[2].get_title()
    plt.close(fig)
    with pytest.raises(ValueError, match="kv_heads"):
        diagrams.head_sharing(8, (3,))


def test_cache_steps_computes_the_prompt_at_once_then_one_position_a_step():
    fig = diagrams.cache_steps(prompt=3, steps=2)
    labels = texts(fig)
    assert labels.count("0") == 3 and labels.count("3") == 2 and labels.count("4") == 1
    assert {"prompt", "step 1", "step 2"} <= set(labels)
    plt.close(fig)


def test_norm_placement_puts_the_norm_after_the_sum_or_before_the_sublayer():
    fig = diagrams.norm_placement()
    for ax, first in zip(fig.axes, ("sublayer", "layer norm")):
        boxes = sorted((t.get_position()[1], t.get_text()) for t in ax.texts if t.get_text() != "residual")
        assert [text for _, text in boxes][1] == first
    plt.close(fig)
