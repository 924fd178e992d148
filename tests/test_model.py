"""attention_course.models.transformer: the models `make train` trains, built from the reference layers."""

from __future__ import annotations

import pytest
import torch

from attention_course.models.fused_attention import (
    CAUSAL,
    FusedGroupedQueryAttention,
    FusedMultiHeadAttention,
    FusedRotaryGroupedQueryAttention,
    mask_for,
    projections,
    use_fused_attention,
)
from attention_course.models.interop import to_torch_encoder_layer
from attention_course.models.layers import feed_forward
from attention_course.models.transformer import NO_BIASES, DecoderOnly, EncoderDecoder, ModelConfig
from attention_course.solutions.ch03_multi_head import MultiHeadAttention
from attention_course.solutions.ch04_masking import causal_mask
from attention_course.solutions.ch06_transformer import EncoderLayer
from attention_course.solutions.ch07_efficient_attention import GroupedQueryAttention
from tests.support.decoding import logits_fed_in_pieces


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


@pytest.mark.parametrize("bias", [True, False])
def test_the_causal_marker_and_one_qkv_product_compute_what_the_reference_computes(bias):
    torch.manual_seed(3)
    mha = MultiHeadAttention(24, 6, bias=bias)
    fused = FusedMultiHeadAttention(24, 6, bias=bias)
    fused.load_state_dict(mha.state_dict())
    x, memory = torch.randn(3, 5, 24, requires_grad=True), torch.randn(3, 7, 24)
    expected = mha(x, x, x, causal_mask(5))[0]
    torch.testing.assert_close(fused(x, x, x, CAUSAL)[0], expected)
    fused.fuse_projections = False  # the three products apart, as `make train --without fused-qkv` runs them
    torch.testing.assert_close(fused(x, x, x, CAUSAL)[0], expected)
    fused.fuse_projections = True
    torch.testing.assert_close(fused(x, memory, memory)[0], mha(x, memory, memory)[0])  # keys and values fused
    # the gradients reach each projection's own parameters as they do through three products
    (grad_fused,) = torch.autograd.grad(fused(x, x, x, CAUSAL)[0].square().sum(), fused.W_k.weight)
    (grad_reference,) = torch.autograd.grad(expected.square().sum(), mha.W_k.weight)
    torch.testing.assert_close(grad_fused, grad_reference)


def test_projections_stack_layers_with_and_without_biases():
    torch.manual_seed(4)
    layers = [torch.nn.Linear(8, 8), torch.nn.Linear(8, 4, bias=False), torch.nn.Linear(8, 4)]
    x = torch.randn(2, 3, 8)
    for got, layer in zip(projections(x, *layers), layers):
        torch.testing.assert_close(got, layer(x))


@pytest.mark.parametrize("num_kv_heads", [4, 2])
def test_grouped_query_attention_takes_the_causal_marker_without_a_cache_only(num_kv_heads):
    torch.manual_seed(5)
    reference = GroupedQueryAttention(16, 4, num_kv_heads, bias=True)
    for fused in (FusedGroupedQueryAttention(16, 4, num_kv_heads, bias=True),
                  FusedRotaryGroupedQueryAttention(16, 4, num_kv_heads, bias=True)):  # fmt: skip
        fused.load_state_dict(reference.state_dict())
        x = torch.randn(2, 6, 16)
        out, cache = fused(x, causal_mask(6))
        torch.testing.assert_close(fused(x, CAUSAL)[0], out)
        with pytest.raises(ValueError, match="CAUSAL"):
            fused(x[:, :1], CAUSAL, cache)


def test_the_causal_marker_becomes_a_mask_for_every_other_attention():
    assert mask_for(FusedMultiHeadAttention(8, 2), CAUSAL, 4, "cpu") is CAUSAL
    built = mask_for(MultiHeadAttention(8, 2), CAUSAL, 4, "cpu")  # the course's own attention, or a student's
    assert torch.equal(built, causal_mask(4))
    keep = torch.ones(2, 4, dtype=torch.bool)
    assert mask_for(MultiHeadAttention(8, 2), keep, 4, "cpu") is keep


def test_a_model_with_the_courses_own_attention_in_a_layer_gets_a_mask_tensor_there():
    torch.manual_seed(6)
    model = DecoderOnly(20, 16, 2, 2, 32, dropout=0.0, max_len=12, fused=True).eval()
    ids = torch.randint(0, 20, (2, 9))
    before = model(ids)
    seen = []
    own = GroupedQueryAttention(16, 2, 2, bias=True)
    own.load_state_dict(model.layers[1].self_attn.state_dict())
    own.register_forward_pre_hook(lambda _, args: seen.append(args[1]))
    model.layers[1].self_attn = own
    torch.testing.assert_close(model(ids), before)
    assert torch.equal(seen[0], causal_mask(9))


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


