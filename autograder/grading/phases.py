"""Grading a whole class on one assignment as ``make grade`` does: its six phases, in order (:func:`grade`).

Each phase is a function of one :class:`~autograder.grading.run.Run`, which holds what the phases read and what
each leaves for the next; :mod:`autograder.cli.grade` says what each does. ``make grades`` writes the CSV again from the
gradebook (:func:`rewrite_csv`). torch and nbgrader's gradebook are imported where they are first
needed, so that phase 1's nbgrader process starts before this one spends seconds importing them.
"""

from __future__ import annotations

import contextlib
import csv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from attention_course.tooling.notebooks import COURSE_ROOT
from autograder.exchange import ClassListError
from autograder.grading import kept, lateness, run_nbgrader
from autograder.grading.feedback import FEEDBACK_SECONDS, write_feedback_in_parallel
from autograder.grading.feedback_pages import write_feedback_pages
from autograder.grading.grader import Grader
from autograder.grading.gradesheet import (
    Result,
    as_graded,
    collect,
    column_order,
    db_url,
    unanswered_note,
    write_csv,
)
from autograder.grading.recording import autograde, autograde_options, record_tests
from autograder.grading.run import GradingUnavailable, Run
from autograder.grading.sandboxed import Precomputed, Remote, plan, precompute, sandbox_score
from autograder.grading.saved import Saved
from autograder.grading.submissions import class_of, notebook_names, refusals
from autograder.release import course
from autograder.sandbox.limits import Limits
from autograder.text.terminal import clean_text


def grade(
    assignment: str,
    root: Path = COURSE_ROOT,
    quiet: bool = False,
    jobs: int = 1,
    sandbox: bool = True,
    settings: course.Release | None = None,
    feedback_seconds: float = FEEDBACK_SECONDS,
    allow_released: bool = False,
    grader: Grader | None = None,
    again: bool = False,
    limits: Limits | None = None,
    remote: Remote | None = None,
) -> list[Result]:
    """Grade every submission of ``assignment`` under ``root``; see :mod:`autograder.cli.grade`.

    ``sandbox=False`` skips the parallel sandboxed pass and leaves execution to
    whatever ``nbgrader autograde`` is configured with (for comparisons). ``settings``: the
    release whose packages the sandbox offers (default: the course's ``term.yml`` and
    environment); nbgrader's own run is given the same. ``feedback_seconds``: the most that
    writing one notebook's feedback may take (:func:`~autograder.grading.feedback.write_feedback`).
    ``grader``: the :class:`~autograder.grading.grader.Grader` of the sandboxed pass (default: one of its
    own, for this grading). Raises :class:`GradingUnavailable` when the sandbox does not work; then
    nothing is scored. Raises :class:`autograder.release.course.ReleasedRefusal` for a term's released
    assignment unless ``allow_released`` (nbgrader's own run, through the course's plugin, is told the same).
    A notebook graded before whose inputs are all unchanged is not run again: its saved report serves
    (:mod:`autograder.grading.saved`); ``again`` grades every notebook all the same. Phases 1, 4 and 5 are
    skipped likewise where nothing they read changed (:mod:`autograder.grading.kept`: a score given by hand
    changes the feedback's key), so that the gradebook (scores given by hand kept), the feedback and the CSV
    (phase 6, always written from the gradebook) are up to date. ``limits``: the sandbox's
    :class:`~autograder.sandbox.limits.Limits` for every notebook (default: its defaults); nbgrader's own run is
    given the same time limits, and a saved report serves only a grading with the limits it was made with.
    ``remote``: where phase 3 grades the notebooks to run (:class:`~autograder.grading.sandboxed.Remote`: a cluster,
    :mod:`autograder.cluster`), connected already; phase 2 then asks it instead of this machine's sandbox.
    """
    run = _start(assignment, Path(root), quiet, jobs, settings, feedback_seconds, allow_released)
    run.remote = remote
    run.again = again
    run.limits = limits or Limits()
    run.keys = kept.Keys(assignment, run.root, run.settings, autograde_options(run, sandbox))
    run.saved = Saved(run.root)
    tests = run.saved.kept(kept.TESTS, assignment, None) or {}
    run.tests_recorded = not again and tests.get("key") == run.keys.tests
    if run.tests_recorded:  # checked against the gradebook before phase 4 (_gradebook_states)
        run.say(f"[1/6] the tests of {assignment} are in the gradebook as recorded last time (nothing they come from "
                "changed): not recorded again")  # fmt: skip
        run.found = _grade_in_sandbox(run, sandbox, grader)  # phases 2 and 3
    else:
        run.say(f"[1/6] recording the tests of {assignment} in the gradebook (in the background)")
        with ThreadPoolExecutor(1) as background:  # leaving it waits for phase 1, whatever happened
            recording = background.submit(record_tests, run, keep=False)
            run.found = _grade_in_sandbox(run, sandbox, grader)  # phases 2 and 3
            recording.result()
        run.saved.keep(kept.TESTS, assignment, None, {"key": run.keys.tests})  # once grading started, not before
    autograde(run, sandbox, grader)  # phase 4
    _settle_lateness(run)  # phase 4's end: the term's deadline in the gradebook
    _write_feedback(run)  # phase 5
    return _write_grades(run)  # phase 6


