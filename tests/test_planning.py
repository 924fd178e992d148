"""Chapter 8's planning figures: Korthikanti et al.'s count of a layer's activations under tensor and sequence
parallelism and recomputation, against the activations the course's layer saves; Chinchilla's fitted loss and
its least-loss split of a budget."""

from __future__ import annotations

import math

import pytest
import torch

from attention_course import seed_everything
from attention_course.models.transformer import DecoderOnlyLayer
from attention_course.scale.flops import (
    CHINCHILLA_FITS,
    PEAK_BF16_FLOPS,
    PEAK_MEMORY_BANDWIDTH,
    chinchilla_loss,
    chinchilla_optimal,
)
from attention_course.scale.memory import megatron_activation_bytes


def saved_bytes(layer: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the storages that the layer's forward pass saves for the backward pass, its weights left out."""
    own = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    saved = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in own:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x)
    return sum(saved.values())


def test_the_count_without_parallelism_is_34sbh_and_5as2b():
    s, b, h, a = 2048, 1, 12288, 96
    assert megatron_activation_bytes(s, b, h, a) == s * b * h * (34 + 5 * a * s / h)
    assert megatron_activation_bytes(s, b, h, a, recompute="selective") == 34 * s * b * h
    assert megatron_activation_bytes(s, b, h, a, recompute="full") == 2 * s * b * h


@pytest.mark.parametrize("t", [1, 2, 8])
def test_tensor_and_sequence_parallelism_split_what_the_paper_says(t):
    s, b, h, a = 512, 4, 1024, 16
    sbh = s * b * h

    def count(**options):
        return megatron_activation_bytes(s, b, h, a, tensor_parallel=t, **options)

    assert math.isclose(count(), sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert math.isclose(count(sequence_parallel=True), sbh * (34 / t + 5 * a * s / (h * t)))
    assert math.isclose(count(recompute="selective"), sbh * (10 + 24 / t))
    assert math.isclose(count(sequence_parallel=True, recompute="selective"), sbh * 34 / t)
    if t == 1:  # one GPU: sequence parallelism changes nothing
        assert count() == count(sequence_parallel=True) == megatron_activation_bytes(s, b, h, a)


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"tensor_parallel": 0}, "tensor_parallel"),
        ({"recompute": "some"}, "recompute"),
        ({"heads": 0}, "heads"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs, named):
    arguments = {"seq_len": 8, "batch_size": 1, "hidden": 16, "heads": 2} | kwargs
    with pytest.raises(ValueError, match=named):
        megatron_activation_bytes(**arguments)


@pytest.mark.parametrize("b, s, h, a", [(2, 32, 64, 4), (1, 24, 48, 3)])
@pytest.mark.parametrize("fused", [False, True])
def test_the_course_layer_differs_from_the_count_by_dropout_norm_statistics_and_fused_extras(b, s, h, a, fused):
    """The course's GELU layer without dropout, in bfloat16, keeps Korthikanti et al.'s tensors, but for their
    dropout masks and dropped-out weights, plus the layer norms' statistics (and, fused, the log-sum-exp and the
    stacked query, key and value matrices in place of the weights)."""
    seed_everything(0)
    layer = DecoderOnlyLayer(h, a, a, 4 * h, dropout=0.0, fused=fused, feed_forward_kind="gelu_exact")
    layer = layer.to(torch.bfloat16).train()
    x = torch.randn(b, s, h, requires_grad=True).to(torch.bfloat16)
    measured = saved_bytes(layer, x)
    statistics = 2 * 2 * 2 * s * b
    if fused:
        expected = megatron_activation_bytes(s, b, h, a, recompute="selective") - 2 * s * b * h
        expected += statistics + 4 * a * s * b + 2 * 3 * h * h
    else:
        expected = megatron_activation_bytes(s, b, h, a) - 2 * s * b * h - 3 * a * s * s * b + statistics
    assert measured == expected


def test_the_fits_are_the_published_constants():
    assert CHINCHILLA_FITS["Hoffmann et al. 2022"] == {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
    assert CHINCHILLA_FITS["Besiroglu et al. 2024"] == {
        "E": 1.8172,
        "A": 482.01,
        "B": 2085.43,
        "alpha": 0.3478,
        "beta": 0.3658,
    }


@pytest.mark.parametrize("source", list(CHINCHILLA_FITS))
@pytest.mark.parametrize("compute", [1e20, 5.88e23, 1e25])
def test_the_optimum_is_the_least_loss_on_the_budget(source, compute):
    fit = CHINCHILLA_FITS[source]
    n_opt, d_opt = chinchilla_optimal(compute, **fit)
    assert math.isclose(6 * n_opt * d_opt, compute)
    best = chinchilla_loss(n_opt, d_opt, **fit)
    for factor in (0.5, 0.9, 1.1, 2.0):  # the same budget, spent otherwise
        n = n_opt * factor
        assert chinchilla_loss(n, compute / (6 * n), **fit) > best
    assert best > fit["E"]


def test_the_refit_spends_chinchillas_budget_near_20_tokens_a_parameter():
    budget = 6 * 70e9 * 1.4e12
    n_h, d_h = chinchilla_optimal(budget, **CHINCHILLA_FITS["Hoffmann et al. 2022"])
    n_b, d_b = chinchilla_optimal(budget, **CHINCHILLA_FITS["Besiroglu et al. 2024"])
    assert 15 < d_b / n_b < 25 < 80 < d_h / n_h


def test_losses_and_budgets_must_be_positive():
    fit = CHINCHILLA_FITS["Hoffmann et al. 2022"]
    with pytest.raises(ValueError, match="n_params"):
        chinchilla_loss(0, 1e9, **fit)
    with pytest.raises(ValueError, match="compute_flops"):
        chinchilla_optimal(-1.0, **fit)


def test_every_bandwidth_has_a_peak():
    assert set(PEAK_MEMORY_BANDWIDTH) <= set(PEAK_BF16_FLOPS)
    ridge = PEAK_BF16_FLOPS["NVIDIA H100 80GB HBM3"] / PEAK_MEMORY_BANDWIDTH["NVIDIA H100 80GB HBM3"]
    assert 250 < ridge < 350  # FLOPs per byte at which an H100's arithmetic, not its memory, is the limit
