"""Chapter 6's decoding references against independent implementations: the sampling distributions against
``transformers``' logits processors, speculative decoding against greedy decoding, and the scripted models
that its hidden tests use."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from attention_course.solutions.ch06_transformer import (
    Transformer,
    greedy_decode,
    min_p_probs,
    speculative_decode,
    speculative_sample,
    temperature_probs,
    top_k_probs,
    top_p_probs,
)
from autograder.api import scripted
from autograder.api.scripted import CallLimitedTranslator, HeldDraft, ScriptedDraft, ScriptedTranslator


def processed(warper, logits):
    return torch.softmax(warper(None, logits.clone()), dim=-1)


@pytest.mark.parametrize("seed", range(5))
def test_the_sampling_distributions_equal_transformers_processors(seed):
    """On random logits (no ties), each distribution is the one ``transformers`` samples from."""
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(seed)) * 3
    for t in (0.3, 1.0, 2.5):
        torch.testing.assert_close(temperature_probs(logits, t), processed(TemperatureLogitsWarper(t), logits))
    for k in (1, 5, 50):
        torch.testing.assert_close(top_k_probs(logits, k), processed(TopKLogitsWarper(k), logits))
    for p in (0.1, 0.5, 0.9, 0.99):
        torch.testing.assert_close(top_p_probs(logits, p), processed(TopPLogitsWarper(p), logits))
    for m in (0.01, 0.1, 0.5):
        torch.testing.assert_close(min_p_probs(logits, m), processed(MinPLogitsWarper(m), logits))


def test_ties_are_kept_together():
    logits = torch.tensor([2.0, 2.0, 1.0, 1.0, 0.0])
    assert temperature_probs(logits, 0).tolist() == [0.5, 0.5, 0.0, 0.0, 0.0]
    assert (top_k_probs(logits, 3) > 0).tolist() == [True] * 4 + [False]  # the tie at the third is kept
    assert (top_p_probs(logits, 0.8) > 0).tolist() == [True] * 4 + [False]


class Counted:
    def __init__(self, model):
        self.model, self.calls = model, 0

    def encode(self, *args):
        return self.model.encode(*args)

    def decode(self, *args):
        self.calls += 1
        return self.model.decode(*args)


@pytest.mark.parametrize("seed", range(6))
def test_speculative_decoding_is_greedy_decoding_of_random_transformers(seed):
    torch.manual_seed(seed)
    model, draft = Transformer(12, 12, 16, 2, 2, 32, 0.0).eval(), Transformer(12, 12, 8, 1, 1, 16, 0.0).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(2.5)  # sharper logits: the model and the draft disagree often
    generator = torch.Generator().manual_seed(seed)
    src, mask = torch.randint(12, (3, 5), generator=generator), torch.rand(3, 5, generator=generator) < 0.8
    mask[:, 0] = True
    for candidate in (draft, model):
        for lookahead in (1, 3, 6):
            for max_len in (1, 4, 9):
                want = greedy_decode(model, src, mask, 1, 2, max_len)
                assert torch.equal(speculative_decode(model, candidate, src, mask, 1, 2, max_len, lookahead), want)


def test_the_scripted_draft_and_the_call_limit():
    src, mask = torch.tensor([[7, 3, 9, 4, 11, 6, 8]]), torch.ones(1, 7, dtype=torch.bool)
    model = ScriptedTranslator(16, 1, 2)
    greedy = greedy_decode(model, src, mask, 1, 2, 10)
    assert torch.equal(greedy_decode(ScriptedDraft(16, 1, 2, 0), src, mask, 1, 2, 10), greedy)
    missing = greedy_decode(ScriptedDraft(16, 1, 2, 3), src, mask, 1, 2, 10)
    assert torch.equal(missing[:, :2], greedy[:, :2]) and missing[0, 2] != greedy[0, 2]
    for lookahead, calls in ((1, 4), (3, 2), (7, 1)):  # 8 tokens, lookahead + 1 per call
        counted = Counted(model)
        speculative_decode(counted, ScriptedDraft(16, 1, 2, 0), src, mask, 1, 2, 10, lookahead)
        assert counted.calls == calls
        limited = CallLimitedTranslator(16, 1, 2, calls)
        assert torch.equal(speculative_decode(limited, model, src, mask, 1, 2, 10, lookahead), greedy)
        over = CallLimitedTranslator(16, 1, 2, calls)
        assert not torch.equal(greedy_decode(over, src, mask, 1, 2, 10), greedy)  # one call per token is too many


@pytest.mark.parametrize("lookahead", [1, 2, 3, 4, 7])
def test_the_keyed_model_and_the_held_draft_that_misses_at_the_models_own_tokens(lookahead):
    """The economy test's fixtures (issue 68): a draft that misses at every (lookahead + 1)-th token, the one the
    model adds itself, costs the reference no call (8 tokens: ceil(8 / (lookahead + 1)) calls, and one fewer is too
    few), and greedy decoding with that draft alone writes other tokens. Keyed, both write words no public fixture
    writes, drawn under the check's key; past its calls, the model's words tell nothing of its own."""
    src, mask = torch.tensor([[7, 3, 9, 4, 11, 6, 8]]), torch.ones(1, 7, dtype=torch.bool)
    calls = -(-8 // (lookahead + 1))
    with scripted.holding():
        greedy = greedy_decode(CallLimitedTranslator(16, 1, 2, 10**9, True), src, mask, 1, 2, 10)
        assert greedy.shape == (1, 8) and greedy[0, -1] == 2
        draft = HeldDraft(16, 1, 2, lookahead + 1, True)
        counted = Counted(CallLimitedTranslator(16, 1, 2, 10**9, True))
        assert torch.equal(speculative_decode(counted, draft, src, mask, 1, 2, 10, lookahead), greedy)
        assert counted.calls == calls
        limited = CallLimitedTranslator(16, 1, 2, calls, True)
        assert torch.equal(speculative_decode(limited, draft, src, mask, 1, 2, 10, lookahead), greedy)
        short = CallLimitedTranslator(16, 1, 2, calls - 1, True)
        assert not torch.equal(speculative_decode(short, draft, src, mask, 1, 2, 10, lookahead), greedy)
        assert not torch.equal(greedy_decode(draft, src, mask, 1, 2, 10), greedy)
        tgt = torch.cat([torch.tensor([[1]]), greedy[:, :-1]], dim=1)  # bos and the greedy tokens but the last
        memory, look_ahead = src.float()[..., None], torch.ones(8, 8, dtype=torch.bool).tril()
        own = CallLimitedTranslator(16, 1, 2, 1, True).decode(tgt, memory, look_ahead, mask).argmax(-1)
        assert torch.equal(own, greedy)
        past = CallLimitedTranslator(16, 1, 2, 0, True).decode(tgt, memory, look_ahead, mask).argmax(-1)
        assert not any(torch.equal(past, (own + shift) % 16) for shift in range(16))  # no roll undoes it
    for public in (ScriptedTranslator(16, 1, 2), ScriptedDraft(16, 1, 2, 0), CallLimitedTranslator(16, 1, 2, 10**9)):
        assert not torch.equal(greedy_decode(public, src, mask, 1, 2, 10), greedy)
    with scripted.holding():  # another check's key
        assert not torch.equal(greedy_decode(CallLimitedTranslator(16, 1, 2, 10**9, True), src, mask, 1, 2, 10), greedy)
    with pytest.raises(ValueError, match="must miss"):
        HeldDraft(16, 1, 2, 0)


@pytest.mark.parametrize("seed", range(2))
def test_speculative_sampling_keeps_the_models_distribution(seed):
    """Rounds of speculative_sample with random draws: every token kept follows p (a chi-square test, p the same
    at every position), a share sum(min(p, q)) of the guesses judged is accepted, and a round keeps
    (1 - a^(g+1)) / (1 - a) tokens on average, within four standard errors."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(seed)
        p_row = torch.softmax(torch.randn(5, generator=generator), dim=0)
        q_row = torch.softmax(torch.randn(5, generator=generator), dim=0)
        p_row[3] = 0.0  # a token the model never writes, which the draft proposes
        p_row = p_row / p_row.sum()
        g, rounds = 2, 6000
        p, q = p_row.expand(g + 1, -1), q_row.expand(g, -1)
        counts, lengths, judged = torch.zeros(5), [], 0
        for _ in range(rounds):
            proposed = torch.multinomial(q_row, g, replacement=True, generator=generator)
            kept = speculative_sample(p, q, proposed, torch.rand(g + 1, generator=generator))
            counts += torch.bincount(kept, minlength=5)
            lengths.append(len(kept))
            judged += min(len(kept), g)
    finally:
        torch.set_num_threads(threads)
    assert counts[3] == 0
    tokens, seen = counts.sum(), p_row > 0
    chi2 = float(((counts[seen] - tokens * p_row[seen]) ** 2 / (tokens * p_row[seen])).sum())
    assert float(torch.special.gammaincc(torch.tensor((int(seen.sum()) - 1) / 2), torch.tensor(chi2 / 2))) > 1e-3
    alpha = float(torch.minimum(p_row, q_row).sum())
    assert abs((float(tokens) - rounds) / judged - alpha) < 0.02
    lengths = torch.tensor(lengths, dtype=torch.float64)
    assert abs(float(lengths.mean()) - (1 - alpha ** (g + 1)) / (1 - alpha)) < 4 * float(lengths.std()) / rounds**0.5
