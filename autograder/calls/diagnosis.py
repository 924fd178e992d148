"""The cause of a failed check, where it is a known mistake of the item (:class:`~autograder.api.items.Mistake`).

The failed call is made again, and its values are compared with those of each known mistake (the
reference solution with that mistake made in it) on the same inputs. A mistake is named only when
it explains the failure on *these* inputs: its values differ from the reference solution's (a
mistake that changes nothing here, such as a guard for rows that these inputs do not have,
explains nothing) and equal the student's at the check's own tolerance. Otherwise the check's own
hint, which says what the property needs, stands.

What a mistake's variant (or the reference) gives on a check's inputs depends on those inputs alone, which every
notebook of a class shares: it is computed once in the grader's process and kept (:func:`_kept`), so that a class of
answers wrong in the same checks pays for the variants once, not once a notebook (chapter 11's run its kernels in
Triton's interpreter: seconds each); notebooks graded side by side wait for the one computing it, and a variant
that fails on those inputs is kept failing. A notebook's diagnosis has a budget, :data:`SECONDS_PER_NOTEBOOK`: past
it, its failures keep the checks' own hints (the score is the same either way).

The known mistakes come in as data (the item's own, or those its notebook's record holds:
:class:`~autograder.api.items.KnownMistakes`); this module keeps no record of them. A student's code that cannot
be replayed explains nothing, nor does a mistake whose code fails on these inputs; a mistake whose variant
cannot be built at all is the course's to mend: a :class:`~autograder.api.items.BrokenMistake` where the record
of the test cells being run is strict (a notebook's kernel, a test), else (graded) left out, at no cost to
the student.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
import warnings
from collections import OrderedDict

import numpy as np
import torch

from autograder.api import items
from autograder.api.items import Item, Mistake
from autograder.api.options import CompareOptions
from autograder.calls import standins
from autograder.calls.call import OPTIONS, Call
from autograder.calls.compare import same
from autograder.release import course, reference


def possible(item: Item, in_sandbox: bool) -> bool:
    """Whether a failure may be diagnosed with the item's reference: always when graded; in a notebook
    only where the term releases the chapter, so that the visible tests say the same in the
    instructor's checkout as in the students' repository, on Colab or a hub (which hold no reference of
    an unreleased chapter)."""
    if in_sandbox:
        return True
    try:
        return course.release().is_released(item.assignment)
    except course.SettingsError:
        return False


SECONDS_PER_NOTEBOOK = 30.0  # of naming causes, in one notebook's grading
KEPT = 2048  # the values of mistakes (and references) on checks' inputs kept in this process
CALL_ARGUMENTS = ("args", "kwargs", "x", *OPTIONS)  # a check's arguments that make its call (Call.replaying)


def cause(item: Item, arguments: dict, known: tuple[Mistake, ...]) -> str | None:
    """The cause of the failure of a check called with ``arguments`` (by parameter name): the one of the
    ``known`` mistakes that explains it, or None (also once the notebook has spent its
    :data:`SECONDS_PER_NOTEBOOK`)."""
    if not known or items.current_record().seconds > SECONDS_PER_NOTEBOOK:
        return None
    started = time.monotonic()
    try:
        return _cause(item, arguments, known, started)
    finally:  # the grader adds it to the notebook's diagnosis phase (autograder.grading.timings)
        items.current_record().seconds += time.monotonic() - started


def _cause(item: Item, arguments: dict, known: tuple[Mistake, ...], started: float) -> str | None:
    try:
        solution = reference.get(item.assignment, item.name)
    except reference.ReferenceUnavailable:  # a student's machine: the visible tests only
        return None
    call = Call.replaying(item, "replay", arguments)
    compared = CompareOptions.of(arguments)  # a check without tolerances of its own: CompareOptions' defaults
    rtol, atol = compared.rtol, compared.atol
    try:
        if call.init is not None:
            call.use_reference_weights()
        got = call.outputs(call.run_shared())  # the failed check's own call, where checks share calls
        key = _key(item, arguments)
        known_answer = key is not None and "expected" in arguments  # what _right reads besides the call
        answer = _digest([arguments["expected"], arguments.get("output")]) if known_answer else None
        right = _kept(
            (key, "reference", answer), lambda: _right(call, standins.as_chosen(solution, item.free), arguments)
        )
    except Exception:  # the student's code cannot even be replayed: nothing to compare
        return None
    for mistake in known:
        if items.current_record().seconds + time.monotonic() - started > SECONDS_PER_NOTEBOOK:
            return None
        variant = items.current_record().variant(item, mistake)
        if variant is None:
            continue
        try:

            def run(variant=variant):
                with warnings.catch_warnings():  # a mistake's own warnings (`k.T` on 3-D tensors) are the grader's
                    warnings.simplefilter("ignore")
                    return call.outputs(call.run(standins.as_chosen(variant, item.free)))

            wrong = _kept((key, mistake.cause, mistake.replacements), run)
            explains = not same(call, {name: wrong.get(name) for name in right}, right, rtol, atol)
            if explains and same(call, got, wrong, rtol, atol):
                return mistake.cause
        except Exception:  # the mistake's code fails on these inputs: it explains nothing here
            continue
    return None


_VALUES: OrderedDict = OrderedDict()
_VALUES_LOCK = threading.Lock()
_COMPUTING: dict = {}  # key -> the Event set once the thread computing it has kept its outcome


class _Failed:
    """That a computation kept under a key raised: the same code on the same inputs raises again."""

    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = f"{type(error).__name__}: {error}"  # its words, not its frames (nor the tensors they hold)


class KeptFailure(Exception):
    """A kept computation's failure, raised again (:func:`_kept`)."""


