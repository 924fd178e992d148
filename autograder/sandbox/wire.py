"""The messages between the grader and the worker in the sandbox, each declared once and checked on receipt.

Each is declared here, and every message received is checked against its declaration before it is used.
A message is a :class:`msgspec.Struct`, tagged with its kind (``"event"`` from the worker, ``"op"`` from
the grader), with fields of fixed types (and ranges, where a number could drive work) and no other field.
On the pipe it is a 4-byte big-endian length, then JSON. :func:`receive` refuses a message longer than
its limit before reading it (and the grader's :class:`Inbox` one that holds more than :data:`MAX_VALUES` JSON
values, before decoding it: :class:`TooManyValues`), then checks it against the union of the messages that may come
(:data:`FromWorkerMessage`, :data:`FromGraderMessage`): a message of the wrong form (an unknown kind, a
missing, extra or wrong-typed field, a number out of range) raises :class:`MessageError`, which names the
kind of message it claimed to be; what is not a message at all raises :class:`WireError`. The grader
takes either as the student's program breaking the protocol, never as its own failure.

Values (a call's arguments, its result) travel inside messages as plain data (:data:`Value`), encoded and
checked by :mod:`autograder.sandbox.values` where they are used. This module imports no torch: the grader's
sandbox (:mod:`autograder.sandbox.process`) and nbgrader's plugins, which use it, start without it.

The worker's side of each exchange is described in :mod:`autograder.sandbox.worker`.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from typing import Annotated, Any, Literal

import msgspec

MAX_MESSAGE = 256 * 2**20  # bytes; the grader takes at most Limits.message_kb from a sandbox
# The most JSON values (numbers, strings, lists, objects and their keys) that the grader decodes of one message from
# a sandbox. What a message costs the grader's shared process is what decoding it makes, up to a few hundred bytes
# of Python objects per value, not its bytes: 7.8 MB of empty sets took the grader 425 MiB and 3 s. The course's
# largest message holds 1,507 (the reference notebooks of ch01 to ch11 graded: a reply of ch06's); one of 65,536
# takes the grader at most about 8 MiB and a tenth of a second to decode (json_values: milliseconds to count).
MAX_VALUES = 2**16

Value = Any  # a value as plain data, checked where it is decoded (autograder.sandbox.values)
Seq = Annotated[int, msgspec.Meta(ge=0, lt=2**53)]  # a request's number
Index = Annotated[int, msgspec.Meta(ge=0, lt=2**31)]  # a cell's index


class WireError(ValueError):
    """A value that cannot cross the boundary, or a message that is not one (too long, not JSON)."""


class MessageError(WireError):
    """A message of the wrong form; ``kind`` is what it claimed to be (its tag), ``detail`` what is wrong."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"an unexpected {kind!r} message: {detail}")
        self.kind, self.detail = kind, detail


class TooManyValues(WireError):
    """A message that holds more JSON values than the grader decodes (:data:`MAX_VALUES`); refused unread."""

    def __init__(self, most: int):
        super().__init__(
            f"a message of more than {most:,} values (numbers, strings, lists and objects in its JSON), "
            f"the most that the grader decodes of one"
        )


# ---------------------------------------------------------------------------- from the worker


class FromWorker(msgspec.Struct, tag_field="event", forbid_unknown_fields=True, frozen=True):
    pass


class Ready(FromWorker, tag="ready"):
    """Its start-up is done; no student code has run yet."""


class CellStart(FromWorker, tag="cell_start"):
    index: Index


class CellDone(FromWorker, tag="cell_done"):
    index: Index
    error: str | None  # "Type: message", or None


class CellsDone(FromWorker, tag="cells_done"):
    others: Annotated[int, msgspec.Meta(ge=0, lt=10**6)]  # processes the cells left running


class Returned(FromWorker, tag="returned"):
    """A call's (or an attribute's) value; the array arguments as they are after the call."""

    seq: Seq
    value: Value
    args_after: list[Value] | None = None
    kwargs_after: dict[str, Value] | None = None
    trace: Value = None  # the Triton kernels the call launched, where the call asked for them (Call.trace)


class Raised(FromWorker, tag="raised"):
    """The call raised; ``raised_in``: the function whose own frame raised it."""

    seq: Seq
    error_type: str
    error: str
    raised_in: str = ""


