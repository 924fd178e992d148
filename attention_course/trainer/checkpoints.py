"""The checkpoints of ``make train``: what a run saves to ``--out/checkpoint.pt``, and a resumed run's start.

A checkpoint holds the model's and the optimizer's states, the options (``args``: the model's settings
are the options', so the model is built from them again), and the progress (:class:`Progress`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch


@dataclass
class Progress:
    """How far training has gone, a resumed run's included (what a checkpoint saves), and this process's
    model FLOPs and tokens in this run alone."""

    step: int = 0
    history: list = field(default_factory=list)
    validation: list = field(default_factory=list)
    tokens: int = 0
    train_seconds: float = 0.0
    run_flops: float = 0.0
    run_tokens: int = 0


def save_checkpoint(path: Path, model, optimizer, step: int, args, history, validation, tokens, seconds) -> None:
    """Save a run's state to ``path``: written beside it, then renamed, so that a run stopped while saving
    leaves the previous checkpoint whole."""
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": step,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "history": history,
        "validation": validation,
        "tokens": tokens,
        "train_seconds": seconds,
    }
    partial = path.with_suffix(".part")
    torch.save(state, partial)
    partial.replace(path)


# The options that shape every task's model; a language model's positions (block_size) and the lm task's
# tokenizer (vocab_size) shape theirs too.
MODEL_OPTIONS = ("task", "d_model", "heads", "layers", "d_ff", "norm", "tie_weights", "bias")
# An option's value in a checkpoint saved before the option was.
BEFORE_SAVED = {"bias": True}


def model_differences(saved: dict, args) -> list[str]:
    """The options that shape the model whose values in ``args`` differ from a checkpoint's ``saved`` ones."""
    task = saved.get("task")
    names = [*MODEL_OPTIONS, *(["block_size"] if task != "dates" else []), *(["vocab_size"] if task == "lm" else [])]
    differ = []
    for name in names:
        then, now = saved.get(name, BEFORE_SAVED.get(name)), getattr(args, name, None)
        if then is not None and then != now:
            differ.append(f"--{name.replace('_', '-')} was {then!r}, is {now!r}")
    return differ


def resume(path: Path, model, optimizer, device: torch.device, args=None) -> Progress:
    """Load the model and optimizer from the checkpoint at ``path``; the progress it saved. Given the run's
    ``args``, a checkpoint of another model (other options that shape it) is refused, by its options' names."""
    state = torch.load(path, map_location=device, weights_only=False)
    differ = model_differences(state.get("args", {}), args) if args is not None else []
    if differ:
        raise SystemExit(f"--resume {path}: that checkpoint is of another model: {'; '.join(differ)}")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return Progress(
        step=state["step"],
        history=state["history"],
        validation=state["validation"],
        tokens=state["tokens"],
        train_seconds=state["train_seconds"],
    )
