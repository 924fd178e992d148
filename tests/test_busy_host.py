"""A busy host costs a correct notebook nothing, and the grader's failures are never the student's (issue 83, case 8).

Instructors grade on shared servers and laptops. The limits that decide a grade count the student's time, not the
wall clock that the host's other work stretches (:meth:`autograder.sandbox.channel.Channel._stretched`: a limit is
stretched by the time the host kept the sandbox's processes from a CPU they were ready for and due, up to a
backstop that is the grader's failure); a worker's exit status is reported as it was; a sandbox that dies of
something its code did not do is graded again in a fresh one, and where that dies too the notebook is not graded
(the grader's failure), never scored 0.

Here a class of correct notebooks (chapters 3 and 11's reference solutions) is graded as ``make grade`` grades it
(two at a time, spawned sandboxes as root), on a quiet host and under a load that the test makes (a few hundred MiB
held, and 8 busy processes for 2 cores: 4 on the one core that the test and all it starts are pinned to, so that
the other tests that pytest-xdist runs beside it keep the other core; each load process in a session of its own, as
another user's is, for a bounded time), with identical scores; and a worker killed from outside during an item is
graded again, or, killed every time, not graded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from autograder.grading.classroom import fill
from autograder.grading.grader import Grader
from autograder.grading.notebook import grade_notebook
from autograder.sandbox import wire
from autograder.sandbox.address_space import host_pid
from autograder.sandbox.bwrap import bwrap_available
from autograder.sandbox.channel import Channel
from autograder.sandbox.errors import SandboxTimeout
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import Sandbox
from tests.support import host

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")]

CLASS = ["ch03_multi_head", "ch11_flash_attention"]
A = "ch02_scaled_dot_product"
LOAD = 4  # busy processes on the one core (see one_core): 8 for 2 cores
LOAD_MB = 300  # memory held
LOAD_SECONDS = 900  # the load ends by itself after this long, whatever becomes of the test

SPIN = "import signal, sys\nsignal.alarm(int(sys.argv[1]))\nprint('busy', flush=True)\nwhile True:\n    pass\n"
HOLD = (
    "import signal, sys, time\nsignal.alarm(int(sys.argv[2]))\nheld = bytearray(int(sys.argv[1]) * 2**20)\n"
    "held[::4096] = b'x' * len(held[::4096])\nprint('held', flush=True)\ntime.sleep(int(sys.argv[2]))\n"
)


@contextlib.contextmanager
def one_core():
    """This thread, and every thread and process it starts while the block runs (they inherit it), on one core."""
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cores)


@contextlib.contextmanager
def busy_host():
    """:data:`LOAD` processes that use all the CPU they get and one that holds :data:`LOAD_MB` MiB, running (each
    has said so) until the block ends."""
    loads = []
    try:
        for program, *args in [(SPIN,)] * LOAD + [(HOLD, LOAD_MB)]:
            command = [sys.executable, "-c", program, *map(str, args), str(LOAD_SECONDS)]
            loads.append(subprocess.Popen(command, stdout=subprocess.PIPE, start_new_session=True))
        said = [load.stdout.readline().strip() for load in loads]
        assert said == [b"busy"] * LOAD + [b"held"], said
        yield
    finally:
        for load in loads:
            with contextlib.suppress(ProcessLookupError):
                load.kill()
            load.wait()
            load.stdout.close()


def graded_class() -> tuple[dict[str, tuple], dict[str, float]]:
    """Each notebook of :data:`CLASS` (its reference solution) graded as make grade grades it: (score, maximum,
    why not graded, tests failed); and the seconds each took."""
    grader = Grader(spawn=True)
    try:
        with grader, ThreadPoolExecutor(2) as jobs:
            futures = {a: jobs.submit(grade_notebook, a, fill(a), grader=grader) for a in CLASS}
            reports = {a: future.result() for a, future in futures.items()}
    finally:
        grader.close()
    return {a: (r.score, r.max_score, r.not_graded, failed(r)) for a, r in reports.items()}, {
        a: r.seconds for a, r in reports.items()
    }


def failed(report) -> list[str]:
    return sorted(gid for gid, result in report.tests.items() if not result.passed)


def test_a_class_of_correct_notebooks_keeps_its_scores_on_a_busy_host(capsys):
    with one_core():
        quiet, quiet_seconds = graded_class()
        with busy_host():
            busy, busy_seconds = graded_class()
    with capsys.disabled():  # what the load cost, for the record (not asserted: the host's other work varies)
        print(f"\nthe class's seconds per notebook, quiet: {quiet_seconds}; busy: {busy_seconds}")
    assert busy == quiet, (busy, quiet)
    assert all(score == maximum and not why and not failed for score, maximum, why, failed in quiet.values()), quiet


def planted(monkeypatch, item: str, signal_number: int, times: int) -> list[int]:
    """In each of the first ``times`` sandboxes, the first request that calls ``item`` finds its worker ended by
    ``signal_number``, sent from outside as the request is made (the pids it was sent to, in order)."""
    send, killed, sandboxes = Channel._send, [], set()

    def sending(self, message, timeout):
        if isinstance(message, wire.Call) and message.name == item and id(self) not in sandboxes:
            sandboxes.add(id(self))
            if len(killed) < times:
                fresh = type(self) is Sandbox  # its process is bubblewrap's; the worker is its namespace's pid 2
                worker = host_pid(self.process.pid, 2) if fresh else self.process.pid
                os.kill(worker, signal_number)
                while host.process(worker) is not None and host.process(worker).alive:
                    time.sleep(0.01)
                killed.append(worker)
        send(self, message, timeout)

    monkeypatch.setattr(Channel, "_send", sending)
    return killed


def graded_reference(spawn: bool):
    """The report of chapter 2's reference notebook, graded as make grade grades it (spawned or fresh sandboxes)."""
    grader = Grader(spawn=spawn)
    try:
        with grader:
            return grade_notebook(A, fill(A), grader=grader)
    finally:
        grader.close()


