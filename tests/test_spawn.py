"""A worker the zygote forks into a student's sandbox runs as a fresh sandbox's worker does, and leaves nothing.

`make grade`, as root, grades each student's notebook in a sandbox of their own whose worker is forked from a
zygote that imported torch once (:mod:`autograder.sandbox.spawn`). Here the student's code looks at its process
from inside both kinds of sandbox, and everything it can see must be the same: uid and groups (a pool uid, not
root), capabilities, no_new_privs, resource limits, mounts, namespaces' views (processes, network, host name,
cgroups), file descriptors, environment, paths, and what it may write or create. Two students' sandboxes share
nothing; closing one kills everything its code started; a zygote that stops costs the student nothing (fresh
sandboxes take over). tests/test_warm_pool.py grades a sample of notebooks in both and compares the reports.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import nbformat
import pytest

from autograder.grading.classroom import fill
from autograder.grading.grader import Grader
from autograder.grading.notebook import grade_notebook
from autograder.release import course
from autograder.sandbox import bwrap, spawn, uids, wire
from autograder.sandbox.bwrap import bwrap_available
from autograder.sandbox.limits import Limits
from autograder.sandbox.process import Sandbox
from autograder.sandbox.spawn import SpawnedSandbox, Zygote
from tests import attacks
from tests.support import host

ROOT_ONLY = "a zygote is a root grader's (an unprivileged one starts fresh sandboxes)"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed"),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="a zygote is a root grader's (an unprivileged one starts fresh sandboxes)"
    ),
]

A = "ch02_scaled_dot_product"
LIMITS = Limits()
TERM = course.Release("term", frozenset({"ch01_bahdanau"}))

# What the student's code can see of its process and its sandbox; uids are compared apart (each sandbox has its own).
LOOK = r"""
import ctypes, json, os, re, resource, socket, sys

def look():
    status = dict(line.rstrip("\n").split(":\t", 1) for line in open("/proc/self/status") if ":\t" in line)
    libc = ctypes.CDLL(None, use_errno=True)
    def refused(call):
        result = call()
        return result != 0 and ctypes.get_errno()
    def writable(path):
        try:
            with open(os.path.join(path, "probe"), "w") as f:
                f.write("x")
            os.unlink(os.path.join(path, "probe"))
            return True
        except OSError as error:
            return error.strerror
    fds = {}
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            fds[fd] = re.sub(r"\[\d+\]", "[n]", os.readlink(f"/proc/self/fd/{fd}"))
        except OSError as error:
            fds[fd] = error.strerror
    return json.dumps({
        "ids": [list(os.getresuid()), list(os.getresgid()), os.getgroups()],
        "caps": {k: v for k, v in status.items() if k.startswith("Cap")},
        "no_new_privs": status["NoNewPrivs"], "seccomp": status.get("Seccomp"),
        "limits": {name: resource.getrlimit(getattr(resource, "RLIMIT_" + name))
                   for name in ("AS", "CPU", "FSIZE", "CORE", "NPROC", "NOFILE")},
        "mounts": sorted(" ".join(line.split()[4:6] + line.split(" - ")[1].split()[:1])
                         for line in open("/proc/self/mountinfo")),
        "root": sorted(os.listdir("/")),
        "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "pid": os.getpid(), "parent": os.getppid(), "session": os.getsid(0) == os.getpid(),
        "network": sorted(name for _, name in socket.if_nameindex()),
        "host": socket.gethostname(),
        "cgroup": open("/proc/self/cgroup").read(),
        "fds": fds,
        "environ": dict(os.environ),
        "cwd": os.getcwd(), "path": sys.path, "executable": sys.executable,
        "umask": os.umask(0o022),
        "dumpable": libc.prctl(3, 0, 0, 0, 0),
        "new user namespace": refused(lambda: libc.unshare(0x10000000)),
        "signal the init": refused(lambda: libc.kill(1, 9)),
        "writable": {p: writable(p) for p in ("/tmp", "/home/student", "/dev/shm", "/opt/course-packages", "/usr")},
        "host files": [os.path.exists(p) for p in HOST_FILES],
    })
