"""Speculative decoding and sampling for the course's ``DecoderOnly`` on its key/value cache.

A small ``draft`` model proposes ``lookahead`` tokens, one at a time; the ``model`` scores all of them in one call
over its cache, keeps a prefix of them by Leviathan et al.'s and Chen et al.'s rule and adds one token of its own.
At temperature 0 the rule keeps the guesses equal to the model's most likely tokens and adds its most likely token
there, so the output is :meth:`DecoderOnly.generate`'s at temperature 0, token for token; at a temperature above 0
each token follows the model's distribution at that temperature, as plain sampling's does. The positions of the
guesses rejected are cut from both caches (rolled back) before the next round.

Leviathan et al.'s model of the time it saves is here too: the tokens a call of the model yields on average
(:func:`expected_tokens_per_call`), the speed-up once the draft's calls are paid for (:func:`speedup`) and the number
of guesses that makes it largest (:func:`best_guesses`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attention_course.models.transformer import DecoderOnly


@dataclass
class Speculation:
    """What a run of :func:`speculative_generate` did: its tokens, and the calls and guesses that made them."""

    ids: torch.Tensor  # (1, L + new_tokens): the prompt and the tokens generated
    model_calls: int  # calls of the model after the prompt's: one per round
    draft_calls: int
    guessed: int  # the draft's guesses that the model judged (a round stops judging at its first rejection)
    accepted: int

    @property
    def acceptance(self) -> float:
        """The share of the guesses judged that were accepted: an estimate of the acceptance rate."""
        return self.accepted / max(self.guessed, 1)

    @property
    def tokens_per_call(self) -> float:
        """The tokens generated per call of the model: every accepted guess, and one token of its own per round."""
        return (self.accepted + self.model_calls) / max(self.model_calls, 1)


def distributions(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The probabilities (..., V) the tokens are drawn from: the softmax at ``temperature``, or, at temperature 0,
    all the probability on the most likely token (the first of a tie, as ``argmax`` picks it)."""
    if temperature == 0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    return torch.softmax(logits.float() / temperature, dim=-1)


def _judge(target: torch.Tensor, proposal: torch.Tensor, guesses: torch.Tensor, generator) -> tuple[int, int]:
    """``(n, token)``: how many of ``guesses`` (g,) to keep, and the model's token after them. ``target`` (g + 1, V)
    holds the model's distributions, ``proposal`` (g, V) the draft's that drew the guesses."""
    g = guesses.numel()
    chance = torch.rand(g, generator=generator, device=target.device)
    picked = torch.arange(g, device=target.device)
    ratio = target[picked, guesses] / proposal[picked, guesses]
    refused = (chance >= ratio).nonzero()
    if len(refused) == 0:
        return g, int(torch.multinomial(target[g], 1, generator=generator))
    n = int(refused[0])
    leftover = (target[n] - proposal[n]).clamp_min(0)
    # rounding can leave nothing where the two distributions are equal: the model's own distribution then
    weights = leftover if leftover.sum() > 0 else target[n]
    return n, int(torch.multinomial(weights, 1, generator=generator))


def _rolled_back(cache: list, length: int) -> list:
    """``cache`` with the positions from ``length`` on cut from every layer's keys and values (B, H, L, d)."""
    return [(keys[:, :, :length], values[:, :, :length]) for keys, values in cache]


def _logits_after(model: DecoderOnly, ids: torch.Tensor, cache: list | None) -> tuple[torch.Tensor, list]:
    """The model's logits (B, L_new, V) for the positions of ``ids`` that ``cache`` does not hold yet."""
    done = 0 if cache is None else model.cached_length(cache)
    hidden, cache = model.hidden_states(ids[:, done:], cache)
    return model.generator(hidden), cache