@pytest.mark.parametrize("norm_first", [False, True])
def test_tied_weights_share_one_matrix_between_target_embedding_and_output_layer(norm_first):
    torch.manual_seed(3)
    untied = EncoderDecoder(11, 13, 16, 4, 2, 32, dropout=0.0, norm_first=norm_first)
    tied = EncoderDecoder(11, 13, 16, 4, 2, 32, dropout=0.0, norm_first=norm_first, tie_weights=True)
    assert tied.generator.weight is tied.tgt_embed.tokens.weight
    count = lambda model: sum(p.numel() for p in model.parameters())  # noqa: E731
    assert count(untied) - count(tied) == 13 * 16  # one (V, d) matrix fewer
    src, tgt = torch.randint(3, 11, (2, 7)), torch.randint(3, 13, (2, 6))
    optimizer = torch.optim.AdamW(tied.parameters(), lr=1e-2)
    tied(src, tgt, None, causal_mask(6)).sum().backward()
    optimizer.step()  # the shared matrix gets one update, from both of its uses
    assert tied.generator.weight is tied.tgt_embed.tokens.weight
    copy = EncoderDecoder(11, 13, 16, 4, 2, 32, dropout=0.0, norm_first=norm_first, tie_weights=True)
    copy.load_state_dict(tied.state_dict())
    assert copy.generator.weight is copy.tgt_embed.tokens.weight
    torch.testing.assert_close(copy(src, tgt, None, causal_mask(6)), tied(src, tgt, None, causal_mask(6)))


def test_a_tied_decoder_only_model_shares_its_embedding_with_the_output_layer():
    torch.manual_seed(4)
    untied = DecoderOnly(20, 16, 2, 2, 32, dropout=0.0)
    tied = DecoderOnly(20, 16, 2, 2, 32, dropout=0.0, tie_weights=True)
    assert tied.generator.weight is tied.embed.tokens.weight
    assert sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in tied.parameters()) == 20 * 16
    ids = torch.randint(0, 20, (2, 8))
    tied(ids).sum().backward()
    assert tied.embed.tokens.weight.grad is tied.generator.weight.grad is not None


@pytest.mark.parametrize(
    "num_kv_heads,fused,norm_first", [(None, False, True), (2, False, True), (1, False, False), (2, True, True)]
)
def test_incremental_decoding_with_the_cache_equals_full_recomputation(num_kv_heads, fused, norm_first):
    torch.manual_seed(5)
    model = DecoderOnly(
        23, 24, 4, 3, 48, dropout=0.0, max_len=16, norm_first=norm_first, fused=fused, num_kv_heads=num_kv_heads
    ).eval()
    ids = torch.randint(0, 23, (2, 11))
    with torch.no_grad():
        whole = model(ids)
        one_at_a_time, cache = logits_fed_in_pieces(model, ids, [1] * 11)
        prompt_then_tokens, _ = logits_fed_in_pieces(model, ids, [5] + [1] * 6)
        in_chunks, _ = logits_fed_in_pieces(model, ids, [4, 3, 4])
    for logits in (one_at_a_time, prompt_then_tokens, in_chunks):
        torch.testing.assert_close(logits, whole, atol=1e-5, rtol=1e-5)
    kv_heads = num_kv_heads or 4
    assert len(cache) == 3 and all(k.shape == v.shape == (2, kv_heads, 11, 6) for k, v in cache)


