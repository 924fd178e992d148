"""attention_course.basics.families: four model families on the date task, differing in their masks and objectives."""

from __future__ import annotations

import pytest
import torch

from attention_course.basics import families
from attention_course.basics.families import MASK_CHARACTER, STREAM_FAMILIES, STREAM_VOCAB
from attention_course.data.dates import DateTask
from attention_course.models.transformer import DecoderOnly
from attention_course.solutions.ch04_masking import causal_mask

TINY = families.Shape(d_model=16, heads=2, layers=2, d_ff=32)


def examples(n=6, split="test"):
    return DateTask(seed=3).examples(split, n)


def tiny_model(family, seed=0):
    torch.manual_seed(seed)
    return families.build(family, TINY).eval()


def test_each_mask_lets_a_query_see_what_its_family_allows():
    """Three source characters and <bos> (the prefix), three target positions, one padding position."""
    got = {f: families.attention_mask(f, torch.tensor([4]), torch.tensor([7]), 8)[0, 0] for f in STREAM_FAMILIES}
    real = torch.arange(8) < 7
    causal = causal_mask(8) & real
    prefix = causal.clone()
    prefix[:, :4] = True
    assert torch.equal(got["decoder-only"], causal)
    assert torch.equal(got["prefix-LM"], prefix)
    assert torch.equal(got["encoder-only"], real.expand(8, 8))
    for mask in got.values():
        assert not mask[:, 7].any(), "a query attended to padding"


def test_the_prefix_lm_mask_is_the_encoder_decoder_pattern_in_one_stack():
    """Prefix rows see the prefix both ways (the encoder); target rows see the whole prefix (cross-attention)
    and the target causally (the decoder's self-attention)."""
    mask = families.attention_mask("prefix-LM", torch.tensor([5]), torch.tensor([9]), 9)[0, 0]
    assert mask[:5, :5].all() and not mask[:5, 5:].any()
    assert mask[5:, :5].all() and torch.equal(mask[5:, 5:], causal_mask(4))


def test_the_masks_take_each_sequence_s_own_prefix_and_length():
    mask = families.attention_mask("prefix-LM", torch.tensor([2, 4]), torch.tensor([5, 6]), 6)
    assert mask.shape == (2, 1, 6, 6)
    assert mask[0, 0, 0, 1] and not mask[0, 0, 0, 2] and not mask[0, 0, :, 5].any()
    assert mask[1, 0, 0, 3] and not mask[1, 0, 0, 4] and mask[1, 0, 5, 5]


@pytest.mark.parametrize("family", ["decoder-only", "prefix-LM"])
def test_a_generating_stream_predicts_each_next_token_from_bos_on(family):
    batch = families.stream_batch(examples(), family)
    for example, ids, targets in zip(examples(), batch["ids"], batch["targets"]):
        start = len(example.source)  # the <bos> position
        assert ids[start] == STREAM_VOCAB.bos_id
        assert STREAM_VOCAB.decode(ids[start:].tolist()) == example.target
        assert (targets[:start] == STREAM_VOCAB.pad_id).all()
        scored = targets[start:][targets[start:] != STREAM_VOCAB.pad_id]
        assert scored.tolist() == STREAM_VOCAB.encode(example.target, eos=True)
        assert torch.equal(targets[start : start + 10], ids[start + 1 : start + 11])


def test_the_encoder_only_stream_hides_the_answer_behind_mask_tokens():
    batch = families.stream_batch(examples(), "encoder-only")
    blank = STREAM_VOCAB.index[MASK_CHARACTER]
    for example, ids, targets in zip(examples(), batch["ids"], batch["targets"]):
        assert STREAM_VOCAB.decode(ids.tolist()) == example.source + MASK_CHARACTER * 10
        scored = targets != STREAM_VOCAB.pad_id
        assert torch.equal(scored, ids == blank)
        assert STREAM_VOCAB.decode(targets[scored].tolist()) == example.target


def test_decoder_only_takes_a_mask_in_place_of_the_look_ahead_mask():
    model = DecoderOnly(20, 16, 2, 2, 32, 0.0, max_len=16).eval()
    ids = torch.randint(4, 20, (2, 7))
    torch.testing.assert_close(model(ids), model(ids, mask=causal_mask(7)))
    both_ways = model(ids, mask=torch.ones(7, 7, dtype=torch.bool))
    assert not torch.allclose(both_ways[:, :-1], model(ids)[:, :-1])
    one_layer = DecoderOnly(20, 16, 2, 1, 32, 0.0, max_len=16).eval()
    # in one layer, the last query sees the same keys either way
    torch.testing.assert_close(one_layer(ids, mask=torch.ones(7, 7, dtype=torch.bool))[:, -1], one_layer(ids)[:, -1])


