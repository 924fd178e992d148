"""Inputs for checks, described as plain data.

A check never receives a tensor from a test: it receives *specs* (shapes, scales, dtypes, literal values) and a
seed, and makes the inputs itself. Specs are frozen dataclasses of ints, floats, strings and tuples, so that a
check call can be written down (``dataclasses.asdict``), sent to another process and replayed there: the
student's function can then run in one process and the comparison with the reference in another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from autograder.api.memory import Laid

LIBRARIES = ("torch", "numpy")


def check_shape(shape: tuple) -> tuple[int, ...]:
    shape = tuple(shape)
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError(f"a shape must be a tuple of non-negative ints, got {shape!r}")
    return shape


def _check_library(library: str) -> None:
    if library not in LIBRARIES:
        raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")


@dataclass(frozen=True)
class Random:
    """A standard-normal array or tensor, times ``scale``, plus ``shift``; with ``spread``, each row
    (the last dimension) is also moved by its own offset, drawn with that standard deviation, so
    that rows sit at very different heights (a softmax must treat each on its own)."""

    shape: tuple[int, ...]
    scale: float = 1.0
    shift: float = 0.0
    dtype: str = "float32"
    library: str = "torch"
    spread: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape))
        _check_library(self.library)

    def make(self, rng: np.random.Generator):
        data = rng.standard_normal(self.shape) * self.scale + self.shift
        if self.spread and self.shape:
            data = data + rng.standard_normal((*self.shape[:-1], 1)) * self.spread
        return _convert(data, self.dtype, self.library)

    def describe(self) -> str:
        spread = f", rows spread by {self.spread:g}" if self.spread else ""
        return f"{self.library} {self.dtype} {self.shape}{spread}"


@dataclass(frozen=True)
class RandomInts:
    """Random integers in ``[low, high)``, e.g. token ids (a torch ``int64`` tensor by default)."""

    shape: tuple[int, ...]
    high: int
    low: int = 0
    library: str = "torch"

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape))
        _check_library(self.library)
        if not self.low < self.high:
            raise ValueError(f"need low < high, got low={self.low}, high={self.high}")

    def make(self, rng: np.random.Generator):
        data = rng.integers(self.low, self.high, size=self.shape)
        return _convert(data, "int64", self.library)

    def describe(self) -> str:
        return f"{self.library} int64 {self.shape}"


@dataclass(frozen=True)
class RandomMask:
    """A random boolean mask, True = keep, with at least one True in every row.

    A "row" is the last dimension (the keys of one query). Unless every row has
    a single column, at least one entry is False, so the mask masks something.
    """

    shape: tuple[int, ...]
    keep: float = 0.6
    library: str = "torch"

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape))
        _check_library(self.library)
        if not self.shape or self.shape[-1] < 1:
            raise ValueError(f"a mask needs a last dimension of at least 1, got shape {self.shape}")

    def make(self, rng: np.random.Generator):
        mask = rng.random(self.shape) < self.keep
        rows = mask.reshape(-1, self.shape[-1])
        for row in rows:
            if not row.any():
                row[rng.integers(self.shape[-1])] = True
        if rows.all() and self.shape[-1] > 1:
            rows[0, rng.integers(self.shape[-1])] = False
        mask = rows.reshape(self.shape)
        return torch.from_numpy(mask.copy()) if self.library == "torch" else mask

    def describe(self) -> str:
        return f"{self.library} bool {self.shape}"


@dataclass(frozen=True)
class PaddedTokens:
    """A batch of token sequences of random lengths, padded at the end with ``pad_id``.

    Tokens are drawn from ``[low, high)`` without ``pad_id``; every sequence has at
    least one token, and at least one sequence is padded (when ``L > 1``).
    """

    shape: tuple[int, int]
    high: int
    pad_id: int = 0
    low: int = 0

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape))
        if len(self.shape) != 2 or self.shape[1] < 1:
            raise ValueError(f"padded tokens are (B, L) with L >= 1, got shape {self.shape}")
        if self.high - self.low < 2:
            raise ValueError(f"need at least two token ids in [low, high), got [{self.low}, {self.high})")

    def make(self, rng: np.random.Generator):
        batch, length = self.shape
        ids = np.array([t for t in range(self.low, self.high) if t != self.pad_id])
        data = rng.choice(ids, size=self.shape)
        lengths = rng.integers(1, length + 1, size=batch)
        if length > 1 and (lengths == length).all():
            lengths[rng.integers(batch)] = rng.integers(1, length)
        data[np.arange(length)[None, :] >= lengths[:, None]] = self.pad_id
        return torch.from_numpy(data.astype(np.int64))

    def describe(self) -> str:
        return f"torch int64 {self.shape} padded with {self.pad_id}"


@dataclass(frozen=True)
class Literal:
    """A fixed value: nested lists of numbers, made into an array or tensor.

    ``library="python"`` passes the value through unchanged (ints, strings, ...).
    """

    value: Any
    dtype: str | None = None
    library: str = "numpy"

    def __post_init__(self):
        if self.library != "python":
            _check_library(self.library)
        object.__setattr__(self, "value", _freeze(self.value))

    def make(self, rng: np.random.Generator):
        if self.library == "python":
            return _thaw(self.value)
        data = np.array(_thaw(self.value), dtype=self.dtype)
        return _convert(data, str(data.dtype), self.library)

    def describe(self) -> str:
        if self.library == "python":
            return repr(_thaw(self.value))
        data = np.array(_thaw(self.value), dtype=self.dtype)
        return f"{self.library} {data.dtype} {tuple(data.shape)}"


@dataclass(frozen=True)
class Fixture:
    """An object of :mod:`autograder.api.scripted` (e.g. a scripted model), built fresh for each call."""

    name: str
    args: tuple = ()

    def __post_init__(self):
        from autograder.api import scripted

        if self.name not in scripted.FIXTURES:
            raise ValueError(f"unknown fixture {self.name!r}; choose from {sorted(scripted.FIXTURES)}")
        object.__setattr__(self, "args", _freeze(self.args))

    def make(self, rng: np.random.Generator):
        from autograder.api import scripted

        return scripted.build(self.name, _thaw(self.args))

    def describe(self) -> str:
        return f"{self.name}({', '.join(map(repr, _thaw(self.args)))})"


@dataclass(frozen=True)
class Group:
    """Several inputs made into one tuple argument, e.g. a cache of keys and values:
    ``group(tensor(2, 1, 3, 4), tensor(2, 1, 3, 4))``."""

    parts: tuple

    def __post_init__(self):
        object.__setattr__(self, "parts", tuple(as_spec(part) for part in self.parts))

    @property
    def library(self) -> str:
        return next((part.library for part in self.parts if getattr(part, "library", None) in LIBRARIES), "python")

    def make(self, rng: np.random.Generator):
        return tuple(part.make(rng) for part in self.parts)

    def describe(self) -> str:
        return "(" + ", ".join(part.describe() for part in self.parts) + ")"


@dataclass(frozen=True)
class AttentionPattern:
    """Causal attention weights (..., T, T): the softmax of random scores (standard normal times ``scale``) over
    the keys at and before each query; each row sums to 1 and is 0 above the diagonal."""

    shape: tuple[int, ...]
    scale: float = 2.0

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape))
        if len(self.shape) < 2 or self.shape[-1] != self.shape[-2] or self.shape[-1] < 1:
            raise ValueError(f"a pattern is (..., T, T) with T >= 1, got shape {self.shape}")

    @property
    def library(self) -> str:
        return "torch"

    def make(self, rng: np.random.Generator):
        scores = torch.from_numpy(rng.standard_normal(self.shape) * self.scale).float()
        future = torch.ones(self.shape[-2:], dtype=torch.bool).triu(1)
        return scores.masked_fill(future, float("-inf")).softmax(dim=-1)

    def describe(self) -> str:
        return f"torch float32 {self.shape} attention pattern (causal, rows sum to 1)"


@dataclass(frozen=True)
class RepeatedTokens:
    """A (batch, length) torch batch of random token ids in ``[0, high)`` that repeat with ``period``: token i
    equals token i - period from position ``period`` on."""

    shape: tuple[int, int]
    period: int
    high: int

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape))
        if len(self.shape) != 2 or not 1 <= self.period < self.shape[1]:
            raise ValueError(f"repeated tokens are (B, L) with 1 <= period < L, got {self.shape}, period {self.period}")

    @property
    def library(self) -> str:
        return "torch"

    def make(self, rng: np.random.Generator):
        first = rng.integers(0, self.high, size=(self.shape[0], self.period))
        return torch.from_numpy(first[:, np.arange(self.shape[1]) % self.period].astype(np.int64))

    def describe(self) -> str:
        return f"torch int64 {self.shape} repeating with period {self.period}"


@dataclass(frozen=True)
class Distributions:
    """Probability rows (..., V): the softmax of standard-normal logits times ``scale``, each row summing to 1.
    With ``zeros``, about that share of each row's tokens (never its most likely one) gets probability 0, as a
    model's does after top-k or top-p."""

    shape: tuple[int, ...]
    scale: float = 1.0
    zeros: float = 0.0
    dtype: str = "float32"
    library: str = "torch"  # always: the library the inputs are made in

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape))
        if not self.shape or self.shape[-1] < 1:
            raise ValueError(f"distributions need a last dimension of at least 1, got shape {self.shape}")
        if not 0 <= self.zeros < 1:
            raise ValueError(f"zeros is a share of the tokens in [0, 1), got {self.zeros}")

    def make(self, rng: np.random.Generator):
        logits = rng.standard_normal(self.shape) * self.scale
        if self.zeros:  # the row's most likely token is never dropped
            dropped = (rng.random(self.shape) < self.zeros) & (logits < logits.max(axis=-1, keepdims=True))
            logits = np.where(dropped, -np.inf, logits)
        weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return _convert(weights / weights.sum(axis=-1, keepdims=True), self.dtype, "torch")

    def describe(self) -> str:
        return f"torch {self.dtype} {self.shape} probabilities (rows sum to 1{', some 0' if self.zeros else ''})"