"""


# the repository (whose Python installation the sandbox sees, and nothing else), and the host's own
HOST_FILES = [str(Path(__file__).resolve().parents[1] / "README.md"), "/etc/shadow", "/run", "/var"]


def looked(sandbox) -> dict:
    errors = sandbox.run_cells([f"HOST_FILES = {HOST_FILES!r}", LOOK], ["files", "look"])
    assert errors == [None, None], errors
    reply = sandbox.call("look", [], {})
    assert isinstance(reply, wire.Returned), reply
    return json.loads(reply.value)


def test_closing_a_spawned_sandbox_kills_what_its_code_started_and_removes_its_cgroups():
    """First in the module: no other zygote runs yet, whose process would be waited for."""
    escape = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
    )
    grader = Grader()
    before = {f"pid {info.pid} " for info in host.descendants()}  # the module's zygote, and what else runs already
    with host.Watch() as watch:
        with Zygote(LIMITS, grader.packages(TERM)) as zygote:
            sandbox = zygote.sandbox()
            uid = sandbox._holder.uid
            assert sandbox.run_cells([escape], ["escape"]) == [None]
            assert sandbox.background == 1  # the grandchild, left to the holder
            cgroups = list(sandbox._cgroups.paths)
            sandbox.close()
        leftovers = watch.leftovers()  # the zygote too, once closed; what was killed is reaped
        running = _running_as(uid, settle=5.0)
    grader.close()
    assert not running, running
    leftovers["processes"] = [p for p in leftovers["processes"] if not p.startswith(tuple(before))]
    assert leftovers == {"processes": [], "cgroups": [], "temporary folders": [], "sandbox folders": []}
    assert not [path for path in cgroups if path.exists()]
    assert sandbox.process.wait(5) is not None


@pytest.fixture(scope="module")
def zygote():
    grader = Grader()
    with Zygote(LIMITS, grader.packages(TERM)) as z:
        yield z
    grader.close()


def test_the_student_sees_the_same_sandbox_from_a_spawned_worker_as_from_a_fresh_one(zygote):
    with Sandbox(LIMITS, "bwrap", zygote.packages) as fresh:
        theirs = looked(fresh)
    with zygote.sandbox() as spawned:
        assert isinstance(spawned, SpawnedSandbox)
        ours = looked(spawned)
    for seen in (theirs, ours):
        uid = seen["ids"][0][0]
        assert uid in uids.UIDS and seen["ids"] == [[uid] * 3, [uid] * 3, []], seen["ids"]
        assert seen["pid"] != 1 and set(seen["processes"]) == {1, seen["pid"]}, seen["processes"]
        seen.pop("ids"), seen.pop("pid"), seen.pop("processes")
        seen["fds"] = sorted(set(seen["fds"].values()))  # their numbers are each process's own
    # The one difference: a fresh worker's parent is the sandbox's init (bubblewrap's), a spawned one's is outside
    # the sandbox's PID namespace (the zygote's child that waits for it), which the namespace shows as 0.
    assert (theirs.pop("parent"), ours.pop("parent")) == (1, 0)
    differ = {key: (theirs[key], ours.get(key)) for key in theirs if theirs[key] != ours.get(key)}
    assert not differ, differ
    assert set(ours["caps"].values()) == {"0000000000000000"}, ours["caps"]
    assert ours["no_new_privs"] == "1" and ours["network"] == ["lo"] and ours["host files"] == [False] * 4


def test_two_students_sandboxes_share_nothing(zygote):
    with zygote.sandbox() as first, zygote.sandbox() as second:
        assert first.run_cells(["open('/tmp/left', 'w').write('mine')\nfrom os import getuid"], ["leave"]) == [None]
        errors = second.run_cells(
            ["import os\nassert not os.path.exists('/tmp/left')\nfrom os import getuid"], ["find"]
        )
        assert errors == [None], errors
        ids = [s.call("getuid", [], {}) for s in (first, second)]
        assert all(isinstance(r, wire.Returned) for r in ids), ids
        assert ids[0].value != ids[1].value


def test_a_worker_killed_by_a_signal_says_which(zygote):
    from autograder.sandbox.errors import SandboxDied

    with zygote.sandbox() as sandbox:
        with pytest.raises(SandboxDied, match=r"killed by signal 9 \(SIGKILL\)"):
            sandbox.run_cells(["import os\nos.kill(os.getpid(), 9)"], ["kill"])


def test_a_zygote_that_stops_costs_the_student_nothing():
    """Killed while a class is graded: the next notebook gets a fresh sandbox, and its report is right."""
    grader = Grader(spawn=True)
    try:
        with grader:
            first = grade_notebook(
                "ch02_scaled_dot_product", fill("ch02_scaled_dot_product"), release=TERM, grader=grader
            )
            zygote = grader.zygote(LIMITS, grader.packages(TERM))
            assert zygote is not None and zygote.spawned >= 1
            os.killpg(zygote.process.pid, 9)
            time.sleep(0.5)
            second = grade_notebook(
                "ch02_scaled_dot_product", fill("ch02_scaled_dot_product"), release=TERM, grader=grader
            )
        assert first.score == second.score == first.max_score, (first.failed, second.failed, second.not_graded)
        assert not second.not_graded
        assert list(grader.unspawned().values()) and "zygote" in list(grader.unspawned().values())[0]
    finally:
        grader.close()


def _running_as(uid: int, settle: float) -> list[str]:
    """The processes that run as ``uid``, once those killed a moment ago have had ``settle`` s to end."""
    deadline = time.monotonic() + settle
    while True:
        found = [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == uid]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _uid_of(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def test_make_grade_says_why_each_sandbox_started_on_its_own_where_the_zygote_could_not_be_used(
    tmp_path, monkeypatch, capsys
):
    """A zygote that cannot start: the class is graded in fresh sandboxes, at full marks, and make grade says why."""
    from autograder.cli import grade
    from autograder.grading.classroom import make_course, submit
    from autograder.sandbox import spawn

    def refused(self, *args, **kwargs):
        raise spawn.ZygoteUnavailable("a zygote refused on purpose")

    monkeypatch.setattr(spawn.Zygote, "__init__", refused)
    course = make_course(tmp_path / "course")
    submit(course, "alice", A, fill(A))
    results = {r.student: r for r in grade.grade(A, root=course, quiet=False, jobs=1, settings=TERM)}
    assert results["alice"].score == results["alice"].max_score - results["alice"].awaiting_points
    said = capsys.readouterr().err
    assert "note: each sandbox started on its own, as the zygote could not be used: a zygote refused on purpose" in said


def test_a_spawned_worker_that_does_not_start_gives_fresh_sandboxes_and_costs_nothing(monkeypatch):
    """The zygote's worker fails before any of the student's code runs (here: limits it cannot set): the grader's
    failure, so that notebook and the next are graded in fresh sandboxes, at full marks."""
    from dataclasses import asdict

    from autograder.sandbox import spawn

    monkeypatch.setattr(spawn, "asdict", lambda limits: {**asdict(limits), "file_mb": -1})
    grader = Grader(spawn=True)
    try:
        with grader:
            reports = [grade_notebook(A, fill(A), release=TERM, grader=grader) for _ in range(2)]
        assert [r.score for r in reports] == [reports[0].max_score] * 2, [(r.failed, r.not_graded) for r in reports]
        assert not any(r.not_graded for r in reports)
        why = list(grader.unspawned().values())
        assert len(why) == 1 and "a worker it forked did not start" in why[0], why
    finally:
        grader.close()


# ----------------------------------------------------------------------------- no process outlives its sandbox

UNDUMPABLE = "if ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE"
SAID = "def said():\n    return OUTLIVED"


def traceable_inits(monkeypatch) -> None:
    """The sandboxes' PID 1 as it was before issue 83 (dumpable, so the student's uid may trace it): what is left
    to end the sandbox whole is its cgroups and its uid."""
    assert UNDUMPABLE in bwrap.INIT and UNDUMPABLE in spawn.HOLD
    monkeypatch.setattr(bwrap, "INIT", bwrap.INIT.replace(UNDUMPABLE, "if False:"))
    monkeypatch.setattr(spawn.Holder, "_arguments", ["-I", "-S", "-c", spawn.HOLD.replace(UNDUMPABLE, "if False:")])


def running_as(uid: int) -> list[str]:
    """The processes (zombies aside) whose real uid is ``uid`` now, as /proc says: no time given to settle."""
    found = []
    for info in host.processes():
        status = Path(f"/proc/{info.pid}/status")
        try:
            real = int(next(line for line in status.read_text().splitlines() if line.startswith("Uid:")).split()[1])
        except (OSError, StopIteration, ValueError):
            continue
        if real == uid and info.alive:
            found.append(f"pid {info.pid} (state {info.state}): {info.command}")
    return found


@pytest.mark.parametrize("init", ["as built", "traceable"])
@pytest.mark.parametrize("kind", ["fresh", "spawned"])
def test_no_process_of_a_sandbox_outlives_it_whatever_its_code_did_to_its_init(zygote, monkeypatch, kind, init):
    """Issue 83, case 7: the cell's daemon (setsid, left to PID 1) traces the sandbox's PID 1 to clear its
    parent-death signal, takes a writer of its standard input, and holds the worker's pipes. PID 1 refuses all of it
    (not dumpable); where it could not (``traceable``: PID 1 as it was), closing the sandbox still ends every process
    of it (its cgroups killed whole, then its uid), and checks that none is left, before it returns."""
    if init == "traceable":
        traceable_inits(monkeypatch)
    sandbox = Sandbox(LIMITS, "bwrap", zygote.packages) if kind == "fresh" else zygote.sandbox()
    uid = sandbox._uid if kind == "fresh" else sandbox._holder.uid
    cgroups = list(sandbox._cgroups.paths)
    try:
        assert sandbox.run_cells([attacks.OUTLIVE, SAID], ["outlive", "said"]) == [None, None]
        reply = sandbox.call("said", [], {})
        # the daemon has done all it could before the cell ended (the cell waits for its record): it runs now
        assert isinstance(reply, wire.Returned) and sandbox.background == 1, (reply, sandbox.background)
        said = reply.value
        assert len(running_as(uid)) >= 3, running_as(uid)  # PID 1, the worker, the daemon
        if init == "as built":
            assert "ptrace refused: Operation not permitted" in said and "stdin refused: Permission denied" in said
        elif platform.machine() == "x86_64":  # the attack's registers are x86-64's
            assert "pdeathsig cleared 0" in said, said
    finally:
        sandbox.close()
    assert sandbox.left == [] and running_as(uid) == []
    assert not [path for path in cgroups if path.exists()]


@pytest.mark.parametrize("spawned", [False, True], ids=["fresh", "spawned"])
def test_grading_a_notebook_whose_daemon_steers_its_init_finishes_and_leaves_nothing(monkeypatch, spawned):
    """The same daemon in a graded notebook, PID 1 traceable as it was: grading ends (before issue 83 it waited for
    ever on the pipes the daemon holds), the notebook keeps its full marks, the report says the daemon was stopped
    only once that was checked, and nothing runs as any uid its sandboxes had."""
    traceable_inits(monkeypatch)
    nb = fill(A)
    nb.cells.append(nbformat.v4.new_code_cell(attacks.OUTLIVE))
    grader = Grader(spawn=spawned)
    try:
        with host.Watch() as watch, grader:
            report = grade_notebook(A, nb, release=TERM, grader=grader)
            used = [uid for uid in watch.uids() if uid is not None]
            assert used and not [uid for uid in used if running_as(uid)], {uid: running_as(uid) for uid in used}
            forked = sum(z.spawned for z in grader._zygotes.values() if not isinstance(z, str))
        assert (forked > 0) == spawned, (forked, grader.unspawned())
        assert report.score == report.max_score, (report.failed, report.not_graded, report.notes)
        assert "the notebook's cells left 1 other process(es) running; they were stopped" in report.notes
    finally:
        grader.close()
