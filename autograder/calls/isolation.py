"""Each check runs its item in isolation: the student's calls under the item's stand-ins.

Every check grades its item's own code (:func:`isolated`): its calls of the student's code run under
the item's stand-ins, bounded by what the reference asks of them on the check's inputs, and a failure
says whose fault it is (:mod:`autograder.calls.attribution`), naming one of the item's known mistakes where
one explains it.
"""

from __future__ import annotations

import functools
import inspect

from autograder.api import items
from autograder.api.items import CheckFailed, Item
from autograder.calls import attribution, standin_limits, standins
from autograder.calls.call import Call
from autograder.release import reference


def isolated(diagnose: bool = True):
    """A check that grades its item's own code: its calls of the student's code run under the item's
    stand-ins (where they run in the sandbox), and a failure with the values of a known mistake names
    its cause (unless not ``diagnose``)."""

    def decorate(check):
        signature = inspect.signature(check)

        @functools.wraps(check)
        def checked(*args, **kwargs):
            arguments = signature.bind(*args, **kwargs)
            arguments.apply_defaults()
            arguments = dict(arguments.arguments)
            item = arguments["item"]
            with standins.grading(item.assignment, attribution.stood_in(item)) as scope:
                scope.run_reference = functools.partial(_reference_run, item, arguments)
                scope.inputs_size = functools.partial(_inputs_size, item, arguments)
                scope.limits_key = _limits_key(item, arguments)
                try:
                    return check(*args, **kwargs)
                except CheckFailed as failure:
                    known = items.current_record().of(item)
                    replayed = {**arguments, **(failure.replay or {})}
                    diagnosed = diagnose and failure.replay is not None
                    explained = attribution.explained(failure, item, replayed, known, diagnosed)
                    if explained is failure:
                        raise
                    raise explained from None

        return checked

    return decorate


def _reference_run(item: Item, arguments: dict, helpers: dict):
    """The item's reference, called as the check calls the student's item, with ``helpers`` in place
    of the graded items it uses (the stand-ins record how large the calls of them are)."""
    call = Call.replaying(item, "reference", arguments)
    return call.run(standins.rebound(reference.get(item.assignment, item.name), helpers))


def _limits_key(item: Item, arguments: dict) -> tuple:
    """The check's call as plain data, but its seed: how large the reference's calls of its helpers are."""
    described = {k: v for k, v in arguments.items() if k not in ("item", "seed", "hint")}
    return (item.assignment, item.name, item.uses, repr(sorted(item.free.items())), repr(described))


def _inputs_size(item: Item, arguments: dict) -> standin_limits.Size:
    call = Call.replaying(item, "inputs", arguments)
    return standin_limits.size_of([call.inputs, call.keywords, list(call.init or ())])