def _start(
    assignment: str,
    root: Path,
    quiet: bool,
    jobs: int,
    settings: course.Release | None,
    feedback_seconds: float,
    allow_released: bool,
) -> Run:
    """The run, once the release allows grading the assignment and there is something to grade: the students
    on the class list, if one is given (:func:`~autograder.grading.submissions.class_of`)."""
    settings = settings or course.release(root)
    refusal = course.grading_refusal(assignment, settings, allow_released)
    if refusal:
        raise course.ReleasedRefusal(refusal)
    try:
        found = class_of(assignment, root)
    except ClassListError as error:
        raise GradingUnavailable(f"grading cannot start, and nothing was scored: {error}") from None
    students = found.students
    if not students:
        unlisted = f" of a student on the class list {found.class_list}" if found.not_listed else ""
        raise SystemExit(f"nothing to grade: no folder submitted/<student>/{assignment}/{unlisted} under {root}")
    return Run(
        assignment, root, students, settings, quiet, jobs, feedback_seconds, allow_released, not_listed=found.not_listed
    )


def _grade_in_sandbox(run: Run, sandbox: bool, grader: Grader | None) -> Precomputed:
    """Phases 2 and 3: the preflight, then every submission graded in the sandbox (nothing without ``sandbox``)."""
    if not sandbox:
        return Precomputed({student: [] for student in run.students})
    own = grader is None
    grader = Grader(spawn=True) if own else grader
    try:
        refused = refusals(run.assignment, run.students, run.root)
        planned = plan(run.assignment, run.students, run.root, run.settings, refused, run.again, run.limits)
        # the grader's settings (torch's threads: torch imported) only where a notebook runs
        with grader if planned.to_run else contextlib.nullcontext():
            if planned.to_run and run.remote is not None:
                run.say(f"[2/6] {planned.to_run} notebook(s) to grade on the cluster: {run.remote.describe()}")
            elif planned.to_run:
                from autograder.grading.notebook import preflight  # torch, imported only where a notebook runs

                run.say("[2/6] checking that the sandbox works (a program known to be right)")
                problem = preflight(run.settings, grader=grader)
                if problem:
                    raise GradingUnavailable(f"grading cannot start, and nothing was scored: {problem}")
            else:  # nothing to run: the sandbox is not started (phase 4 grades with it only where nbgrader asks)
                run.say("[2/6] no notebook to run (each saved report serves): the sandbox is not started")
            also = f" ({len(refused)} refused, see the summary)" if refused else ""
            graded = len(run.students) - len(refused)
            served = len(planned.decided) - planned.to_run
            reused = f"; {served} notebook(s) not run again, their saved reports serve (--again runs them)"
            where = "on the cluster" if run.remote is not None else f"in the sandbox, {run.jobs} at a time"
            run.say(f"[3/6] grading {graded} submission(s) {where}{also}" + (reused if served else ""))
            for line in planned.lines():
                run.say(line)
            found = precompute(
                run.assignment,
                run.students,
                run.root,
                run.jobs,
                progress=not run.quiet and planned.to_run > 0,
                settings=run.settings,
                grader=grader,
                planned=planned,
                limits=run.limits,
                remote=run.remote,
            )
            for why in grader.unspawned().values():  # slower, and nothing lost: said, so that it can be mended
                run.say(f"note: each sandbox started on its own, as the zygote could not be used: {why}")
            return found
    finally:
        if own:
            grader.close()


def _settle_lateness(run: Run) -> None:
    """The end of phase 4: ``term.yml``'s due date, the extensions, each submission's collected time and its late
    penalty in the gradebook (:func:`autograder.grading.lateness.settle`), for phase 5 and 6 to read; the gradebook's
    state of each student then says it, with the words the feedback shows (its key, :mod:`autograder.grading.kept`)."""
    from nbgrader.api import Gradebook

    left_out = {*run.excluded, *run.found.not_graded, *run.refused_by_nbgrader}
    students = [student for student in run.students if student not in left_out]
    with Gradebook(db_url(run.root)) as gradebook:
        words = lateness.settle(gradebook, run.assignment, students, run.root)
        for student in students:
            state = kept.submission_state(gradebook, run.assignment, student)
            run.states[student] = None if state is None else kept.with_words(state, words.get(student, ""))


