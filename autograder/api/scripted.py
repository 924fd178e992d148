"""The scripted objects that hidden tests hand to a student's function, built alike in the grader and the sandbox.

A test cannot send an object into the sandbox (only plain data crosses), so a
fixture crosses as its name and constructor arguments and is rebuilt from this
module on the other side. The grader runs the reference with its own copy, so
a fixture changed inside the sandbox changes only the student's result.

A fixture whose state or behaviour is part of what its test checks never enters the sandbox: the
model whose calls its test counts (:class:`CallLimitedTranslator`) and the draft that test hands over
beside it (:class:`HeldDraft`). Each declares :class:`Held`, and the student's code gets a proxy with
its public attributes whose calls of its methods the grader answers with the fixture it holds
(:mod:`autograder.calls.standins`), so that the code can call the fixture but never read or change its
state, nor reach its class. The grader holds each such fixture for the check that sent it
(:func:`holding`, :func:`hold`, :func:`held`).

Built ``keyed``, such a fixture writes words drawn from a hash, under a key, of all that a causal model
sees at each position: the key is drawn afresh for each check (:func:`holding`) in the process that runs
the check, the grader's, and never crosses, so no object that the student's code builds, of any class
and with any arguments, writes the same tokens (:func:`key`).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import secrets
from collections.abc import Callable, Iterator
from typing import NamedTuple

import torch


class Held(NamedTuple):
    """What the student's code gets of a fixture that the grader holds: the ``methods`` it may call (answered
    in the grader) and the ``attributes`` it may read (plain values, copied)."""

    methods: tuple[str, ...]
    attributes: tuple[str, ...] = ()


class ScriptedTranslator(torch.nn.Module):
    """A stand-in for a trained encoder-decoder whose greedy output is known.

    ``encode(src, src_mask)`` keeps the source; ``decode(tgt_in, memory, tgt_mask,
    memory_mask)`` returns logits (B, T, V) whose most likely token at position t
    depends on the token fed at t, on the first source token and, through the
    number of visible source positions, on ``memory_mask`` (None: all visible). Sequence b produces
    ``eos_id`` when its output is as long as its visible source, so the sequences
    of a batch end at different steps; fed more tokens, it goes on with words. Without a
    look-ahead ``tgt_mask`` (True on and below the diagonal, broadcastable to (B, H, T, T)) it
    predicts other words, as a trained model would that sees the future.

    With ``margin``, another word comes a close second at every position: its logit is ``margin`` below the
    most likely token's (a near tie, which only the argmax always resolves; else every other token is 8 below).

    A fixture with a key (``_key``: the held ones built ``keyed``) writes other words (:meth:`_words`).
    """

    _key: bytes | None = None

    def __init__(self, vocab_size: int = 16, bos_id: int = 1, eos_id: int = 2, margin: float | None = None):
        super().__init__()
        if vocab_size < 5:
            raise ValueError(f"vocab_size must be at least 5, got {vocab_size}")
        if margin is not None and not 0 < margin < 8:
            raise ValueError(f"margin must be between 0 and 8, got {margin}")
        self.vocab_size, self.bos_id, self.eos_id, self.margin = vocab_size, bos_id, eos_id, margin
        arguments = (vocab_size, bos_id, eos_id) if margin is None else (vocab_size, bos_id, eos_id, margin)
        self.__wire_fixture__ = ("ScriptedTranslator", arguments)

    def encode(self, src, src_mask=None):
        return src.float()[..., None]  # (B, S, 1): the "memory" is the source itself

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        src, length = self._seen(memory, memory_mask)
        words = self.vocab_size - 3  # ids 3 .. V-1 are words
        step = torch.arange(tgt_in.size(1), device=tgt_in.device)[None, :]  # position t predicts token t + 1
        word = self._words(tgt_in, src, length, self._causal(tgt_mask, tgt_in.size(1)))
        # eos once the output is as long as the visible source; after that, words again (as an undertrained
        # model would), so a decoder must fill finished sequences with eos itself.
        next_token = torch.where(step == length, torch.full_like(word, self.eos_id), word)
        logits = torch.full((*tgt_in.shape, self.vocab_size), -4.0, device=tgt_in.device)
        if self.margin is not None:  # the next word in turn, a close second
            second = 3 + (next_token - 3 + 1) % words
            logits.scatter_(-1, second[..., None], 4.0 - self.margin)
        logits.scatter_(-1, next_token[..., None], 4.0)
        return logits

    @staticmethod
    def _seen(memory, memory_mask) -> tuple[torch.Tensor, torch.Tensor]:
        """The source (B, S), and how many of its positions ``memory_mask`` leaves visible (B, 1): the length
        of the output before eos."""
        src = memory[..., 0].long()
        visible = torch.ones_like(src, dtype=torch.bool) if memory_mask is None else memory_mask.bool()
        return src, visible.sum(dim=1, keepdim=True)

    def _words(self, tgt_in, src, length, causal: bool, domain: bytes = b"word") -> torch.Tensor:
        """(B, T): the word that position t predicts. Without a key, it depends on the token fed at t, the first
        source token, the visible length and whether the mask looks ahead; with one, it is drawn from a hash
        under the key of those and of every token fed up to t (:func:`keyed_hash`; ``domain`` draws other words
        from the same key)."""
        words = self.vocab_size - 3
        if self._key is None:
            return 3 + (tgt_in * 5 + src[:, :1] + length + (0 if causal else 1)) % words
        return 3 + keyed_hash(self._key, domain, tgt_in, src, length, causal) % words

    @staticmethod
    def _causal(tgt_mask, length: int) -> bool:
        if (
            not isinstance(tgt_mask, torch.Tensor)
            or tgt_mask.dtype != torch.bool
            or tgt_mask.shape[-2:] != (length, length)
        ):
            return False
        lower = torch.ones(length, length, dtype=torch.bool, device=tgt_mask.device).tril()
        return bool((tgt_mask == lower).all())


class ScriptedDraft(ScriptedTranslator):
    """A draft model for :class:`ScriptedTranslator` (same ``vocab_size``, ``bos_id`` and ``eos_id``), for speculative
    decoding: its most likely token is the translator's, except at every position t with (t + 1) % ``miss_every``
    == 0, where it guesses the next word instead (``miss_every`` 0: never)."""

    def __init__(self, vocab_size: int = 16, bos_id: int = 1, eos_id: int = 2, miss_every: int = 0):
        super().__init__(vocab_size, bos_id, eos_id)
        if miss_every < 0:
            raise ValueError(f"miss_every must be 0 or more, got {miss_every}")
        self.miss_every = miss_every
        self.__wire_fixture__ = ("ScriptedDraft", (vocab_size, bos_id, eos_id, miss_every))

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        logits = super().decode(tgt_in, memory, tgt_mask, memory_mask)
        if not self.miss_every:
            return logits
        step = torch.arange(tgt_in.size(1), device=tgt_in.device)
        missed = (step + 1) % self.miss_every == 0  # (T,)
        words = self.vocab_size - 3
        if self._key is None:  # the next word in turn
            shift = 1
        else:  # another word, drawn under the key: never the translator's
            src, length = self._seen(memory, memory_mask)
            causal = self._causal(tgt_mask, tgt_in.size(1))
            shift = 1 + keyed_hash(self._key, b"miss", tgt_in, src, length, causal) % (words - 1)
        wrong = 3 + (logits.argmax(dim=-1) - 3 + shift) % words
        guessed = torch.full_like(logits, -4.0).scatter_(-1, wrong[..., None], 4.0)
        return torch.where(missed[None, :, None], guessed, logits)


class CallLimitedTranslator(ScriptedTranslator):
    """:class:`ScriptedTranslator` for ``calls`` calls of ``decode``; from the next call on, it predicts other
    words. A decoder that calls it more often than its task needs (speculative decoding: one call per
    ``lookahead + 1`` tokens where the draft guesses right) writes other tokens than the reference.

    Its count of calls is what its test checks: the grader holds it, and counts the calls it answers.
    ``keyed``: its words are drawn under the check's key (:func:`key`), and so are the other words it writes
    past its calls, which tell nothing of its own (without a key, its logits rolled by one)."""

    __wire_held__ = Held(methods=("encode", "decode"), attributes=("vocab_size", "bos_id", "eos_id"))

    def __init__(self, vocab_size: int = 16, bos_id: int = 1, eos_id: int = 2, calls: int = 1, keyed: bool = False):
        super().__init__(vocab_size, bos_id, eos_id)
        self.calls, self.made = calls, 0
        self._key = key() if keyed else None
        arguments = (vocab_size, bos_id, eos_id, calls) + ((True,) if keyed else ())
        self.__wire_fixture__ = ("CallLimitedTranslator", arguments)

    def decode(self, tgt_in, memory, tgt_mask=None, memory_mask=None):
        self.made += 1
        logits = super().decode(tgt_in, memory, tgt_mask, memory_mask)
        if self.made <= self.calls:
            return logits
        if self._key is None:
            return logits.roll(1, dims=-1)
        src, length = self._seen(memory, memory_mask)
        other = self._words(tgt_in, src, length, self._causal(tgt_mask, tgt_in.size(1)), b"past its calls")
        return torch.full_like(logits, -4.0).scatter_(-1, other[..., None], 4.0)


class HeldDraft(ScriptedDraft):
    """:class:`ScriptedDraft` held by the grader: the draft that the test of :class:`CallLimitedTranslator`
    hands over beside it, whose guesses the student's code can ask for but never make itself. It misses
    (``miss_every`` 1 or more: a draft that never misses is the model itself, and greedy decoding with it
    would give the model's tokens without a call of the model). ``keyed``: its words are those of the keyed
    :class:`CallLimitedTranslator` of the same check (the same key), and at a miss it guesses another word
    drawn under the key, so that the guesses it misses cannot be put right without the model."""

    __wire_held__ = Held(methods=("encode", "decode"), attributes=("vocab_size", "bos_id", "eos_id"))

    def __init__(
        self, vocab_size: int = 16, bos_id: int = 1, eos_id: int = 2, miss_every: int = 1, keyed: bool = False
    ):
        if miss_every < 1:
            raise ValueError(f"a held draft must miss: miss_every must be 1 or more, got {miss_every}")
        super().__init__(vocab_size, bos_id, eos_id, miss_every)
        self._key = key() if keyed else None
        arguments = (vocab_size, bos_id, eos_id, miss_every) + ((True,) if keyed else ())
        self.__wire_fixture__ = ("HeldDraft", arguments)


def keyed_hash(secret: bytes, domain: bytes, tgt_in, src, length, causal: bool) -> torch.Tensor:
    """(B, T) int64 in [0, 2**56): at position t of sequence b, a keyed hash (BLAKE2b under ``secret``) of
    ``domain``, the first source token, the visible length, whether the mask looks ahead, and the tokens fed at
    positions 0 to t: all that a causal model sees there."""
    rows = []
    for b in range(tgt_in.size(0)):
        seen = hashlib.blake2b(key=secret, digest_size=7, person=domain[:16])
        first = int(src[b, 0]) if src.size(1) else -1
        seen.update(f"{first},{int(length[b, 0])},{int(causal)};".encode())
        row = []
        for token in tgt_in[b].tolist():
            seen.update(f"{token},".encode())
            row.append(int.from_bytes(seen.copy().digest(), "little"))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.long, device=tgt_in.device).reshape(tgt_in.shape)


def attention_only(vocab_size: int, max_len: int, d_model: int, num_heads: int, num_layers: int, seed: int):
    """Chapter 10's attention-only model (:class:`attention_course.interpret.circuits.AttentionOnly`) with random
    weights drawn from ``seed``, in eval mode."""
    from attention_course.interpret import circuits

    config = circuits.AttentionOnlyConfig(vocab_size, max_len, d_model, num_heads, num_layers)
    model = circuits.AttentionOnly(config, seed=seed).eval()
    model.__wire_fixture__ = ("AttentionOnly", (vocab_size, max_len, d_model, num_heads, num_layers, seed))
    return model


def induction_by_hand(vocab_size: int, max_len: int, num_heads: int, seed: int):
    """Chapter 10's two-layer model whose weights do induction
    (:func:`attention_course.interpret.circuits.induction_by_hand`)."""
    from attention_course.interpret import circuits

    model = circuits.induction_by_hand(vocab_size, max_len, num_heads, seed=seed).eval()
    model.__wire_fixture__ = ("InductionByHand", (vocab_size, max_len, num_heads, seed))
    return model


FIXTURES = {
    "ScriptedTranslator": ScriptedTranslator,
    "ScriptedDraft": ScriptedDraft,
    "CallLimitedTranslator": CallLimitedTranslator,
    "HeldDraft": HeldDraft,
    "AttentionOnly": attention_only,
    "InductionByHand": induction_by_hand,
}


def build(name: str, args):
    """The fixture ``name`` built with ``args``; only the classes of this module. While :func:`noting`, each
    call of a held fixture's methods is noted first."""
    if name not in FIXTURES:
        raise ValueError(f"unknown fixture {name!r}")
    fixture = FIXTURES[name](*args)
    note = _NOTING.get()
    if note is not None and held_by_grader(fixture):
        for method in fixture.__wire_held__.methods:
            setattr(fixture, method, _noted(note, fixture, method, getattr(fixture, method)))
    return fixture


def held_by_grader(fixture) -> bool:
    """Whether the grader holds ``fixture`` while the student's code uses it (its class declares :class:`Held`)."""
    return isinstance(getattr(type(fixture), "__wire_held__", None), Held)


# ---------------------------------------------------------------------- the fixtures the grader holds

_HELD: contextvars.ContextVar[list | None] = contextvars.ContextVar("held_fixtures", default=None)
_SENT: contextvars.ContextVar[set | None] = contextvars.ContextVar("sent_fixtures", default=None)
_KEY: contextvars.ContextVar[bytes | None] = contextvars.ContextVar("fixture_key", default=None)
_PROCESS_KEY = secrets.token_bytes(32)  # outside a check: this process's own
_NOTING: contextvars.ContextVar[Callable | None] = contextvars.ContextVar("noting_fixtures", default=None)


@contextlib.contextmanager
def holding() -> Iterator[None]:
    """The grader holds the fixtures that cross to the sandbox in this block (one check's), and answers for
    them (:func:`held`) until it ends; the keyed fixtures built in it share a key drawn for it (:func:`key`)."""
    token, drawn, sent = _HELD.set([]), _KEY.set(secrets.token_bytes(32)), _SENT.set(set())
    try:
        yield
    finally:
        _SENT.reset(sent)
        _KEY.reset(drawn)
        _HELD.reset(token)


def sending(name: str, args) -> None:
    """Note that the fixture ``name`` built with ``args`` crosses to the sandbox in the check being run."""
    sent = _SENT.get()
    if sent is not None:
        sent.add((name, repr(list(args))))


def may_build(name: str, args) -> bool:
    """Whether a fixture that came back from the sandbox may be built here: in the check being run (the grader's),
    only one that the check sent (a fixture named with other arguments would have the grader build a model of the
    student's sizes); outside a check (the sandbox's own process), any."""
    sent = _SENT.get()
    return sent is None or (name, repr(list(args))) in sent


def key() -> bytes:
    """The key of the keyed fixtures built now: the one drawn for the check being run (:func:`holding`), else
    this process's own, drawn when it imported this module. Either is drawn in the process that builds the
    fixtures and never crosses: the sandbox's own differ from the grader's."""
    return _KEY.get() or _PROCESS_KEY


def hold(fixture) -> int:
    """The number by which the student's code reaches ``fixture``, which the grader holds (:func:`holding`)."""
    fixtures = _HELD.get()
    if fixtures is None:
        raise RuntimeError(f"{type(fixture).__name__} is held by the grader: it crosses only while a check runs")
    for number, known in enumerate(fixtures, 1):
        if known is fixture:
            return number
    fixtures.append(fixture)
    return len(fixtures)


def held(number) -> object | None:
    """The fixture held under ``number`` for the check being run, or None."""
    fixtures = _HELD.get()
    if fixtures is None or isinstance(number, bool) or not isinstance(number, int) or not 0 < number <= len(fixtures):
        return None
    return fixtures[number - 1]


@contextlib.contextmanager
def noting(note: Callable[[object, str, tuple, dict], None]) -> Iterator[None]:
    """In this block, every held fixture that :func:`build` makes calls ``note(fixture, method, args, kwargs)``
    before each call of its methods (how large the reference's own calls are)."""
    token = _NOTING.set(note)
    try:
        yield
    finally:
        _NOTING.reset(token)


def _noted(note, fixture, method: str, function):
    def noted(*args, **kwargs):
        note(fixture, method, args, kwargs)
        return function(*args, **kwargs)

    return noted
