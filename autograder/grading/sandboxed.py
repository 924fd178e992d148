"""Phase 3 of ``make grade``: every submitted notebook of the class graded in the sandbox, ``jobs`` at a time.

Each notebook's report is saved where nbgrader's grading step reads it
(:func:`autograder.grading.handoff.report_path`); what the pass found for each student (notes, the
refused, the not graded, the notebooks that answer nothing) is :class:`Precomputed`. Phase 4 grades the
same way (:func:`grade_again`) a notebook whose report does not fit the copy that nbgrader grades.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tqdm import tqdm

from attention_course.tooling import notebooks
from autograder.grading.grader import Grader
from autograder.grading.handoff import as_submitted, pending_path, report_path, saved_reports
from autograder.grading.report import Report
from autograder.grading.saved import Class, Decision, Inputs, Saved
from autograder.grading.source import MAX_NOTEBOOK_BYTES, Source, unanswered
from autograder.grading.submissions import names_list, notebook_names, refusals, submitted_notebooks
from autograder.release import course
from autograder.sandbox.limits import Limits
from autograder.text.terminal import clean_text


@dataclass
class Precomputed:
    """What the sandboxed pass found: notes per student, and the students that nbgrader must not grade."""

    notes: dict[str, list[str]]
    refused: dict[str, str] = field(default_factory=dict)  # student -> why (scored 0)
    not_graded: dict[str, str] = field(default_factory=dict)  # student -> why (the grader's failure)
    unanswered: dict[str, list[str]] = field(default_factory=dict)  # student -> notebooks with nothing answered
    # student -> what phase 3 did with each notebook and why (grading/saved): graded, or its saved report used
    decisions: dict[str, list[str]] = field(default_factory=dict)
    # student -> notebook -> the inputs it was graded from (None: not comparable), for phase 4's key (grading/kept)
    inputs: dict[str, dict[str, Inputs | None]] = field(default_factory=dict)


@dataclass
class Plan:
    """What phase 3 will do: each notebook to grade or whose saved report serves (:mod:`autograder.grading.saved`),
    and what was found on the way (notes on missing notebooks, the refused, each student's decisions)."""

    found: Precomputed
    decided: list[tuple]  # (student, notebook, path, Inputs, Decision)
    saved: Saved

    @property
    def to_run(self) -> int:
        """How many notebooks the sandbox will run (a saved report serves the others)."""
        return sum(1 for *_, decision in self.decided if decision.report is None)

    def lines(self) -> list[str]:
        """One line per student graded: what is done with their notebooks and why."""
        return [f"  {clean_text(student, 200)}: {'; '.join(whys)}" for student, whys in self.found.decisions.items()]


def plan(
    assignment: str,
    students: list[str],
    root: Path,
    settings: course.Release,
    refused: dict[str, str] | None = None,
    again: bool = False,
    limits: Limits | None = None,
) -> Plan:
    """The notebooks of the students not ``refused`` (default: :func:`~autograder.grading.submissions.refusals`),
    each to grade, or its saved report to use where nothing graded changed since (under the same ``limits``),
    unless ``again``."""
    refused = refusals(assignment, students, root) if refused is None else refused
    found = Precomputed({student: [] for student in students}, refused=dict(refused))
    shared, saved = Class(assignment, root, settings, limits), Saved(root)
    decided = []
    for student, name, path in _notebooks_to_grade(assignment, students, root, found):
        try:
            inputs = shared.inputs(name, path)
        except OSError:  # graded as it is (the report says why it cannot be read), and nothing saved
            inputs, decision = (
                None,
                Decision(None, "graded: the notebook cannot be read to compare with its last grade"),
            )
        else:
            decision = saved.decide(assignment, student, name, inputs, again)
        decided.append((student, name, path, inputs, decision))
        found.inputs.setdefault(student, {})[name] = inputs
        found.decisions.setdefault(student, []).append(decision.why)
    return Plan(found, decided, saved)


def precompute(
    assignment: str,
    students: list[str],
    root: Path,
    jobs: int,
    progress: bool = True,
    isolation: str = "bwrap",
    settings: course.Release | None = None,
    refused: dict[str, str] | None = None,
    grader: Grader | None = None,
    again: bool = False,
    planned: Plan | None = None,
    limits: Limits | None = None,
    remote: Remote | None = None,
) -> Precomputed:
    """Grade every submitted notebook in a sandbox, ``jobs`` at a time; save the reports. ``refused``:
    the students not to grade, with why (default: :func:`~autograder.grading.submissions.refusals`).
    ``grader``: the :class:`~autograder.grading.grader.Grader` that grades them (default: one each).
    A notebook whose saved report still fits it (:mod:`autograder.grading.saved`: nothing graded changed since)
    is not run again: that report serves, unless ``again``. ``planned``: the :func:`plan` made already (then
    ``refused``, ``again`` and ``limits`` are its). ``limits``: the sandbox's (default: its defaults).
    ``remote``: where the notebooks to run are graded instead of here (:class:`Remote`: a cluster); the reports
    are saved here alike."""
    release = settings or course.release(root)
    limits = limits or Limits()
    planned = planned or plan(assignment, students, root, release, refused, again, limits)
    found, decided, saved = planned.found, planned.decided, planned.saved

    def run(student: str, name: str, path: Path, inputs: Inputs | None, decision: Decision) -> tuple[str, str, Report]:
        report = decision.report
        if report is None:
            from autograder.grading.notebook import grade_notebook  # torch: imported only where a notebook runs

            report = grade_notebook(
                assignment, path, notebook=name, isolation=isolation, release=release, grader=grader, limits=limits
            )
            if inputs is not None:
                saved.save(assignment, student, name, inputs, report)
        _save(report, root, assignment, student, name)
        return student, name, report

    if remote is None or not planned.to_run:
        results = _in_parallel(run, decided, jobs, f"grading {assignment}", progress)
    else:
        results = _remotely(remote, assignment, root, planned, release, limits, progress)
    for student, name, report in results:
        if report.not_graded:
            found.not_graded[student] = report.not_graded
            continue
        if report.tests and report.score == 0 and nothing_answered(assignment, name, student, root):
            found.unanswered.setdefault(student, []).append(name)
        found.notes[student] += report.notes
        found.notes[student] += [
            f"{report.cell_name(i)}: {report.cell_errors[i].splitlines()[0][:160]}"
            for i in sorted(report.cell_errors)
            if i in report.skipped or report.cell_errors[i].startswith(("MemoryError", "BlockingIOError"))
        ]
    return found


class Remote(Protocol):
    """Graders on other machines (:class:`autograder.cluster.client.Cluster`): each notebook of ``work`` (student,
    notebook, path, its inputs) graded there, as it comes, with where and how long in words ('' where none)."""

    def describe(self) -> str:
        """Where, in words (the workers and how many notebooks they take at once)."""

    def graded(
        self, assignment: str, work: list[tuple], release: course.Release, limits: Limits, progress: bool
    ) -> Iterator[tuple[str, str, Report, str]]: ...


def _remotely(remote: Remote, assignment: str, root: Path, planned: Plan, release, limits, progress: bool):
    """:func:`precompute`'s results where ``remote`` grades: the saved reports that serve, then each notebook
    graded there, saved and signed here as it comes (so that a grading stopped half way keeps what it received)."""
    found, saved = planned.found, planned.saved
    work, inputs_of = [], {}
    for student, name, path, inputs, decision in planned.decided:
        if decision.report is not None:
            _save(decision.report, root, assignment, student, name)
            yield student, name, decision.report
        elif inputs is None:  # unreadable here: graded here, where the report says why
            from autograder.grading.notebook import grade_notebook

            report = grade_notebook(assignment, path, notebook=name, release=release, limits=limits)
            _save(report, root, assignment, student, name)
            yield student, name, report
        else:
            work.append((student, name, path, inputs))
            inputs_of[student, name] = inputs
    for student, name, report, where in remote.graded(assignment, work, release, limits, progress):
        saved.save(assignment, student, name, inputs_of[student, name], report)
        _save(report, root, assignment, student, name)
        if where:
            found.decisions.setdefault(student, []).append(f"{name} {where}")
        yield student, name, report


def _save(report: Report, root: Path, assignment: str, student: str, name: str) -> None:
    target = report_path(root, assignment, student, name)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(report.to_json())


def grade_again(
    assignment: str,
    students: list[str],
    root: Path,
    jobs: int,
    settings: course.Release,
    grader: Grader,
    progress: bool = True,
    limits: Limits | None = None,
) -> dict[str, str]:
    """Phase 4's: each notebook of ``students`` that nbgrader saved for grading again (its copy, which the
    phase-3 report does not fit: :func:`~autograder.grading.handoff.pending_path`) graded in the sandbox as
    phase 3 grades, ``jobs`` at a time, each within its time limit, its report saved where nbgrader reads it.
    Returns student -> why, for those whose notebook could not be graded (the grader's failure)."""
    from autograder.grading.notebook import grade_notebook

    work = [
        (student, name, pending_path(root, assignment, student, name))
        for student in students
        for name in notebook_names(assignment, root)
    ]
    work = [job for job in work if job[2].is_file()]

    def run(student: str, name: str, path: Path) -> tuple[str, Report]:
        submitted = Path(root) / "submitted" / student / assignment / f"{name}.ipynb"
        report = grade_notebook(
            assignment,
            path,
            notebook=name,
            release=settings,
            grader=grader,
            as_submitted=as_submitted(submitted),
            limits=limits or Limits(),
        )
        _save(report, root, assignment, student, name)
        path.unlink()
        return student, report

    results = _in_parallel(run, work, jobs, f"grading {assignment} again", progress)
    return {student: report.not_graded for student, report in results if report.not_graded}


def _in_parallel(run, work: list[tuple], jobs: int, description: str, progress: bool):
    """``run(*job)`` for each job of ``work``, ``jobs`` at a time, each result as it comes, with a progress bar."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run, *job) for job in work]
        bar = tqdm(as_completed(futures), total=len(futures), desc=description, unit="notebook",
                   disable=not progress, file=sys.stderr)  # fmt: skip
        for future in bar:
            yield future.result()


def _notebooks_to_grade(assignment: str, students: list[str], root: Path, found: Precomputed) -> list[tuple]:
    """``(student, notebook, path)`` of each notebook of the assignment submitted by a student not refused;
    a note in ``found`` on each notebook of the assignment missing, and on those of other names ignored."""
    names = notebook_names(assignment, root)
    work = []
    for student in students:
        if student in found.refused:
            continue
        folder = Path(root) / "submitted" / student / assignment
        present = submitted_notebooks(root, student, assignment)
        for name in names:
            path = folder / f"{name}.ipynb"
            if path.is_file():
                work.append((student, name, path))
            else:  # another of the assignment's notebooks is there (none at all is refused: misnamed)
                others = f" (found: {names_list(present)}; rename it and grade again)" if present else ""
                found.notes[student].append(f"missing {name}.ipynb{others}")
        others = [name for name in present if name.removesuffix(".ipynb") not in names]
        if others and student in {job[0] for job in work}:
            found.notes[student].append(
                f"ignored {names_list(others)}: grading reads {' and '.join(f'{n}.ipynb' for n in names)} only"
            )
    return work


def nothing_answered(assignment: str, name: str, student: str, root: Path) -> bool:
    """Whether the student's notebook ``name`` answers nothing: its code is the released notebook's
    (``exercises/``), as :func:`autograder.grading.source.unanswered` compares them. False where either
    cannot be read (the grader's report says why), or the submission is larger than the grader reads."""
    submitted = Path(root) / "submitted" / student / assignment / f"{name}.ipynb"
    released = Path(root) / "exercises" / assignment / f"{name}.ipynb"
    try:
        if submitted.is_symlink() or submitted.stat().st_size > MAX_NOTEBOOK_BYTES:
            return False
        return unanswered(Source.load(assignment, name, root), notebooks.read(submitted), notebooks.read(released))
    except Exception:  # an unreadable notebook, or no released one: the report says what was graded
        return False


def sandbox_score(root: Path, assignment: str, student: str) -> str:
    """What the sandboxed grader's reports give the student ('' if there are none)."""
    names = notebook_names(assignment, root)
    reports = list(saved_reports(root, assignment, student, names).values())
    if not reports or len(reports) < len(names) or any(r.not_graded for r in reports):
        return ""
    return f"{sum(r.score for r in reports):g} / {sum(r.max_score for r in reports):g}"