def _write_feedback(run: Run, label: str = "[5/6] writing") -> None:
    """Phase 5: each student's feedback, by ``nbgrader generate_feedback``, each notebook within the time limit;
    not written again where nothing it shows changed since it was written (:mod:`autograder.grading.kept`: the
    autograded copies, the student's scores and comments in the gradebook, ...), its notes kept."""
    left_out = {*run.excluded, *run.found.not_graded, *run.refused_by_nbgrader}
    given = [student for student in run.students if student not in left_out]
    names = notebook_names(run.assignment, run.root)
    keys, unchanged = {}, {}
    for student in given:
        autograded = run.keys.autograded(student, names)
        keys[student] = run.keys.feedback(autograded, run.states.get(student), run.feedback_seconds)
        record = run.saved.kept(kept.FEEDBACK, run.assignment, student) or {}
        fits = keys[student] is not None and record.get("key") == keys[student]
        if fits and not run.again and record.get("pages") == run.keys.pages(student, names):
            unchanged[student] = [clean_text(str(note), 500) for note in record.get("notes", [])]
            continue
        run.saved.forget(kept.FEEDBACK, run.assignment, student)
        if record and student not in run.autograded and not run.again:
            if record.get("state") != run.states.get(student):
                why = "feedback written again: the student's scores or comments in the gradebook changed"
            elif fits:
                why = "feedback written again: a page of it was changed or removed since it was written"
            else:
                why = "feedback written again: what it is written from changed"
            run.found.decisions.setdefault(student, []).append(why)
            run.say(f"  {clean_text(student, 200)}: {why}")
    to_write = [student for student in given if student not in unchanged]
    same = f" ({len(unchanged)} unchanged since it was written: kept)" if unchanged else ""
    run.say(f"{label} the feedback of {len(to_write)} student(s) (nbgrader generate_feedback){same}")
    run.feedback_notes, run.stopped = write_feedback_in_parallel(
        run.assignment,
        run.students,
        run.root,
        run.jobs,
        exclude=[student for student in run.students if student not in to_write],
        env=run.env,
        quiet=run.quiet,
        seconds=run.feedback_seconds,
    )
    for student in to_write:
        if keys[student] is not None and student not in run.stopped:
            record = {"key": keys[student], "state": run.states.get(student), "pages": run.keys.pages(student, names)}
            run.saved.keep(
                kept.FEEDBACK, run.assignment, student, {**record, "notes": run.feedback_notes.get(student, [])}
            )
    run.feedback_notes.update({student: notes for student, notes in unchanged.items() if notes})


def _write_grades(run: Run) -> list[Result]:
    """Phase 6: each student's result from the gradebook, with the notes of the phases (and the course's
    feedback pages where nbgrader wrote none), into ``grades/<assignment>.csv``."""
    run.say(f"[6/6] writing grades/{run.assignment}.csv")
    if run.found.refused:  # in the gradebook, with no submission: nbgrader's export lists them with 0
        from nbgrader.api import Gradebook

        with Gradebook(db_url(run.root)) as gradebook:
            for student in run.found.refused:
                gradebook.update_or_create_student(student)
    results = collect(run.assignment, run.students, run.root)
    for result in results:
        _settle(run, result)
    write_csv(run.root / "grades" / f"{run.assignment}.csv", results, column_order(run.assignment, run.root))
    write_class_report(run.assignment, run.root, results, run.say)
    return results


def write_class_report(assignment: str, root: Path, results: list[Result] | None = None, say=print) -> None:
    """The class report (``grades/<assignment>-report.html`` and its figures: :mod:`autograder.grading.class_report`)
    from what grading saved; a failure to write it is said, and costs no grade (the CSV is written already)."""
    from autograder.grading import class_pages, class_report

    try:
        class_pages.write_class(class_report.build(assignment, root, results), Path(root) / "grades")
    except Exception as error:  # the grades stand without it: said, for the instructor to mend and run again
        say(f"note: the class report was not written ({type(error).__name__}: {error}); make class-report "
            f"ASSIGNMENT={assignment} writes it again")  # fmt: skip