def test_grouped_query_attention_shrinks_the_cache_by_num_heads_over_num_kv_heads():
    ids = torch.randint(0, 10, (1, 7))
    sizes = {}
    for kv_heads in (8, 4, 2, 1):
        model = DecoderOnly(10, 32, 8, 2, 64, dropout=0.0, max_len=8, num_kv_heads=kv_heads).eval()
        with torch.no_grad():
            _, cache = model.extend(ids)
        sizes[kv_heads] = sum(k.numel() + v.numel() for k, v in cache)
        assert all(k.size(1) == kv_heads for k, _ in cache)
        assert model.layers[0].self_attn.W_k.out_features == kv_heads * 4
    assert {8 // h: sizes[8] // sizes[h] for h in sizes} == {1: 1, 2: 2, 4: 4, 8: 8}


@pytest.mark.parametrize("num_kv_heads", [None, 2])
def test_generation_with_and_without_the_cache_gives_the_same_tokens(num_kv_heads):
    torch.manual_seed(6)
    model = DecoderOnly(17, 16, 4, 2, 32, dropout=0.0, max_len=10, num_kv_heads=num_kv_heads).eval()
    prompt = torch.randint(0, 17, (3, 4))
    for temperature in (0.0, 1.0):
        cached = model.generate(prompt, 12, temperature, torch.Generator().manual_seed(1))
        recomputed = model.generate(prompt, 12, temperature, torch.Generator().manual_seed(1), use_cache=False)
        assert cached.shape == (3, 16)  # longer than max_len: the last steps see a sliding window
        assert torch.equal(cached, recomputed)


def test_with_as_many_key_value_heads_as_heads_the_layers_equal_torch_encoder_layers():
    torch.manual_seed(7)
    model = DecoderOnly(19, 16, 4, 2, 32, dropout=0.0, max_len=12).eval()
    assert isinstance(model.layers[0], EncoderLayer)
    ids = torch.randint(0, 19, (2, 9))
    with torch.no_grad():
        x = model.embed(ids)
        for layer in model.layers:
            x = to_torch_encoder_layer(layer)(x, src_mask=~causal_mask(9), is_causal=True)
        torch.testing.assert_close(model(ids), model.generator(model.norm(x)), atol=1e-5, rtol=1e-5)


def test_extend_refuses_more_positions_than_max_len():
    model = DecoderOnly(11, 16, 2, 1, 32, dropout=0.0, max_len=6).eval()
    _, cache = model.extend(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="max_len"):
        model.extend(torch.zeros(1, 2, dtype=torch.long), cache)


def test_both_models_keep_their_settings_as_one_config_and_are_rebuilt_from_it():
    config = ModelConfig(16, 2, 2, 32, 0.0, 24, True, False, True)
    torch.manual_seed(0)
    seq2seq = EncoderDecoder(11, 13, 16, 2, 2, 32, dropout=0.0, max_len=24, norm_first=True, tie_weights=True)
    decoder = DecoderOnly(17, **vars(config), num_kv_heads=1, positions="rotary")
    assert seq2seq.config == config and decoder.config == config
    torch.manual_seed(0)
    again = EncoderDecoder.from_config(11, 13, config)
    assert again.state_dict().keys() == seq2seq.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), seq2seq.state_dict().values()))
    rebuilt = DecoderOnly.from_config(17, config, num_kv_heads=1, positions="rotary")
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {
        k: v.shape for k, v in decoder.state_dict().items()
    }
    with pytest.raises(TypeError):
        DecoderOnly.from_config(17, config, d_model=8)  # a setting is the config's, not an option


def test_a_model_without_biases_has_none_and_nanogpts_parameter_count():
    """NO_BIASES (nanoGPT's bias=False): no bias in the attention, the feed-forward network, the norms or the
    output layer, so that a tied model of L layers of width d has L (12 d² + 2 d) + d + V d parameters, as
    nanoGPT's (less its learned positions); it computes and trains as the biased one does."""
    vocab, d, layers = 65, 32, 2
    for kind in ("relu", "gelu", "gelu_exact", "swiglu"):
        model = DecoderOnly(vocab, d, 4, layers, 4 * d, dropout=0.0, fused=True, tie_weights=True, feed_forward=kind,
                            **NO_BIASES)  # fmt: skip
        assert [name for name, _ in model.named_parameters() if "bias" in name] == [], kind
        ids = torch.randint(0, vocab, (2, 12))
        model(ids).sum().backward()
        assert all(p.grad is not None for p in model.parameters())
    model = DecoderOnly(vocab, d, 4, layers, 4 * d, dropout=0.0, fused=True, tie_weights=True, **NO_BIASES)
    assert sum(p.numel() for p in model.parameters()) == layers * (12 * d * d + 2 * d) + d + vocab * d
    biased = DecoderOnly(vocab, d, 4, layers, 4 * d, dropout=0.0, fused=True, tie_weights=True)
    assert sum("bias" in name for name, _ in biased.named_parameters()) == layers * 8 + 2  # as before


@pytest.mark.parametrize("kind", ["relu", "gelu"])
def test_feed_forward_without_biases_is_the_biased_network_with_zero_biases(kind):
    torch.manual_seed(0)
    biased, unbiased = feed_forward(kind, 16, 32, 0.0, True), feed_forward(kind, 16, 32, 0.0, False)
    unbiased.load_state_dict({k: v for k, v in biased.state_dict().items() if not k.endswith("bias")})
    with torch.no_grad():
        for layer in (biased.linear1, biased.linear2):
            layer.bias.zero_()
    x = torch.randn(3, 5, 16)
    torch.testing.assert_close(unbiased(x), biased(x))
