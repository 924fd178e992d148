"""Chapter 10's patching experiments (attention_course.interpret.patching): activation patching (noising and
denoising), path patching from a corrupted run, attribution patching and logit attribution with the final norm frozen,
on chapter 10's attention-only models and on a randomly initialised tiny GPT-2 (no download)."""

from __future__ import annotations

import re

import pytest
import torch

from attention_course.data.tokenization import train_bpe
from attention_course.interpret.circuits import AttentionOnly, AttentionOnlyConfig, induction_by_hand
from attention_course.interpret.ioi import IOI_NAMES, IOI_TEMPLATE, ioi_prompts
from attention_course.interpret.patching import (
    LogitDifference,
    attribution_patching,
    head_outputs,
    logit_attribution,
    normalised,
    patch_each_head,
    patch_each_position,
    patch_heads,
    patch_residual,
    path_patch_from,
    residual_streams,
)
from attention_course.models.transformer import attention_weights
from attention_course.published import pretrained
from attention_course.published.pretrained import from_pretrained
from attention_course.tooling.notebooks import COURSE_ROOT
from tests.test_pretrained import build

SMALL = AttentionOnlyConfig(vocab_size=16, max_len=16, d_model=16, num_heads=2, num_layers=2)


def reversed_pair(vocab: int, period: int, batch: int, seed: int = 0):
    """(clean, corrupted, metric): a segment of distinct tokens then the same again; the corrupted run has the
    segment backwards first, where induction predicts the token before, not after. The metric is the logit of the
    clean next token minus the corrupted one's, on the queries of the repeat where both exist."""
    generator = torch.Generator().manual_seed(seed)
    segment = torch.stack([torch.randperm(vocab, generator=generator)[:period] for _ in range(batch)])
    clean = torch.cat([segment, segment], dim=1)
    corrupted = torch.cat([segment.flip(1), segment], dim=1)
    i = torch.arange(1, period - 1)
    return clean, corrupted, LogitDifference(period + i, segment[:, i + 1], segment[:, i - 1])


def pair_on(model, clean, corrupted, difference):
    with torch.no_grad():
        return normalised(difference, model(clean), model(corrupted))


def test_the_logit_difference_and_its_normalisation():
    logits = torch.zeros(2, 3, 5)
    logits[:, 1, 4], logits[:, 1, 2] = 3.0, 1.0
    difference = LogitDifference(torch.tensor([1]), torch.tensor([[4], [4]]), torch.tensor([[2], [0]]))
    assert difference(logits).item() == pytest.approx((2.0 + 3.0) / 2)
    metric = normalised(difference, logits, torch.zeros_like(logits))
    assert metric(logits).item() == pytest.approx(1.0) and metric(torch.zeros_like(logits)).item() == 0.0
    with pytest.raises(ValueError, match="nothing to normalise"):
        normalised(difference, logits, logits)
    with pytest.raises(ValueError, match="right must be"):
        LogitDifference(torch.tensor([1, 2]), torch.tensor([[4], [4]]), torch.tensor([[2, 1], [0, 1]]))


