"""A translation task whose information grows with its length: symbol strings through a cipher.

A source is a random string over 20 lower-case symbols, ``a`` to ``t``; its translation replaces
every symbol by its own capital letter under one fixed substitution (a permutation, drawn once
from the task's seed), symbol for symbol:

    >>> task = SubstitutionTask(seed=0)
    >>> task.translate("abc") == "".join(task.key[s] for s in "abc")
    True

A string of length ``n`` holds ``n * log2(20)``, about ``4.3 * n``, bits, and all of them must
come out again: unlike a date, whose answer is always ten characters, a longer source asks the
model to carry more. Splits are made by string, not by example: a string of the test split never
appears in training (its split is a hash of the string).
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from attention_course.data.dates import CharVocab
from attention_course.data.dates import batch as _batch

SYMBOLS = "abcdefghijklmnopqrst"
CAPITALS = SYMBOLS.upper()
SOURCE_VOCAB = CharVocab(SYMBOLS)
TARGET_VOCAB = CharVocab(CAPITALS)
BITS_PER_SYMBOL = math.log2(len(SYMBOLS))


@dataclass(frozen=True)
class Pair:
    """A source string and its translation."""

    source: str
    target: str


class SubstitutionTask:
    """Seeded generator of substitution examples, with lengths from ``min_len`` to ``max_len``."""

    def __init__(self, seed: int = 0, min_len: int = 4, max_len: int = 40):
        if isinstance(min_len, bool) or not isinstance(min_len, int) or min_len < 1:
            raise ValueError(f"min_len must be a positive int, got {min_len!r}")
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < min_len:
            raise ValueError(f"max_len must be an int of at least min_len ({min_len}), got {max_len!r}")
        self.seed, self.min_len, self.max_len = seed, min_len, max_len
        capitals = list(CAPITALS)
        random.Random(f"{seed}-key").shuffle(capitals)
        self.key = dict(zip(SYMBOLS, capitals))
        self.source_vocab, self.target_vocab = SOURCE_VOCAB, TARGET_VOCAB

    def translate(self, text: str) -> str:
        """``text`` with every symbol replaced by its capital under the task's key."""
        unknown = sorted(set(text) - set(SYMBOLS))
        if unknown:
            raise ValueError(f"symbols {unknown} are not in the alphabet {SYMBOLS!r}")
        return "".join(self.key[symbol] for symbol in text)

    @staticmethod
    def split_of(text: str) -> str:
        """Each string belongs to one split: about 80% train, 10% validation, 10% test."""
        bucket = zlib.crc32(text.encode()) % 10
        return "test" if bucket == 0 else "val" if bucket == 1 else "train"

    def examples(self, split: str, n: int, lengths: Iterable[int] | None = None) -> list[Pair]:
        """``n`` examples of one split, the same for the same seed.

        Each example's length is drawn uniformly from ``lengths`` (by default ``min_len`` to
        ``max_len``), and its symbols uniformly from the alphabet.
        """
        if split not in ("train", "val", "test"):
            raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be a non-negative int, got {n!r}")
        lengths = list(range(self.min_len, self.max_len + 1) if lengths is None else lengths)
        if not lengths or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in lengths):
            raise ValueError(f"lengths must be positive ints, got {lengths!r}")
        rng = random.Random(f"{self.seed}-{split}-{lengths}")
        out = []
        while len(out) < n:
            text = "".join(rng.choices(SYMBOLS, k=rng.choice(lengths)))
            if self.split_of(text) == split:
                out.append(Pair(text, self.translate(text)))
        return out


def batch(examples: Sequence[Pair]) -> dict[str, torch.Tensor]:
    """Pad examples into ``src``, ``src_mask`` and ``tgt`` tensors, as :func:`attention_course.data.dates.batch`."""
    return _batch(examples, SOURCE_VOCAB, TARGET_VOCAB)


def batches_by_length(examples: Sequence[Pair], batch_size: int, *, seed: int = 0) -> Callable[[], Iterator]:
    """A function that returns one epoch of batches each time it is called (the ``batches_fn`` of
    :func:`attention_course.basics.training.train`), in which every batch holds examples of one length.

    A batch of strings of one length needs no padding, so a step costs what its strings need and
    not what the longest string of a mixed batch would. Each epoch shuffles the examples of each
    length, cuts them into batches of ``batch_size`` (the last of a length may be smaller) and
    shuffles the order of the batches, from a generator seeded with ``seed``.
    """
    if len(examples) == 0:
        raise ValueError("examples must not be empty")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    by_length: dict[int, list[Pair]] = {}
    for example in examples:
        by_length.setdefault(len(example.source), []).append(example)
    generator = torch.Generator().manual_seed(seed)

    def one_epoch():
        chunks = []
        for length in sorted(by_length):
            group = by_length[length]
            order = torch.randperm(len(group), generator=generator).tolist()
            chunks += [[group[i] for i in order[k : k + batch_size]] for k in range(0, len(order), batch_size)]
        for i in torch.randperm(len(chunks), generator=generator).tolist():
            yield batch(chunks[i])

    return one_epoch


def token_accuracy(predictions: Sequence[str], targets: Sequence[str]) -> list[float]:
    """For each pair, the fraction of the target's positions where the prediction has the same symbol.

    A prediction that is too short misses the positions it lacks; one that is too long is not
    rewarded for its extra symbols.
    """
    if isinstance(predictions, str) or isinstance(targets, str):
        raise ValueError("predictions and targets must be sequences of strings, not single strings")
    if len(predictions) != len(targets):
        raise ValueError(f"predictions ({len(predictions)}) and targets ({len(targets)}) must have the same length")
    if any(len(t) == 0 for t in targets):
        raise ValueError("targets must not be empty strings")
    return [sum(a == b for a, b in zip(p, t)) / len(t) for p, t in zip(predictions, targets)]