@dataclass(frozen=True)
class Uniforms:
    """Numbers drawn uniformly from ``[low, high)``: the random draws that a sampler is handed."""

    shape: tuple[int, ...]
    low: float = 0.0
    high: float = 1.0
    dtype: str = "float32"
    library: str = "torch"  # always

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape))
        if not 0 <= self.low < self.high <= 1:
            raise ValueError(f"need 0 <= low < high <= 1, got low={self.low}, high={self.high}")

    def make(self, rng: np.random.Generator):
        return _convert(self.low + (self.high - self.low) * rng.random(self.shape), self.dtype, "torch")

    def describe(self) -> str:
        return f"torch {self.dtype} {self.shape} uniform in [{self.low:g}, {self.high:g})"


Spec = Random | RandomInts | RandomMask | PaddedTokens | Literal | Fixture | Group | AttentionPattern
Spec = Spec | RepeatedTokens | Distributions | Uniforms | Laid


def _freeze(value):
    if isinstance(value, np.ndarray):
        value = value.tolist()
    return tuple(_freeze(v) for v in value) if isinstance(value, (list, tuple)) else value


def _thaw(value):
    return [_thaw(v) for v in value] if isinstance(value, tuple) else value


def _convert(data: np.ndarray, dtype: str, library: str):
    if library == "numpy":
        return data.astype(dtype)
    return torch.from_numpy(np.ascontiguousarray(data)).to(getattr(torch, dtype))


