"""The grader's end of the channel to a sandbox, read and written by the grader's own thread: wire.Inbox takes
the worker's messages by a deadline, and Sandbox._send writes a request by one. A worker that sends in pieces,
sends too much, stops, never says a whole message, or stops reading is each answered as the sandbox's fault,
in time; nothing here waits past its deadline."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import struct
import threading
import time

import pytest

from autograder.sandbox import channel, wire
from autograder.sandbox.errors import SandboxDied, SandboxLost, SandboxTimeout
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import Sandbox

READY = wire.frame(wire.Ready())


@pytest.fixture
def pipe():
    """(inbox, the write end's fd) of a pipe; both ends closed after the test."""
    read, write = os.pipe()
    reader = os.fdopen(read, "rb", buffering=0)
    yield wire.Inbox(reader, wire.FromWorkerMessage, max_size=1 << 20), write
    reader.close()
    with contextlib.suppress(OSError):
        os.close(write)


def soon(seconds: float = 2.0) -> float:
    return time.monotonic() + seconds


def test_messages_come_whole_however_they_are_cut(pipe):
    inbox, write = pipe
    done = wire.frame(wire.CellDone(3, "x" * 200_000))  # larger than the pipe holds at once
    data = READY + done + READY

    def trickle():
        for start in range(0, len(data), 7919):
            os.write(write, data[start : start + 7919])

    writer = threading.Thread(target=trickle)
    writer.start()
    assert inbox.next(soon()) == wire.Ready()
    assert inbox.next(soon()) == wire.CellDone(3, "x" * 200_000)
    assert inbox.next(soon()) == wire.Ready()
    writer.join()
    os.close(write)
    assert inbox.next(soon()) is None
    assert inbox.next(soon()) is None  # the end stays the end


def test_what_has_come_is_read_even_at_a_deadline_passed(pipe):
    inbox, write = pipe
    os.write(write, READY)
    assert inbox.next(time.monotonic() - 1) == wire.Ready()
    with pytest.raises(TimeoutError):
        inbox.next(time.monotonic() - 1)


def test_half_a_message_times_out_and_the_rest_is_still_read(pipe):
    inbox, write = pipe
    os.write(write, READY[:5])
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        inbox.next(started + 0.2)
    assert 0.2 <= time.monotonic() - started < 1.0
    os.write(write, READY[5:])
    assert inbox.next(soon()) == wire.Ready()


def test_a_message_that_never_ends_cannot_hold_the_reader_past_its_deadline(pipe):
    inbox, write = pipe
    stop = threading.Event()
    os.write(write, struct.pack(">I", 1 << 19))

    def drip():
        while not stop.is_set():
            os.write(write, b" ")
            time.sleep(0.001)

    writer = threading.Thread(target=drip)
    writer.start()
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            inbox.next(started + 0.3)
        assert time.monotonic() - started < 1.5
    finally:
        stop.set()
        writer.join()


def test_an_oversized_message_is_refused_from_its_length_and_stays_refused(pipe):
    inbox, write = pipe
    os.write(write, struct.pack(">I", (1 << 20) + 1) + b"{")
    for _ in range(2):
        with pytest.raises(wire.WireError, match="larger than the limit"):
            inbox.next(soon())


@pytest.mark.parametrize(
    "payload,error",
    [(b"not json", "not JSON"), (b"[1, 2]", "malformed"), (b'{"event": "ready", "extra": 1}', "ready")],
)
def test_what_is_not_a_message_of_its_kind_is_refused(pipe, payload, error):
    inbox, write = pipe
    os.write(write, struct.pack(">I", len(payload)) + payload + READY)
    with pytest.raises(wire.WireError) as raised:
        inbox.next(soon())
    assert error in str(raised.value) or getattr(raised.value, "kind", "") == error
    with pytest.raises(wire.WireError):  # the conversation is over: the next message is not read
        inbox.next(soon())


# A worker that says it is ready and then never reads a request, or stops at once.
DEAF = f"import os, sys, time\nos.write(1, {READY!r})\n"


@pytest.mark.parametrize(
    "then,error,said",
    [
        ("time.sleep(60)", SandboxTimeout, "stopped reading its requests"),
        ("sys.exit(0)", SandboxDied, "exited with status 0 during a request"),
    ],
)
def test_a_worker_that_does_not_take_a_request_is_stopped_in_time(tmp_path, then, error, said):
    (tmp_path / "deaf.py").write_text(DEAF + then + "\n")
    with Sandbox(Limits(), "none", tmp_path, program="deaf") as sandbox:
        sandbox._wait_ready()
        if then.startswith("sys.exit"):
            sandbox.process.wait(timeout=10)
        started = time.monotonic()
        with pytest.raises(error, match=said):
            sandbox.call("f", ["x" * 1_000_000], {}, timeout=0.5)  # more than a pipe holds
        assert time.monotonic() - started < 5
        assert not sandbox.alive


@pytest.mark.parametrize(
    "waited,used,error",
    [
        (1.0, 0.0, SandboxLost),  # it waited for a CPU all along and got none: the host's, to the backstop
        (0.0, 0.0, SandboxTimeout),  # it never waited for a CPU (it sleeps): the student's, at the limit
        (1.0, 1.0, SandboxTimeout),  # it waited, while its processes used all the CPU it was due: the student's
    ],
)
def test_a_limit_counts_the_students_time_and_the_hosts_to_a_backstop_only(tmp_path, monkeypatch, waited, used, error):
    """Issue 83, case 8: a call that never answers, its sandbox's CPU clock made up (seconds waited for a CPU and
    used, per second that passes). Stretched only by the CPU it was due and waited for, and at its backstop (here 4
    times the limit) the grader's failure, not graded; else the student's timeout at the limit."""
    (tmp_path / "deaf.py").write_text(DEAF + "time.sleep(60)\n")
    monkeypatch.setattr(channel, "BACKSTOP_SECONDS", 0.0)
    start = time.monotonic()
    monkeypatch.setattr(
        Sandbox, "_cpu_clock", lambda self: ((time.monotonic() - start) * waited, (time.monotonic() - start) * used)
    )
    with Sandbox(Limits(), "none", tmp_path, program="deaf") as sandbox:
        sandbox._wait_ready()
        with pytest.raises(error, match="not given its time" if error is SandboxLost else "time limit"):
            sandbox.call("f", [], {}, timeout=0.5)
        assert not sandbox.alive


# A worker that answers its first request with stand-in calls sent all at once, queued before the grader has
# answered any, then reads whatever the grader sends.
HASTY = """import os
os.write(1, {ready!r})
os.read(0, 1 << 16)
os.write(1, {calls!r})
while os.read(0, 1 << 16):
    pass
"""


def hasty_worker(folder, queued: int) -> None:
    """A HASTY worker in ``folder``, in the worker's place (so that its messages are read as a worker's), that
    queues ``queued`` stand-in calls."""
    call = wire.StandInCall("call", "causal_mask", {"list": [{"int": "6"}]}, {"dict": {}})
    worker = folder / "autograder" / "sandbox"
    worker.mkdir(parents=True)
    for package in (folder / "autograder", worker):
        (package / "__init__.py").write_text("")
    (worker / "worker.py").write_text(HASTY.format(ready=READY, calls=wire.frame(wire.Callback(1, call)) * queued))


def cut_off_at_the_deadline(folder, answer) -> None:
    """A call of the hasty worker in ``folder``, its stand-in calls answered by ``answer``, times out at its
    0.5 s deadline (in less than 1.5 s), and its sandbox is closed."""
    with Sandbox(Limits(), "none", folder) as sandbox:
        sandbox._wait_ready()
        started = time.monotonic()
        with pytest.raises(SandboxTimeout, match="did not finish within its time limit"):
            sandbox.call("f", [], {}, timeout=0.5, callbacks=answer)
        assert time.monotonic() - started < 1.5
        assert not sandbox.alive


def test_stand_in_calls_queued_ahead_are_not_answered_past_the_calls_deadline(tmp_path):
    hasty_worker(tmp_path, 100)
    answered = []

    def slow_answer(callback: dict) -> dict:  # each stand-in call costs the grader a twentieth of a second
        answered.append(callback)
        time.sleep(0.05)
        return {"ok": True, "value": None}

    cut_off_at_the_deadline(tmp_path, slow_answer)
    assert 5 <= len(answered) <= 15, len(answered)  # not all 100: 5 s of the grader's work


def test_a_stand_in_call_that_costs_the_grader_long_is_cut_off_at_the_calls_deadline(tmp_path):
    """Issue 37: the deadline holds while the grader computes a stand-in's answer, not only while it waits for
    the worker: one call whose answer would take the grader 5 s ends the call at its 0.5 s deadline."""
    hasty_worker(tmp_path, 1)
    marker = contextvars.ContextVar("marker", default="unset")
    seen = []

    def slow_answer(callback: dict) -> dict:
        seen.append(marker.get())  # the calling check's context, in the thread that computes the answer
        time.sleep(5)
        return {"ok": True, "value": None}

    marker.set("the check's")
    cut_off_at_the_deadline(tmp_path, slow_answer)
    assert seen == ["the check's"]


def json_nodes(data) -> int:
    """The values of decoded JSON: numbers, strings, lists, objects and their keys."""
    if isinstance(data, dict):
        return 1 + sum(1 + json_nodes(value) for value in data.values())
    if isinstance(data, list):
        return 1 + sum(json_nodes(value) for value in data)
    return 1


def returned(value) -> bytes:
    return json.dumps({"event": "returned", "seq": 1, "value": value}).encode()


@pytest.mark.parametrize(
    "value,read",
    [
        ({"list": [{"set": []}] * 70_000}, False),  # the attack of issue 68: few bytes, many objects
        ([1] * 100_000, False),
        ([{}] * 50_000, False),  # an empty list or object counts as two (its bracket and a comma)
        (", :[{" * 100_000, True),  # brackets, commas and colons in a string are no values
        ([", :[{" * 10] * 60_000, True),  # ... but each string is one
        ([", :[{" * 10] * 70_000, False),
        (['\\"', '"\\', "a,b", '\\\\",:['] * 16_000, True),  # escaped quotes and backslashes
        ({f"key, {i}: [": i for i in range(30_000)}, True),
        ({"dict": {"a": [{"int": "1"}] * 1000}}, True),
    ],
    ids=["empty sets", "numbers", "empty objects", "a string", "strings", "more strings", "escapes", "keys", "a reply"],
)
def test_the_values_of_a_message_are_never_counted_fewer_than_it_holds(value, read):
    """Issue 68: json_values counts, on a message's bytes, at least the values that decoding it would make (or more
    than the bound, where it holds more), not the brackets, commas and colons inside its strings where that matters:
    a message of no more values than the bound whose other structure is in strings is ``read``."""
    payload = returned(value)
    exact = json_nodes(json.loads(payload))
    counted = wire.json_values(payload, wire.MAX_VALUES)
    assert counted >= min(exact, wire.MAX_VALUES + 1), (counted, exact)
    assert (counted <= wire.MAX_VALUES) == read, (counted, exact)
    assert wire.json_values(bytearray(payload), wire.MAX_VALUES) == counted


def test_a_message_of_more_values_than_the_grader_decodes_is_refused_unread_and_stays_refused(pipe):
    """Issue 68: 70,000 empty sets (0.9 MB, under the message limit, and once 50 MB of objects in the grader) are
    refused before they are decoded, in milliseconds, saying what was too large; the conversation is over. A message
    as long whose commas are in a string is read."""
    inbox, write = pipe
    commas = wire.frame(wire.Raised(1, "ValueError", ", " * 400_000))
    bloated = returned({"list": [{"set": []}] * 70_000})
    data = commas + struct.pack(">I", len(bloated)) + bloated + READY
    writer = threading.Thread(target=lambda: os.write(write, data))
    writer.start()
    assert inbox.next(soon()) == wire.Raised(1, "ValueError", ", " * 400_000)
    started = time.monotonic()
    with pytest.raises(wire.TooManyValues, match=f"more than {wire.MAX_VALUES:,} values"):
        inbox.next(soon())
    assert time.monotonic() - started < 0.5
    with pytest.raises(wire.TooManyValues):
        inbox.next(soon())
    writer.join()
    assert 0 < inbox.seconds < 1