def _settle(run: Run, result: Result) -> None:
    """The student's ``result`` as the phases left it: not graded, refused (by the grader or by nbgrader), or
    scored, with the notes of every phase; the course's own feedback pages where nbgrader wrote none."""
    found, student = run.found, result.student
    result.grading = "; ".join(found.decisions.get(student, []))
    if student in found.not_graded:
        result.void(None)
        result.note = f"not graded: {found.not_graded[student]}"
        return
    refusal = found.refused.get(student, "")
    if student in run.refused_by_nbgrader:
        sandboxed = sandbox_score(run.root, run.assignment, student)
        refusal = f"refused by nbgrader: {run.refused_by_nbgrader[student]}" + (
            f" (the sandboxed grader's report gave {sandboxed}; nbgrader recorded no score)" if sandboxed else ""
        )
    if refusal:
        result.void(0.0)
        result.refused = True
    blank = [] if refusal else found.unanswered.get(student, [])
    result.unanswered = bool(blank) and set(blank) >= set(notebook_names(run.assignment, run.root))
    unreleased = write_feedback_pages(
        run.root, run.assignment, result, found.refused, run.refused_by_nbgrader, run.stopped, run.feedback_seconds
    )
    extra = [
        refusal,
        *(unanswered_note(name) for name in blank),
        *found.notes.get(student, []),
        *run.feedback_notes.get(student, []),
        unreleased,
    ]
    result.note = clean_text("; ".join(filter(None, [result.note, *extra])), 4000)


EXPORT = "all.csv"  # nbgrader export's CSV of every assignment, under grades/, which make grades writes


def refresh(
    assignment: str,
    root: Path = COURSE_ROOT,
    jobs: int = 1,
    quiet: bool = False,
    feedback_seconds: float = FEEDBACK_SECONDS,
) -> list[Result]:
    """``make grades``: every output brought up to date from the gradebook, with the scores given by hand since the
    class was graded (formgrader), grading nothing: each late penalty on the score earned now
    (:func:`autograder.grading.lateness.settle`), the feedback of each student whose scores, comments or lateness
    changed since it was written (the others kept, as phase 5 keeps them), ``grades/<assignment>.csv``
    (:func:`rewrite_csv`) and ``grades/all.csv``, ``nbgrader export``'s. A student refused or not graded stays so.
    Raises :class:`GradingUnavailable` where the class was never graded (no CSV)."""
    path = root / "grades" / f"{assignment}.csv"
    if not path.is_file():
        raise GradingUnavailable(f"no {path}: grade the class first (make grade ASSIGNMENT={assignment})")
    with path.open(newline="") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    settings = course.release(root)
    run = Run(assignment, root, list(rows), settings, quiet, jobs, feedback_seconds, allow_released=False)
    left_out = {s: row.get("note") or "" for s, row in rows.items() if (row.get("score") or "") == ""}
    refused = {s: row["note"] for s, row in rows.items() if (row.get("note") or "").startswith("refused")}
    run.found = Precomputed({student: [] for student in rows}, refused=refused, not_graded=left_out)
    run.excluded = sorted({*left_out, *refused})
    run.keys = kept.Keys(assignment, root, settings, [])
    run.saved = Saved(root)
    _settle_lateness(run)
    _write_feedback(run, label="writing again")
    results = rewrite_csv(assignment, root)
    for result in results:
        if result.student in run.stopped:
            note = write_feedback_pages(root, assignment, result, {}, {}, run.stopped, feedback_seconds)
            result.note = clean_text(
                "; ".join(filter(None, [result.note, *run.feedback_notes.get(result.student, []), note])), 4000
            )
    if run.stopped:
        write_csv(path, results, column_order(assignment, root))
    write_class_report(assignment, root, results, run.say)
    run.say(f"writing grades/{EXPORT} (nbgrader export: every assignment, every student)")
    run_nbgrader.run("export", "--to", str(root / "grades" / EXPORT), root=root, quiet=True, env=run.env)
    return results


def rewrite_csv(assignment: str, root: Path = COURSE_ROOT) -> list[Result]:
    """``grades/<assignment>.csv`` written again from the gradebook, with the scores that the instructor has
    given the written answers since (formgrader): the tests' scores are as graded, each student keeps the notes
    of the grading (a refusal, nothing answered, ...), and one who was not graded or was refused stays so."""
    path = root / "grades" / f"{assignment}.csv"
    if not path.is_file():
        raise GradingUnavailable(f"no {path}: grade the class first (make grade ASSIGNMENT={assignment})")
    with path.open(newline="") as f:
        before = {row["student"]: row for row in csv.DictReader(f)}
    from nbgrader.api import Gradebook

    with Gradebook(db_url(root)) as gradebook:  # the late penalties of the scores given by hand since
        lateness.settle(gradebook, assignment, list(before), root)
    results = as_graded(assignment, root, before)
    write_csv(path, results, column_order(assignment, root))
    return results