@torch.inference_mode()
def speculative_generate(
    model: DecoderOnly,
    draft: DecoderOnly,
    ids: torch.Tensor,
    new_tokens: int,
    lookahead: int = 4,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> Speculation:
    """``new_tokens`` tokens after the prompt ``ids`` (1, L), the draft guessing up to ``lookahead`` per round.

    Both models keep a key/value cache of the tokens accepted so far. Each round the draft extends its own cache
    one guess at a time; the model runs once on the tokens its cache lacks followed by the guesses; then both
    caches are cut back to the tokens kept. At ``temperature`` 0 the result is ``model.generate(ids, new_tokens,
    0)``'s; above 0, each token is distributed as ``model.generate``'s at that temperature. The whole sequence must
    fit in both models' ``max_len`` (no window is slid). ``generator`` draws every random number.
    """
    if ids.size(0) != 1:
        raise ValueError(f"speculative_generate runs one sequence: ids must be (1, L), got {tuple(ids.shape)}")
    if lookahead < 1:
        raise ValueError(f"lookahead must be at least 1, got lookahead={lookahead}")
    if temperature < 0:
        raise ValueError(f"temperature must be 0 or more, got temperature={temperature}")
    longest = ids.size(1) + new_tokens
    if longest > min(model.max_len, draft.max_len):
        raise ValueError(f"{longest} positions do not fit max_len {min(model.max_len, draft.max_len)}")
    end = ids.size(1) + new_tokens
    model_cache = draft_cache = None
    calls = draft_calls = guessed = accepted = 0
    while ids.size(1) < end:
        g = min(lookahead, end - ids.size(1) - 1)  # room for the model's own token after the guesses
        sequence, proposals = ids, []
        for _ in range(g):
            logits, draft_cache = _logits_after(draft, sequence, draft_cache)
            draft_calls += 1
            proposals.append(distributions(logits[0, -1], temperature))
            guess = torch.multinomial(proposals[-1], 1, generator=generator)
            sequence = torch.cat([sequence, guess[None]], dim=1)
        before = 0 if model_cache is None else model.cached_length(model_cache)
        logits, model_cache = _logits_after(model, sequence, model_cache)
        calls += 1
        # the model's distribution for the token after the accepted tokens, and after each guess
        target = distributions(logits[0, ids.size(1) - 1 - before :], temperature)
        guesses = sequence[0, ids.size(1) :]
        if g:
            proposal = torch.stack(proposals)
            n, token = _judge(target, proposal, guesses, generator)
        else:
            n, token = 0, int(torch.multinomial(target[0], 1, generator=generator))
        guessed += min(n + 1, g)
        accepted += n
        kept = ids.size(1) + n
        ids = torch.cat([sequence[:, :kept], torch.tensor([[token]], device=ids.device)], dim=1)
        # roll back: neither cache may hold a rejected guess (the new token is fed in the next round)
        model_cache = _rolled_back(model_cache, kept)
        if draft_cache is not None:
            draft_cache = _rolled_back(draft_cache, min(kept, draft.cached_length(draft_cache)))
    return Speculation(ids, calls, draft_calls, guessed, accepted)


# Leviathan et al.'s model of a round's wall-clock time (Leviathan, Kalman and Matias, 2023, section 3): each guess
# is accepted with probability ``acceptance`` independently of the others, a call of the draft costs ``cost`` times a
# call of the model, and a round is ``guesses`` calls of the draft followed by one call of the model.


def _check_round(acceptance: float, guesses: int) -> None:
    if not 0 <= acceptance <= 1:
        raise ValueError(f"acceptance must be a probability, between 0 and 1, got acceptance={acceptance}")
    if isinstance(guesses, bool) or not isinstance(guesses, int) or guesses < 0:
        raise ValueError(f"guesses must be a whole number of 0 or more, got guesses={guesses!r}")


def expected_tokens_per_call(acceptance: float, guesses: int) -> float:
    """The tokens a round yields on average, one call of the model: ``1 + a + ... + a^g = (1 - a^(g+1)) / (1 - a)``
    for acceptance ``a`` and ``g`` guesses (``g + 1`` at ``a = 1``); never more than ``1 / (1 - a)``."""
    _check_round(acceptance, guesses)
    if acceptance == 1:
        return float(guesses + 1)
    return (1 - acceptance ** (guesses + 1)) / (1 - acceptance)


def speedup(acceptance: float, guesses: int, cost: float) -> float:
    """How many times faster than plain decoding a round makes tokens, by Leviathan et al.'s model:
    ``(1 - a^(g+1)) / ((1 - a) (g c + 1))``, the tokens of a round over its time (``g`` calls of the draft at
    ``cost`` ``c`` each, one of the model), in calls of the model."""
    _check_round(acceptance, guesses)
    if cost < 0:
        raise ValueError(f"cost must be 0 or more (the draft's time per call over the model's), got cost={cost}")
    return expected_tokens_per_call(acceptance, guesses) / (guesses * cost + 1)


def best_guesses(acceptance: float, cost: float, most: int = 64) -> int:
    """The number of guesses per round, from 0 to ``most``, with the largest :func:`speedup` (the fewest of a
    tie); 0 means that the draft does not pay."""
    if isinstance(most, bool) or not isinstance(most, int) or most < 0:
        raise ValueError(f"most must be a whole number of 0 or more, got most={most!r}")
    return max(range(most + 1), key=lambda g: (speedup(acceptance, g, cost), -g))
