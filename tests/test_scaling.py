"""attention_course.scale.scaling: peak tensor memory, best time, and the log-log plot of chapter 7."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attention_course.scale.scaling import best_time, peak_tensor_bytes, plot_scaling  # noqa: E402


def test_peak_counts_the_tensors_alive_at_once():
    def two_matrices():
        a = torch.ones(100, 100)  # 40,000 bytes
        b = a * 2  # 40,000 more, both alive
        del a, b
        c = torch.ones(50, 50)  # 10,000, after the others are gone
        return c

    result, peak = peak_tensor_bytes(two_matrices)
    assert peak == 80_000
    assert result.shape == (50, 50)


def test_views_and_in_place_operations_add_nothing():
    def views():
        a = torch.zeros(1000)
        b = a.view(10, 100).t()  # the same storage
        b.add_(1)  # in place
        return a[:10]

    _, peak = peak_tensor_bytes(views)
    assert peak == 4000


def test_inputs_and_their_views_are_not_counted():
    x = torch.randn(256, 256)
    _, peak = peak_tensor_bytes(lambda t: t.t()[:10], x)
    assert peak == 0
    _, peak = peak_tensor_bytes(lambda t: t.sum(), x)
    assert peak == 4


def test_full_attention_holds_scores_and_weights_and_blocks_hold_less():
    q = k = v = torch.randn(1, 1, 512, 16)

    def full(q, k, v):
        return (q @ k.transpose(-2, -1)).softmax(dim=-1) @ v

    _, full_peak = peak_tensor_bytes(full, q, k, v)
    scores = 512 * 512 * 4
    # the scores and the weights; the scores are gone before the product with v
    assert full_peak == 2 * scores

    def blocks(q, k, v):
        total = torch.zeros(512, 1)
        for i in range(0, 512, 64):
            total = total + (q[0, 0] @ k[0, 0, i : i + 64].t()).exp().sum(dim=-1, keepdim=True)
        return total

    _, block_peak = peak_tensor_bytes(blocks, q, k, v)
    assert block_peak <= 2 * 512 * 64 * 4 + 2 * 512 * 4


def test_a_memory_freed_and_reused_at_the_same_address_is_counted_again():
    def loop():
        for _ in range(5):
            x = torch.empty(10_000)
            del x
        return None

    _, peak = peak_tensor_bytes(loop)
    assert peak == 40_000


def test_best_time_is_the_shortest_and_checks_repeats():
    calls = []
    assert best_time(lambda: calls.append(1), repeats=4) >= 0
    assert len(calls) == 5  # one warm-up
    with pytest.raises(ValueError, match="repeats"):
        best_time(lambda: None, repeats=0)


def test_plot_scaling_draws_each_series_and_a_reference():
    fig, ax = plt.subplots()
    plot_scaling([1, 2, 4], {"a": [1.0, 4.0, 16.0], "b": [1.0, 2.0, 4.0]}, ax=ax, reference=("L²", 2))
    assert len(ax.lines) == 3
    assert list(ax.lines[2].get_ydata()) == [1.0, 4.0, 16.0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="values"):
        plot_scaling([1, 2], {"a": [1.0]}, ax=ax)
    plt.close(fig)