def test_patching_the_whole_residual_stream_gives_1_denoising_and_0_noising():
    model = AttentionOnly(SMALL, seed=3).eval()
    clean, corrupted, difference = reversed_pair(16, 8, 4)
    metric = pair_on(model, clean, corrupted, difference)
    every = list(range(clean.size(1)))
    denoised = patch_residual(model, corrupted, residual_streams(model, clean), metric, positions=every)
    noised = patch_residual(model, clean, residual_streams(model, corrupted), metric, positions=every)
    torch.testing.assert_close(denoised, torch.ones(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(noised, torch.zeros(3), atol=1e-5, rtol=0)
    # one position at a time: a position the metric never reads, nor any query before it, changes nothing
    one_by_one = patch_residual(model, corrupted, residual_streams(model, clean), metric)
    assert one_by_one.shape == (3, 16) and one_by_one[:, -1].abs().max() < 1e-5
    assert one_by_one[0, :8].abs().max() > 1e-3  # the first segment differs, and the keys read it


def test_patching_a_head_with_its_own_run_changes_nothing_and_only_later_positions_see_a_patch():
    model = AttentionOnly(SMALL, seed=4).eval()
    clean, corrupted, _ = reversed_pair(16, 8, 3)
    own, other = head_outputs(model, clean), head_outputs(model, corrupted)
    with torch.no_grad():
        intact = model(clean)
        torch.testing.assert_close(patch_heads(model, clean, own, [(0, 0), (1, 1)]), intact)
        patched = patch_heads(model, clean, other, [(0, 1)], positions=5)
    assert torch.equal(patched[:, :5], intact[:, :5]) and not torch.allclose(patched[:, 5:], intact[:, 5:])
    with pytest.raises(ValueError, match="heads must be"):
        patch_heads(model, clean, other, [(2, 0)])
    with pytest.raises(ValueError, match="source's z"):
        patch_heads(model, clean[:, :10], other, [(0, 0)])


def test_on_the_induction_circuit_noising_a_head_outside_it_changes_little_and_one_inside_it_a_lot():
    model = induction_by_hand()  # head 0 of each layer is the circuit; head 1 has small random weights
    clean, corrupted, difference = reversed_pair(32, 12, 8)
    metric = pair_on(model, clean, corrupted, difference)
    noised = patch_each_head(model, clean, head_outputs(model, corrupted), metric)
    denoised = patch_each_head(model, corrupted, head_outputs(model, clean), metric)
    assert noised.shape == denoised.shape == (2, 2)
    assert (noised[:, 1] > 0.95).all() and (denoised[:, 1].abs() < 0.05).all(), (noised, denoised)
    # the induction head writes the answer: without it nothing is left, with it alone everything is back
    assert noised[1, 0] < 0.05 and denoised[1, 0] > 0.95, (noised, denoised)
    # the previous-token head's keys, from the other run, send the induction head to a third token: half way
    assert noised[0, 0] < 0.6 and denoised[0, 0] > 0.4, (noised, denoised)
    # one position at a time: the previous-token head matters where the keys are (the first segment)
    by_position = patch_each_position(model, clean, head_outputs(model, corrupted), metric)
    assert by_position.shape == (2, 2, 24) and (1 - by_position[0, 0, 2:12]).min() > 0.01
    assert (1 - by_position[0, 0, 13:]).abs().max() < 1e-4


def test_path_patching_from_a_corrupted_run_sends_along_one_path_only():
    model = induction_by_hand()
    clean, corrupted, difference = reversed_pair(32, 12, 8)
    metric = pair_on(model, clean, corrupted, difference)
    source = head_outputs(model, corrupted)
    with torch.no_grad():
        by_path = {p: metric(path_patch_from(model, clean, source, (0, [0]), 1, p)).item() for p in ("key", "query")}
        direct = path_patch_from(model, clean, source, (0, [0, 1]), 1, "direct")
        # by hand: the unembedding reads the clean stream plus the senders' change of output
        own = head_outputs(model, clean)[0]
        change = torch.einsum("bhte,hed->btd", source[0] - own, model.layers[0].W_O)
        torch.testing.assert_close(direct, model(clean) + change @ model.W_U, atol=1e-4, rtol=1e-4)
        whole = metric(patch_heads(model, clean, source, [(0, 0)])).item()  # every path at once
    # the previous-token head is read through the keys: that path alone carries all its effect, the queries none
    assert whole < 0.6 and abs(by_path["key"] - whole) < 1e-3 and by_path["query"] > 0.95, (by_path, whole)
    with pytest.raises(ValueError, match="path must be"):
        path_patch_from(model, clean, source, (0, [0]), 1, "keys")
    with pytest.raises(ValueError, match="receiver must be"):
        path_patch_from(model, clean, source, (1, [0]), 1, "key")


def test_attribution_patching_is_exact_where_the_metric_is_linear_in_the_activation():
    """The logits are linear in the last layer's z (through W_O and W_U), so is a logit difference: there the
    first-order estimate equals real noising; an earlier layer's z passes through a softmax, and it does not."""
    model = AttentionOnly(SMALL, seed=5).eval()
    clean, corrupted, difference = reversed_pair(16, 8, 4)
    metric = pair_on(model, clean, corrupted, difference)
    estimate = attribution_patching(model, clean, corrupted, metric)
    real = patch_each_position(model, clean, head_outputs(model, corrupted), metric) - 1
    assert estimate.shape == real.shape == (2, 2, 16)
    torch.testing.assert_close(estimate[1], real[1], atol=1e-4, rtol=1e-4)
    assert (estimate[0] - real[0]).abs().max() > 1e-3


def tiny_gpt2(tmp_path):
    build("gpt2-tied", tmp_path)
    return from_pretrained(tmp_path)


def test_the_heads_outputs_of_a_gpt2_are_its_attention_weights_times_its_values(tmp_path):
    model = tiny_gpt2(tmp_path)
    ids = torch.randint(61, (2, 9), generator=torch.Generator().manual_seed(0))
    z = head_outputs(model, ids)
    assert len(z) == 2 and z[0].shape == (2, 4, 9, 8)
    inputs = []
    hook = model.layers[1].self_attn.register_forward_pre_hook(lambda m, args: inputs.append(args[0]))
    with torch.no_grad():
        model(ids)
        hook.remove()
        values = model.layers[1].self_attn.W_v(inputs[0]).view(2, 9, 4, 8).transpose(1, 2)
    torch.testing.assert_close(z[1], attention_weights(model, ids)[1] @ values, atol=1e-5, rtol=1e-5)


def test_logit_attribution_of_a_gpt2_adds_up_to_transformers_logit_difference(tmp_path):
    reference = build("gpt2-tied", tmp_path)
    model = from_pretrained(tmp_path)
    ids = torch.randint(61, (3, 10), generator=torch.Generator().manual_seed(1))
    right, wrong = torch.tensor([3, 7, 11]), torch.tensor([5, 2, 40])
    parts = logit_attribution(model, ids, right, wrong)
    with torch.no_grad():
        logits = reference(ids).logits[:, -1]
    expected = (logits.gather(-1, right[:, None]) - logits.gather(-1, wrong[:, None])).mean().item()
    assert parts.heads.shape == (2, 4) and parts.feed_forward.shape == (2,)
    assert parts.total == pytest.approx(expected, abs=1e-4)
    assert parts.summed() == pytest.approx(expected, abs=1e-4)
    # a head's direct term is its output through the frozen norm: zeroing the last layer's head 2 at the last
    # position moves the logit difference by that term, to first order only (the norm's scale moves with it)
    z = head_outputs(model, ids)
    z[1][:, 2] = 0
    with torch.no_grad():
        moved = LogitDifference(torch.tensor([9]), right[:, None], wrong[:, None])(patch_heads(model, ids, z, [(1, 2)]))
    assert moved.item() != pytest.approx(expected, abs=1e-3)


def test_a_gpt2s_heads_patch_and_attribute_as_the_attention_only_models_do(tmp_path):
    model = tiny_gpt2(tmp_path)
    generator = torch.Generator().manual_seed(2)
    clean = torch.randint(61, (4, 8), generator=generator)
    corrupted = clean.clone()
    corrupted[:, 2] = (clean[:, 2] + 1) % 61
    difference = LogitDifference(torch.tensor([7]), clean[:, 2:3], corrupted[:, 2:3])
    metric = pair_on(model, clean, corrupted, difference)
    own = patch_each_head(model, clean, head_outputs(model, clean), metric)
    torch.testing.assert_close(own, torch.ones(2, 4), atol=1e-4, rtol=0)
    noised = patch_each_head(model, clean, head_outputs(model, corrupted), metric)
    assert not torch.allclose(noised, torch.ones(2, 4), atol=1e-3)
    estimate = attribution_patching(model, clean, corrupted, metric)
    assert estimate.shape == (2, 4, 8) and estimate[:, :, :2].abs().max() < 1e-6  # before the change, no change


def test_logit_attribution_refuses_a_model_without_a_final_layernorm(tmp_path):
    build("llama-gqa-untied", tmp_path)
    llama = from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="final LayerNorm"):
        logit_attribution(llama, torch.zeros(1, 4, dtype=torch.long), torch.tensor([1]), torch.tensor([2]))


def names_tokenizer():
    """A byte-level BPE tokenizer in which each of the indirect-object names is one token, as in GPT-2's."""
    sentences = [IOI_TEMPLATE.format(a=a, b=b, s=b) for a, b in zip(IOI_NAMES, IOI_NAMES[1:] + IOI_NAMES[:1])]
    return train_bpe("\n".join(sentences * 40), 1000)


def test_ioi_prompts_name_the_subject_twice_and_the_corruption_a_third_name():
    tokenizer = names_tokenizer()
    prompts = ioi_prompts(tokenizer, 6, seed=1)
    assert prompts.clean.shape == prompts.corrupted.shape and prompts.clean.size(0) == 6
    for k in range(6):
        clean, corrupted = tokenizer.decode(prompts.clean[k].tolist()), tokenizer.decode(prompts.corrupted[k].tolist())
        io, s = tokenizer.decode([int(prompts.io[k])]), tokenizer.decode([int(prompts.s[k])])
        assert clean.count(s) == 2 and clean.count(io) == 1 and corrupted.count(s) == 1 and corrupted.count(io) == 1
        assert clean.index(io) < clean.index(s) if k % 2 == 0 else clean.index(s) < clean.index(io)
    assert prompts.metric.positions.tolist() == [prompts.clean.size(1) - 1]
    with pytest.raises(ValueError, match="one token each.*Zaphod"):
        ioi_prompts(tokenizer, 2, names=[" Mary", " John", " Zaphod"])


def test_the_chapters_gpt2_circuit_cells_run_on_a_small_gpt2_with_random_weights(tmp_path, monkeypatch, capsys):
    """Chapter 10's cells for Colab (GPT-2's indirect-object circuit), which the offline build does not run, run
    here as written, on a tiny GPT-2 checkpoint in place of GPT-2's and a tokenizer whose names are one token."""
    text = (COURSE_ROOT / "book" / "ch10_what_heads_learn.md").read_text()
    section = text[text.index("(ch10-gpt2-ioi)=") : text.index("## Key takeaways")]
    cells = re.findall(r"```\{code-cell\} ipython3\n:tags: \[skip-execution\]\n(.*?)\n```", section, re.S)
    assert len(cells) == 5
    tokenizer = names_tokenizer()
    build("gpt2-tied", tmp_path, vocab=tokenizer.get_vocab_size())
    monkeypatch.setattr(pretrained, "load_tokenizer", lambda name: tokenizer)
    namespace = {"gpt2": from_pretrained(tmp_path)}
    for cell in cells:
        exec(compile(cell, "ch10_what_heads_learn.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "When" in printed and "writes IO over S the most: " in printed and "denoising restores the most: " in printed
    parts = namespace["parts"]
    assert parts.summed() == pytest.approx(parts.total, abs=1e-4) and parts.heads.shape == (2, 4)
    assert namespace["noised"].shape == namespace["denoised"].shape == (2, 4)
    assert "at S2, noising costs the most: " in printed and "writes more once they are gone: " in printed
    assert namespace["at"].shape == (2, 4, 4) and len(namespace["movers"]) == 3
    assert namespace["knocked"].summed() == pytest.approx(namespace["knocked"].total, abs=1e-4)