# Short constructors, so that tests read as one line per property.
def tensor(*shape: int, scale=1.0, shift=0.0, dtype="float32", spread=0.0, memory: tuple = ()) -> Random | Laid:
    """A random torch tensor of this shape; ``memory``: a strided view's order of its dimensions in memory."""
    spec = Random(shape, scale=scale, shift=shift, dtype=dtype, library="torch", spread=spread)
    return Laid(spec, tuple(memory)) if memory else spec


def array(*shape: int, scale: float = 1.0, shift: float = 0.0, dtype: str = "float64", spread: float = 0.0) -> Random:
    """A random NumPy array of this shape."""
    return Random(shape, scale=scale, shift=shift, dtype=dtype, library="numpy", spread=spread)


def tokens(*shape: int, high: int, low: int = 0) -> RandomInts:
    """Random token ids in ``[low, high)``, as a torch int64 tensor."""
    return RandomInts(shape, high=high, low=low)


def padded_tokens(batch: int, length: int, *, high: int, pad_id: int = 0, low: int = 0) -> PaddedTokens:
    """A (batch, length) torch batch of token ids, each sequence padded at its end with ``pad_id``."""
    return PaddedTokens((batch, length), high=high, pad_id=pad_id, low=low)


def pattern(*shape: int, scale: float = 2.0) -> AttentionPattern:
    """Causal attention weights (..., T, T) as a torch tensor: each row sums to 1, nothing above the diagonal."""
    return AttentionPattern(shape, scale=scale)


