"""What a test cell names: the graded item, its known mistakes, and the failure a check reports.

The graded item is an :class:`Item`; its known mistakes, :class:`Mistake`, are declared with :func:`mistakes`
into the notebook's record of them, :class:`KnownMistakes` (a mistake whose variant cannot be built is a
:class:`BrokenMistake`); the failure a check reports is a :class:`CheckFailed`, or :class:`PartlyRight` for a
question whose parts earn a share of its points each."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from autograder.release import reference

LAYOUTS = ("contract", "transformer")


class CheckFailed(AssertionError):
    """A graded property does not hold. The message is written for the student: what was called,
    the property, the inputs, the problem and a hint."""

    def __init__(
        self, what: str, prop: str, inputs: str, problem: str, hint: str, unwritten: str = "", known: str = ""
    ):
        self.what, self.prop, self.inputs, self.problem, self.hint = what, prop, inputs, problem, hint
        # The graded item that is not written yet (it raised NotImplementedError, as released), or "": a report
        # says so once for all the tests of it that fail so, not once a test.
        self.unwritten = unwritten
        # The cause of the known mistake that explains the failure (the hint then says it), or "": the class
        # report counts each under the mistake it matched, and never guesses one.
        self.known = known
        # How a diagnosis replays the failed call: with the check's own arguments ({}), with these
        # arguments in their place (a check that compares values on a sample of a large call), or not at
        # all (None: a failure that no mistake in the values explains, such as memory beyond a budget).
        self.replay: dict | None = {}
        super().__init__(f"{what}: {prop} failed\n  inputs: {inputs}\n  problem: {problem}\n  hint: {hint}")

    def with_hint(self, hint: str, known: str = "") -> CheckFailed:
        """The same failure with ``hint``; ``known``: the cause of the known mistake the hint names, if it is one."""
        return CheckFailed(self.what, self.prop, self.inputs, self.problem, hint, self.unwritten, known)

    def _render_traceback_(self) -> list[str]:
        """What Jupyter shows for the failure (IPython's hook): the message alone, no traceback through
        the checks, its lines wrapped at :data:`SHOWN_WIDTH` so that a hub's Validate button
        (``nbgrader validate``, which cuts lines at 87 characters) shows every word of it."""
        return shown_lines(f"{type(self).__name__}: {self}")


class PartlyRight(AssertionError):
    """Some parts of a question are wrong (``failures``, one per wrong part) and ``right`` of its ``total``
    parts are right: graded, the test cell earns that share of its points (:func:`share`)."""

    def __init__(self, what: str, noun: str, right: int, total: int, failures: list[CheckFailed]):
        if not failures or right + len(failures) != total:
            raise ValueError(f"{right} right and {len(failures)} wrong parts are not {total} parts")
        self.what, self.right, self.total, self.failures = what, right, total, list(failures)
        wrong = len(failures)
        head = f"{what}: {wrong} of {total} {noun} wrong, {right} right"
        super().__init__("\n".join([head, *(f"{_indented(f)}" for f in failures)]))

    def _render_traceback_(self) -> list[str]:
        """What Jupyter shows: the message alone, wrapped as :class:`CheckFailed`'s."""
        return shown_lines(f"{type(self).__name__}: {self}")


def share(points: float, right: int, total: int) -> float:
    """The points that ``right`` of ``total`` parts earn, to the hundredth (what nbgrader's gradebook records)."""
    return round(points * right / total, 2)


def _indented(failure: CheckFailed) -> str:
    return textwrap.indent(str(failure), "  ").replace("  ", "- ", 1)


# A failed check quotes the student's error (what it raised, in their code or ours) this far: its type and the first
# line of its message. Its message is whatever the student's code chose, and code that records its arguments would
# print the inputs of every hidden check it was called by before; a first line keeps the hint a real error gives.
# A stand-in's refusal that the student's code let through word for word is the grader's text, and longer.
QUOTED_ERROR_CHARS = 200
QUOTED_GRADER_CHARS = 500


def quoted_error(exc: BaseException) -> str:
    """``"Type: message"`` of ``exc``, cut to the first line of its message and :data:`QUOTED_ERROR_CHARS`
    characters (:data:`QUOTED_GRADER_CHARS` where the grader wrote it, ``exc.grader_wrote``: a stand-in's
    refusal, :mod:`autograder.grading.session`), with a note where more was left out."""
    try:
        lines = str(exc).strip().splitlines()
    except Exception:  # a student's __str__ that fails
        lines = ["(its message could not be read)"]
    most = QUOTED_GRADER_CHARS if getattr(exc, "grader_wrote", False) is True else QUOTED_ERROR_CHARS
    quoted = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    if len(lines) <= 1 and len(quoted) <= most:
        return quoted
    return f"{quoted[:most]} [the rest of its message is not shown]"


def fewer_dimensions(inputs: list[tuple[str, object]]) -> str:
    """Of a call's ``inputs`` (name, value) that raised, those arrays with fewer dimensions than another (a mask of
    shape (Lk,) beside queries (B, L, D)), by name and shape (the check's own inputs, never a value), as what a
    library function's error on them most often means: it takes the full shape only, which the student's code must
    broadcast them to first. Empty where all have as many dimensions."""
    arrays = [(name, value) for name, value in inputs if isinstance(getattr(value, "ndim", None), int)]  # np, torch
    most = max((value.ndim for _, value in arrays), default=0)
    fewer = [f"{name} of shape {tuple(value.shape)}" for name, value in arrays if 0 < value.ndim < most]
    if not fewer:
        return ""
    return (
        f", with {' and '.join(fewer[:3])}, fewer dimensions than the other inputs, as the assignment allows: "
        "where a library function raised it (torch's, NumPy's), broadcast such an input to the full shape before "
        "passing it on"
    )


# A failed check quotes of a value that the student's code returned no more than it needs: of a shape, its number of
# dimensions, or the first dimension that differs from the expected one; of a length, the length; of a type, its name
# cut to QUOTED_TYPE_CHARS. Never a whole shape: an empty tensor may have any, and code that wrote a hidden check's
# inputs into its dimensions (torch.empty(0, 130, 141, 650)) would read them back from the message. One size at most,
# and whole up to QUOTED_SIZE (or twice what was expected, where that is more): one number of a few digits, never
# several packed into a large one.
QUOTED_SIZE = 1000
QUOTED_TYPE_CHARS = 40


def quoted_size(size: int, expected: int | None = None) -> str:
    """A size that the student's code chose (a dimension, a length) as a failed check quotes it: whole up to
    :data:`QUOTED_SIZE` or twice ``expected``, else as "over" that."""
    most = max(QUOTED_SIZE, 2 * expected) if expected is not None else QUOTED_SIZE
    return f"{size}" if size <= most else f"over {most}"


def dimensions(count: int) -> str:
    """``count`` dimensions, in words: "1 dimension", "3 dimensions"."""
    return f"{count} dimension{'' if count == 1 else 's'}"


def shape_difference(name: str, got, want, expected: str = "expected") -> str:
    """How the shape ``got`` of the value ``name`` that the student's code returned differs from ``want`` (the one
    expected, made from the inputs' shapes, which the check shows): its number of dimensions, or else the first
    dimension that differs, and the whole expected shape; one size of ``got`` at most (:func:`quoted_size`).
    ``expected``: who expects it ("the reference solution gives")."""
    got, want = tuple(got), tuple(want)
    if len(got) != len(want):
        return f"{name} has {dimensions(len(got))}; {expected} {len(want)}: {want}"
    for index, (size, wanted) in enumerate(zip(got, want)):
        if size != wanted:
            return f"{name} has size {quoted_size(size, wanted)} in dimension {index}; {expected} {wanted}: {want}"
    return f"{name} has the shape {want}"


def type_name(value) -> str:
    """The name of ``value``'s type as a failed check quotes it: cut to :data:`QUOTED_TYPE_CHARS` characters."""
    name = type(value).__name__
    return name if len(name) <= QUOTED_TYPE_CHARS else f"{name[:QUOTED_TYPE_CHARS]}..."


SHOWN_WIDTH = 80


def shown_lines(message: str, width: int = SHOWN_WIDTH) -> list[str]:
    """``message``'s lines wrapped at ``width``, each continuation indented under its line's label."""
    lines = []
    for line in message.splitlines():
        indent = len(line) - len(line.lstrip())
        label = line.lstrip().split(": ", 1)[0] if ": " in line else ""
        follow = " " * (indent + (len(label) + 2 if 0 < len(label) < 12 else 4))
        lines += textwrap.wrap(line, width, subsequent_indent=follow, break_on_hyphens=False) or [""]
    return lines


class Mistake:
    """A realistic wrong answer to an item, as changes to the reference solution's code, and its
    cause in words: a check that fails with the values this gives names the cause in its hint.

    ``Mistake("the scores are divided by the square root of d_model, not of one head's size",
    ("math.sqrt(q.size(-1))", "math.sqrt(query.size(-1))"))``
    """

    def __init__(self, cause: str, *replacements: tuple[str, str]):
        if not replacements:
            raise ValueError("a Mistake needs at least one (old, new) replacement")
        self.cause, self.replacements = cause, tuple(tuple(r) for r in replacements)

    def __repr__(self) -> str:
        return f"Mistake({self.cause!r})"


class BrokenMistake(ValueError):
    """A known mistake whose variant of the reference cannot be built: a replacement that is not in the
    reference's code, or code that does not run. The course's to mend, never the student's to pay for."""


def variant(item: Item, mistake: Mistake):
    """The reference of ``item`` with ``mistake`` made in it (:func:`autograder.release.reference.variant`); a
    :class:`BrokenMistake` that names the mistake where it cannot be built."""
    try:
        return reference.variant(item.assignment, item.name, mistake.replacements)
    except reference.ReferenceUnavailable:
        raise
    except Exception as exc:
        raise BrokenMistake(
            f"{item.assignment}/{item.name}: the known mistake {mistake.cause!r} cannot be built: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


@dataclass(frozen=True)
class Item:
    """A graded item: the student's function or class under its contract name.

    ``outputs`` names the values the item returns, in order, when it returns a tuple
    (``("output", "weights")``); leave it empty for a single value. ``returns`` is the library of
    the result (``"torch"`` or ``"numpy"``) where no input says it.

    ``uses`` names the other graded items (of this chapter or an earlier one) that the item's code
    calls or builds (``("split_heads", "merge_heads")``, ``("MultiHeadAttention", "FeedForward")``).
    Graded, the item runs with the grader's stand-ins for them (:mod:`autograder.calls.standins`), so
    that its checks grade its own code only: a mistake in a helper costs points in the helper's
    tests alone. ``layout`` says where the grader finds the item's parameters to give it the
    reference's weights: by the contract's names (``"contract"``), or, for a ``Transformer`` whose
    embeddings and output layer the contract does not name, by their role (``"transformer"``).
    ``free`` names, for a used module, the arguments that the student may choose when building it
    (``{"EncoderLayer": ("norm_first",)}``: a Transformer of pre-norm layers is right too): the grader
    compares with the reference built with the same choice.
    ``known`` holds the item's known mistakes (:func:`mistakes`), for the hints (:mod:`autograder.calls.diagnosis`).
    """

    assignment: str
    name: str
    obj: Any = field(compare=False, repr=False)
    outputs: tuple[str, ...] = ()
    returns: str | None = None
    uses: tuple[str, ...] = ()
    layout: str = "contract"
    free: dict = field(default_factory=dict, compare=False)
    known: tuple[Mistake, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        if isinstance(self.uses, str) or not all(isinstance(name, str) for name in self.uses):
            raise TypeError(f"uses must be a tuple of the names of graded items, got {self.uses!r}")
        object.__setattr__(self, "uses", tuple(self.uses))
        if not set(self.free) <= set(self.uses):
            raise ValueError(
                f"free names modules that the item does not use: {sorted(set(self.free) - set(self.uses))}"
            )
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")


def is_shape(value) -> bool:
    """Whether ``value`` is a shape: a tuple of Python ints."""
    return isinstance(value, tuple) and all(isinstance(n, int) for n in value)


class KnownMistakes:
    """The known mistakes of each item, as the test cells of one notebook declare them: an item's first
    test cell declares them (:func:`mistakes`), and its later cells, which build the Item again, find them
    here. Plain data, passed where it is needed: the grader keeps one per notebook it grades
    (:func:`known_mistakes`), a test its own.

    A ``strict`` record (a notebook's kernel, a test) raises a :class:`BrokenMistake` where a known mistake
    cannot be built; the grader's is not strict: a broken mistake is left out (kept in ``broken``), so that
    it costs no student a point, and a failure it would have explained keeps the check's own hint."""

    def __init__(self, strict: bool = True):
        self.strict = strict
        self.broken: list[BrokenMistake] = []
        self.seconds = 0.0  # spent naming the causes of failed checks from this record (the grader adds them up)
        self._known: dict[tuple[str, str], tuple[Mistake, ...]] = {}

    def variant(self, item: Item, mistake: Mistake):
        """:func:`variant` of ``mistake``; where it cannot be built, its :class:`BrokenMistake` raised if this
        record is strict, else kept, once, among the mistakes left out, and None returned."""
        try:
            return variant(item, mistake)
        except BrokenMistake as broken:
            if self.strict:
                raise
            if all(str(other) != str(broken) for other in self.broken):
                self.broken.append(broken)
            return None

    def declare(self, item: Item, known: tuple[Mistake, ...]) -> None:
        self._known[(item.assignment, item.name)] = tuple(known)

    def of(self, item: Item) -> tuple[Mistake, ...]:
        """The known mistakes of ``item``: its own, or those an earlier test cell declared for it."""
        return item.known or self._known.get((item.assignment, item.name), ())


# The record that the test cells being run write to and read: the grader's for the notebook it grades, else
# the kernel's (a notebook's own kernel runs one notebook).
_KERNEL = KnownMistakes()
_CURRENT: contextvars.ContextVar[KnownMistakes | None] = contextvars.ContextVar("known_mistakes", default=None)


@contextlib.contextmanager
def known_mistakes(record: KnownMistakes | None = None) -> Iterator[KnownMistakes]:
    """``record`` (default: a new one that is not strict, the grader's) as the record of the test cells run
    inside, for grading one notebook."""
    token = _CURRENT.set(KnownMistakes(strict=False) if record is None else record)
    try:
        yield _CURRENT.get()
    finally:
        _CURRENT.reset(token)


def current_record() -> KnownMistakes:
    """The record of the test cells being run."""
    found = _CURRENT.get()
    return _KERNEL if found is None else found


def mistakes(item: Item, *known: Mistake, also: tuple[str, str] | None = None) -> Item:
    """``item`` with its known mistakes (in a hidden test: the grader's knowledge only), which the item's
    later test cells in the same notebook know too. Each must apply to the reference solution's code: one
    that cannot be built raises a :class:`BrokenMistake`, or, graded, is left out (:class:`KnownMistakes`).

    ``also``, an (old, new) replacement that every one of them makes after its own: the answer put in the
    form the checks compare, as the test cell's item gives it (a number as a float64 tensor, say)."""
    if also is not None:
        known = tuple(Mistake(mistake.cause, *mistake.replacements, also) for mistake in known)
    record = current_record()
    built = tuple(mistake for mistake in known if record.variant(item, mistake) is not None)
    record.declare(item, built)
    return dataclasses.replace(item, known=built)


# Whether the test code being run is hidden. A notebook's kernel runs only the visible tests that students have;
# the grader runs the instructor's cells, each in its runs of lines in turn, a visible run under
# hidden_tests(False) and a hidden region under hidden_tests() (grading/notebook.test_runs). A visible test's known
# answer is public (its cell prints it): a failure there shows it beside the value returned, in make check as in
# make validate. A hidden test's is the grader's secret: no failure shows it (see known_answers_shown).
_HIDDEN: contextvars.ContextVar[bool] = contextvars.ContextVar("hidden_tests", default=False)


@contextlib.contextmanager
def hidden_tests(hidden: bool = True) -> Iterator[None]:
    """The test code run inside is hidden (the grader's, by default: its failures show no known answer), or, with
    ``hidden=False``, a visible test's lines that students have (their known answers shown)."""
    token = _HIDDEN.set(hidden)
    try:
        yield
    finally:
        _HIDDEN.reset(token)


def known_answers_shown() -> bool:
    """Whether a failed check may show its known answer beside the value returned: only where no hidden test
    runs (a notebook's kernel, `make validate`), whose test cells students have, known answers and all."""
    return not _HIDDEN.get()
