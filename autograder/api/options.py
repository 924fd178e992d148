"""How a check compares, declared once: the tolerances, the outputs it looks at and its hint (:class:`CompareOptions`).

A check takes those it needs as keyword arguments, each with the check's own default (:func:`compares`), as
:func:`autograder.calls.call.takes_options` gives it the options of its call; the diagnosis of a failure reads the
tolerances the same way (:meth:`CompareOptions.of`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from autograder.api.keywords import gathered


@dataclass(frozen=True)
class CompareOptions:
    """The keyword options of how a check compares: ``output``, the one returned value it looks at (default:
    the first), or ``outputs``, those it compares (default: all); ``rtol`` and ``atol``, the tolerances; and
    ``hint``, what its failure tells the student to look at."""

    output: str | None = None
    outputs: tuple[str, ...] | None = None
    rtol: float = 1e-5
    atol: float = 1e-6
    hint: str = ""

    @classmethod
    def of(cls, arguments: dict) -> CompareOptions:
        """The options among a check's arguments (by parameter name); the defaults for those it does not take."""
        return cls(**{name: arguments[name] for name in COMPARE_OPTIONS if name in arguments})


COMPARE_OPTIONS = tuple(option.name for option in dataclasses.fields(CompareOptions))


def compares(*names: str, hint: str, **defaults):
    """A check that takes the comparison options ``names``, those given a default of the check's own here, and
    ``hint`` (the check's own default) as keyword arguments, and gets them as one argument, ``compared``; an
    option without a default here has :class:`CompareOptions`' default. The check's signature, as callers and
    :func:`inspect.signature` see it, lists them."""
    unknown = sorted({*names, *defaults} - set(COMPARE_OPTIONS))
    if unknown:
        raise ValueError(f"no comparison options {unknown}; choose from {COMPARE_OPTIONS}")
    defaults = {**defaults, "hint": hint}
    names = tuple(name for name in COMPARE_OPTIONS if name in names or name in defaults)
    return gathered(CompareOptions, "compared", names, defaults)