def repeated_tokens(batch: int, length: int, *, period: int, high: int) -> RepeatedTokens:
    """A (batch, length) torch batch of random token ids that repeat with ``period``."""
    return RepeatedTokens((batch, length), period=period, high=high)


def distributions(*shape: int, scale: float = 1.0, zeros: float = 0.0, dtype: str = "float32") -> Distributions:
    """Random probability rows (..., V) as a torch tensor, each summing to 1; ``zeros``: a share of them 0."""
    return Distributions(shape, scale=scale, zeros=zeros, dtype=dtype)


def uniforms(*shape: int, low: float = 0.0, high: float = 1.0, dtype: str = "float32") -> Uniforms:
    """A torch tensor of numbers drawn uniformly from ``[low, high)``: the draws a sampler is given."""
    return Uniforms(shape, low=low, high=high, dtype=dtype)


def fixture(name: str, *args) -> Fixture:
    """An object from :mod:`autograder.api.scripted`, such as ``fixture("ScriptedTranslator", 16, 1, 2)``."""
    return Fixture(name, tuple(args))


def mask(*shape: int, keep: float = 0.6) -> RandomMask:
    """A random boolean torch mask (True = attend) with a visible key in every row."""
    return RandomMask(shape, keep=keep)


def group(*parts) -> Group:
    """A tuple of inputs passed as one argument (a cache of keys and values)."""
    return Group(tuple(parts))


def literal(value, *, dtype: str | None = None, library: str = "numpy") -> Literal:
    """A fixed value; ``library="python"`` passes it through as it is."""
    return Literal(value, dtype=dtype, library=library)


def loud_query(*shape: int, dtype: str = "float32", seed: int, loudness: float = 2000.0) -> Literal:
    """Random torch queries (standard normal, from ``seed``, whatever the check's seed), the last ``loudness`` times
    larger than the others: its scores overflow a raw exponential, the other rows' stay moderate."""
    shape = check_shape(shape)
    loud = np.ones((*shape[:-1], 1))
    loud.reshape(-1)[-1] = loudness
    return literal((np.random.default_rng(seed).standard_normal(shape) * loud).tolist(), dtype=dtype, library="torch")


def made(value) -> Literal:
    """A value already made (a tensor or array) as the spec that makes it again, dtype and library kept."""
    if isinstance(value, torch.Tensor):
        return Literal(value.detach().cpu().tolist(), dtype=str(value.dtype).removeprefix("torch."), library="torch")
    if isinstance(value, np.ndarray):
        return Literal(value.tolist(), dtype=str(value.dtype), library="numpy")
    return as_spec(value)


def as_spec(value) -> Spec:
    """Plain Python values (numbers, strings, None) become ``Literal(..., library="python")``."""
    if isinstance(value, Spec):
        return value
    if value is None or isinstance(value, (bool, int, float, str)):
        return Literal(value, library="python")
    raise TypeError(
        "a check's inputs must be specs (tensor(...), array(...), tokens(...), padded_tokens(...), mask(...), "
        "pattern(...), repeated_tokens(...), distributions(...), uniforms(...), literal(...), loud_query(...), "
        f"made(...), group(...)) or plain numbers and strings, got {type(value).__name__}"
    )


def materialize(args, kwargs, seed: int):
    """Make the inputs that ``args`` and ``kwargs`` describe, from ``seed``: the same specs and seed always give
    the same values, so the student's function and the reference get equal, but separate, inputs."""
    rng = np.random.default_rng(seed)
    values = [as_spec(a).make(rng) for a in args]
    keywords = {k: as_spec(v).make(rng) for k, v in (kwargs or {}).items()}
    return values, keywords