class StandInCall(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A call of one of the grader's stand-ins (:mod:`autograder.calls.standins` answers it); ``fixture``: of the method
    ``name`` of the fixture that the grader holds under the number ``held``."""

    kind: Literal["call", "construct", "forward", "fixture"]
    name: str
    args: Value
    kwargs: Value
    rng: Value = None
    init: Value = None
    state: Value = None
    training: bool = False
    held: Annotated[int, msgspec.Meta(ge=1, lt=2**31)] | None = None


class Callback(FromWorker, tag="callback"):
    seq: Seq
    callback: StandInCall


Reply = Returned | Raised  # the answer to a call, an attribute or the stand-ins' placing
FromWorkerMessage = Ready | CellStart | CellDone | CellsDone | Returned | Raised | Callback

Pid = Annotated[int, msgspec.Meta(ge=1, le=2**22)]  # a process id in the sandbox (Linux's pid_max at most)


class Forked(FromWorker, tag="forked"):
    """A fork server's new worker, for the next notebook: its process id in the sandbox."""

    pid: Pid


class Exited(FromWorker, tag="exited"):
    """A fork server's worker has ended: its exit code, or minus the signal that killed it."""

    pid: Pid
    status: Annotated[int, msgspec.Meta(ge=-128, le=255)]


class NotForked(FromWorker, tag="not_forked"):
    """The zygote could not put a new worker in its sandbox: why."""

    why: Annotated[str, msgspec.Meta(max_length=4000)]


FromForkServerMessage = Ready | Forked | Exited  # what a fork server (autograder.sandbox.forkserver) sends
FromZygoteMessage = Ready | Forked | NotForked | Exited  # what the zygote (autograder.sandbox.zygote) sends


# ---------------------------------------------------------------------------- from the grader


class FromGrader(msgspec.Struct, tag_field="op", forbid_unknown_fields=True, frozen=True):
    pass


class RunCells(FromGrader, tag="run_cells"):
    cells: list[str | None]  # None: a cell skipped


class Call(FromGrader, tag="call"):
    """Call the student's object ``name`` (or the handle ``handle``), or its attribute ``attr``."""

    seq: Seq
    args: list[Value]
    kwargs: dict[str, Value]
    name: str | None = None
    handle: int | None = None
    attr: str | None = None
    seed: int | None = None  # the random generators are seeded with it just before the call
    trace: bool = False  # record the Triton kernels the call launches (autograder.sandbox.launch_log)


class GetAttr(FromGrader, tag="getattr"):
    seq: Seq
    handle: int
    attr: str


class StandIn(FromGrader, tag="stand_in"):
    """Put the stand-ins of these names in place; ``message_bytes``: the largest message the grader takes (a
    stand-in's call larger than that is refused in the sandbox, as an error in the student's code)."""

    seq: Seq
    functions: list[str]
    modules: list[str]
    message_bytes: Annotated[int, msgspec.Meta(ge=0, le=MAX_MESSAGE)] = MAX_MESSAGE


class WarmUp(FromGrader, tag="warm_up"):
    """Load what torch loads on its first operation on the "meta" device, before a call that uses it is timed."""

    seq: Seq


class CallbackResult(FromGrader, tag="callback_result"):
    """The grader's answer to a stand-in's call: ``ok`` with the values, or the error to raise."""

    seq: Seq
    ok: bool
    value: Value = None
    error_type: str = ""
    error: str = ""
    init: Value = None
    state: Value = None
    parameters: Value = None
    attributes: Value = None
    rng: Value = None


FromGraderMessage = RunCells | Call | GetAttr | StandIn | WarmUp | CallbackResult


def kind(message: msgspec.Struct) -> str:
    """The kind (tag) of a message."""
    return str(message.__struct_config__.tag)


# ---------------------------------------------------------------------------- the pipe


def frame(message: msgspec.Struct | dict) -> bytes:
    """One message as it goes on the pipe. JSON by the standard library: a lone surrogate in a student's text
    is escaped, and comes back as it was, for :func:`autograder.text.terminal.clean_text` to replace."""
    payload = json.dumps(msgspec.to_builtins(message)).encode()
    return struct.pack(">I", len(payload)) + payload


def send(stream, message: msgspec.Struct | dict) -> None:
    """Write one message (:func:`frame`) and flush it."""
    stream.write(frame(message))
    stream.flush()


def _read_exactly(stream, size: int) -> bytes | None:
    """``size`` bytes, or None if the stream ends first. An unbuffered pipe gives at most what it
    holds (64 KiB on Linux) per read, so a large message takes several."""
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _size(header, max_size: int) -> int:
    """The length a message's 4-byte header declares; :class:`WireError` if it is longer than ``max_size``."""
    (size,) = struct.unpack(">I", header)
    if size > max_size:
        raise WireError(f"message of {size} bytes is larger than the limit of {max_size}")
    return size


def receive(stream, schema=None, max_size: int = MAX_MESSAGE):
    """The next message, checked against ``schema`` (a message type or a union of them), or None at the
    end of the stream; without ``schema``, the JSON object as it came. A message longer than ``max_size``
    bytes is refused before it is read."""
    header = _read_exactly(stream, 4)
    if header is None:
        return None
    payload = _read_exactly(stream, _size(header, max_size))
    if payload is None:
        return None
    return decode(payload, schema)


def decode(payload: bytes | bytearray, schema=None, max_values: int | None = None):
    """A message's payload (after its length) as the message of ``schema`` it is, or as its JSON object. With
    ``max_values``, a payload of more JSON values than that is refused before it is decoded (:class:`TooManyValues`)."""
    if max_values is not None and json_values(payload, max_values) > max_values:
        raise TooManyValues(max_values)
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError) as error:
        raise WireError(f"a message that is not JSON ({type(error).__name__})") from None
    if not isinstance(data, dict):
        raise WireError("malformed message")
    return data if schema is None else checked(data, schema)


