"""Training and evaluation pieces that the chapters share.

The models themselves are the lessons and live in the chapters; what is here
works for any of them:

- :func:`epoch_batches` shuffles a list of examples into batches, epoch after epoch;
- :func:`to_device` moves a batch (a tensor, or a dict, list or tuple of them) to a device;
- :func:`sequence_cross_entropy` is the teacher-forcing loss of a sequence model;
- :func:`train` runs a training loop with a progress bar and returns the losses (while the book is
  built, the build's progress line quotes the bar: ``course_site.progress``);
- :func:`greedy_decode_rnn` decodes an RNN encoder-decoder one token at a time;
- :func:`exact_match` and :func:`accuracy_by_length` score whole predicted strings;
- :func:`plot_loss_curve` draws the losses that :func:`train` returned.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from tqdm import tqdm


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def epoch_batches(
    items: Sequence,
    batch_size: int,
    collate: Callable[[list], Any] | None = None,
    *,
    shuffle: bool = True,
    seed: int = 0,
) -> Callable[[], Iterable]:
    """A function that returns one epoch of batches each time it is called.

    Each call goes once through ``items`` in a new order (drawn from a generator
    seeded with ``seed``, so the sequence of epochs repeats from run to run),
    cuts it into batches of ``batch_size`` (the last one may be smaller) and
    passes each list of items to ``collate`` (by default the list itself).
    This is the ``batches_fn`` that :func:`train` expects.
    """
    if len(items) == 0:
        raise ValueError("items must not be empty")
    _positive_int("batch_size", batch_size)
    if collate is not None and not callable(collate):
        raise ValueError(f"collate must be callable or None, got {type(collate).__name__}")
    generator = torch.Generator().manual_seed(seed)
    collate = collate or (lambda chunk: chunk)

    def one_epoch():
        order = torch.randperm(len(items), generator=generator).tolist() if shuffle else range(len(items))
        order = list(order)
        for start in range(0, len(order), batch_size):
            yield collate([items[i] for i in order[start : start + batch_size]])

    return one_epoch


def to_device(batch, device: torch.device | str):
    """``batch`` with every tensor in it moved to ``device``; dicts, lists and tuples are kept."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {key: to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(value, device) for value in batch)
    return batch


