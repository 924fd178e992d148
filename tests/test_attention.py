"""attention_course.attention: the attention code that the chapters show and later chapters build on."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attention_course.attention import (
    MultiHeadAttention,
    causal_mask,
    decoder_self_attention_mask,
    masked_softmax,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
    to_torch_attn_mask,
    to_torch_multihead,
)
from autograder import reference


def test_split_and_merge_heads_are_inverse_and_slice_features():
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    assert torch.equal(heads[1, 2, 4], x[1, 4, 8:12])
    assert torch.equal(merge_heads(heads), x)
    with pytest.raises(ValueError, match="num_heads=5"):
        split_heads(x, 5)


def test_batched_heads_equal_a_loop_over_heads():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    x, keep = torch.randn(2, 6, 16), torch.rand(2, 1, 1, 6) > 0.3
    keep[..., 0] = True
    output, weights = mha(x, x, x, keep)
    q, k, v = mha.W_q(x), mha.W_k(x), mha.W_v(x)
    per_head = [scaled_dot_product_attention(q[..., h * 4:(h + 1) * 4], k[..., h * 4:(h + 1) * 4],
                                             v[..., h * 4:(h + 1) * 4], keep[:, 0])[0] for h in range(4)]
    torch.testing.assert_close(output, mha.W_o(torch.cat(per_head, dim=-1)))
    assert weights.shape == (2, 4, 6, 6)


@pytest.mark.parametrize("bias", [True, False])
def test_multihead_attention_equals_torch_and_the_fused_path(bias):
    torch.manual_seed(1)
    mha = MultiHeadAttention(24, 6, bias=bias)
    query, memory = torch.randn(3, 4, 24), torch.randn(3, 9, 24)
    keep = torch.rand(3, 1, 4, 9) > 0.4
    keep[..., 0] = True
    output, weights = mha(query, memory, memory, keep)
    builtin = to_torch_multihead(mha)
    expected, expected_weights = builtin(query, memory, memory, attn_mask=to_torch_attn_mask(keep, 3, 6, 4, 9),
                                         average_attn_weights=False)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)
    fused = MultiHeadAttention(24, 6, bias=bias, fused=True)
    fused.load_state_dict(mha.state_dict())
    fused_output, no_weights = fused(query, memory, memory, keep)
    torch.testing.assert_close(fused_output, output)
    assert no_weights is None


def test_masks():
    tokens = torch.tensor([[4, 5, 0], [0, 3, 0]])
    assert padding_mask(tokens, 0).tolist() == [[True, True, False], [False, True, False]]
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    mask = decoder_self_attention_mask(torch.tensor([[1, 6, 2, 0]]), 0)
    assert mask.shape == (1, 1, 4, 4) and mask.dtype == torch.bool
    assert mask[0, 0].tolist() == [[True, False, False, False], [True, True, False, False],
                                   [True, True, True, False], [True, True, True, False]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_masked_softmax_gives_zeros_for_fully_masked_rows_with_finite_gradients(dtype):
    scores = torch.randn(3, 5, dtype=dtype, requires_grad=True)
    keep = torch.tensor([[True, False, True, True, False], [False] * 5, [True] * 5])
    weights = masked_softmax(scores, keep)
    assert weights.dtype == dtype
    assert torch.equal(weights[1], torch.zeros(5, dtype=dtype))
    assert weights[~keep].eq(0).all()
    torch.testing.assert_close(weights[2], torch.softmax(scores[2], -1))
    (weights * torch.randn(3, 5, dtype=dtype)).sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_fully_masked_rows_agree_with_torch_sdpa():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    keep = torch.rand(2, 3, 5) > 0.5
    keep[0, 1] = False
    output, _ = scaled_dot_product_attention(q, k, v, keep)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    assert torch.equal(output[0, 1], torch.zeros(6))


@pytest.mark.parametrize("name,assignment", [
    ("split_heads", "ch03_multi_head"), ("merge_heads", "ch03_multi_head"), ("MultiHeadAttention", "ch03_multi_head"),
    ("padding_mask", "ch04_masking"), ("causal_mask", "ch04_masking"), ("masked_softmax", "ch04_masking"),
    ("decoder_self_attention_mask", "ch04_masking"),
])
def test_the_package_agrees_with_the_reference_solutions(name, assignment):
    """The chapters show the package's code and the exercises grade against the solutions: they must agree."""
    ours, theirs = globals()[name], reference.get(assignment, name)
    torch.manual_seed(0)
    if name == "split_heads":
        x = torch.randn(2, 5, 12)
        assert torch.equal(ours(x, 3), theirs(x, 3))
    elif name == "merge_heads":
        x = torch.randn(2, 3, 5, 4)
        assert torch.equal(ours(x), theirs(x))
    elif name == "MultiHeadAttention":
        a, b = ours(16, 4), theirs(16, 4)
        b.load_state_dict(a.state_dict())
        x, keep = torch.randn(2, 5, 16), torch.rand(2, 1, 5, 5) > 0.5
        for got, want in zip(a(x, x, x, keep), b(x, x, x, keep)):
            torch.testing.assert_close(got, want)
    elif name in ("padding_mask", "decoder_self_attention_mask"):
        tokens = torch.randint(0, 4, (3, 7))
        assert torch.equal(ours(tokens, 2), theirs(tokens, 2))
    elif name == "causal_mask":
        assert torch.equal(ours(6), theirs(6))
    else:
        scores, keep = torch.randn(2, 4, 6), torch.rand(2, 4, 6) > 0.6
        assert torch.equal(ours(scores, keep), theirs(scores, keep))