@pytest.mark.parametrize("family", STREAM_FAMILIES)
def test_no_logit_depends_on_what_the_mask_hides(family):
    model = tiny_model(family)
    batch = families.stream_batch(examples(1), family)
    ids, mask = batch["ids"], batch["mask"]
    bos = int((ids[0] == STREAM_VOCAB.bos_id).nonzero())
    changed = ids.clone()
    changed[0, -1] = STREAM_VOCAB.index["7"] if ids[0, -1] != STREAM_VOCAB.index["7"] else STREAM_VOCAB.index["8"]
    moved = (model(changed, mask=mask) - model(ids, mask=mask)).abs().amax(dim=-1)[0]
    if family == "encoder-only":
        assert (moved > 1e-6).all(), "a change to the last position should reach every position"
    else:
        assert (moved[:-1] == 0).all(), "an earlier logit depends on the last token"
    source_changed = ids.clone()
    source_changed[0, bos - 1] = STREAM_VOCAB.index["9"] if ids[0, bos - 1] != STREAM_VOCAB.index["9"] else 5
    moved = (model(source_changed, mask=mask) - model(ids, mask=mask)).abs().amax(dim=-1)[0]
    reaches_back = bool((moved[: bos - 1] > 1e-6).any())
    assert reaches_back == (family != "decoder-only"), "the source should be read both ways, but causally here"


def slow_predictions(family, model, chosen):
    """Each example decoded alone, one token per pass, with the mask built for its own stream."""
    out = []
    for example in chosen:
        ids = torch.tensor([STREAM_VOCAB.encode(example.source) + [STREAM_VOCAB.bos_id]])
        prefix = ids.size(1)
        for _ in range(11):
            size = torch.tensor([ids.size(1)])
            mask = families.attention_mask(family, torch.tensor([prefix]), size, ids.size(1))
            ids = torch.cat([ids, model(ids, mask=mask)[:, -1:].argmax(-1)], dim=1)
        out.append(STREAM_VOCAB.decode(ids[0, prefix:].tolist()))
    return out


@pytest.mark.parametrize("family", ["decoder-only", "prefix-LM"])
def test_predictions_decoded_by_source_length_equal_each_decoded_alone(family):
    model, chosen = tiny_model(family, seed=1), examples(12)
    assert len({len(e.source) for e in chosen}) > 2
    assert families.predict(family, model, chosen) == slow_predictions(family, model, chosen)


def test_encoder_only_predictions_are_the_argmax_at_the_blanks():
    model, chosen = tiny_model("encoder-only", seed=2), examples(5)
    batch = families.stream_batch(chosen, "encoder-only")
    guesses = model(batch["ids"], mask=batch["mask"]).argmax(-1)
    blanks = batch["ids"] == STREAM_VOCAB.index[MASK_CHARACTER]
    expected = [STREAM_VOCAB.decode(row[b].tolist()) for row, b in zip(guesses, blanks)]
    assert families.predict("encoder-only", model, chosen) == expected


@pytest.mark.parametrize("family", families.FAMILIES)
def test_a_few_steps_of_training_lower_each_family_s_loss(family):
    result = families.train(family, 40, batch_size=16, shape=TINY, test_examples=4, warmup=5)
    assert result.family == family and len(result.losses) == 40
    assert sum(result.losses[-5:]) / 5 < 0.8 * sum(result.losses[:5]) / 5
    assert 0.0 <= result.exact_match <= 1.0 and result.parameters > 0 and result.train_seconds > 0


def test_bad_arguments_name_what_was_expected():
    with pytest.raises(ValueError, match="one of encoder-only, decoder-only, prefix-LM, encoder-decoder, got"):
        families.build("decoder")
    with pytest.raises(ValueError, match="family must be one of encoder-only, decoder-only, prefix-LM, got"):
        families.stream_batch(examples(1), "encoder-decoder")
    with pytest.raises(ValueError, match="steps, batch_size and test_examples must be positive"):
        families.train("decoder-only", 0)
    with pytest.raises(ValueError, match="examples must not be empty"):
        families.stream_batch([], "decoder-only")
