"""Chapter 10's finer experiments (attention_course.interpret.ablation and the per-position patching of
attention_course.interpret.patching): patching a head's queries, keys, values or pattern alone, heads replaced while
another computation runs, backups, and a circuit's faithfulness, completeness and minimality under mean ablation; and
the per-head patching of a GPT-2 checked against transformers' own model, on a random tiny GPT-2 (no download)."""

from __future__ import annotations

import pytest
import torch

from attention_course.interpret.ablation import (
    backup_effects,
    circuit_score,
    completeness,
    faithfulness,
    head_activations,
    heads_replaced,
    mean_outputs,
    minimality,
    patch_each_head_activation,
)
from attention_course.interpret.circuits import AttentionOnly, induction_by_hand
from attention_course.interpret.ioi import ioi_prompts
from attention_course.interpret.patching import (
    head_outputs,
    logit_attribution,
    patch_each_head,
    patch_each_position,
)
from attention_course.published.pretrained import from_pretrained
from tests.test_patching import SMALL, names_tokenizer, pair_on, reversed_pair
from tests.test_pretrained import build

CIRCUIT = [(0, 0), (1, 0)]  # induction_by_hand's previous-token head and induction head


def test_patching_a_heads_output_alone_is_patching_its_z_and_its_own_run_changes_nothing():
    model = AttentionOnly(SMALL, seed=6).eval()
    clean, corrupted, difference = reversed_pair(16, 8, 4)
    metric = pair_on(model, clean, corrupted, difference)
    by_z = patch_each_head_activation(model, corrupted, head_activations(model, clean, "z"), metric, "z")
    torch.testing.assert_close(by_z, patch_each_head(model, corrupted, head_outputs(model, clean), metric))
    for activation in ("q", "k", "v", "pattern"):
        own = patch_each_head_activation(model, clean, head_activations(model, clean, activation), metric, activation)
        torch.testing.assert_close(own, torch.ones(2, 2), atol=1e-5, rtol=0)
    assert head_activations(model, clean, "pattern")[0].shape == (4, 2, 16, 16)
    with pytest.raises(ValueError, match="activation must be"):
        head_activations(model, clean, "keys")


def test_the_induction_head_needs_its_clean_keys_and_values_together():
    """In the reversed pair, the induction head's keys say where the answer is and its values what it is: keys alone
    send it to a position that holds a third token in the corrupted run, values alone give it the clean tokens at the
    corrupted positions; only the two together (or its output) restore the clean answer. Its queries (the repeat's
    tokens, the same in both runs) and the outside head change nothing."""
    model = induction_by_hand()
    clean, corrupted, difference = reversed_pair(32, 12, 8)
    metric = pair_on(model, clean, corrupted, difference)
    denoised = {
        a: patch_each_head_activation(model, corrupted, head_activations(model, clean, a), metric, a)
        for a in ("q", "k", "v", "pattern", "z")
    }
    assert denoised["z"][1, 0] > 0.95 and denoised["q"][1, 0].abs() < 0.05, denoised
    for part in ("k", "pattern", "v"):
        assert 0.2 < denoised[part][1, 0] < 0.8, (part, denoised)
    assert abs(denoised["k"][1, 0] - denoised["pattern"][1, 0]) < 0.05, denoised  # keys act through the pattern
    assert all(denoised[a][:, 1].abs().max() < 0.05 for a in denoised), denoised


def test_heads_replaced_holds_for_any_run_inside_and_a_mean_broadcasts():
    model = AttentionOnly(SMALL, seed=7).eval()
    clean, corrupted, _ = reversed_pair(16, 8, 4)
    other = head_outputs(model, corrupted)
    with torch.no_grad():
        intact = model(clean)
        with heads_replaced(model, other, [(0, 1)]):
            inside = model(clean)
        expected = model(clean)  # the hook is gone again
        torch.testing.assert_close(expected, intact)
        with heads_replaced(model, other, [(0, 1)], positions=[5]):
            at_five = model(clean)
    assert not torch.allclose(inside, intact) and torch.equal(at_five[:, :5], intact[:, :5])
    means = mean_outputs(model, corrupted)
    assert means[0].shape == (1, 2, 16, 8)
    with heads_replaced(model, means, [(1, 0)]):
        replaced = head_outputs(model, clean)[1][:, 0]
    torch.testing.assert_close(replaced, means[1][:, 0].expand_as(replaced))
    with pytest.raises(ValueError, match="heads must be"):
        with heads_replaced(model, means, [(0, 2)]):
            pass


