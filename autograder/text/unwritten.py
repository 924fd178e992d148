"""What the course's tools say of a graded item not written yet, one that still raises NotImplementedError.

The released stubs raise it with no message (``raise NotImplementedError()``).

A failed check of such an item says so in its problem (:func:`problem`); `make check` and `make validate` say it
once for the tests in a row that fail so (:func:`not_written`), not in one identical block a test, and quote a
cell's empty NotImplementedError as what it means (:func:`cell_error`), never as "NotImplementedError: " alone.
"""

from __future__ import annotations

import re

# The problem of a failed check of an item not written yet, as :func:`problem` writes it: what make validate
# reads back from a test cell's error in the student's kernel, where only the text of the failure comes back.
_PROBLEM = re.compile(r"^\s*problem: .*raised NotImplementedError[^:\n]*: (?P<item>\w+) is not written yet$", re.M)


def problem(raised: str, item: str) -> str:
    """The problem of a failed check of ``item`` whose call ``raised`` NotImplementedError."""
    return f"{raised}: {item} is not written yet"


def unwritten_item(message: str) -> str:
    """The item that a failed check's ``message`` says is not written yet (:func:`problem`), or ""."""
    found = _PROBLEM.search(message)
    return found["item"] if found else ""


def not_written(item: str, tests: int) -> str:
    """What a report says once for ``tests`` tests in a row that fail because ``item`` is not written yet."""
    which = "this test fails" if tests == 1 else f"these {tests} tests fail"
    return f"{item} is not written yet (it raises NotImplementedError): {which} until it is."


def cell_error(error: str) -> str:
    """A cell's error (``"Type: message"``) as a report quotes it: its first line, cut; an error without a message
    by its name alone, and an empty NotImplementedError (the released stubs') as what it means."""
    first = (error.splitlines() or [""])[0][:200]
    name, _, message = first.partition(":")
    if message.strip():
        return first
    if name.strip() == "NotImplementedError":
        return "NotImplementedError: what it runs is not written yet"
    return name.strip()
