"""The instructor's side of the cluster: phase 3's notebooks graded on a Dask scheduler's workers (:class:`Cluster`).

The instructor's ``make grade`` keeps everything but phase 3's grading: the class, the plan of what to grade
(a notebook whose saved report still fits is never sent), the gradebook, the saved and signed reports and the
grader's secret. Each notebook to grade is one task (:func:`autograder.cluster.worker.grade`) that takes one of a
worker's ``notebooks`` (so a host grades at most as many at once as its ``make grade-worker JOBS=N`` says). A
report is accepted only where the worker graded from the digests of the instructor's own checkout; a worker
that refuses (another commit, a sandbox that does not work) gets no more of the class, and its notebooks go to
the others. What can fail, and what it costs:

- a worker lost in the middle (its machine, its process): Dask runs its notebooks on the others, and each
  report is accepted once;
- a notebook that stops every worker it is tried on (Dask's ``KilledWorker``): "not graded", with why;
- a notebook that a worker started and has not finished within the instructor's own deadline: "not graded";
- the scheduler lost: :class:`~autograder.grading.run.GradingUnavailable`; the reports received are saved, so
  ``make grade`` again sends only the notebooks that have none.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from autograder.cluster import certificates
from autograder.cluster.worker import RESOURCE, TOPIC, differences, grade
from autograder.grading.report import Report
from autograder.grading.run import GradingUnavailable
from autograder.grading.saved import Inputs
from autograder.grading.source import MAX_NOTEBOOK_BYTES
from autograder.release import course
from autograder.sandbox.channel import BACKSTOP, BACKSTOP_SECONDS
from autograder.sandbox.limits import Limits
from autograder.text.terminal import clean_text

CONNECT_SECONDS = 30.0  # the most that reaching the scheduler may take
RESTART_SECONDS = 20.0  # how long a worker whose notebook passed the deadline has to stop, before its nanny kills it


def deadline(limits: Limits) -> float:
    """The instructor's own bound on one notebook's grading once a worker started it: its sandbox's start and
    all the CPU time it may take, stretched as far as a busy host's backstop stretches the sandbox's limits."""
    return BACKSTOP * (limits.startup_timeout + limits.cpu_seconds) + BACKSTOP_SECONDS


class Cluster:
    """A connection to the scheduler at ``address`` (``tls://host:port``), with the course's certificates in
    ``certs`` (:mod:`autograder.cluster.certificates`)."""

    def __init__(
        self,
        address: str,
        certs: Path,
        notebook_deadline: float | None = None,
        connect_seconds: float = CONNECT_SECONDS,
    ):
        if not address.startswith("tls://"):
            raise GradingUnavailable(
                f"CLUSTER: the scheduler's address must start with tls:// (the cluster speaks TLS only), "
                f"got {address!r}"
            )
        self.address, self.certs, self.notebook_deadline = address, Path(certs), notebook_deadline
        self.connect_seconds = connect_seconds  # reaching the scheduler, and reaching it again once lost
        self.client = None
        # task key -> when a worker started it, the worker's name and address
        self._started: dict[str, tuple[float, str, str]] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()  # set when a future is done
        self.graded_on: dict[tuple[str, str], tuple[str, float]] = {}  # (student, notebook) -> (worker, seconds)
        self.refused: dict[str, str] = {}  # worker address -> why it graded nothing more of the class

    def connect(self) -> str:
        """Reach the scheduler; a line on its workers. :class:`GradingUnavailable` where it cannot be reached or
        no worker grades."""
        from distributed import Client

        try:
            security = certificates.security(self.certs)
        except certificates.CertificatesMissing as error:
            raise GradingUnavailable(f"grading cannot start, and nothing was scored: {error}") from None
        try:
            self.client = Client(self.address, security=security, timeout=self.connect_seconds, set_as_default=False)
        except (OSError, TimeoutError) as error:
            raise GradingUnavailable(
                f"grading cannot start, and nothing was scored: the scheduler at {self.address} cannot be reached "
                f"({clean_text(error, 300)})"
            ) from None
        self.client.subscribe_topic(TOPIC, self._event)
        return self.describe()

    def describe(self) -> str:
        """The scheduler and its grading workers, in words; :class:`GradingUnavailable` where none grades."""
        workers = self.workers()
        if not workers:
            raise GradingUnavailable(
                f"grading cannot start, and nothing was scored: the scheduler at {self.address} has no grading worker "
                "(start one on each grading host: make grade-worker SCHEDULER=...)"
            )
        return f"{self.address}, {len(workers)} grading worker(s), {sum(workers.values()):g} notebook(s) at once"

    def workers(self) -> dict[str, float]:
        """The scheduler's workers that grade, by address: how many notebooks each takes at once."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        slots = {address: (w.get("resources") or {}).get(RESOURCE, 0) for address, w in info.items()}
        return {address: n for address, n in slots.items() if n}

    def _event(self, event) -> None:
        _, message = event
        with self._lock:
            if isinstance(message, dict) and "started" in message:
                when = (time.monotonic(), str(message.get("worker", "")), str(message.get("address", "")))
                self._started[str(message["started"])] = when

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def graded(
        self,
        assignment: str,
        work: list[tuple[str, str, Path, Inputs]],
        release: course.Release,
        limits: Limits,
        progress: bool = True,
    ) -> Iterator[tuple[str, str, Report, str]]:
        """Each notebook of ``work`` (student, notebook, path, the instructor's inputs) graded on the cluster, as
        it comes: (student, notebook, report, where and how long, in words)."""
        sending = _Sending(self, assignment, release, limits)
        bar = tqdm(total=len(work), desc=f"grading {assignment} on {self.address}", unit="notebook",
                   disable=not progress, file=sys.stderr)  # fmt: skip
        try:
            for job in work:
                report = sending.start(job)
                if report is not None:  # graded here (too large to read), or no worker would grade it
                    bar.update()
                    yield job[0], job[1], report, ""
            while sending.pending:
                self._ready.wait(1.0)
                self._ready.clear()
                for graded in sending.received(len(work)):
                    bar.update()
                    done_by = Counter(worker for worker, _ in self.graded_on.values())
                    bar.set_postfix_str(", ".join(f"{w}: {n}" for w, n in sorted(done_by.items())))
                    yield graded
        finally:
            bar.close()
            for future in sending.pending:
                future.cancel()

    def summary(self) -> list[str]:
        """Lines for make grade's summary: each worker's notebooks and seconds, each notebook's worker, and the
        workers that refused the class, with why."""
        if not self.graded_on and not self.refused:
            return []
        lines = [f"Graded on the cluster at {self.address}: {len(self.graded_on)} notebook(s)"]
        by_worker: dict[str, list[float]] = {}
        for worker, seconds in self.graded_on.values():
            by_worker.setdefault(worker, []).append(seconds)
        lines += [f"  worker {w}: {len(s)} notebook(s), {sum(s):.1f} s in all" for w, s in sorted(by_worker.items())]
        lines += [
            f"  {clean_text(student, 200)}: {name} on worker {worker} in {seconds:.1f} s"
            for (student, name), (worker, seconds) in sorted(self.graded_on.items())
        ]
        lines += [f"  refused the class: {why}" for why in self.refused.values()]
        return lines

    def restart(self, address: str) -> None:
        """Start the worker at ``address`` again (its nanny does), since a notebook past the deadline holds one of
        its threads, which Dask cannot stop: its other notebooks are graded again."""
        with contextlib.suppress(Exception):  # gone already: Dask runs its notebooks elsewhere
            self.client.restart_workers([address], timeout=RESTART_SECONDS, raise_for_error=False)

    def _overdue(self, pending: dict, bound: float) -> list:
        now = time.monotonic()
        with self._lock:
            return [f for f in pending if f.key in self._started and now - self._started[f.key][0] > bound]


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read(MAX_NOTEBOOK_BYTES + 1)


def _accepted(assignment: str, name: str, answer: dict, expected: Inputs) -> tuple[Report, str]:
    """The worker's report, where it was graded from the instructor's own inputs; else not graded, saying which."""
    worker = clean_text(answer.get("worker", "?"), 100)
    try:
        inputs = Inputs(**answer["inputs"])
        report = Report.from_json(answer["report"])
    except (KeyError, TypeError, ValueError) as error:
        return _not_graded(assignment, name, f"worker {worker} sent no readable report ({clean_text(error, 200)})"), ""
    differs = differences(inputs, expected)
    if differs:
        return _not_graded(assignment, name, f"worker {worker} graded it from other inputs than these: {differs}"), ""
    host = clean_text(answer.get("host", ""), 100)
    return report, f"graded on worker {worker}{f' ({host})' if host else ''} in {float(answer.get('seconds', 0)):.1f} s"


def _failed(assignment: str, name: str, error: BaseException) -> Report:
    from distributed.scheduler import KilledWorker

    if isinstance(error, KilledWorker):
        why = "it stopped every grading worker it was tried on (the grader's failure: the rest of the class is graded)"
    else:
        why = f"the grading worker failed: {clean_text(f'{type(error).__name__}: {error}', 300)}"
    return _not_graded(assignment, name, why)


def _not_graded(assignment: str, name: str, why: str) -> Report:
    return Report(assignment, name, not_graded=f"the cluster: {why}")


def _lost(address: str, received: int, total: int) -> GradingUnavailable:
    return GradingUnavailable(
        f"the scheduler at {address} was lost after {received} of {total} notebook(s): their reports are saved; "
        "make grade again sends only the notebooks that have none"
    )


class _Sending:
    """One class's notebooks on their way: the tasks pending, and what each answer makes of its notebook."""

    def __init__(self, cluster: Cluster, assignment: str, release: course.Release, limits: Limits):
        self.cluster, self.assignment, self.release, self.limits = cluster, assignment, release, limits
        self.bound = cluster.notebook_deadline or deadline(limits)
        self.pending: dict = {}  # future -> its job
        self.allowed: dict = {}  # future -> the workers it may run on (None: any)

    def start(self, job: tuple[str, str, Path, Inputs]) -> Report | None:
        """Send ``job``'s notebook to a worker that has not refused the class; else its report, made here."""
        student, name, path, inputs = job
        if os.path.getsize(path) > MAX_NOTEBOOK_BYTES:  # refused by its size, as a local grading refuses it
            from autograder.grading.notebook import grade_notebook

            return grade_notebook(self.assignment, path, notebook=name, release=self.release)
        refused = self.cluster.refused
        # where a worker refused the class, the others by address (a worker restarted has another: see received)
        allowed = [address for address in self.cluster.workers() if address not in refused] if refused else None
        if allowed == []:
            why = f"no grading worker would grade it ({'; '.join(refused.values())})"
            return _not_graded(self.assignment, name, why)
        release = [self.release.edition, sorted(self.release.released)]
        future = self.cluster.client.submit(
            grade, self.assignment, name, _read(path), asdict(inputs), release, asdict(self.limits),
            key=f"grade-{self.assignment}-{name}-{uuid.uuid4().hex}", pure=False, resources={RESOURCE: 1},
            workers=allowed, allow_other_workers=False,
        )  # fmt: skip
        self.pending[future] = job
        self.allowed[future] = allowed
        future.add_done_callback(lambda _: self.cluster._ready.set())
        return None

    def received(self, total: int) -> Iterator[tuple[str, str, Report, str]]:
        """The notebooks whose answers came, or whose deadline passed; a refused one is sent on to another worker.
        :class:`GradingUnavailable` where the scheduler is lost."""
        from distributed.client import FutureCancelledError

        yield from self._resent_where_no_worker_may_take_it()
        finished = [future for future in self.pending if future.done()]
        if not finished and self.cluster.client.status not in ("running", "connecting"):
            raise _lost(self.cluster.address, total - len(self.pending), total)
        for future in finished:
            job = self.pending.pop(future)
            self.allowed.pop(future, None)
            try:
                answer = future.result()
            except FutureCancelledError:
                raise _lost(self.cluster.address, total - len(self.pending) - 1, total) from None
            except Exception as error:  # KilledWorker: it stopped every worker it was tried on
                yield job[0], job[1], _failed(self.assignment, job[1], error), ""
                continue
            if "refused" in answer:
                who = clean_text(f"worker {answer.get('worker', '?')} ({answer.get('address', '?')})", 200)
                self.cluster.refused[str(answer.get("address"))] = f"{who}: {clean_text(answer['refused'], 600)}"
                report = self.start(job)
                if report is not None:
                    yield job[0], job[1], report, ""
                continue
            report, where = _accepted(self.assignment, job[1], answer, job[3])
            if where:
                worker = clean_text(answer["worker"], 100)
                self.cluster.graded_on[job[0], job[1]] = (worker, float(answer.get("seconds", 0)))
            yield job[0], job[1], report, where
        for future in self.cluster._overdue(self.pending, self.bound):
            job = self.pending.pop(future)
            self.allowed.pop(future, None)
            future.cancel()
            _, worker, address = self.cluster._started[future.key]
            self.cluster.restart(address)
            why = f"worker {clean_text(worker, 100)} started it and sent no report within {self.bound:g} s"
            yield job[0], job[1], _not_graded(self.assignment, job[1], why), ""

    def _resent_where_no_worker_may_take_it(self) -> Iterator[tuple[str, str, Report, str]]:
        """A notebook that may run only on workers that are gone (restarted, their address another), sent again."""
        stuck = [f for f, allowed in self.allowed.items() if allowed is not None and not f.done()]
        if not stuck:
            return
        live = set(self.cluster.workers())
        if not live:  # the workers are starting again: wait for them
            return
        for future in stuck:
            if live.isdisjoint(self.allowed[future]):
                job = self.pending.pop(future)
                del self.allowed[future]
                future.cancel()
                report = self.start(job)
                if report is not None:
                    yield job[0], job[1], report, ""
