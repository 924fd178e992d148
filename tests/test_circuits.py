"""Chapter 10's model, task and circuits (attention_course.interpret), and the inputs its exercise's checks make."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.interpret.circuits import (
    AttentionOnly,
    AttentionOnlyConfig,
    composition_scores,
    induction_by_hand,
    logit_lens,
    next_token_losses,
    on_the_repeat,
    ov_circuit,
    qk_circuit,
    random_composition_scores,
    repeated_tokens,
    train_induction,
)
from attention_course.models.transformer import DecoderOnly
from autograder.api import scripted, specs

SMALL = AttentionOnlyConfig(vocab_size=12, max_len=16, d_model=16, num_heads=2, num_layers=2)


def test_the_config_refuses_bad_sizes_and_names_them():
    with pytest.raises(ValueError, match="num_heads"):
        AttentionOnlyConfig(num_heads=0)
    with pytest.raises(ValueError, match="multiple of num_heads"):
        AttentionOnlyConfig(d_model=10, num_heads=4)
    assert AttentionOnlyConfig(d_model=10, num_heads=4, d_head=3).d_head == 3


def test_the_patterns_are_causal_and_each_row_sums_to_one():
    model = AttentionOnly(SMALL, seed=0)
    ids = torch.randint(12, (3, 9))
    patterns = model.patterns(ids)
    assert [tuple(p.shape) for p in patterns] == [(3, 2, 9, 9)] * 2
    for p in patterns:
        torch.testing.assert_close(p.sum(-1), torch.ones(3, 2, 9))
        assert (p.triu(1) == 0).all()
    assert model(ids).shape == (3, 9, 12)
    with pytest.raises(ValueError, match="length <= 16"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_a_model_is_the_same_for_the_same_seed_and_another_for_another():
    one, again, other = AttentionOnly(SMALL, seed=3), AttentionOnly(SMALL, seed=3), AttentionOnly(SMALL, seed=4)
    ids = torch.randint(12, (2, 8))
    with torch.no_grad():
        assert torch.equal(one(ids), again(ids))
        assert not torch.allclose(one(ids), other(ids))


def test_the_logits_are_the_residual_stream_through_the_unembedding():
    model = AttentionOnly(SMALL, seed=1)
    ids = torch.randint(12, (2, 8))
    with torch.no_grad():
        stream = model.residuals(ids)
        assert len(stream) == 3
        torch.testing.assert_close(stream[-1] @ model.W_U, model(ids))


def test_repeated_tokens_repeat_with_their_period():
    tokens, periods = repeated_tokens(16, 48, 64, torch.Generator().manual_seed(0))
    assert tokens.shape == (16, 48) and ((periods >= 12) & (periods <= 24)).all()
    for row, period in zip(tokens, periods.tolist()):
        assert torch.equal(row[period:], row[:-period])
    fixed, periods = repeated_tokens(2, 10, 5, periods=3)
    assert periods.tolist() == [3, 3] and torch.equal(fixed[:, 3:], fixed[:, :-3])
    with pytest.raises(ValueError, match="periods"):
        repeated_tokens(1, 10, 5, periods=10)
    repeat = on_the_repeat(torch.tensor([3, 5]), 8)
    assert repeat.tolist() == [[False] * 3 + [True] * 4, [False] * 5 + [True] * 2]


def test_a_short_training_lowers_the_loss_on_the_repeat_and_records_it():
    model = AttentionOnly(SMALL, seed=0)
    history = train_induction(model, 30, batch_size=16, seed=0, eval_every=10, eval_batch=32)
    assert [h["step"] for h in history] == [0, 10, 20, 30]
    assert history[-1]["repeat_loss"] < history[0]["repeat_loss"]


def test_the_circuits_are_the_products_of_the_heads_matrices():
    model = AttentionOnly(SMALL, seed=2)
    layer = model.layers[1]
    torch.testing.assert_close(
        qk_circuit(model, 1, 0), (model.W_E @ layer.W_Q[0]) @ (model.W_E @ layer.W_K[0]).T, rtol=1e-5, atol=1e-5
    )
    assert qk_circuit(model, 0, 1, positions=True).shape == (16, 16)
    ov = ov_circuit(model, 1, 1)
    assert ov.shape == (12, 12) and not ov.requires_grad
    # row t of the OV circuit is what the head adds to the logits where it attends to token t alone
    x = model.W_E[3]
    torch.testing.assert_close(ov[3], (x @ layer.W_V[1] @ layer.W_O[1] @ model.W_U).detach(), rtol=1e-5, atol=1e-5)
    for kind in "QKV":
        scores = composition_scores(model, kind)
        assert scores.shape == (2, 2) and ((scores > 0) & (scores <= 1)).all()
    with pytest.raises(KeyError):
        composition_scores(model, "X")


def test_the_model_built_by_hand_does_induction_with_two_heads():
    model = induction_by_hand()
    segments = torch.stack([torch.randperm(32, generator=torch.Generator().manual_seed(s))[:8] for s in range(4)])
    tokens = segments.repeat(1, 2)
    previous, induction = model.patterns(tokens)
    queries = torch.arange(1, 16)
    assert previous[:, 0, queries, queries - 1].min() > 0.99  # layer 0, head 0: the previous token
    repeat = torch.arange(8, 16)
    assert induction[:, 0, repeat, repeat - 7].min() > 0.99  # layer 1, head 0: after the earlier occurrence
    with torch.no_grad():
        losses = next_token_losses(model, tokens)
    assert losses[:, 8:].max() < 0.01  # the repeat is predicted
    hook = model.layers[0].hook_z.register_forward_hook(lambda m, i, z: z * torch.tensor([0.0, 1.0])[:, None, None])
    with torch.no_grad():
        ablated = next_token_losses(model, tokens)
    hook.remove()
    assert ablated[:, 8:].mean() > 2.0  # without the previous-token head, no induction


def test_the_logit_lens_ends_with_the_models_own_logits():
    model = DecoderOnly(20, 16, 2, 2, 32, dropout=0.0, max_len=12).eval()
    ids = torch.randint(20, (2, 7))
    lens = logit_lens(model, ids)
    assert len(lens) == 3 and all(x.shape == (2, 7, 20) for x in lens)
    with torch.no_grad():
        torch.testing.assert_close(lens[-1], model(ids))
        torch.testing.assert_close(lens[0], model.generator(model.norm(model.embed(ids))))


def test_the_attention_pattern_spec_makes_causal_rows_that_sum_to_one():
    spec = specs.pattern(2, 3, 6, 6)
    made = spec.make(np.random.default_rng(0))
    assert made.shape == (2, 3, 6, 6) and made.dtype == torch.float32
    torch.testing.assert_close(made.sum(-1), torch.ones(2, 3, 6))
    assert (made.triu(1) == 0).all() and (made[..., torch.ones(6, 6).tril().bool()] > 0).all()
    assert torch.equal(made, spec.make(np.random.default_rng(0)))
    assert "attention pattern" in spec.describe()
    with pytest.raises(ValueError, match="pattern"):
        specs.pattern(2, 3, 6, 5)


def test_the_repeated_tokens_spec_repeats_with_its_period():
    made = specs.repeated_tokens(3, 10, period=4, high=7).make(np.random.default_rng(1))
    assert made.shape == (3, 10) and made.dtype == torch.int64 and int(made.max()) < 7
    assert torch.equal(made[:, 4:], made[:, :-4])
    with pytest.raises(ValueError, match="period"):
        specs.repeated_tokens(3, 10, period=10, high=7)


@pytest.mark.parametrize(
    "name,args", [("AttentionOnly", (12, 16, 16, 2, 2, 5)), ("InductionByHand", (16, 32, 2, 0))], ids=str
)
def test_a_fixture_model_is_rebuilt_the_same_from_its_wire_name(name, args):
    model = scripted.build(name, args)
    again = scripted.build(*model.__wire_fixture__)
    assert not model.training
    ids = torch.randint(12, (2, 9))
    with torch.no_grad():
        assert torch.equal(model(ids), again(ids))


def test_each_input_hook_changes_its_own_path_alone():
    model = AttentionOnly(SMALL, seed=6).eval()
    ids = torch.randint(12, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        intact = model(ids)
        for name in ("hook_q_input", "hook_k_input", "hook_v_input", None):
            point = getattr(model.layers[1], name) if name else model.hook_unembed_input
            seen = []
            handle = point.register_forward_hook(lambda m, i, x, seen=seen: seen.append(x) or torch.zeros_like(x))
            changed = model(ids)
            handle.remove()
            assert seen[0].shape == (2, 9, 16) and not torch.allclose(changed, intact), name
        assert torch.equal(model(ids), intact)  # the hooks removed, the model as it was
        # zero queries: every key scores 0, so each position averages the values before it
        handle = model.layers[0].hook_q_input.register_forward_hook(lambda m, i, x: torch.zeros_like(x))
        (pattern, _) = model.patterns(ids)
        handle.remove()
        torch.testing.assert_close(pattern[0, 0, 3, :4], torch.full((4,), 0.25))
        # the unembedding reads the last residual stream through its hook point
        torch.testing.assert_close(model.residuals(ids)[-1] @ model.W_U, intact)


def test_random_composition_scores_are_the_level_of_chance_and_repeat_with_the_seed():
    config = AttentionOnlyConfig()
    scores = random_composition_scores(config, "K", samples=64, seed=1)
    assert scores.shape == (64,) and ((scores > 0) & (scores < 1)).all()
    assert torch.equal(scores, random_composition_scores(config, "K", samples=64, seed=1))
    assert not torch.equal(scores, random_composition_scores(config, "K", samples=64, seed=2))
    # random products in d_model dimensions score about 1 / sqrt(d_model): 1/8 here, 1/16 in a stream of 256
    assert 0.11 < scores.mean() < 0.14, scores.mean()
    wide = random_composition_scores(AttentionOnlyConfig(d_model=256), "V", samples=16)
    assert 0.05 < wide.mean() < 0.075, wide.mean()