def test_a_backup_head_matters_only_once_the_head_it_backs_up_is_gone():
    """Two identical induction heads, each writing half the answer: noising either alone costs half; once one is
    noised, the other's noising costs the other half. Two copies of one head: the second matters only once the
    first is gone if each alone can do the whole job, which noising one at a time does not see."""
    model = induction_by_hand()
    layer = model.layers[1]
    with torch.no_grad():
        for weight in (layer.W_Q, layer.W_K, layer.W_V):
            weight[1] = weight[0]
        layer.W_O[0] /= 2
        layer.W_O[1] = layer.W_O[0]
    clean, corrupted, difference = reversed_pair(32, 12, 8)
    metric = pair_on(model, clean, corrupted, difference)
    alone, after = backup_effects(model, clean, head_outputs(model, corrupted), metric, removed=[(1, 0)])
    assert alone.shape == after.shape == (2, 2)
    assert 0.4 < alone[1, 1] < 0.6 and after[1, 1] < 0.05, (alone, after)  # half alone; all of what is left after
    torch.testing.assert_close(after[1, 0], alone[1, 0])  # the removed head again: nothing more
    # a circuit that leaves out the second copy is not complete: without the first copy, the model keeps the half
    # that the second writes, the circuit does not
    means = mean_outputs(model, corrupted)
    rows = {k: (c, m) for k, c, m in completeness(model, clean, means, difference, CIRCUIT)}
    circuit_left, model_left = rows[((1, 0),)]
    whole = rows[()][1]
    assert model_left - circuit_left > 0.3 * whole, rows
    both = {k: (c, m) for k, c, m in completeness(model, clean, means, difference, [*CIRCUIT, (1, 1)])}
    assert max(abs(c - m) for c, m in both.values()) < 0.05 * whole, both