_STRUCTURE = (b"{", b"[", b",", b":")


def json_values(payload: bytes | bytearray, most: int) -> int:
    """At least as many as the values of the JSON ``payload`` (numbers, strings, lists, objects and their keys), or
    than ``most`` where it has more, counted on its bytes before anything is decoded: each value is the whole, or
    follows an opening bracket, a comma or a colon (an empty list or object counts twice). Above ``most``, the count
    is made again without the brackets, commas and colons inside strings (or is the count of its strings, where that
    is above it too). Milliseconds for a message of 8 MiB."""
    count = 1 + sum(payload.count(c) for c in _STRUCTURE)
    if count <= most:
        return count
    strings = (payload.count(b'"') - payload.count(b'\\"')) // 2  # at least: an escaped quote follows a backslash
    if strings > most:
        return strings
    if not strings:
        return count
    bare = payload.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in payload else payload
    outside = bare.split(b'"')[0::2]  # no escape left: each quote opens or ends a string; at most 2 * most + 1 pieces
    return 1 + sum(piece.count(c) for piece in outside for c in _STRUCTURE)


class Inbox:
    """The messages of a pipe, each read when it is asked for, by a deadline: no thread waits on the pipe, so a
    reply reaches the grader's thread with no hand-over between threads. The pipe is made non-blocking; only
    what one message needs is read at a time (a message longer than ``max_size`` is refused from its length).
    After the end of the pipe or a message that is not one, every later :meth:`next` says the same. A message of
    more than ``max_values`` JSON values is refused before it is decoded (:class:`TooManyValues`); ``seconds``:
    how long decoding its messages took, in all (the grader's own work, on the time of the notebook it grades)."""

    CHUNK = 65536

    def __init__(self, stream, schema, max_size: int = MAX_MESSAGE, max_values: int = MAX_VALUES):
        self._max_values = max_values
        self.seconds = 0.0
        self._fd = stream.fileno()
        os.set_blocking(self._fd, False)
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLIN)
        self._schema, self._max_size = schema, max_size
        self._buffer = bytearray()
        self._ended = False
        self._error: WireError | None = None

    def next(self, deadline: float):
        """The next message, or None at the end of the pipe; :class:`TimeoutError` if none is whole at
        ``deadline`` (a :func:`time.monotonic` time; what has come by then is still read); :class:`WireError`
        or :class:`MessageError` as :func:`receive` raises them."""
        waited = False
        while True:
            if self._error is not None:
                raise self._error
            needed = self._needed()
            if needed == 0:
                return self._take()
            if self._ended:
                return None
            left = deadline - time.monotonic()
            if left <= 0 and waited:
                raise TimeoutError
            waited = True
            if not self._poll.poll(max(0, math.ceil(left * 1000))):
                continue
            try:
                chunk = os.read(self._fd, max(self.CHUNK, needed))
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if chunk:
                self._buffer += chunk
            else:
                self._ended = True

    def _needed(self) -> int:
        """How many more bytes the next message needs (0: it is whole)."""
        if len(self._buffer) < 4:
            return 4 - len(self._buffer)
        try:
            size = _size(self._buffer[:4], self._max_size)
        except WireError as error:
            self._error = error
            raise
        return max(0, 4 + size - len(self._buffer))

    def _take(self):
        size = _size(self._buffer[:4], self._max_size)
        if len(self._buffer) == 4 + size:  # the buffer holds this message alone: taken whole, not copied
            payload, self._buffer = self._buffer, bytearray()
            del payload[:4]
        else:
            with memoryview(self._buffer) as view:
                payload = bytes(view[4 : 4 + size])
            del self._buffer[: 4 + size]
        started = time.monotonic()
        try:
            return decode(payload, self._schema, self._max_values)
        except WireError as error:
            self._error = error
        finally:
            self.seconds += time.monotonic() - started
            del payload
        # raised again by every later next(): with no traceback into decode(), whose frame holds the payload
        raise self._error.with_traceback(None)


def checked(data: dict, schema):
    """``data`` as the message of ``schema`` it is; else :class:`MessageError`."""
    try:
        return msgspec.convert(data, schema)
    except msgspec.ValidationError as error:
        tag = data.get("event", data.get("op"))
        claimed = tag[:40] if isinstance(tag, str) else "untagged"
        raise MessageError(claimed, str(error)[:300]) from None
