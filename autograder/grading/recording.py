"""Phases 1 and 4 of ``make grade``, what nbgrader records in the gradebook: the tests, then the scores.

The assignment's test cells (:func:`record_tests`) and each student's scores (:func:`autograde`).

:mod:`autograder.grading.phases` runs them in order with the others; each is a function of one
:class:`~autograder.grading.run.Run`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from autograder.grading import kept, run_nbgrader
from autograder.grading.grader import Grader
from autograder.grading.gradesheet import db_url, stale_written_grades
from autograder.grading.handoff import GradeAgain, NotGraded
from autograder.grading.nbgrader_log import nbgrader_refused
from autograder.grading.run import Run
from autograder.grading.sandboxed import grade_again
from autograder.grading.submissions import notebook_names
from autograder.sandbox.limits import Limits
from autograder.text.terminal import clean_text


def record_tests(run: Run, keep: bool = True) -> None:
    """Phase 1: the assignment's test cells into the gradebook; exercises/ is left alone. Its key kept
    (:mod:`autograder.grading.kept`), so that the next ``make grade`` skips it where nothing it reads changed;
    ``keep=False`` leaves that to the caller, once grading could start."""
    run.saved.forget(kept.TESTS, run.assignment, None)
    with tempfile.TemporaryDirectory() as tmp:
        run_nbgrader.generate([run.assignment], into=Path(tmp), db_url=db_url(run.root), root=run.root, quiet=True)
    run.tests_recorded = True
    if keep:
        run.saved.keep(kept.TESTS, run.assignment, None, {"key": run.keys.tests})


_NOT_GRADED = f"{NotGraded.__module__}.{NotGraded.__name__}:"  # how nbgrader's log names the grader's exceptions
_GRADE_AGAIN = f"{GradeAgain.__module__}.{GradeAgain.__name__}:"


def autograde(run: Run, sandbox: bool = True, grader: Grader | None = None) -> None:
    """Phase 4: ``nbgrader autograde`` records the scores; what it refused, or left without a score, found.

    nbgrader grades nothing itself (``SandboxedExecute.grade_here`` off): a notebook whose phase-3 report does
    not fit nbgrader's copy of it is graded again in the sandbox as phase 3 grades (``JOBS`` at a time, each
    within its time limit) and given to nbgrader again, once (:func:`_grade_again`). A student whose phase-4 inputs
    are unchanged since their last autograde (:mod:`autograder.grading.kept`) is not given to nbgrader again."""
    found = run.found
    # nbgrader warns about every test cell with hidden tests (its checksum changes on release),
    # so only its errors are shown; the summary lists what each student lost. Refused and
    # not-graded submissions are not given to nbgrader: it would follow a link, or record a zero; nor are
    # those of students not on the class list.
    run.excluded = sorted({*found.refused, *found.not_graded, *run.not_listed})
    options = autograde_options(run, sandbox)
    given = [student for student in run.students if student not in run.excluded]
    run.states = _gradebook_states(run, given)
    names = notebook_names(run.assignment, run.root)
    unchanged = [student for student in given if _autograded_before(run, student, names)]
    given = [student for student in given if student not in unchanged]
    run.autograded = set(given)
    kept_scores = f" ({len(unchanged)} unchanged since their last autograde: their scores stand)" if unchanged else ""
    run.say(
        f"[4/6] recording the scores in the gradebook (nbgrader autograde) for {len(given)} student(s){kept_scores}"
    )
    if not given:
        return
    for student, names in stale_written_grades(run.assignment, given, run.root).items():
        note = f"the score given by hand to {', '.join(names)} dropped: the answer's text changed since it was graded"
        run.say(f"  {clean_text(student, 200)}: {note}")
        found.notes[student].append(note)
    refused_by_nbgrader, unexplained = _runautograde(run, given, options)
    again = sorted(student for student, why in refused_by_nbgrader.items() if why.startswith(_GRADE_AGAIN))
    if again:
        for student in again:
            del refused_by_nbgrader[student]
        failed = _grade_again(run, again, grader)
        for student, why in failed.items():
            found.not_graded[student] = why
        again = [student for student in again if student not in failed]
    if again:
        refused_again, unexplained_again = _runautograde(run, again, options)
        refused_by_nbgrader.update(refused_again)
        unexplained += unexplained_again
    for student in unexplained:  # never a silent 0: the grader's failure, to grade again
        found.not_graded[student] = (
            "nbgrader autograde recorded no score for this submission, and its log names no error of its "
            "(it may have stopped before it: see nbgrader's errors)"
        )
    for student, why in list(refused_by_nbgrader.items()):
        if why.startswith(_NOT_GRADED):  # the grader's failure, not a refusal
            found.not_graded[student] = why.split("not graded: ", 1)[-1]
            del refused_by_nbgrader[student]
        elif why.startswith(_GRADE_AGAIN):  # graded again, and nbgrader's copy changed again: never a 0
            found.not_graded[student] = (
                "nbgrader's copy of the notebook did not fit the report of grading it twice in a row; grade again"
            )
            del refused_by_nbgrader[student]
    run.refused_by_nbgrader = refused_by_nbgrader
    done = [s for s in given if s not in found.not_graded and s not in refused_by_nbgrader]
    run.states.update(_gradebook_states(run, done))
    for student in done:
        key = run.keys.autograde(student, found.inputs.get(student, {}))
        if key is not None:
            autograded = run.keys.autograded(student, notebook_names(run.assignment, run.root))
            run.saved.keep(kept.AUTOGRADE, run.assignment, student, {"key": key, "autograded": autograded})


def autograde_options(run: Run, sandbox: bool) -> list[str]:
    """The options of phase 4's ``nbgrader autograde`` (part of its key, :mod:`autograder.grading.kept`)."""
    options = ["--SandboxedExecute.grade_here=False"] if sandbox else []
    default = Limits()
    for name in ("cell_timeout", "call_timeout"):  # the time limits nbgrader's grading here (and its key) uses
        if getattr(run.limits, name) != getattr(default, name):
            options.append(f"--SandboxedExecute.{name}={getattr(run.limits, name)!r}")
    if run.allow_released:
        options.append("--SandboxedExecute.allow_released=True")
    return options