def test_the_hand_set_circuit_is_faithful_complete_and_minimal_and_a_partial_one_is_not():
    model = induction_by_hand()
    clean, corrupted, difference = reversed_pair(32, 12, 8)
    means = mean_outputs(model, corrupted)
    in_circuit, whole = faithfulness(model, clean, means, difference, CIRCUIT)
    every = [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert whole == pytest.approx(float(difference(model(clean).detach())), abs=1e-5)
    assert in_circuit == pytest.approx(whole, rel=0.05), (in_circuit, whole)
    assert circuit_score(model, clean, means, difference, every) == pytest.approx(whole, abs=1e-5)
    partial, _ = faithfulness(model, clean, means, difference, [(1, 0)])  # without the previous-token head
    assert partial < 0.5 * whole, (partial, whole)
    rows = completeness(model, clean, means, difference, CIRCUIT)
    assert [k for k, _, _ in rows] == [(), ((0, 0),), ((1, 0),), ((0, 0), (1, 0))]
    assert max(abs(c - m) for _, c, m in rows) < 0.05 * whole, rows
    needed = minimality(model, clean, means, difference, CIRCUIT)
    assert set(needed) == set(CIRCUIT) and min(needed.values()) > 0.5 * whole, needed
    # a head that does nothing added to the circuit: not minimal
    assert minimality(model, clean, means, difference, [*CIRCUIT, (0, 1)])[(0, 1)] < 0.05 * whole


def test_per_head_patching_of_a_gpt2_at_chosen_positions_agrees_with_transformers_own_model(tmp_path):
    """A head of a random tiny GPT-2 patched at one position in the course's model moves the metric as the same
    patch does in transformers' GPT-2 (its heads' outputs, side by side before c_proj, replaced by a hook)."""
    tokenizer = names_tokenizer()
    reference = build("gpt2-tied", tmp_path, vocab=tokenizer.get_vocab_size()).eval()
    model = from_pretrained(tmp_path)
    prompts = ioi_prompts(tokenizer, 6)
    metric = prompts.metric
    positions = [prompts.slots["S2"], prompts.slots["end"]]
    patched = patch_each_position(model, prompts.clean, head_outputs(model, prompts.corrupted), metric, positions)
    assert patched.shape == (2, 4, 2)

    def merged(ids, layer):
        seen = []
        c_proj = reference.transformer.h[layer].attn.c_proj
        handle = c_proj.register_forward_pre_hook(lambda m, args: seen.append(args[0]))
        with torch.no_grad():
            reference(ids)
        handle.remove()
        return seen[0]

    for layer, head, k in [(0, 1, 0), (1, 3, 1), (1, 0, 0)]:
        width = slice(head * 8, (head + 1) * 8)  # d_head 8
        other = merged(prompts.corrupted, layer)

        def swap(module, args, at=positions[k], width=width, other=other):
            x = args[0].clone()
            x[:, at, width] = other[:, at, width]
            return (x,)

        handle = reference.transformer.h[layer].attn.c_proj.register_forward_pre_hook(swap)
        with torch.no_grad():
            expected = metric(reference(prompts.clean).logits)
        handle.remove()
        assert patched[layer, head, k].item() == pytest.approx(expected.item(), abs=1e-4)
    with pytest.raises(ValueError, match="positions must be"):
        patch_each_position(model, prompts.clean, head_outputs(model, prompts.corrupted), metric, [99])


def test_a_gpt2s_logit_attribution_sees_heads_replaced_and_the_ioi_corruptions_differ(tmp_path):
    tokenizer = names_tokenizer()
    build("gpt2-tied", tmp_path, vocab=tokenizer.get_vocab_size())
    model = from_pretrained(tmp_path)
    prompts = ioi_prompts(tokenizer, 4)
    means = mean_outputs(model, prompts.corrupted)
    plain = logit_attribution(model, prompts.clean, prompts.io, prompts.s)
    with heads_replaced(model, means, [(1, 2)]):
        knocked = logit_attribution(model, prompts.clean, prompts.io, prompts.s)
    assert knocked.summed() == pytest.approx(knocked.total, abs=1e-4)
    assert knocked.total != pytest.approx(plain.total, abs=1e-4)
    with heads_replaced(model, means, [(1, 2)]):
        inside = head_outputs(model, prompts.clean)
    outside = head_outputs(model, prompts.clean)
    torch.testing.assert_close(inside[1][:, 2], means[1][:, 2].expand_as(inside[1][:, 2]))
    torch.testing.assert_close(inside[0], outside[0])  # the layer before: as it was
    assert not torch.allclose(inside[1][:, 2], outside[1][:, 2])
    # the paper's p_ABC: no name of the clean prompt is left; the course's: only the subject's second place moves
    abc = ioi_prompts(tokenizer, 4, corruption="abc")
    assert torch.equal(abc.clean, prompts.clean)
    for k in range(4):
        slots = [abc.slots["first name"], abc.slots["second name"], abc.slots["S2"]]
        assert not set(abc.corrupted[k, slots].tolist()) & {int(abc.io[k]), int(abc.s[k])}
        differs = (prompts.clean[k] != prompts.corrupted[k]).nonzero().flatten().tolist()
        assert differs == [prompts.slots["S2"]]
    with pytest.raises(ValueError, match="corruption must be"):
        ioi_prompts(tokenizer, 2, corruption="abba")


def test_mean_ablating_a_head_of_the_last_layer_moves_the_logit_difference_by_its_term():
    """A check of circuit_score by hand: with no later layer, mean-ablating the last layer's head moves a logit
    difference by (mean z - z) through W_O and W_U."""
    model = AttentionOnly(SMALL, seed=8).eval()
    clean, corrupted, difference = reversed_pair(16, 8, 4)
    means = mean_outputs(model, corrupted)
    every = [(layer, head) for layer in range(2) for head in range(2)]
    without = circuit_score(model, clean, means, difference, every, removed=[(1, 1)])
    z = head_outputs(model, clean)[1][:, 1]
    with torch.no_grad():
        moved = model(clean) + torch.einsum("bte,ed->btd", means[1][:, 1] - z, model.layers[1].W_O[1]) @ model.W_U
    assert without == pytest.approx(float(difference(moved)), abs=1e-4)
