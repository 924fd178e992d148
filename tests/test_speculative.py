"""Speculative decoding on ``DecoderOnly``'s key/value cache (attention_course.published.speculative): at temperature
0 it is greedy generation token for token, and when it samples, its sequences follow the model's own distribution."""

from __future__ import annotations

import itertools

import pytest
import torch

from attention_course.models.transformer import DecoderOnly
from attention_course.published.speculative import distributions, speculative_generate


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models: one thread computes them as fast as two, and far faster on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def random_model(vocab, d_model, layers, seed, sharpen=2.0, **options):
    torch.manual_seed(seed)
    model = DecoderOnly(vocab, d_model, 2, layers, 2 * d_model, 0.0, max_len=64, **options).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(sharpen)  # sharper logits: the draft and the model disagree often
    return model


FAMILIES = {
    "sinusoidal, multi-head": {},
    "rotary, grouped-query, fused": {"positions": "rotary", "num_kv_heads": 1, "fused": True, "norm": "rms"},
    "sliding window": {"sliding_window": 4},
}


@pytest.mark.parametrize("family", FAMILIES)
def test_at_temperature_zero_it_is_greedy_generation_token_for_token(family):
    options = FAMILIES[family]
    model = random_model(20, 32, 2, 0, **options)
    drafts = [random_model(20, 16, 1, 1, **options), model]  # one that guesses badly, one that guesses right
    prompt = torch.randint(20, (1, 5), generator=torch.Generator().manual_seed(2))
    for draft, lookahead, n in [(drafts[0], 1, 9), (drafts[0], 3, 1), (drafts[0], 3, 25), (drafts[0], 6, 17),
                                (drafts[1], 4, 2), (drafts[1], 2, 13)]:  # fmt: skip
        want = model.generate(prompt, n, temperature=0)
        run = speculative_generate(model, draft, prompt, n, lookahead, temperature=0)
        assert torch.equal(run.ids, want), (family, lookahead, n)
    # a draft that is the model itself is always right: lookahead + 1 tokens per call of the model
    run = speculative_generate(model, model, prompt, 24, 3, temperature=0)
    assert run.model_calls == 6 and run.acceptance == 1.0 and run.tokens_per_call == 4.0
    bad = speculative_generate(model, drafts[0], prompt, 24, 3, temperature=0)
    assert bad.acceptance < 0.9 and bad.model_calls > 6  # the bad draft's rejections were rolled back


def exact_sequences(model, prompt, n, temperature):
    """The probability of each of the model's continuations of n tokens: {tuple: probability}."""
    vocab = model.generator.out_features
    result = {}
    for tail in itertools.product(range(vocab), repeat=n):
        ids = torch.cat([prompt, torch.tensor([tail])], dim=1)
        with torch.no_grad():
            probs = distributions(model(ids)[0, prompt.size(1) - 1 : -1], temperature)
        result[tail] = float(probs[torch.arange(n), torch.tensor(tail)].prod())
    return result


def chi_square_p_value(counts, exact, runs):
    """The p-value of the chi-square test of ``counts`` against the probabilities ``exact``, the outcomes expected
    fewer than 5 times pooled into one."""
    big = [s for s in exact if runs * exact[s] >= 5]
    observed = [counts[s] for s in big] + [runs - sum(counts[s] for s in big)]
    expected = [runs * exact[s] for s in big] + [runs * (1 - sum(exact[s] for s in big))]
    chi2 = sum((o - e) ** 2 / e for o, e in zip(observed, expected) if e > 0)
    return float(torch.special.gammaincc(torch.tensor((len(observed) - 1) / 2.0), torch.tensor(chi2 / 2.0)))


def test_when_sampling_its_sequences_follow_the_models_distribution():
    """Three tokens of a 3-token vocabulary, 1,500 times: the counts of the 27 continuations against the model's
    own probabilities (a chi-square test), with a draft that is often wrong, so that every branch of the rule
    runs; the same test rejects the draft's own samples."""
    model, draft = random_model(3, 8, 2, 3, sharpen=2.0), random_model(3, 8, 1, 4, sharpen=2.0)
    prompt, n, runs, temperature = torch.tensor([[1, 2]]), 3, 1500, 0.8
    exact = exact_sequences(model, prompt, n, temperature)
    counts, wrong = dict.fromkeys(exact, 0), dict.fromkeys(exact, 0)
    generator = torch.Generator().manual_seed(5)
    judged = accepted = 0
    for _ in range(runs):
        run = speculative_generate(model, draft, prompt, n, 2, temperature, generator)
        counts[tuple(run.ids[0, 2:].tolist())] += 1
        judged, accepted = judged + run.guessed, accepted + run.accepted
        wrong[tuple(draft.generate(prompt, n, temperature, generator)[0, 2:].tolist())] += 1
    assert chi_square_p_value(counts, exact, runs) > 1e-3
    assert 0.2 < accepted / judged < 0.95  # guesses both accepted and rejected
    assert chi_square_p_value(wrong, exact, runs) < 1e-6


