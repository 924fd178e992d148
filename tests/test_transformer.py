"""attention_course.transformer: the capstone model against torch.nn, its causality, padding and decoding."""

from __future__ import annotations

import pytest
import torch

from attention_course.attention import causal_mask
from attention_course.transformer import (
    DecoderLayer,
    DecoderOnly,
    EncoderLayer,
    FeedForward,
    Transformer,
    greedy_decode,
    to_torch_decoder_layer,
    to_torch_encoder_layer,
)
from autograder import reference
from autograder.fixtures import ScriptedTranslator


@pytest.mark.parametrize("norm_first", [False, True])
def test_layers_equal_the_torch_built_ins(norm_first):
    torch.manual_seed(0)
    x, memory = torch.randn(3, 6, 16), torch.randn(3, 9, 16)
    keep = torch.rand(3, 9) > 0.3
    keep[:, 0] = True
    encoder = EncoderLayer(16, 4, 32, norm_first=norm_first)
    torch.testing.assert_close(encoder(memory, keep[:, None, None, :]),
                               to_torch_encoder_layer(encoder).eval()(memory, src_key_padding_mask=~keep))
    decoder = DecoderLayer(16, 4, 32, norm_first=norm_first)
    expected = to_torch_decoder_layer(decoder).eval()(x, memory, tgt_mask=~causal_mask(6),
                                                      memory_key_padding_mask=~keep)
    torch.testing.assert_close(decoder(x, memory, causal_mask(6), keep[:, None, None, :]), expected)


@pytest.mark.parametrize("norm_first,fused", [(False, False), (True, True)])
def test_the_transformer_is_causal_and_ignores_padding(norm_first, fused):
    torch.manual_seed(1)
    model = Transformer(11, 13, 16, 4, 2, 32, dropout=0.0, norm_first=norm_first, fused=fused).eval()
    src, tgt = torch.randint(3, 11, (2, 7)), torch.randint(3, 13, (2, 6))
    keep = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    logits = model(src, tgt, keep, causal_mask(6))
    assert logits.shape == (2, 6, 13)
    later = tgt.clone()
    later[:, 3:] = (later[:, 3:] + 1) % 13
    torch.testing.assert_close(model(src, later, keep, causal_mask(6))[:, :3], logits[:, :3])
    padded = src.clone()
    padded[1, 4:] = 0
    torch.testing.assert_close(model(padded, tgt, keep, causal_mask(6)), logits)


def test_greedy_decode_stops_fills_and_drops_bos():
    model = ScriptedTranslator(16, 1, 2)
    src = torch.tensor([[7, 3, 9, 4], [1, 2, 3, 4]])
    keep = torch.tensor([[True, True, False, False], [True] * 4])
    out = greedy_decode(model, src, keep, 1, 2, 10)
    assert out.shape == (2, 5) and out.dtype == torch.long
    assert out[0, 2:].tolist() == [2, 2, 2] and out[1, 4].item() == 2 and (out[1, :4] != 2).all()
    assert greedy_decode(model, src, keep, 1, 2, 3).shape == (2, 3)


def test_the_decoder_only_model_is_causal_and_generates():
    torch.manual_seed(2)
    model = DecoderOnly(20, 16, 2, 2, 32, dropout=0.0, max_len=12).eval()
    ids = torch.randint(0, 20, (2, 8))
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 20
    torch.testing.assert_close(model(changed)[:, :5], model(ids)[:, :5])
    out = model.generate(ids[:, :2], 15, temperature=0.0)
    assert out.shape == (2, 17)


@pytest.mark.parametrize("name", ["FeedForward", "EncoderLayer", "DecoderLayer", "greedy_decode"])
def test_the_package_agrees_with_the_reference_solutions(name):
    torch.manual_seed(3)
    theirs = reference.get("ch06_transformer", name)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    if name == "FeedForward":
        ours, other = FeedForward(16, 24), theirs(16, 24)
        other.load_state_dict(ours.state_dict())
        torch.testing.assert_close(ours(x), other(x))
    elif name == "EncoderLayer":
        for norm_first in (False, True):
            ours, other = EncoderLayer(16, 4, 32, 0.0, norm_first), theirs(16, 4, 32, 0.0, norm_first)
            other.load_state_dict(ours.state_dict())
            torch.testing.assert_close(ours(x), other(x))
    elif name == "DecoderLayer":
        for norm_first in (False, True):
            ours, other = DecoderLayer(16, 4, 32, 0.0, norm_first), theirs(16, 4, 32, 0.0, norm_first)
            other.load_state_dict(ours.state_dict())
            torch.testing.assert_close(ours(x, memory, causal_mask(5)), other(x, memory, causal_mask(5)))
    else:
        src, keep = torch.randint(0, 16, (3, 6)), torch.rand(3, 6) > 0.4
        model = ScriptedTranslator(16, 1, 2)
        assert torch.equal(greedy_decode(model, src, keep, 1, 2, 9), theirs(model, src, keep, 1, 2, 9))
