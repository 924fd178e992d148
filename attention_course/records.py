"""The course's measurements, as its pages read them.

The records of ``benchmarks/figures.json`` in the course's repository, each written by the command it names
(``benchmarks/figures.py`` writes them).
"""

from __future__ import annotations

import json
from pathlib import Path


def course_repository() -> Path:
    """The folder of the course's repository that this package was installed from (the book is built there)."""
    return Path(__file__).resolve().parent.parent


def measured(name: str) -> dict:
    """The record ``name``: its ``command``, ``day``, ``machine`` and ``figures``, as the command recorded them."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a record's name (a non-empty str), got {name!r}")
    path = course_repository() / "benchmarks" / "figures.json"
    if not path.is_file():
        raise FileNotFoundError(
            "the course's measurements come with its repository (benchmarks/figures.json), which this copy of "
            "attention_course was not installed from"
        )
    records = json.loads(path.read_text())
    if name not in records:
        raise KeyError(f"no record named {name!r}; the records are {', '.join(sorted(records))}")
    return records[name]