@pytest.mark.parametrize("spawn", [False, True], ids=["fresh", "spawned"])
def test_a_worker_killed_from_outside_during_an_item_is_graded_again_in_a_fresh_sandbox(monkeypatch, spawn):
    killed = planted(monkeypatch, "softmax", signal.SIGKILL, times=1)
    report = graded_reference(spawn)
    assert len(killed) == 1
    assert report.score == report.max_score and not report.not_graded, (failed(report), report.notes)
    assert "softmax: graded again in a fresh sandbox, as its process ended but not by the student's code" in (
        report.notes
    )


@pytest.mark.parametrize("spawn", [False, True], ids=["fresh", "spawned"])
def test_a_worker_killed_from_outside_again_in_a_fresh_sandbox_is_not_graded_never_scored_0(monkeypatch, spawn):
    """Its status as it was (SIGTERM, not made SIGKILL), twice: the notebook is not graded, the grader's failure."""
    killed = planted(monkeypatch, "softmax", signal.SIGTERM, times=2)
    report = graded_reference(spawn)
    assert len(killed) == 2 and killed[0] != killed[1], killed
    assert report.not_graded.startswith("not graded (the grader's failure, not yours): softmax: "), report.not_graded
    assert "was killed by signal 15 (SIGTERM) during " in report.not_graded, report.not_graded
    assert report.not_graded.endswith("and again in a fresh sandbox"), report.not_graded


def test_a_student_whose_own_code_kills_its_worker_loses_that_item_only(monkeypatch):
    """The other side: an item whose own code ends its process (abort: a fault of its own) is the student's, as it
    was: that item's tests fail, nothing is graded again, and the notebook is graded."""
    abort = "def softmax(x, axis=-1):\n    import os\n    os.abort()\n"
    report = grade_notebook(A, fill(A, {"softmax": abort}))
    softmax = __import__(f"tests.buggy.{A}", fromlist=["TESTS"]).TESTS["softmax"]
    assert not report.not_graded and failed(report) == sorted(softmax), (report.not_graded, failed(report))
    assert not any("graded again" in note for note in report.notes), report.notes
    assert any("killed by signal 6 (SIGABRT)" in note for note in report.notes), report.notes


BURN = "import time\nstart = time.process_time()\nwhile time.process_time() < start + {seconds}:\n    pass\n"
SPINNERS = (
    "import os\nfor _ in range(4):\n    if os.fork() == 0:\n        os.setsid()\n        while True:\n"
    "            pass\n"
)


def test_a_cells_limit_counts_its_cpu_not_the_time_a_busy_host_keeps_it_waiting():
    """A cell that needs 2 s of CPU, with a limit of 4 s, on a host whose busy processes leave the sandbox a
    fraction of a CPU (before issue 83 it timed out): it finishes. The time the host held it is not the student's,
    and only that: a cell that sleeps past its limit on the same host, or one whose own processes use the sandbox's
    CPU while it sleeps (on a quiet host), is timed out at its limit, the student's."""
    limits = Limits(cell_timeout=4.0)
    with one_core(), Sandbox(limits) as sandbox:
        sandbox._wait_ready()  # started on a quiet host: its start-up is not what is measured here
        with busy_host():
            assert sandbox.run_cells([BURN.format(seconds=2)], ["burn"]) == [None]
            with pytest.raises(SandboxTimeout):
                sandbox.run_cells(["import time\ntime.sleep(120)"], ["sleep"])
    with Sandbox(limits) as sandbox, pytest.raises(SandboxTimeout):
        sandbox.run_cells([SPINNERS + "import time\ntime.sleep(120)"], ["spin and sleep"])
