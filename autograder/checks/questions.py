"""The check of a multiple-choice question: each part's answer one of its options, and the right one.

The student's item gives each answer as a one-hot vector over the options; a failure is said as a choice, and
each part earns its share of the cell's points (:class:`~autograder.api.items.PartlyRight`).
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from autograder.api.items import CheckFailed, Item, PartlyRight
from autograder.checks.values import check_equals


def check_choices(
    item: Item,
    argument: str,
    values,
    options,
    answers: dict | None = None,
    *,
    hint: str,
    form_hint: str,
):
    """A multiple-choice question, asked for each of ``values`` of ``argument``: each answer is one of
    ``options`` (``item`` gives it as a one-hot vector over them) and, given ``answers`` (each value's right
    option: the hidden tests'), the right one. Each part is checked on its own; where some are wrong,
    :class:`~autograder.api.items.PartlyRight` names every wrong one, and graded, the cell earns a share of its
    points per right part."""
    values, options = list(values), list(options)
    if answers is not None and (set(answers) != set(values) or not set(answers.values()) <= set(options)):
        raise ValueError("answers must give one of the options for each of the values, and nothing else")
    chosen = dataclasses.replace(item, obj=_chose_an_option(item.obj), known=())
    failures = []
    for value in values:
        try:
            part = "one of the options"
            check_equals(chosen, [], True, {argument: value}, hint=form_hint)
            if answers is not None:
                part = "the right option"
                check_equals(item, [], [answers[value] == o for o in options], {argument: value}, hint=hint)
        except CheckFailed as failure:  # said as a choice, not as the one-hot vectors that were compared
            problem = "another option" if part == "the right option" else "none of the options, as written there"
            failures.append(CheckFailed(failure.what, part, failure.inputs, f"the answer is {problem}", failure.hint))
    if failures:
        raise PartlyRight(item.name, f"{argument}s", len(values) - len(failures), len(values), failures)


def _chose_an_option(one_hot):
    @functools.wraps(one_hot)
    def chose(*args, **kwargs):
        return torch.as_tensor(one_hot(*args, **kwargs)).any()

    return chose
