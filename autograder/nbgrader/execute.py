"""nbgrader's execute step done by the sandboxed grader (``SandboxedExecute``), its outcome written as outputs.

``nbgrader autograde`` still sanitises each submission (restoring test cells, read-only cells and
points from the gradebook, with :class:`autograder.nbgrader.restore_cells.RestoreTestCells`), then
calls :class:`SandboxedExecute` instead of running the notebook in a Jupyter kernel. It grades the
notebook with :func:`autograder.grading.notebook.grade_notebook` and writes the outcome as cell
outputs: nothing in a test cell that passed, the check's message as an error in one that failed, and
each student cell's error, if any. nbgrader then reads the scores from those outputs as usual
(``SaveAutoGrades``).

``make grade`` grades the submissions in parallel first and leaves a report per
notebook under ``grades/reports/``; a report whose key matches (the same
student code, instructor notebook, limits and release) is used instead of grading
again, and a report that cannot be used is said so in nbgrader's log. Both read a
submission's cells as :func:`autograder.grading.source.roles` does, so moving or copying
a cell's metadata leaves the key as it was. Where a report cannot be used all the same,
plain ``nbgrader autograde`` grades the notebook here; ``make grade`` turns that off
(``grade_here``): the notebook as nbgrader is about to grade it is saved beside the report
(:func:`~autograder.grading.handoff.pending_path`) and :class:`~autograder.grading.handoff.GradeAgain` raised,
and ``make grade`` grades the saved notebooks in the sandbox, ``JOBS`` at a time, each within its time limit,
then gives them to nbgrader again (:mod:`autograder.grading.phases`): one notebook never holds up the class.

A notebook that is a symbolic link (nbgrader would have read its target: perhaps a
file of ``solutions/``) is refused: its cells are replaced by a note, so that
nothing of the target reaches the autograded notebook or the feedback. A notebook
that the grader could not grade (:class:`~autograder.sandbox.errors.SandboxUnavailable`)
raises :class:`~autograder.grading.handoff.NotGraded`, so that nbgrader reports it for that student instead of
recording a score.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_markdown_cell, new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, TraitError, Unicode, validate

from attention_course.tooling.notebooks import cell_id, is_test
from autograder.grading.handoff import GradeAgain, NotGraded, as_submitted, pending_path, report_path
from autograder.grading.report import Report
from autograder.grading.source import Source, submission_key
from autograder.release import course
from autograder.sandbox.limits import Limits
from autograder.text.terminal import clean_text


def error_output(ename: str, message: str):
    return new_output("error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])


def apply_report(nb, report: Report) -> None:
    """Replace the notebook's outputs with what grading found."""
    count = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        count += 1
        cell.execution_count = count
        cell.outputs = []
        gid = cell_id(cell)
        if is_test(cell):
            result = report.tests.get(gid)
            if result is None:
                cell.outputs = [error_output("GradingError", f"{gid} is not a test of this assignment")]
            elif result.partial:  # nbgrader reads a share of the points from the cell's result (determine_grade)
                head = f"PartlyRight: {result.partial:g} of {result.points:g} points\n"
                cell.outputs = [
                    new_output("stream", name="stdout", text=head + result.message),
                    new_output("execute_result", data={"text/plain": f"{result.partial:g}"}, execution_count=count),
                ]
            elif not result.passed:
                cell.outputs = [error_output("CheckFailed", result.message)]
        elif index in report.cell_errors:
            name, _, message = report.cell_errors[index].partition(": ")
            cell.outputs = [error_output(name if name.isidentifier() else "Error", message or name)]
        if not is_test(cell) and gid in report.cell_notes:  # a copied answer cell: which copy the tests used
            note = new_output("stream", name="stdout", text=f"Note from the grader: {report.cell_notes[gid]}\n")
            cell.outputs = [note, *cell.outputs]
    if report.notes:
        nb.metadata["autograder"] = {"notes": report.notes}


