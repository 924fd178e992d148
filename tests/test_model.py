"""attention_course.model: the models `make train` trains, built from the reference layers."""

from __future__ import annotations

import pytest
import torch

from attention_course.model import DecoderOnly, EncoderDecoder, FusedMultiHeadAttention, use_fused_attention
from attention_course.solutions.ch03_multi_head import MultiHeadAttention
from attention_course.solutions.ch04_masking import causal_mask


@pytest.mark.parametrize("bias", [True, False])
def test_the_fused_attention_computes_what_the_reference_computes(bias):
    torch.manual_seed(0)
    mha = MultiHeadAttention(24, 6, bias=bias)
    fused = FusedMultiHeadAttention(24, 6, bias=bias)
    fused.load_state_dict(mha.state_dict())
    query, memory = torch.randn(3, 4, 24), torch.randn(3, 9, 24)
    keep = torch.rand(3, 1, 4, 9) > 0.4
    keep[..., 0] = True
    output, no_weights = fused(query, memory, memory, keep)
    torch.testing.assert_close(output, mha(query, memory, memory, keep)[0])
    assert no_weights is None


def test_use_fused_attention_changes_every_attention_and_keeps_the_weights():
    torch.manual_seed(1)
    model = EncoderDecoder(11, 13, 16, 4, 2, 32, dropout=0.0).eval()
    src, tgt = torch.randint(3, 11, (2, 7)), torch.randint(3, 13, (2, 6))
    before = model(src, tgt, None, causal_mask(6))
    use_fused_attention(model)
    attentions = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert len(attentions) == 6 and all(type(m) is FusedMultiHeadAttention for m in attentions)
    torch.testing.assert_close(model(src, tgt, None, causal_mask(6)), before)


@pytest.mark.parametrize("norm_first,fused", [(False, False), (True, True)])
def test_the_encoder_decoder_is_causal_and_ignores_padding(norm_first, fused):
    torch.manual_seed(1)
    model = EncoderDecoder(11, 13, 16, 4, 2, 32, dropout=0.0, norm_first=norm_first, fused=fused).eval()
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


def test_the_decoder_only_model_is_causal_and_generates():
    torch.manual_seed(2)
    model = DecoderOnly(20, 16, 2, 2, 32, dropout=0.0, max_len=12).eval()
    ids = torch.randint(0, 20, (2, 8))
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 20
    torch.testing.assert_close(model(changed)[:, :5], model(ids)[:, :5])
    out = model.generate(ids[:, :2], 15, temperature=0.0)
    assert out.shape == (2, 17)
