"""DeepSeek's multi-head latent attention in the course's layers (attention_course.scale.mla), against ``transformers``.

Each test builds a randomly initialised ``transformers`` DeepSeek-V3 model of dense layers from a tiny config
(``first_k_dense_replace`` at least the number of layers: no mixture of experts) and loads its weights into the
course's model, whose every attention is chapter 7's reference ``MultiHeadLatentAttention``: the logits must equal
``transformers``' within 1e-4 in float32, computed with the up-projections absorbed or not, and greedy generation
with the course's cache of latents must choose the tokens that ``transformers``' ``generate`` chooses. The weights
are drawn larger than ``transformers``' initialisation, so that the scores, and so the rotary layout, matter.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from attention_course.published.layouts import CheckpointError
from attention_course.scale.mla import from_deepseek, latent_attention, latent_cache_bytes

VOCAB = 53
CONFIGS = {  # (settings, what it tries)
    "interleaved": {},
    "query-latent": {"q_lora_rank": 24},
    "rotate-half": {"rope_interleave": False},
    "tied-base-100": {"tie_word_embeddings": True, "rope_parameters": {"rope_type": "default", "rope_theta": 100.0}},
}


def deepseek(seed: int = 0, **settings) -> transformers.DeepseekV3ForCausalLM:
    """A tiny random DeepSeek-V3 of dense layers: 4 heads of 16 non-rotary and 8 rotary features, a latent of 12."""
    config = transformers.DeepseekV3Config(
        **{
            "vocab_size": VOCAB,
            "hidden_size": 48,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "kv_lora_rank": 12,
            "q_lora_rank": None,
            "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 16,
            "v_head_dim": 16,
            "first_k_dense_replace": 2,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "n_group": 1,
            "topk_group": 1,
            "max_position_embeddings": 64,
            "num_mtp_layers": 0,
            "bos_token_id": None,
            "eos_token_id": None,
            "pad_token_id": None,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
            **settings,
        }
    )
    torch.manual_seed(seed)
    model = transformers.DeepseekV3ForCausalLM(config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # N(1, 0.3) for the norms' scales, N(0, 0.3) for the rest
        for name, p in model.named_parameters():
            drawn = torch.randn(p.shape, generator=generator) * 0.3
            p.copy_(drawn + 1 if name.endswith("norm.weight") else drawn)
    return model.eval()


def greedy(model, ids: torch.Tensor, n: int) -> torch.Tensor:
    config = transformers.GenerationConfig(max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)


@pytest.mark.parametrize("name", CONFIGS)
def test_logits_and_greedy_generation_equal_transformers(name):
    theirs = deepseek(**CONFIGS[name])
    ours = from_deepseek(theirs.state_dict(), theirs.config.to_dict())
    ids = torch.randint(VOCAB, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = theirs(ids).logits
        got = ours(ids)
        absorbed = ours.absorb()(ids)
        ours.absorb(False)
    assert want.abs().max() > 1.0  # logits that vary: the attention matters to them
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(absorbed, want, rtol=1e-4, atol=1e-4)
    prompt = ids[:, :5]
    expected = greedy(theirs, prompt, 12)
    for use_cache in (True, False):
        written = ours.generate(prompt, 12, temperature=0, use_cache=use_cache)
        assert torch.equal(written, expected), (name, use_cache)
    assert torch.equal(ours.absorb().generate(prompt, 12, temperature=0), expected), name


def test_the_cache_holds_a_latent_and_a_rotary_key_per_position_and_layer():
    theirs = deepseek()
    ours = from_deepseek(theirs.state_dict(), theirs.config.to_dict())
    ids = torch.randint(VOCAB, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        whole, _ = ours.extend(ids)
        first, cache = ours.extend(ids[:, :6])
        rest, cache = ours.extend(ids[:, 6:], cache)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), whole, rtol=1e-5, atol=1e-5)
    assert [tuple(t.shape) for t in cache[0]] == [(2, 9, 12), (2, 9, 8)]
    held = sum(t.numel() * t.element_size() for layer in cache for t in layer)
    assert held == latent_cache_bytes(2, 12, 8, tokens=9, batch_size=2, bytes_per_value=4)


def test_one_attention_equals_transformers_own():
    theirs = deepseek(seed=3, q_lora_rank=20)
    attention = theirs.model.layers[1].self_attn
    ours = latent_attention(theirs.state_dict(), theirs.config.to_dict(), "model.layers.1.self_attn.")
    x = torch.randn(2, 7, 48, generator=torch.Generator().manual_seed(4))
    positions = torch.arange(7)[None]
    with torch.no_grad():
        cos_sin = theirs.model.rotary_emb(x, positions)
        causal = torch.full((7, 7), float("-inf")).triu(1)[None, None]
        want, _ = attention(x, position_embeddings=cos_sin, attention_mask=causal)
        got, _ = ours(x, torch.ones(7, 7, dtype=torch.bool).tril())
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_rotate_half_rows_must_be_reordered():
    """With rope_interleave=False transformers rotates halves: loaded as if interleaved, the logits differ."""
    theirs = deepseek(rope_interleave=False)
    wrongly = from_deepseek(theirs.state_dict(), {**theirs.config.to_dict(), "rope_interleave": True})
    ids = torch.randint(VOCAB, (2, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        gap = (wrongly(ids) - theirs(ids).logits).abs().max()
    assert gap > 1e-2


@pytest.mark.parametrize(
    "setting,value",
    [
        ("first_k_dense_replace", 1),
        ("v_head_dim", 8),
        ("rope_parameters", {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "mscale_all_dim": 1.0}),
        ("attention_bias", True),
    ],
)
def test_what_the_course_cannot_compute_is_refused_by_name(setting, value):
    config = {**deepseek().config.to_dict(), setting: value}
    with pytest.raises(CheckpointError, match=setting):
        from_deepseek({}, config)


@pytest.mark.parametrize("sizes", [(4, 16, 8, 32), (3, 8, 4, 12), (2, 24, 6, 10)])
@pytest.mark.parametrize("way, absorb", [("latent", False), ("absorbed", True)])
@pytest.mark.parametrize("queries", [1, 2])
def test_the_decoding_cost_per_cached_position_is_what_the_module_computes(sizes, way, absorb, queries):
    """FlopCounterMode's count of one decoding step grows by decode_cost_per_position's FLOPs per cached
    position, absorbed or not, with one new token or two (each a query per head); what does not depend on the
    cache (W_o W_uv, the projections) cancels."""
    from torch.utils.flop_counter import FlopCounterMode

    from attention_course.scale.mla import decode_cost_per_position
    from attention_course.solutions.ch07_efficient_attention import MultiHeadLatentAttention

    heads, head_dim, rope_dim, latent = sizes
    torch.manual_seed(0)
    attention = MultiHeadLatentAttention(32, heads, latent, head_dim, rope_dim)

    def flops(cached):
        cache = (torch.randn(2, cached, latent), torch.randn(2, cached, rope_dim))
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            attention(torch.randn(2, queries, 32), cache=cache, absorb=absorb)
        return counter.get_total_flops()

    counted, read = decode_cost_per_position(way, heads, head_dim, rope_dim, latent, bytes_per_value=4, queries=queries)
    assert (flops(21) - flops(5)) == 2 * 16 * counted  # two sequences, 16 more positions each
    assert read == (latent + rope_dim) * 4 == latent_cache_bytes(1, latent, rope_dim, 1, 1, 4)


def test_absorbed_decoding_is_multi_query_attention_with_576_wide_keys_at_deepseek_v3s_sizes():
    from attention_course.scale.mla import decode_cost_per_position

    v3 = {"num_heads": 128, "head_dim": 128, "rope_dim": 64, "kv_latent_dim": 512}
    assert decode_cost_per_position("naive", **v3) == (81_920, 81_920)  # 2 H (2 d_h + d_R), one FLOP a byte
    assert decode_cost_per_position("absorbed", **v3) == (2 * 128 * (512 + 576), 576 * 2)
    flops, read = decode_cost_per_position("latent", **v3)
    assert read == 576 * 2 and flops == 81_920 + 4 * 128 * 128 * 512
    with pytest.raises(ValueError, match="way"):
        decode_cost_per_position("fast", **v3)
    # two queries a step (a guessed token checked too): twice the FLOPs on the same bytes
    assert decode_cost_per_position("absorbed", **v3, queries=2) == (4 * 128 * (512 + 576), 576 * 2)
    for wrong in (0, 1.5, True):
        with pytest.raises(ValueError, match="queries"):
            decode_cost_per_position("absorbed", **v3, queries=wrong)