class SandboxedExecute(NbGraderPreprocessor):
    """Grade the notebook in a sandbox (see :mod:`autograder.grading`) and record the outcome as outputs."""

    isolation = Unicode("bwrap", help="'bwrap' (bubblewrap sandbox) or 'none' (separate process only)").tag(config=True)
    allow_released = Bool(
        False,
        help="grade a term's assignment whose solutions are released (make grade's --allow-released)",
    ).tag(config=True)
    cell_timeout = Float(
        Limits().cell_timeout, help="seconds for one notebook cell in the sandbox (make grade's --cell-timeout)"
    ).tag(config=True)
    call_timeout = Float(
        Limits().call_timeout,
        help="seconds for one call of a graded function in the sandbox (make grade's --call-timeout)",
    ).tag(config=True)
    grade_here = Bool(
        True,
        help="grade here a notebook that has no saved report of its key; make grade turns it off: such a "
        "notebook is saved for make grade to grade in the sandbox, JOBS at a time (GradeAgain)",
    ).tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        assignment, notebook, student = info["assignment"], info["notebook"], info["student"]
        settings = course.release(Path.cwd())
        refusal = course.grading_refusal(assignment, settings, self.allow_released)
        if refusal:  # the same refusal as make grade's, for plain nbgrader autograde
            raise course.ReleasedRefusal(f"{student}/{assignment}: not graded: {refusal}")
        note = course.open_edition_note(settings)
        if note and not getattr(self, "_noted", False):
            self.log.warning("%s", note)
            self._noted = True
        submitted = Path.cwd() / "submitted" / student
        linked = [
            p
            for p in (submitted, submitted / assignment, submitted / assignment / f"{notebook}.ipynb")
            if p.is_symlink()
        ]
        if linked:
            why = "refused: the submission holds a symbolic link; submit the notebook file itself"
            self.log.warning("%s/%s: %s", student, assignment, why)
            nb.cells = [new_markdown_cell(why)]
            return nb, resources
        report = self._saved_report(nb, assignment, notebook, student)
        if report is None and not self.grade_here:  # make grade: graded in the sandbox, beside the others
            pending = pending_path(Path.cwd(), assignment, student, notebook)
            pending.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, str(pending))
            raise GradeAgain(f"{student}/{assignment}/{notebook}: no report of the notebook as nbgrader grades it")
        if report is None:  # plain nbgrader autograde, not make grade: graded here
            from autograder.grading.notebook import grade_notebook  # torch, imported only to grade

            report = grade_notebook(
                assignment,
                nb,
                notebook=notebook,
                limits=self._limits(),
                isolation=self.isolation,
                release=settings,
                as_submitted=as_submitted(submitted / assignment / f"{notebook}.ipynb"),
            )
        if report.not_graded:
            raise NotGraded(f"{student}/{assignment}/{notebook}: not graded: {report.not_graded}")
        for note in report.notes:
            self.log.warning("%s/%s: %s", student, assignment, clean_text(note, 500))
        apply_report(nb, report)
        return nb, resources

    @validate("cell_timeout", "call_timeout")
    def _positive(self, proposal):
        if not proposal["value"] > 0:
            raise TraitError(
                f"SandboxedExecute.{proposal['trait'].name} must be more than 0 seconds, got {proposal['value']:g}"
            )
        return proposal["value"]

    def _limits(self) -> Limits:
        """The sandbox's limits, with the time limits this preprocessor is configured with."""
        return Limits(cell_timeout=self.cell_timeout, call_timeout=self.call_timeout)

    def _saved_report(self, nb, assignment: str, notebook: str, student: str) -> Report | None:
        path = report_path(Path.cwd(), assignment, student, notebook)
        if not path.is_file():
            return None
        try:
            report = Report.from_json(path.read_text())
            source = Source.load(assignment, notebook)
            key = submission_key(source, nb, self._limits(), course.release(Path.cwd()))
        except Exception as error:
            self.log.warning(
                "%s/%s: the saved report %s cannot be used (%s); grading the notebook again",
                student,
                assignment,
                path,
                type(error).__name__,
            )
            return None
        if report.key != key:
            self.log.info(
                "%s/%s: the saved report is for other code, tests, limits or release; grading again",
                student,
                assignment,
            )
            return None
        return report
