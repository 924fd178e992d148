"""The learning-rate schedules of ``make train`` and chapter 6's families: one factor of the peak at each step.

:func:`lr_factor` is the one schedule: the learning rate of a step as a fraction of its peak, a warm-up
then a cosine decay (``cosine``) or the paper's inverse square root (``noam``). :func:`scheduler` drives an
optimizer with it (a ``LambdaLR``, stepped after each optimizer step), and :func:`learning_rate` gives
the rate of a step under ``make train``'s options.
"""

from __future__ import annotations

import functools
import math

import torch

from attention_course.basics.training import warmup_cosine

SCHEDULES = ("cosine", "noam")


def lr_factor(step: int, steps: int, warmup: int, schedule: str = "cosine") -> float:
    """The learning rate of step ``step`` (from 0) as a fraction of its peak, which both schedules reach at the
    end of a linear warm-up over ``warmup`` steps: ``cosine`` then decays along half a cosine to a tenth of
    the peak at step ``steps``; ``noam``, the paper's schedule, as the inverse square root of the step."""
    warmup = max(1, warmup)
    if schedule == "noam":  # the paper's schedule, scaled so that its peak (at the end of warm-up) is 1
        return min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))
    return warmup_cosine(step, steps, warmup)


def scheduler(
    optimizer: torch.optim.Optimizer, peak: float, steps: int, warmup: int, schedule: str = "cosine", start: int = 0
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` that sets ``optimizer``'s learning rate to ``peak`` times :func:`lr_factor`, from step
    ``start`` (a resumed run's first step) on; step it after each optimizer step."""
    for group in optimizer.param_groups:
        group["initial_lr"] = peak
    factor = functools.partial(lr_factor, steps=steps, warmup=warmup, schedule=schedule)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor, last_epoch=start - 1)


def learning_rate(step: int, args) -> float:
    """The learning rate of step ``step`` under ``make train``'s options: ``--lr`` times :func:`lr_factor`."""
    return args.lr * lr_factor(step, args.steps, args.warmup, args.schedule)