def sequence_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` (B, T, V) against ``targets`` (B, T), skipping ``pad_id``."""
    if logits.dim() != 3:
        raise ValueError(f"logits must have shape (batch, time, vocab), got {tuple(logits.shape)}")
    if targets.shape != logits.shape[:2]:
        raise ValueError(
            f"targets must have shape {tuple(logits.shape[:2])} to match logits, got {tuple(targets.shape)}"
        )
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id)


class _NotebookBar:
    """A file for tqdm that shows the bar as one updatable output in a Jupyter kernel.

    Plain text with carriage returns would pile up, one line per refresh, in a
    notebook saved with its outputs (and so in the book); updating a single
    display keeps only the latest state of the bar.
    """

    encoding = "utf-8"  # tqdm draws its bar in block characters, not "#", for a file that says it takes them

    def __init__(self):
        from IPython.display import Pretty, display

        self._pretty = Pretty
        self._handle = display(Pretty(""), display_id=True)

    def write(self, text: str) -> None:
        line = text.rsplit("\r", 1)[-1].strip()
        if line:
            self._handle.update(self._pretty(line))

    def flush(self) -> None:
        pass


def progress_file(elsewhere=None):
    """Where a progress bar goes: an updatable display in a Jupyter kernel (which a cell's redirected standard
    streams do not catch: a training run whose printing a page leaves out still shows its step there and in the
    build's progress line), else ``elsewhere`` (standard output if not given)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and getattr(shell, "kernel", None) is not None:
        return _NotebookBar()
    return sys.stdout if elsewhere is None else elsewhere


def warmup_cosine(step: int, steps: int, warmup: int) -> float:
    """The learning rate of step ``step`` (from 0) as a fraction of its peak: a linear warm-up over ``warmup``
    steps, then a cosine decay that reaches a tenth of the peak at step ``steps``."""
    warmup = max(1, warmup)
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def train(
    model: torch.nn.Module,
    batches_fn: Callable[[], Iterable],
    loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    steps: int,
    device: torch.device | str,
    *,
    progress: bool = True,
    clip_grad_norm: float | None = 1.0,
    desc: str = "training",
    schedule: torch.optim.lr_scheduler.LRScheduler | None = None,
) -> list[float]:
    """Take ``steps`` optimisation steps and return the loss of each.

    ``batches_fn()`` returns one epoch of batches; it is called again whenever an
    epoch runs out. Each batch is moved to ``device`` (the model must already be
    there) and ``loss_fn(model, batch)`` returns a scalar loss. Gradients are
    clipped to norm ``clip_grad_norm`` unless it is None; ``schedule``, if given, steps after each
    optimiser step. With ``progress`` a
    bar shows the steps and the recent loss: on standard output, or in a
    Jupyter notebook as one output that is updated in place (never on
    standard error); ``make book``'s progress line quotes that output's latest state.
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(batches_fn):
        raise ValueError("batches_fn must be a function that returns an iterable of batches")
    if not callable(loss_fn):
        raise ValueError("loss_fn must be a function (model, batch) -> scalar loss")
    _positive_int("steps", steps)
    if clip_grad_norm is not None and not clip_grad_norm > 0:
        raise ValueError(f"clip_grad_norm must be positive or None, got {clip_grad_norm!r}")
    device = torch.device(device)
    model.train()
    losses: list[float] = []
    bar = tqdm(
        total=steps,
        desc=desc,
        file=progress_file() if progress else sys.stdout,
        disable=not progress,
        mininterval=0.5,
        bar_format="{desc}: {percentage:3.0f}%|{bar:30}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]",
    )
    try:
        while len(losses) < steps:
            empty_epoch = True
            for batch in batches_fn():
                empty_epoch = False
                loss = loss_fn(model, to_device(batch, device))
                if loss.dim() != 0:
                    raise ValueError(f"loss_fn must return a scalar, got shape {tuple(loss.shape)}")
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if clip_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
                optimizer.step()
                if schedule is not None:
                    schedule.step()
                losses.append(loss.item())
                bar.update(1)
                if len(losses) % 10 == 0 or len(losses) == steps:
                    recent = losses[-10:]
                    bar.set_postfix_str(f"loss={sum(recent) / len(recent):.4f}", refresh=False)
                if len(losses) == steps:
                    break
            if empty_epoch:
                raise ValueError("batches_fn returned no batches")
    finally:
        bar.close()
    model.eval()
    return losses


@torch.no_grad()
def greedy_decode_rnn(
    model: torch.nn.Module,
    src: torch.Tensor,
    src_mask: torch.Tensor | None,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int,
    pad_id: int = 0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Decode a batch greedily: at each step feed back the most likely token.

    ``model.encode(src, src_mask)`` must return ``(enc_outputs, hidden)`` and
    ``model.decoder.step(prev_tokens, hidden, enc_outputs, src_mask)`` must
    return ``(logits, hidden, weights)``, where ``weights`` (B, S) may be None
    for a decoder without attention. Decoding starts from ``bos_id`` and stops
    after ``max_len`` tokens or when every sequence has produced ``eos_id``;
    positions after a sequence's ``eos_id`` hold ``pad_id``.

    Returns ``tokens`` (B, T) and the attention weights (B, T, S), or None,
    with T <= ``max_len``.
    """
    if src.dim() != 2:
        raise ValueError(f"src must have shape (batch, source length), got {tuple(src.shape)}")
    if src_mask is not None and src_mask.shape != src.shape:
        raise ValueError(f"src_mask must have the shape of src {tuple(src.shape)}, got {tuple(src_mask.shape)}")
    _positive_int("max_len", max_len)
    was_training = model.training
    model.eval()
    enc_outputs, hidden = model.encode(src, src_mask)
    prev = torch.full((src.size(0),), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    tokens, weights = [], []
    for _ in range(max_len):
        logits, hidden, w = model.decoder.step(prev, hidden, enc_outputs, src_mask)
        prev = logits.argmax(dim=-1)
        tokens.append(prev.masked_fill(finished, pad_id))
        if w is not None:
            weights.append(w)
        finished |= prev == eos_id
        if finished.all():
            break
    model.train(was_training)
    return torch.stack(tokens, dim=1), (torch.stack(weights, dim=1) if weights else None)


def exact_match(predictions: Sequence, targets: Sequence) -> float:
    """The fraction of predictions equal to their target (strings, or anything comparable with ==)."""
    if isinstance(predictions, str) or isinstance(targets, str):
        raise ValueError("predictions and targets must be sequences of items, not single strings")
    if len(predictions) != len(targets):
        raise ValueError(f"predictions ({len(predictions)}) and targets ({len(targets)}) must have the same length")
    if len(targets) == 0:
        raise ValueError("targets must not be empty")
    return sum(p == t for p, t in zip(predictions, targets)) / len(targets)


class LengthBucket(NamedTuple):
    """Examples with ``low <= length < high``: how many, and the fraction correct (nan if none)."""

    low: int
    high: int
    accuracy: float
    count: int


def accuracy_by_length(lengths: Sequence[int], correct: Sequence[bool], edges: Sequence[int]) -> list[LengthBucket]:
    """Accuracy in each length bucket ``[edges[i], edges[i + 1])``.

    ``lengths[k]`` is the length of example ``k`` and ``correct[k]`` whether it
    was predicted right. ``edges`` must increase strictly and cover every
    length. Empty buckets are kept, with accuracy nan and count 0.
    """
    lengths, correct, edges = list(lengths), list(correct), list(edges)
    if len(lengths) != len(correct):
        raise ValueError(f"lengths ({len(lengths)}) and correct ({len(correct)}) must have the same length")
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"edges must be at least two strictly increasing numbers, got {edges}")
    outside = [n for n in lengths if not edges[0] <= n < edges[-1]]
    if outside:
        raise ValueError(f"edges {edges[0]}..{edges[-1]} do not cover the lengths {sorted(set(outside))}")
    buckets = []
    for low, high in zip(edges, edges[1:]):
        hits = [bool(c) for n, c in zip(lengths, correct) if low <= n < high]
        buckets.append(LengthBucket(low, high, sum(hits) / len(hits) if hits else math.nan, len(hits)))
    return buckets


def plot_loss_curve(
    losses: Sequence[float],
    ax=None,
    *,
    label: str | None = None,
    window: int = 20,
    log: bool = True,
    title: str | None = "training loss",
):
    """Plot losses per step, faint, with a moving average over ``window`` steps on top. Returns the axes."""
    import matplotlib.pyplot as plt
    import numpy as np

    values = np.asarray(list(losses), dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError("losses must be a non-empty sequence of numbers")
    _positive_int("window", window)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.4))
    steps = np.arange(1, values.size + 1)
    (line,) = ax.plot(steps, values, alpha=0.3, linewidth=0.8)
    window = min(window, values.size)
    smooth = np.convolve(values, np.ones(window) / window, mode="valid")
    ax.plot(steps[window - 1 :], smooth, color=line.get_color(), label=label)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    if title:
        ax.set_title(title)
    if label is not None:
        ax.legend()
    return ax