def _kept(key, compute):
    """``compute()``, kept under ``key`` in this process (the least recently used dropped past :data:`KEPT`); a
    key of None is computed every time. What it raised is kept too, and raised again: the same code on the same
    inputs fails alike. A key that another thread is computing is waited for, not computed twice (notebooks graded
    side by side fail the same checks at the same time)."""
    if key is None or key[0] is None:
        return compute()
    while True:
        with _VALUES_LOCK:
            if key in _VALUES:
                _VALUES.move_to_end(key)
                return _outcome(_VALUES[key])
            waiting = _COMPUTING.get(key)
            if waiting is None:
                done = _COMPUTING[key] = threading.Event()
                break
        waiting.wait()  # then read what it kept (or, dropped already, compute it here)
    try:
        try:
            value = compute()
        except Exception as exc:
            value = _Failed(exc)
        with _VALUES_LOCK:
            _VALUES[key] = value
            while len(_VALUES) > KEPT:
                _VALUES.popitem(last=False)
    finally:
        with _VALUES_LOCK:
            del _COMPUTING[key]
        done.set()
    return _outcome(value)


def _outcome(value):
    """A kept value, or what its computation raised, raised again."""
    if isinstance(value, _Failed):
        raise KeptFailure(value.error)
    return value


def _key(item: Item, arguments: dict) -> tuple | None:
    """What a mistake's values on a check's call depend on: the item and the call's arguments (the inputs'
    specs and made data, the seed, the options: what :meth:`Call.replaying` reads, not how the check compares, so
    that checks of different outputs of one call share them), or None where they depend on more (the student's own
    choice of the arguments of a module the item builds, ``free``)."""
    if item.free:
        return None
    described = {name: value for name, value in arguments.items() if name in CALL_ARGUMENTS}
    return (item.assignment, item.name, item.outputs, _digest(described))


def _digest(value) -> str:
    """A digest of plain data: specs, tensors and arrays by their contents, containers by their items."""
    digest = hashlib.sha256()

    def feed(part) -> None:
        if isinstance(part, torch.Tensor):
            data = part.detach().cpu().contiguous()
            digest.update(f"tensor {data.dtype} {tuple(data.shape)}".encode())
            digest.update((data.view(torch.int16) if data.dtype == torch.bfloat16 else data).numpy().tobytes())
        elif isinstance(part, np.ndarray):
            digest.update(f"array {part.dtype} {part.shape}".encode())
            digest.update(np.ascontiguousarray(part).tobytes())
        elif dataclasses.is_dataclass(part) and not isinstance(part, type):
            digest.update(type(part).__qualname__.encode())
            for field in dataclasses.fields(part):
                digest.update(field.name.encode())
                feed(getattr(part, field.name))
        elif isinstance(part, dict):
            digest.update(b"{")
            for name in sorted(part, key=repr):
                feed(name)
                feed(part[name])
            digest.update(b"}")
        elif isinstance(part, (list, tuple)):
            digest.update(b"[" if isinstance(part, list) else b"(")
            for item in part:
                feed(item)
            digest.update(b"]")
        else:
            digest.update(f"{type(part).__qualname__} {part!r}".encode())

    feed(value)
    return digest.hexdigest()


def _right(call: Call, solution, arguments: dict) -> dict:
    """The right values of the call, by output name: the known answer of a check that has one (a question's
    number, which the reference gives in its own form), else what the reference solution returns."""
    if "expected" in arguments:
        name = arguments.get("output") or (call.item.outputs or ("result",))[0]
        value = np.asarray(arguments["expected"])
        return {name: torch.from_numpy(value) if call.expected_library() == "torch" else value}
    return call.outputs(call.run(solution))
