"""The diagrams of attention_course.basics.diagrams: each draws its mechanism from its arguments."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attention_course.basics import diagrams


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


def test_attention_block_runs_the_steps_in_order_from_q_and_k_to_the_output():
    fig = diagrams.attention_block()
    steps = sorted((t.get_position()[1], t.get_text()) for t in fig.axes[0].texts)
    order = [text for _, text in steps if text not in ("Q", "K", "V")]
    assert order == [r"scores $QK^\top$", r"scale by $1/\sqrt{d_k}$", "mask (optional)", "softmax over keys",
                     r"weights $\times V$", "output"]  # fmt: skip
    plt.close(fig)


def test_multi_head_split_colours_d_model_over_num_heads_features_per_head_in_every_row():
    fig = diagrams.multi_head_split(12, 3)
    cells = [p for p in fig.axes[0].patches if type(p).__name__ == "Rectangle"]
    assert len(cells) == 3 * 12
    colours = [tuple(p.get_facecolor()) for p in cells[:12]]
    assert [colours.count(c) for c in dict.fromkeys(colours)] == [4, 4, 4]
    plt.close(fig)
    with pytest.raises(ValueError, match="num_heads"):
        diagrams.multi_head_split(10, 3)


def test_rotary_rotation_gives_the_same_score_for_the_same_offset():
    fig = diagrams.rotary_rotation((1.0, 0.0), (0.0, 1.0), 0.35, ((2, 0), (5, 3), (4, 4)))
    titles = [ax.get_title() for ax in fig.axes]
    scores = [title.split("score ")[1] for title in titles]
    assert scores[0] == scores[1] == f"{np.cos(np.pi / 2 - 2 * 0.35):.2f}" and scores[2] == "0.00"
    plt.close(fig)


def test_model_stacks_give_cross_attention_to_the_encoder_decoder_only():
    fig = diagrams.model_stacks()
    encoder_decoder, decoder_only = ([t.get_text() for t in ax.texts] for ax in fig.axes)
    assert "cross-attention" in encoder_decoder and "cross-attention" not in decoder_only
    assert encoder_decoder.count("masked self-att.") == 1 and decoder_only.count("masked self-att.") == 1
    assert "self-attention" in encoder_decoder  # the encoder's, unmasked
    plt.close(fig)


def test_flash_tiling_marks_the_tiles_done_and_the_current_one():
    fig = diagrams.flash_tiling(4, 5, (1, 2))
    drawn = fig.axes[0].images[0].get_array()
    new = np.all(np.isclose(drawn, diagrams._rgb(diagrams.COLOURS["new"])), axis=-1)
    done = np.all(np.isclose(drawn, diagrams._rgb(diagrams.COLOURS["cached"])), axis=-1)
    assert drawn.shape[:2] == (4, 5) and list(zip(*np.nonzero(new))) == [(1, 2)]
    assert list(zip(*np.nonzero(done))) == [(1, 0), (1, 1)]
    plt.close(fig)
    with pytest.raises(ValueError, match="current"):
        diagrams.flash_tiling(4, 4, (4, 0))


def test_linear_reassociation_draws_an_n_by_n_or_a_d_by_d_middle():
    fig = diagrams.linear_reassociation(8, 3)
    shapes = [[t.get_text() for t in ax.texts if "×" in t.get_text()] for ax in fig.axes]
    assert shapes == [["8×3", "3×8", "8×3", "8×8"], ["8×3", "3×8", "8×3", "3×3"]]
    plt.close(fig)


def test_all_reduce_gives_every_worker_a_share_a_gradient_and_the_same_update():
    fig = diagrams.all_reduce(3)
    labels = texts(fig)
    assert [label for label in labels if label.startswith("grad")] == ["grad 0", "grad 1", "grad 2"]
    assert labels.count("update") == 3 and sum("all-reduce" in label for label in labels) == 1
    plt.close(fig)
