"""The reference solutions, imported as ``attention_course.solutions.<assignment>``: their properties,
and their agreement with PyTorch's built-ins through ``attention_course.models.interop``.

The solution notebooks are the one source of each graded item; these tests check that what the
book shows, later chapters build on and the hidden tests compare with behaves as the contract says.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_course import solutions
from attention_course.models.interop import (
    to_torch_attn_mask,
    to_torch_decoder_layer,
    to_torch_encoder_layer,
    to_torch_multihead,
)
from attention_course.solutions import ch02_scaled_dot_product as ch02
from attention_course.solutions import ch03_multi_head as ch03
from attention_course.solutions import ch04_masking as ch04
from attention_course.solutions import ch05_positional_encoding as ch05
from attention_course.solutions import ch06_transformer as ch06
from autograder.api.scripted import ScriptedTranslator
from autograder.release import course, reference


def test_every_assignment_is_a_module_built_from_its_notebook():
    for assignment in course.assignments():
        module = reference.load(assignment)
        assert module.__name__ == f"attention_course.solutions.{assignment}"
        assert module.__spec__.origin.endswith(f"solutions/{assignment}/{assignment}.ipynb")
        source = solutions.module_source(assignment)
        assert "BEGIN SOLUTION" not in source and "from autograder" not in source
        compile(source, assignment, "exec")


def test_inspect_reads_each_reference_and_each_known_mistake_from_its_own_code():
    """A Triton kernel reads its own source to run (chapter 11): the module built from a notebook, whose file is the
    notebook's JSON, and each known mistake's variant, which is only a string, give inspect their own lines; two
    variants of one item do not share theirs."""
    import inspect

    module = reference.load("ch11_flash_attention")
    assert inspect.getsource(module.flash_attention_forward).startswith("def flash_attention_forward(")
    kernel = module.flash_forward_kernel.fn
    assert "tl.program_id(0)" in inspect.getsource(kernel)
    halved = reference.variant(
        "ch11_flash_attention", "flash_attention_forward", (("acc / total[:, None]", "acc / total[:, None] / 2"),)
    )
    doubled = reference.variant(
        "ch11_flash_attention", "flash_attention_forward", (("acc / total[:, None]", "acc / total[:, None] * 2"),)
    )
    for variant, changed in ((halved, "acc / total[:, None] / 2"), (doubled, "acc / total[:, None] * 2")):
        assert changed in inspect.getsource(variant.__globals__["flash_forward_kernel"].fn)
    q = torch.randn(1, 16, 16, generator=torch.Generator().manual_seed(0))
    right = module.flash_attention_forward(q, q, q)[0]
    torch.testing.assert_close(halved(q, q, q)[0], right / 2)
    torch.testing.assert_close(doubled(q, q, q)[0], right * 2)


def test_the_modules_share_their_classes():
    """A later chapter's reference builds on the earlier chapter's module object, not a copy of it."""
    layer = ch06.EncoderLayer(8, 2, 16)
    assert type(layer.self_attn) is ch03.MultiHeadAttention


def test_split_and_merge_heads_are_inverse_and_slice_features():
    x = torch.randn(2, 5, 12)
    heads = ch03.split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    assert torch.equal(heads[1, 2, 4], x[1, 4, 8:12])
    assert torch.equal(ch03.merge_heads(heads), x)
    with pytest.raises(ValueError, match="num_heads=5"):
        ch03.split_heads(x, 5)


def test_batched_heads_equal_a_loop_over_heads():
    torch.manual_seed(0)
    mha = ch03.MultiHeadAttention(16, 4)
    x, keep = torch.randn(2, 6, 16), torch.rand(2, 1, 1, 6) > 0.3
    keep[..., 0] = True
    output, weights = mha(x, x, x, keep)
    q, k, v = mha.W_q(x), mha.W_k(x), mha.W_v(x)
    per_head = [
        ch02.scaled_dot_product_attention(
            q[..., h * 4 : (h + 1) * 4], k[..., h * 4 : (h + 1) * 4], v[..., h * 4 : (h + 1) * 4], keep[:, 0]
        )[0]
        for h in range(4)
    ]
    torch.testing.assert_close(output, mha.W_o(torch.cat(per_head, dim=-1)))
    assert weights.shape == (2, 4, 6, 6)


@pytest.mark.parametrize("bias", [True, False])
def test_multihead_attention_equals_torch(bias):
    torch.manual_seed(1)
    mha = ch03.MultiHeadAttention(24, 6, bias=bias)
    query, memory = torch.randn(3, 4, 24), torch.randn(3, 9, 24)
    keep = torch.rand(3, 1, 4, 9) > 0.4
    keep[..., 0] = True
    output, weights = mha(query, memory, memory, keep)
    builtin = to_torch_multihead(mha)
    expected, expected_weights = builtin(
        query, memory, memory, attn_mask=to_torch_attn_mask(keep, 3, 6, 4, 9), average_attn_weights=False
    )
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)


def test_masks():
    tokens = torch.tensor([[4, 5, 0], [0, 3, 0]])
    assert ch04.padding_mask(tokens, 0).tolist() == [[True, True, False], [False, True, False]]
    assert ch04.causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    mask = ch04.decoder_self_attention_mask(torch.tensor([[1, 6, 2, 0]]), 0)
    assert mask.shape == (1, 1, 4, 4) and mask.dtype == torch.bool
    assert mask[0, 0].tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [True, True, True, False],
        [True, True, True, False],
    ]
    decoder_input, target = ch04.teacher_forcing_split(torch.tensor([[1, 7, 8, 2]]))
    assert decoder_input.tolist() == [[1, 7, 8]] and target.tolist() == [[7, 8, 2]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_masked_softmax_gives_zeros_for_fully_masked_rows_with_finite_gradients(dtype):
    scores = torch.randn(3, 5, dtype=dtype, requires_grad=True)
    keep = torch.tensor([[True, False, True, True, False], [False] * 5, [True] * 5])
    weights = ch04.masked_softmax(scores, keep)
    assert weights.dtype == dtype
    assert torch.equal(weights[1], torch.zeros(5, dtype=dtype))
    assert weights[~keep].eq(0).all()
    torch.testing.assert_close(weights[2], torch.softmax(scores[2], -1))
    (weights * torch.randn(3, 5, dtype=dtype)).sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_scaled_dot_product_attention_agrees_with_torch():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    keep = torch.rand(2, 3, 5) > 0.5
    keep[..., 0] = True
    output, weights = ch02.scaled_dot_product_attention(q, k, v, keep)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    assert weights[~keep].eq(0).all()


def test_sinusoidal_formula_and_interleaving():
    pe = ch05.sinusoidal_positional_encoding(50, 8)
    assert pe.shape == (50, 8) and pe.dtype == torch.float32
    for p, i in [(0, 0), (7, 1), (49, 3)]:
        angle = p / 10000 ** (2 * i / 8)
        assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
        assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    with pytest.raises(ValueError, match="d_model"):
        ch05.sinusoidal_positional_encoding(4, 7)


def test_a_shift_of_position_is_a_fixed_rotation():
    pe = ch05.sinusoidal_positional_encoding(120, 16).double()
    k = 9
    frequencies = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    shift = torch.zeros(16, 16, dtype=torch.float64)
    for i, w in enumerate(frequencies):
        c, s = math.cos(k * w), math.sin(k * w)
        shift[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    torch.testing.assert_close(pe[:-k] @ shift.T, pe[k:], atol=1e-6, rtol=0)


def test_positional_encoding_module():
    module = ch05.PositionalEncoding(8, max_len=10)
    x = torch.randn(3, 6, 8)
    torch.testing.assert_close(module(x), x + module.pe[:6])
    assert module(x.half()).dtype == torch.float16
    assert "pe" in module.state_dict() and not any(p is module.pe for p in module.parameters())
    with pytest.raises(ValueError, match="max_len=10"):
        module(torch.randn(1, 11, 8))


def test_rotary_scores_depend_only_on_the_distance():
    q, k = torch.randn(2, 3, 1, 16, dtype=torch.float64), torch.randn(2, 3, 1, 16, dtype=torch.float64)
    scores = [
        (ch05.apply_rotary(q, torch.tensor([m])) * ch05.apply_rotary(k, torch.tensor([m - 4]))).sum(-1)
        for m in (4, 11, 300)
    ]
    torch.testing.assert_close(scores[0], scores[1])
    torch.testing.assert_close(scores[0], scores[2])
    x = torch.randn(5, 8)
    rotated = ch05.apply_rotary(x)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))  # rotations keep lengths
    torch.testing.assert_close(rotated[0], x[0])  # position 0 is not rotated
    assert ch05.apply_rotary(x.half()).dtype == torch.float16


@pytest.mark.parametrize("norm_first", [False, True])
def test_layers_equal_the_torch_built_ins(norm_first):
    torch.manual_seed(0)
    x, memory = torch.randn(3, 6, 16), torch.randn(3, 9, 16)
    keep = torch.rand(3, 9) > 0.3
    keep[:, 0] = True
    encoder = ch06.EncoderLayer(16, 4, 32, norm_first=norm_first)
    torch.testing.assert_close(
        encoder(memory, keep[:, None, None, :]), to_torch_encoder_layer(encoder)(memory, src_key_padding_mask=~keep)
    )
    decoder = ch06.DecoderLayer(16, 4, 32, norm_first=norm_first)
    expected = to_torch_decoder_layer(decoder)(x, memory, tgt_mask=~ch04.causal_mask(6), memory_key_padding_mask=~keep)
    torch.testing.assert_close(decoder(x, memory, ch04.causal_mask(6), keep[:, None, None, :]), expected)


def test_the_transformer_is_causal_and_ignores_padding():
    torch.manual_seed(1)
    model = ch06.Transformer(11, 13, 16, 4, 2, 32, dropout=0.0).eval()
    src, tgt = torch.randint(3, 11, (2, 7)), torch.randint(3, 13, (2, 6))
    keep = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    logits = model(src, tgt, keep, ch04.causal_mask(6))
    assert logits.shape == (2, 6, 13)
    later = tgt.clone()
    later[:, 3:] = (later[:, 3:] + 1) % 13
    torch.testing.assert_close(model(src, later, keep, ch04.causal_mask(6))[:, :3], logits[:, :3])
    padded = src.clone()
    padded[1, 4:] = 0
    torch.testing.assert_close(model(padded, tgt, keep, ch04.causal_mask(6)), logits)


def test_greedy_decode_stops_fills_and_drops_bos():
    model = ScriptedTranslator(16, 1, 2)
    src = torch.tensor([[7, 3, 9, 4], [1, 2, 3, 4]])
    keep = torch.tensor([[True, True, False, False], [True] * 4])
    out = ch06.greedy_decode(model, src, keep, 1, 2, 10)
    assert out.shape == (2, 5) and out.dtype == torch.long
    assert out[0, 2:].tolist() == [2, 2, 2] and out[1, 4].item() == 2 and (out[1, :4] != 2).all()
    assert ch06.greedy_decode(model, src, keep, 1, 2, 3).shape == (2, 3)
