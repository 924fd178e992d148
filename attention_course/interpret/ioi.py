"""Wang et al.'s indirect-object task, on which chapter 10's cells for Colab patch GPT-2.

A prompt names two people, one of them twice (the subject, S), and a model should complete it with the other (the
indirect object, IO): "When Mary and John went to the store, John gave a drink to" -> " Mary". :func:`ioi_prompts`
writes such prompts, each with a corrupted twin, in one of two corruptions:

- ``"s2"`` (the course's, the default): a third name takes the subject's second place ("..., Tom gave a drink to").
  The corrupted prompt keeps both of the clean names where they were; only the repetition that marks the subject is
  gone, so the corrupted run still holds the two candidate names, and nothing says which of them is the answer.
- ``"abc"`` (Wang et al.'s p_ABC): the indirect object and both places of the subject take three other names, all
  different ("When Amy and Paul went to the store, Lisa gave a drink to"). Nothing of the clean prompt's names is
  left: a heavier corruption, which also removes what the names themselves carry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from attention_course.interpret.patching import LogitDifference

# Names and a template of the paper's kind, each name one GPT-2 token.
IOI_NAMES = (" Mary", " John", " Tom", " James", " Dan", " Sid", " Martin", " Amy", " Paul", " Lisa", " Mark", " Anne")
IOI_TEMPLATE = "When{a} and{b} went to the store,{s} gave a drink to"
CORRUPTIONS = ("s2", "abc")


@dataclass(frozen=True)
class IOIPrompts:
    """Prompts of the indirect-object task, all of one token length: ``clean`` (N, L) names the subject twice;
    ``corrupted`` is its twin under the corruption chosen (module docstring). ``io`` and ``s`` (N,) are the clean
    prompt's two names' tokens, ``metric`` the logit difference ``logit(io) - logit(s)`` at the last position, and
    ``slots`` the positions, the same in every prompt, of the first name, the second name, the subject's second
    place (``"S2"``) and the last token (``"end"``): the indirect object is the first name in half of the prompts
    and the second in the other half."""

    clean: torch.Tensor
    corrupted: torch.Tensor
    io: torch.Tensor
    s: torch.Tensor
    slots: dict[str, int]

    @property
    def metric(self) -> LogitDifference:
        return LogitDifference(torch.tensor([self.clean.size(1) - 1]), self.io[:, None], self.s[:, None])


def _slots(prompt: list[int], a: int, b: int, s: int) -> dict[str, int]:
    return {
        "first name": prompt.index(a),
        "second name": prompt.index(b),
        "S2": len(prompt) - 1 - prompt[::-1].index(s),
        "end": len(prompt) - 1,
    }


def ioi_prompts(
    tokenizer,
    count: int,
    seed: int = 0,
    names: Iterable[str] = IOI_NAMES,
    template: str = IOI_TEMPLATE,
    corruption: str = "s2",
) -> IOIPrompts:
    """``count`` prompts of ``template`` (with ``{a}``, ``{b}`` and ``{s}`` for the names, ``{s}`` the repeated
    one), names drawn from ``names`` (each must be one token of ``tokenizer``, a ``tokenizers.Tokenizer``); the
    indirect object comes first in half of them, second in the other half (the paper's ABBA and BABA orders).
    ``corruption`` is ``"s2"`` (a third name in the subject's second place) or ``"abc"`` (three other names)."""
    names = list(names)
    if corruption not in CORRUPTIONS:
        raise ValueError(f"corruption must be one of {CORRUPTIONS}, got {corruption!r}")
    ids = {name: tokenizer.encode(name).ids for name in names}
    split = [name for name, pieces in ids.items() if len(pieces) != 1]
    if split:
        raise ValueError(f"names must be one token each; these are not: {split}")
    needed = 3 if corruption == "s2" else 5
    if len(set(names)) < needed:
        raise ValueError(f"names must hold at least {needed} different names for corruption {corruption!r}")
    if count < 1:
        raise ValueError(f"count must be a positive int, got {count!r}")
    generator = torch.Generator().manual_seed(seed)
    clean, corrupted, io, s, slots = [], [], [], [], []
    for k in range(count):
        drawn = [names[i] for i in torch.randperm(len(names), generator=generator)[:needed].tolist()]
        first, second = drawn[:2]
        a, b = (first, second) if k % 2 == 0 else (second, first)  # ABBA, then BABA
        prompt = tokenizer.encode(template.format(a=a, b=b, s=second)).ids
        clean.append(prompt)
        if corruption == "s2":
            corrupted.append(tokenizer.encode(template.format(a=a, b=b, s=drawn[2])).ids)
        else:  # the paper's p_ABC: IO, S1 and S2 each another name, none of them the clean prompt's
            corrupted.append(tokenizer.encode(template.format(a=drawn[2], b=drawn[3], s=drawn[4])).ids)
        io.append(ids[first][0])
        s.append(ids[second][0])
        slots.append(_slots(prompt, ids[a][0], ids[b][0], ids[second][0]))
    if len({len(c) for c in clean + corrupted}) != 1 or any(slot != slots[0] for slot in slots):
        raise ValueError("the prompts' token lengths differ: the template must tokenize the same way around each name")
    return IOIPrompts(torch.tensor(clean), torch.tensor(corrupted), torch.tensor(io), torch.tensor(s), slots[0])