def test_arguments_it_cannot_run_are_refused():
    model = random_model(10, 16, 1, 0)
    with pytest.raises(ValueError, match="one sequence"):
        speculative_generate(model, model, torch.zeros(2, 3, dtype=torch.long), 4)
    with pytest.raises(ValueError, match="lookahead"):
        speculative_generate(model, model, torch.zeros(1, 3, dtype=torch.long), 4, lookahead=0)
    with pytest.raises(ValueError, match="max_len"):
        speculative_generate(model, model, torch.zeros(1, 3, dtype=torch.long), 62)


def tokens_per_round_by_counting(acceptance, guesses):
    """The mean tokens of a round from its distribution: n guesses kept with probability a^n (1 - a) for n < g and
    a^g for n = g, and one token of the model's after them."""
    a, g = acceptance, guesses
    return sum(a**n * (1 - a) * (n + 1) for n in range(g)) + a**g * (g + 1)


@pytest.mark.parametrize("acceptance", [0.0, 0.3, 0.8, 0.95, 1.0])
@pytest.mark.parametrize("guesses", [0, 1, 4, 10])
def test_tokens_per_call_is_the_mean_of_a_rounds_distribution(acceptance, guesses):
    from attention_course.published.speculative import expected_tokens_per_call

    found = expected_tokens_per_call(acceptance, guesses)
    assert found == pytest.approx(tokens_per_round_by_counting(acceptance, guesses), rel=1e-12)
    if acceptance < 1:
        assert found <= 1 / (1 - acceptance)  # never more, however many guesses


def test_tokens_per_call_matches_rounds_simulated_with_speculative_sample():
    """Rounds of the chapter's small example judged by the reference rule: the mean tokens per round is the formula's
    at the acceptance a = sum min(p, q)."""
    from attention_course.published.speculative import expected_tokens_per_call
    from attention_course.solutions.ch06_transformer import speculative_sample

    p_row = torch.tensor([0.30, 0.25, 0.20, 0.12, 0.08, 0.05])
    q_row = torch.tensor([0.10, 0.35, 0.05, 0.30, 0.15, 0.05])
    g, rounds = 3, 4000
    draws = torch.Generator().manual_seed(0)
    lengths = []
    for _ in range(rounds):
        proposed = torch.multinomial(q_row, g, replacement=True, generator=draws)
        kept = speculative_sample(
            p_row.expand(g + 1, -1), q_row.expand(g, -1), proposed, torch.rand(g + 1, generator=draws)
        )
        lengths.append(len(kept))
    lengths = torch.tensor(lengths, dtype=torch.float64)
    alpha = float(torch.minimum(p_row, q_row).sum())
    assert abs(lengths.mean() - expected_tokens_per_call(alpha, g)) < 4 * lengths.std() / rounds**0.5


def test_the_speedup_pays_for_the_drafts_calls_and_peaks_at_the_best_number_of_guesses():
    from attention_course.published.speculative import best_guesses, expected_tokens_per_call, speedup

    assert speedup(0.8, 0, 0.05) == 1.0  # no guess: plain decoding
    assert speedup(0.8, 4, 0.0) == expected_tokens_per_call(0.8, 4)  # a free draft: the tokens per call
    # Leviathan et al.'s formula, written out
    assert speedup(0.7, 3, 0.1) == pytest.approx((1 - 0.7**4) / ((1 - 0.7) * (3 * 0.1 + 1)), rel=1e-12)
    for acceptance, cost in [(0.6, 0.05), (0.8, 0.05), (0.9, 0.01), (0.9, 0.2), (0.5, 0.5)]:
        best = best_guesses(acceptance, cost)
        rates = [speedup(acceptance, g, cost) for g in range(65)]
        assert rates[best] == max(rates) and best == rates.index(max(rates))
    # a better draft, or a cheaper one, never asks for fewer guesses
    assert best_guesses(0.6, 0.05) <= best_guesses(0.8, 0.05) <= best_guesses(0.9, 0.05)
    assert best_guesses(0.8, 0.2) <= best_guesses(0.8, 0.05) <= best_guesses(0.8, 0.01)
    # a draft that is always refused does not pay
    assert best_guesses(0.0, 0.05) == 0


def test_the_speedup_model_refuses_what_it_cannot_mean():
    from attention_course.published.speculative import best_guesses, expected_tokens_per_call, speedup

    for call, name in [
        (lambda: expected_tokens_per_call(1.5, 4), "acceptance"),
        (lambda: expected_tokens_per_call(-0.1, 4), "acceptance"),
        (lambda: expected_tokens_per_call(0.5, -1), "guesses"),
        (lambda: expected_tokens_per_call(0.5, 2.5), "guesses"),
        (lambda: speedup(0.5, 4, -0.1), "cost"),
        (lambda: best_guesses(0.5, 0.1, most=-1), "most"),
    ]:
        with pytest.raises(ValueError, match=name):
            call()
