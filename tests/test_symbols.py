"""The substitution task of the helper package (attention_course.data.symbols)."""

import math

import pytest
import torch

from attention_course.data.symbols import (
    BITS_PER_SYMBOL,
    CAPITALS,
    SOURCE_VOCAB,
    SYMBOLS,
    TARGET_VOCAB,
    Pair,
    SubstitutionTask,
    batch,
    batches_by_length,
    token_accuracy,
)


def test_the_key_is_a_fixed_permutation_of_the_capitals():
    task = SubstitutionTask(seed=0)
    assert sorted(task.key) == list(SYMBOLS)
    assert sorted(task.key.values()) == list(CAPITALS)
    assert task.key == SubstitutionTask(seed=0).key
    assert task.key != SubstitutionTask(seed=1).key
    assert task.key == SubstitutionTask(seed=0, min_len=2, max_len=5).key
    assert math.isclose(BITS_PER_SYMBOL, math.log2(20))


def test_translation_maps_symbol_for_symbol():
    task = SubstitutionTask(seed=0)
    assert task.translate("") == ""
    assert task.translate(SYMBOLS) == "".join(task.key[s] for s in SYMBOLS)
    assert task.translate("abca") == task.key["a"] + task.key["b"] + task.key["c"] + task.key["a"]
    for example in task.examples("train", 50):
        assert example.target == task.translate(example.source)
        assert len(example.target) == len(example.source)
    with pytest.raises(ValueError, match="not in the alphabet"):
        task.translate("abz")


def test_lengths_stay_in_range_and_follow_the_lengths_asked_for():
    task = SubstitutionTask(seed=0, min_len=4, max_len=40)
    lengths = {len(e.source) for e in task.examples("train", 500)}
    assert min(lengths) >= 4 and max(lengths) <= 40 and len(lengths) > 25
    assert {len(e.source) for e in task.examples("test", 40, lengths=[7, 9])} == {7, 9}
    assert all(set(e.source) <= set(SYMBOLS) for e in task.examples("val", 50))


def test_splits_are_disjoint_by_string():
    task = SubstitutionTask(seed=0, min_len=1, max_len=3)
    sources = {split: {e.source for e in task.examples(split, 400)} for split in ("train", "val", "test")}
    assert not (sources["train"] & sources["test"])
    assert not (sources["train"] & sources["val"])
    assert not (sources["val"] & sources["test"])
    for split, strings in sources.items():
        assert all(SubstitutionTask.split_of(s) == split for s in strings)
    splits = [SubstitutionTask.split_of(e.source) for e in task.examples("train", 10)]
    assert splits == ["train"] * 10


def test_examples_are_determined_by_the_seed():
    assert SubstitutionTask(seed=3).examples("train", 30) == SubstitutionTask(seed=3).examples("train", 30)
    assert SubstitutionTask(seed=3).examples("train", 30) != SubstitutionTask(seed=4).examples("train", 30)
    first = SubstitutionTask(seed=3).examples("test", 20, lengths=[5])
    assert first == SubstitutionTask(seed=3).examples("test", 20, lengths=[5])
    assert all(isinstance(e, Pair) for e in first)


def test_batch_has_the_shapes_the_training_helpers_expect():
    examples = SubstitutionTask(seed=0, min_len=3, max_len=8).examples("val", 6)
    b = batch(examples)
    longest = max(len(e.source) for e in examples)
    assert b["src"].shape == (6, longest) and b["src_mask"].dtype == torch.bool
    assert b["tgt"].shape == (6, longest + 2)
    assert (b["tgt"][:, 0] == TARGET_VOCAB.bos_id).all()
    for i, e in enumerate(examples):
        assert SOURCE_VOCAB.decode(b["src"][i]) == e.source
        assert TARGET_VOCAB.decode(b["tgt"][i]) == e.target
        assert b["src_mask"][i].sum() == len(e.source)
        assert b["tgt"][i, len(e.target) + 1] == TARGET_VOCAB.eos_id


def test_batches_by_length_hold_one_length_each_and_cover_every_example():
    examples = SubstitutionTask(seed=0, min_len=2, max_len=6).examples("train", 103)
    one_epoch = batches_by_length(examples, 8, seed=0)
    batches = list(one_epoch())
    assert sum(b["src"].shape[0] for b in batches) == 103
    assert all(b["src"].shape[0] <= 8 for b in batches)
    assert all(b["src_mask"].all() for b in batches)  # one length per batch: no padding
    seen = sorted(SOURCE_VOCAB.decode(row) for b in batches for row in b["src"])
    assert seen == sorted(e.source for e in examples)
    again = [b["src"] for b in batches_by_length(examples, 8, seed=0)()]
    assert all(torch.equal(x, b["src"]) for x, b in zip(again, batches))
    second_epoch = [b["src"] for b in one_epoch()]
    assert any(not torch.equal(x, b["src"]) for x, b in zip(second_epoch, batches))


def test_token_accuracy_counts_positions():
    assert token_accuracy(["ABCD", "AB", "ABCDE", "XBCD"], ["ABCD"] * 4) == [1.0, 0.5, 1.0, 0.75]


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: SubstitutionTask(min_len=0), "min_len must be"),
        (lambda: SubstitutionTask(min_len=5, max_len=4), "max_len must be"),
        (lambda: SubstitutionTask().examples("dev", 3), "split must be"),
        (lambda: SubstitutionTask().examples("train", -1), "n must be"),
        (lambda: SubstitutionTask().examples("train", 3, lengths=[0]), "lengths must be"),
        (lambda: batches_by_length([], 4), "examples must not be empty"),
        (lambda: batches_by_length([Pair("a", "A")], 0), "batch_size must be"),
        (lambda: token_accuracy(["A"], ["A", "B"]), "same length"),
        (lambda: token_accuracy("AB", "AB"), "not single strings"),
        (lambda: token_accuracy([""], [""]), "must not be empty"),
    ],
)
def test_bad_arguments_are_refused_clearly(call, error):
    with pytest.raises(ValueError, match=error):
        call()