def _gradebook_states(run: Run, students: list[str]) -> dict[str, str | None]:
    """Each student's submission as the gradebook holds it (:func:`autograder.grading.kept.submission_state`), once
    the gradebook holds the assignment's tests: where phase 1 was skipped and it does not (a new gradebook), phase
    1 runs now."""
    from nbgrader.api import Gradebook

    if not (run.root / "gradebook.db").is_file():  # removed since: phase 1 makes it again (nbgrader, with alembic)
        run.tests_recorded = False
    if run.tests_recorded:
        with Gradebook(db_url(run.root)) as gradebook:
            run.tests_recorded = kept.recorded_as_released(gradebook, run.assignment, run.root)
    if not run.tests_recorded:
        run.say(f"  the gradebook does not hold the tests of {run.assignment} as last recorded: recording them")
        record_tests(run)
    if not students:
        return {}
    with Gradebook(db_url(run.root)) as gradebook:
        return {student: kept.submission_state(gradebook, run.assignment, student) for student in students}


def _autograded_before(run: Run, student: str, names: list[str]) -> bool:
    """Whether ``student``'s phase 4 can be skipped: its key is the one kept, nbgrader's autograded copies are as
    it left them and the gradebook holds the submission (not with ``--again``)."""
    if run.again or run.states.get(student) is None:
        return False
    key = run.keys.autograde(student, run.found.inputs.get(student, {}))
    record = run.saved.kept(kept.AUTOGRADE, run.assignment, student) or {}
    if key is not None and record.get("key") == key and record.get("autograded") == run.keys.autograded(student, names):
        return True
    run.saved.forget(kept.AUTOGRADE, run.assignment, student)
    return False


def _runautograde(run: Run, students: list[str], options: list[str]) -> tuple[dict[str, str], list[str]]:
    """``nbgrader autograde`` of ``students`` (the excluded and the rest of the class left out): what it refused,
    with its reasons, and the students it left without a score and without a reason
    (:func:`~autograder.grading.nbgrader_log.nbgrader_refused`)."""
    others = sorted({*run.excluded, *(set(run.students) - set(students))})
    exclude = [f"--CourseDirectory.student_id_exclude={','.join(others)}"] if others else []
    autograde = run_nbgrader.run(
        "autograde",
        run.assignment,
        "--force",
        *exclude,
        *options,
        root=run.root,
        check=False,
        quiet=run.quiet,
        log_level="ERROR",
        env=run.env,
    )
    log = f"{autograde.stdout}\n{autograde.stderr}"
    return nbgrader_refused(run.assignment, students, run.root, log)


def _grade_again(run: Run, students: list[str], grader: Grader | None) -> dict[str, str]:
    """The notebooks of ``students`` whose phase-3 reports did not fit nbgrader's copies, graded in the sandbox
    (:func:`~autograder.grading.sandboxed.grade_again`): student -> why, for those the grader could not grade."""
    run.say(
        f"grading {run.assignment} again for {len(students)} student(s), {run.jobs} at a time: nbgrader's copy of "
        "their notebook runs other code than the one graded in phase 3"
    )
    own = grader is None
    grader = Grader(spawn=True) if own else grader
    try:
        with grader:
            return grade_again(
                run.assignment,
                students,
                run.root,
                run.jobs,
                run.settings,
                grader,
                progress=not run.quiet,
                limits=run.limits,
            )
    finally:
        if own:
            grader.close()
