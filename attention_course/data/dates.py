"""The date-translation task: human-readable dates in many formats -> ISO 8601.

    >>> task = DateTask(seed=0)
    >>> task.render(datetime.date(2026, 11, 21), "weekday_day_month_year")
    'saturday 21 november 2026'

Dates run from 1950-01-01 to 2049-12-31; a two-digit year ``yy`` means 20yy
below 50 and 19yy otherwise, so every source has exactly one answer. Splits are
made by date, not by example: a date in the test split never appears, in any
format, in training.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

FIRST, LAST = datetime.date(1950, 1, 1), datetime.date(2049, 12, 31)
MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


# name -> how a date is written; each is a function of the date only
FORMATS = {
    "weekday_day_month_year": lambda d: f"{WEEKDAYS[d.weekday()]} {d.day} {MONTHS[d.month - 1]} {d.year}",
    "mon_day_year": lambda d: f"{MONTHS[d.month - 1][:3].title()} {d.day}, {d.year}",
    "dd.mm.yy": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year % 100:02d}",
    "day_month_year": lambda d: f"{d.day} {MONTHS[d.month - 1].title()} {d.year}",
    "month_day_year": lambda d: f"{MONTHS[d.month - 1].title()} {d.day}, {d.year}",
    "dd/mm/yyyy": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year}",
    "full_us": lambda d: f"{WEEKDAYS[d.weekday()].title()}, {MONTHS[d.month - 1].title()} {d.day}, {d.year}",
    "day_mon_yy": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]} {d.year % 100:02d}",
    "MONTH_DD_YYYY": lambda d: f"{MONTHS[d.month - 1].upper()} {d.day:02d}, {d.year}",
    "ordinal_of_month": lambda d: f"the {_ordinal(d.day)} of {MONTHS[d.month - 1].title()} {d.year}",
    "dd-Mon-yyyy": lambda d: f"{d.day:02d}-{MONTHS[d.month - 1][:3].title()}-{d.year}",
    "yyyy/mm/dd": lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",
}

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"


class CharVocab:
    """Characters <-> ids. Ids 0-3 are <pad>, <bos>, <eos>, <unk>; the rest are ``characters`` in order."""

    def __init__(self, characters: str):
        if len(set(characters)) != len(characters):
            raise ValueError("characters must not repeat")
        self.tokens = [PAD, BOS, EOS, UNK, *characters]
        self.index = {token: i for i, token in enumerate(self.tokens)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str, *, bos: bool = False, eos: bool = False) -> list[int]:
        ids = [self.index.get(ch, self.unk_id) for ch in text]
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def decode(self, ids: Sequence[int]) -> str:
        """Characters up to the first <eos>; <pad> and <bos> are skipped."""
        out = []
        for i in (int(i) for i in ids):
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                out.append(self.tokens[i] if 0 <= i < len(self.tokens) else UNK)
        return "".join(out)


SOURCE_VOCAB = CharVocab(" ,-./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
TARGET_VOCAB = CharVocab("-0123456789")


@dataclass(frozen=True)
class Example:
    source: str
    target: str
    format: str


class DateTask:
    """Seeded generator of date-translation examples and splits."""

    def __init__(self, seed: int = 0, formats: Sequence[str] | None = None):
        formats = list(formats or FORMATS)
        unknown = [f for f in formats if f not in FORMATS]
        if unknown:
            raise ValueError(f"unknown formats {unknown}; choose from {sorted(FORMATS)}")
        self.seed, self.formats = seed, formats
        self.source_vocab, self.target_vocab = SOURCE_VOCAB, TARGET_VOCAB

    @staticmethod
    def render(date: datetime.date, fmt: str) -> str:
        return FORMATS[fmt](date)

    @staticmethod
    def split_of(date: datetime.date) -> str:
        """Each date belongs to one split: 80% train, 10% validation, 10% test."""
        bucket = (date.toordinal() * 2654435761) % 2**32 % 10
        return "test" if bucket == 0 else "val" if bucket == 1 else "train"

    def examples(self, split: str, n: int) -> list[Example]:
        """``n`` examples of one split ("train", "val" or "test"), the same for the same seed."""
        if split not in ("train", "val", "test"):
            raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
        if n < 0:
            raise ValueError(f"n must be non-negative, got {n}")
        rng = random.Random(f"{self.seed}-{split}")
        span = (LAST - FIRST).days
        out = []
        while len(out) < n:
            date = FIRST + datetime.timedelta(days=rng.randrange(span + 1))
            if self.split_of(date) != split:
                continue
            fmt = rng.choice(self.formats)
            out.append(Example(self.render(date, fmt), date.isoformat(), fmt))
        return out


def batch(
    examples: Sequence[Example], source_vocab: CharVocab = SOURCE_VOCAB, target_vocab: CharVocab = TARGET_VOCAB
) -> dict[str, torch.Tensor]:
    """Pad a list of examples into tensors.

    ``src`` (B, S) and ``src_mask`` (B, S) with True at real characters; ``tgt``
    (B, T+2) = <bos> target <eos>, padded, ready for teacher forcing
    (``tgt[:, :-1]`` in, ``tgt[:, 1:]`` out).
    """
    if not examples:
        raise ValueError("examples must not be empty")
    src = _padded([source_vocab.encode(e.source) for e in examples], source_vocab.pad_id)
    tgt = _padded([target_vocab.encode(e.target, bos=True, eos=True) for e in examples], target_vocab.pad_id)
    return {"src": src, "src_mask": src != source_vocab.pad_id, "tgt": tgt}


def _padded(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """(len(rows), longest row): each row's ids from the left, then ``pad_id``."""
    lengths = torch.tensor([len(row) for row in rows])
    out = torch.full((len(rows), int(lengths.max())), pad_id, dtype=torch.long)
    out[torch.arange(out.size(1)) < lengths[:, None]] = torch.tensor([i for row in rows for i in row], dtype=torch.long)
    return out
