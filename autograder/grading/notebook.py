"""Grading one notebook, and checking that the sandbox works at all before a class is graded.

:func:`grade_notebook` grades; :func:`preflight` checks the sandbox.

For a submitted notebook, :func:`grade_notebook`

1. reads the instructor's notebook (``solutions/``) for the setup cells, the test
   cells (with their points) and the names of the graded items (:mod:`autograder.grading.source`);
2. builds the student's program: the submission's code cells in order, with the
   setup cells taken from the instructor's notebook and the test cells left out;
3. runs that program in a sandbox (:class:`~autograder.grading.session.Session`); a cell that
   hangs or kills the process is skipped and the program is run again without it;
4. runs each test cell *here*, with the graded items bound to
   :class:`~autograder.grading.session.Remote` proxies: a check makes its inputs here, the proxy
   sends them to the sandbox as plain data, the student's function runs there, and its return
   value comes back as plain data and is compared here with the reference.

Patching NumPy or builtins, IPython hooks, tensor subclasses, frame inspection
and killing the process all happen inside the sandbox, where nothing is scored.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Collection
from pathlib import Path
from types import CodeType
from typing import NamedTuple

import nbformat
import torch

from attention_course.tooling import notebooks
from autograder.api import items
from autograder.api.items import CheckFailed, PartlyRight, share
from autograder.calls.shared import shared_calls
from autograder.grading import grader as graders
from autograder.grading import report as reports
from autograder.grading import timings
from autograder.grading.report import Cause, Report, TestResult
from autograder.grading.session import MAX_MESSAGE_CHARS, Remote, Session
from autograder.grading.source import (
    MAX_NOTEBOOK_BYTES,
    Source,
    copied_answers,
    copy_labels,
    program_key,
    student_program,
    submission_key,
    tampered_tests,
)
from autograder.release import course, reference
from autograder.sandbox import values, wire
from autograder.sandbox.errors import (
    SandboxError,
    SandboxLost,
    SandboxProtocolError,
    SandboxTimeout,
    SandboxUnavailable,
)
from autograder.sandbox.limits import Limits
from autograder.sandbox.pool import WarmPool
from autograder.text.terminal import clean_text

TOTAL_SECONDS = 600.0  # one submission's whole grading, restarts included
DEFAULT_LIMITS = Limits()
MAX_CODE_CELLS = 500  # a submission with more code cells is not run


PROBE = [
    "import numpy\nimport torch\nimport attention_course\nfrom autograder import *\n",
    "def probe(x):\n    return x * 2\n",
]


def preflight(
    release: course.Release | None = None,
    isolation: str = "bwrap",
    limits: Limits = DEFAULT_LIMITS,
    grader: graders.Grader | None = None,
) -> str | None:
    """Start one sandbox with a program known to be right and call it once: None when that works,
    else what went wrong, written for the instructor (grading must not start then). ``grader``: whose
    sandboxes, as it starts them for students (:meth:`~autograder.grading.grader.Grader.sandboxes`: its zygote's,
    started here, where it has one), and mounting its packages (default: the process's shared ones)."""
    release = release or course.release()
    try:
        with (grader or graders.default()).sandboxes(limits, isolation, release)() as sandbox:
            errors = sandbox.run_cells(PROBE, ["the probe's imports", "the probe's function"])
            if any(errors):
                return (
                    "in the sandbox, the course's packages cannot be imported: "
                    + "; ".join(error for error in errors if error)
                    + ". Check that `make venv` installed them into the environment that grades"
                )
            reply = sandbox.call("probe", [values.encode(torch.arange(3.0))], {})
            value = values.decode(reply.value) if isinstance(reply, wire.Returned) else None
            if not isinstance(value, torch.Tensor) or not torch.equal(value, torch.arange(3.0) * 2):
                return f"the sandbox's worker answered a call wrongly: {clean_text(reply, 300)}"
    except SandboxUnavailable as exc:
        return (
            f"{exc}. Check that bubblewrap is installed (`make sandbox`) and may create user namespaces "
            "(sysctl user.max_user_namespaces > 0; on Debian and Ubuntu, kernel.unprivileged_userns_clone=1), "
            "and, in a container, that it allows them"
        )
    except SandboxError as exc:
        return f"the sandbox stopped during a program known to be right: {exc}"
    return None


def _refused(tests: list[tuple[str, str, float]], report: Report, why: str) -> Report:
    """A submission that is not run: every test fails with ``why`` (the student's doing)."""
    report.notes.append(why)
    for gid, _, points in tests:
        report.tests[gid] = TestResult(
            gid, points, False, f"no test ran: {why}", causes=[Cause(reports.NOT_RUN, "the notebook was not run")]
        )
    return report


def _read_submission(submission, tests: list[tuple[str, str, float]], report: Report):
    """The submitted notebook, or None (with the report filled in) for one that is not run."""
    if not isinstance(submission, (str, Path)):
        return submission
    path = Path(submission)
    if path.is_symlink():
        _refused(tests, report, "the notebook is a symbolic link, not a file; submit the notebook itself")
        return None
    try:
        size = path.stat().st_size
    except OSError as exc:
        _refused(tests, report, clean_text(f"could not read the notebook: {exc}", MAX_MESSAGE_CHARS))
        return None
    if size > MAX_NOTEBOOK_BYTES:
        _refused(
            tests,
            report,
            f"the notebook is larger than {MAX_NOTEBOOK_BYTES // 2**20} MiB "
            f"({size // 2**20} MiB); clear its outputs and submit it again",
        )
        return None
    return nbformat.read(str(path), as_version=4)


def grade_notebook(
    assignment: str,
    submission,
    *,
    notebook: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    isolation: str = "bwrap",
    release: course.Release | None = None,
    as_submitted=None,
    only: Collection[str] | None = None,
    pool: WarmPool | None = None,
    grader: graders.Grader | None = None,
) -> Report:
    """Grade one submitted notebook (a path or a NotebookNode) against the instructor's tests.

    The student's code can import the course's packages as students get them under ``release``
    (default: the term's settings), so never the solution of a chapter that is not released.
    Where the sandbox cannot be used (:class:`~autograder.sandbox.errors.SandboxUnavailable`), the report's
    ``not_graded`` says why and its scores mean nothing: the failure is the grader's.
    ``as_submitted``: the notebook as the student submitted it, when ``submission`` is a copy whose
    test cells nbgrader has already put back (the notes on changed test cells come from it).
    ``only``: grade just the test cells of these graded items (the report holds no other); every item
    is graded on its own code (the items it uses are the grader's stand-ins), so what the others score
    does not change what these do. A ValueError names an item that the notebook does not grade.
    ``pool``: for the course's own notebooks only (never a student's), a worker forked from one of these warm
    sandboxes instead of a sandbox started for this notebook (:mod:`autograder.sandbox.pool`); it must have
    been made with the same ``limits``, ``isolation`` and ``release``.
    ``grader``: the :class:`~autograder.grading.grader.Grader` whose packages the sandbox mounts; the
    settings it holds (torch's threads, warnings) hold while this grading runs, and are put back after it
    (default: one of its own, :func:`autograder.grading.grader.default`). Where it has a store of reports
    (the tests'), a notebook given as a NotebookNode is read from it under its key
    (:func:`~autograder.grading.source.submission_key`), or graded and stored.
    """
    grader = grader or graders.default()

    def graded() -> Report:
        with grader:
            return _grade(
                assignment, submission, notebook, limits, isolation, release, as_submitted, only, pool, grader
            )

    if grader.store is None or isinstance(submission, (str, Path)):
        return graded()
    key = submission_key(Source.load(assignment, notebook), submission, limits, release or course.release(), only)
    return grader.store.report(key, graded)


def _grade(assignment, submission, notebook, limits, isolation, release, as_submitted, only, pool, grader) -> Report:
    """:func:`grade_notebook`, with its settings held."""
    started = time.monotonic()
    release = release or course.release()
    if pool is not None and (pool.limits, pool.isolation, pool.release) != (limits, isolation, release):
        raise ValueError(
            f"pool: its sandboxes have other limits, isolation or release ({pool.release.key}) than this "
            f"grading's ({release.key})"
        )
    source = Source.load(assignment, notebook)
    tests = source.tests_of(only)
    report = Report(assignment, source.notebook)
    with timings.recording(report.phases):
        with timings.phase("reading"):
            program = _program(source, tests, submission, as_submitted, report)
        if program is not None:  # a notebook refused once read has the key too: nbgrader's copy is refused alike
            report.key = program_key(source, program.pieces, limits, release, only)
        if program is not None and program.runs:
            if pool is None:
                sandboxes = runners = grader.sandboxes(limits, isolation, release)
            else:  # the course's own notebooks: their kernels are run again here (a pool's worker would wait for
                sandboxes, runners = pool.sandbox, None  # the server that the notebook's worker holds)
            deadline = started + TOTAL_SECONDS
            session = Session(program.pieces, program.where, report, limits, deadline, sandboxes, runners)
            try:
                # no known answer shown; checks on the same inputs share the student's call (calls/shared)
                with items.known_mistakes() as known, items.hidden_tests(), shared_calls():
                    try:
                        _run_tests(source, tests, session, report)
                    finally:
                        if known.seconds:
                            timings.add("diagnosis", known.seconds)
            except SandboxLost as exc:  # the grader could not give the student's code its due
                report.not_graded = clean_text(
                    f"not graded (the grader's failure, not yours): {exc}", MAX_MESSAGE_CHARS
                )
            except SandboxUnavailable as exc:
                report.not_graded = clean_text(f"the sandbox could not be used: {exc}", MAX_MESSAGE_CHARS)
            finally:
                session.close()
    report.seconds = round(time.monotonic() - started, 3)
    return report


class _Program(NamedTuple):
    """The student's program (:func:`student_program`), where each piece is in the submission, and whether it runs."""

    pieces: list[str]
    where: list[int]
    runs: bool


def _program(source: Source, tests: list, submission, as_submitted, report: Report) -> _Program | None:
    """The student's program, or None for a submission that cannot be read; one that is not run (read, but
    with too many code cells) has ``runs`` false. A submission that is not run has its tests failed in
    ``report``, with why."""
    try:
        nb = _read_submission(submission, tests, report)
        if nb is None:
            return None
        pieces, where = student_program(source, nb)
        code_cells = sum(1 for cell in nb.cells if cell.get("cell_type") == "code")
        if code_cells > MAX_CODE_CELLS:
            _refused(tests, report, f"the notebook has {code_cells} code cells, more than the {MAX_CODE_CELLS} allowed")
            return _Program(pieces, where, False)
        copies = copy_labels(source, nb)
        report.cell_names = {i: copies.get(i) or notebooks.cell_label(nb, i) for i in where if i >= 0}
        submitted = nb if as_submitted is None else as_submitted
        report.notes += tampered_tests(source, submitted)
        # nbgrader's copy has its copied cells' grade ids removed (cell_roles): the notes come from the submission
        report.cell_notes = copied_answers(source, submitted)
        report.notes += list(report.cell_notes.values())
    except Exception as exc:
        _refused(tests, report, clean_text(f"could not read the notebook: {type(exc).__name__}: {exc}", 500))
        return None
    return _Program(pieces, where, True)


def _run_tests(source: Source, tests: list, session: Session, report: Report) -> None:
    """Run each of ``tests`` here, with the graded items bound to proxies of the student's objects."""
    trusted = {"__name__": f"autograder.tests.{source.assignment}"}
    for code in source.setup.values():
        exec(compile(code, f"<setup of {source.assignment}>", "exec"), trusted)
    signatures = {}
    for name in source.items:
        try:
            signatures[name] = inspect.signature(reference.get(source.assignment, name))
        except (reference.ReferenceUnavailable, TypeError, ValueError):
            signatures[name] = None
    for gid, code, points in tests:
        if (
            time.monotonic() > session.deadline
        ):  # every limit of the student's is far shorter: the grader's, or the host's
            raise SandboxLost(f"{gid}: not run: grading the notebook took over its {TOTAL_SECONDS:g} s")
        namespace = dict(trusted)
        namespace.update({name: Remote(session, name, signatures[name]) for name in source.items})
        begun, before = time.monotonic(), _elsewhere(report)
        runs = test_runs(code, gid)
        parts = {hidden for hidden, _ in runs} == {False, True}  # a visible part and a hidden one
        hidden = None  # the part that runs: none before the first
        try:
            session.start()
            for hidden, run in runs:
                with items.hidden_tests(hidden):
                    exec(run, namespace)
            report.tests[gid] = TestResult(gid, points, True)
        except PartlyRight as exc:
            partial = share(points, exc.right, exc.total)
            message = clean_text(f"{failed_part(parts, hidden)}{exc}", MAX_MESSAGE_CHARS)
            causes = [_part_cause(failure) for failure in exc.failures]
            report.tests[gid] = TestResult(gid, points, False, message, partial=partial, causes=causes)
        except CheckFailed as exc:
            message = clean_text(f"{failed_part(parts, hidden)}{exc}", MAX_MESSAGE_CHARS)
            causes = [failure_cause(exc)]
            report.tests[gid] = TestResult(gid, points, False, message, unwritten=exc.unwritten, causes=causes)
        except SandboxError as exc:
            message = clean_text(f"{failed_part(parts, hidden)}{gid}: {exc}", MAX_MESSAGE_CHARS)
            report.tests[gid] = TestResult(gid, points, False, message, causes=[_stopped_cause(exc)])
        except SandboxUnavailable:
            raise
        except Exception as exc:  # a test that cannot run scores nothing, and says why
            report.tests[gid] = TestResult(
                gid,
                points,
                False,
                clean_text(
                    f"{failed_part(parts, hidden)}{gid}: the test could not run: {items.quoted_error(exc)}",
                    MAX_MESSAGE_CHARS,
                ),
                causes=[Cause(reports.ERROR, "the test could not run on what the code returned or raised")],
            )
        # the cell's own time: not the sandboxes it (re)started, nor the warm-up it waited for
        own = max(0.0, time.monotonic() - begun - (_elsewhere(report) - before))
        report.tests[gid].seconds = round(own, 3)
        timings.add("tests", own)


def failure_cause(failure: CheckFailed) -> Cause:
    """Why a check failed, in the grader's words alone (:class:`~autograder.grading.report.Cause`): the known mistake
    its hint names; the item not written yet; else the property that failed, with the check's own hint of what it
    needs, and no guess of why (an error the student's code raised is theirs: said to be one, never quoted)."""
    if failure.known:
        return Cause(reports.KNOWN, failure.known)
    if failure.unwritten:
        return Cause(reports.UNWRITTEN, f"{failure.unwritten} not written yet (it raises NotImplementedError)")
    if failure.problem.startswith("it raised "):  # its hint says what the property needs, not why it raised
        return Cause(reports.UNKNOWN, f"{failure.prop} failed: the code raised an error")
    return Cause(reports.UNKNOWN, f"{failure.prop} failed: {failure.hint}")


def _part_cause(failure: CheckFailed) -> Cause:
    """A question's wrong part: which part (the value it asks about, the question's own), how it is wrong, and the
    part's hint (the misconception it names)."""
    how = failure.problem.removeprefix("the answer is ")
    return Cause(reports.PART, f"{failure.inputs}: {how}; {failure.hint}")


def _stopped_cause(error: SandboxError) -> Cause:
    if isinstance(error, SandboxTimeout):
        return Cause(reports.STOPPED, "the code ran past its time limit")
    if isinstance(error, SandboxProtocolError):
        return Cause(reports.STOPPED, "the code broke the grader's protocol")
    return Cause(reports.STOPPED, "the code's process ended (a limit it reached, or a crash)")


def failed_part(parts: bool, hidden: bool | None) -> str:
    """The first line of a failed test cell's message where the cell has a visible part and a hidden one
    (``parts``), saying which failed (``hidden``): its visible checks, which the student's notebook and make
    validate run too, or its hidden ones, after the visible checks passed; empty for a cell of one part, or where
    no part ran (``hidden`` None)."""
    if not parts or hidden is None:
        return ""
    if hidden:
        return "The hidden part of this test failed; its visible part (make validate runs it) passed.\n"
    return "The visible part of this test failed: make validate runs it too.\n"


def test_runs(code: str, gid: str) -> list[tuple[bool, CodeType]]:
    """A test cell's code in its runs of visible and hidden lines (``### BEGIN/END HIDDEN TESTS``, as nbgrader
    reads them), in order, each ``(hidden, compiled)`` at its own line numbers, run in turn in one namespace: a
    visible run's checks are the released cell's, which students have, and a failure there shows its known answer
    as `make validate` does; a hidden run's show none. A cell whose runs do not compile apart (a hidden region
    inside a block) is one hidden run, whole."""
    begin, end = notebooks.HIDDEN_TESTS
    runs: list[tuple[bool, int, list[str]]] = [(False, 0, [])]
    for number, line in enumerate(code.split("\n")):
        if begin in line:
            runs.append((True, number + 1, []))
        elif end in line:
            if runs[-1][0]:
                runs.append((False, number + 1, []))
        else:
            runs[-1][2].append(line)
    name = f"<test {gid}>"
    try:
        return [
            (hidden, compile("\n" * start + "\n".join(lines), name, "exec"))
            for hidden, start, lines in runs
            if any(line.strip() for line in lines)
        ]
    except SyntaxError:
        return [(True, compile(code, name, "exec"))]


def _elsewhere(report: Report) -> float:
    """The seconds so far of the phases that a test cell may wait for but that are not its own."""
    return sum(report.phases.get(name, 0.0) for name in ("start-up", "cells", "warm-up"))
