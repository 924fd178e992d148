"""Measuring attention's memory and time against the sequence length.

On any device: the peak memory of a computation's tensors, the best time of a call, and a log-log plot of
both against the sequence length (chapter 7).

:func:`peak_tensor_bytes` counts the bytes of every tensor that PyTorch's operators create while
a function runs (a ``TorchDispatchMode`` sees each operator's outputs) and keeps the largest
total alive at one time. It works on the CPU, where PyTorch keeps no memory statistics, and on a
GPU alike. It counts tensors, not the allocator's cache, and not the scratch buffers that one
fused kernel uses inside itself; the inputs, and views of them, are not counted.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class _LiveTensors(TorchDispatchMode):
    """Adds up the storages that operators create, and the largest total alive at once."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, list[int]] = {}  # storage address -> [bytes, live tensors using it]
        self.now = 0
        self.peak = 0

    def _release(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.now -= entry[0]
            del self.live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {
            t.untyped_storage().data_ptr()
            for t in tree_flatten((args, kwargs))[0]
            if isinstance(t, torch.Tensor) and t.layout == torch.strided
        }
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
                continue
            storage = t.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if size == 0:
                continue
            if key in self.live:  # a view of, or the same as, a tensor made in here
                self.live[key][1] += 1
            elif key in inputs:  # a view of an input made outside: not ours to count
                continue
            else:  # new memory
                self.live[key] = [size, 1]
                self.now += size
                self.peak = max(self.peak, self.now)
            weakref.finalize(t, self._release, key)
        return out


def peak_tensor_bytes(fn: Callable, *args, **kwargs) -> tuple[object, int]:
    """``(fn(*args, **kwargs), peak)``: the result, and the largest number of bytes held at one
    time by tensors created during the call (the result included, while it is being made)."""
    counter = _LiveTensors()
    with counter:
        result = fn(*args, **kwargs)
    return result, counter.peak


def best_time(fn: Callable, *args, repeats: int = 3, **kwargs) -> float:
    """The shortest wall-clock time in seconds of ``repeats`` calls of ``fn`` (after one warm-up
    call). The shortest time is the one least disturbed by other programs."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    fn(*args, **kwargs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return min(times)


def plot_scaling(
    lengths: Sequence[int],
    series: dict[str, Sequence[float]],
    *,
    ax=None,
    ylabel: str = "",
    title: str | None = None,
    reference: tuple[str, float] | None = None,
):
    """Plot each of ``series`` (name -> one value per length) against ``lengths`` on log-log
    axes, with markers. ``reference=(label, power)`` adds a dotted line growing as
    ``length ** power`` through the first point of the first series, to compare slopes.
    Returns the axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for name, values in series.items():
        if len(values) != len(lengths):
            raise ValueError(f"{name}: {len(values)} values for {len(lengths)} lengths")
        ax.plot(lengths, values, marker="o", label=name)
    if reference is not None and series:
        label, power = reference
        first = next(iter(series.values()))[0]
        ax.plot(
            lengths,
            [first * (n / lengths[0]) ** power for n in lengths],
            ls=":",
            color="0.4",
            label=label,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return ax
