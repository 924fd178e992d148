"""The course's plugins for nbgrader (``nbgrader_config.py`` enables them).

:class:`SandboxedExecute` is nbgrader's "execute" step, done by the sandboxed grader.
``nbgrader autograde`` still sanitises each submission (restoring test cells,
read-only cells and points from the gradebook, with :class:`RestoreTestCells`), then calls it
instead of running the notebook in a Jupyter kernel. It grades the notebook
with :func:`autograder.grading.notebook.grade_notebook` and writes the outcome as cell
outputs: nothing in a test cell that passed, the check's message as an error
in one that failed, and each student cell's error, if any. nbgrader then reads
the scores from those outputs as usual (``SaveAutoGrades``).

``make grade`` grades the submissions in parallel first and leaves a report per
notebook under ``grades/reports/``; a report whose key matches (the same
student code, instructor notebook, limits and release) is used instead of grading
again, and a report that cannot be used is said so in nbgrader's log.

A notebook that is a symbolic link (nbgrader would have read its target: perhaps a
file of ``solutions/``) is refused: its cells are replaced by a note, so that
nothing of the target reaches the autograded notebook or the feedback. A notebook
that the grader could not grade (:class:`~autograder.sandbox.process.SandboxUnavailable`)
raises :class:`NotGraded`, so that nbgrader reports it for that student instead of
recording a score.

:class:`HideHiddenTests` shapes the feedback students read: nbgrader's own feedback shows each
test cell as it ran, hidden tests included, and a failing hidden test's traceback quotes the
hidden code. It leaves, for each test cell, the visible tests, a one-line placeholder where the
hidden tests were, and the failing check's message without the traceback.

:class:`InstructorCellRoles` runs first when ``nbgrader autograde`` sanitises a submission: every
cell's nbgrader metadata becomes the instructor's (from the gradebook) or none, so that nbgrader
never refuses a notebook over metadata a student wrote, and its log never quotes a cell because of
it.

:class:`LimitMarkdown` runs first when ``nbgrader generate_feedback`` writes a student's feedback: it
cuts markdown and raw cells too long to show, says so at the top of the feedback, and tells ``make
grade`` (through the file named by ``AUTOGRADER_FEEDBACK_PROGRESS``) which notebook it is writing, so
that a notebook whose feedback takes too long is stopped (:func:`autograder.cli.grade.write_feedback`).
:func:`strip_files_prefix` replaces nbconvert's filter of that name, whose regular expression takes
quadratic time on a line of ``[`` (150,000 of them: minutes).
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import nbformat
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbformat.v4 import new_markdown_cell, new_output
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells
from nbgrader.utils import is_grade, is_locked
from traitlets import Bool, Integer, List, Unicode

from attention_course.notebooks import cell_id, is_test, released_source, without_hidden_tests
from autograder import colab, course
from autograder.grading.report import Report
from autograder.grading.source import MAX_NOTEBOOK_BYTES, Source, submission_key
from autograder.items import shown_lines
from autograder.sandbox.process import Limits
from autograder.terminal import clean_text

REPORTS = Path("grades") / "reports"
FEEDBACK_PROGRESS = "AUTOGRADER_FEEDBACK_PROGRESS"  # the file LimitMarkdown names each notebook in, as it starts


class NotGraded(RuntimeError):
    """The grader could not grade this notebook (its failure, not the student's)."""


def report_path(root: Path, assignment: str, student: str, notebook: str) -> Path:
    return Path(root) / REPORTS / assignment / student / f"{notebook}.json"


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
    if report.notes:
        nb.metadata["autograder"] = {"notes": report.notes}


class SandboxedExecute(NbGraderPreprocessor):
    """Grade the notebook in a sandbox (see :mod:`autograder.grading`) and record the outcome as outputs."""

    isolation = Unicode("bwrap", help="'bwrap' (bubblewrap sandbox) or 'none' (separate process only)").tag(config=True)
    allow_released = Bool(
        False,
        help="grade a term's assignment whose solutions are released (make grade's --allow-released)",
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
        if report is None:  # plain nbgrader autograde, not make grade: graded here
            from autograder.grading.notebook import grade_notebook  # torch, imported only to grade

            report = grade_notebook(
                assignment,
                nb,
                notebook=notebook,
                isolation=self.isolation,
                release=settings,
                as_submitted=self._as_submitted(submitted / assignment / f"{notebook}.ipynb"),
            )
        if report.not_graded:
            raise NotGraded(f"{student}/{assignment}/{notebook}: not graded: {report.not_graded}")
        for note in report.notes:
            self.log.warning("%s/%s: %s", student, assignment, clean_text(note, 500))
        apply_report(nb, report)
        return nb, resources

    @staticmethod
    def _as_submitted(path: Path):
        """The notebook as submitted (nbgrader has put its test cells back in ``nb``), where it can be read."""
        try:
            if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_NOTEBOOK_BYTES:
                return nbformat.read(str(path), as_version=4)
        except Exception:  # an unreadable notebook: nbgrader's own copy is graded, without notes on it
            return None
        return None

    def _saved_report(self, nb, assignment: str, notebook: str, student: str) -> Report | None:
        path = report_path(Path.cwd(), assignment, student, notebook)
        if not path.is_file():
            return None
        try:
            report = Report.from_json(path.read_text())
            source = Source.load(assignment, notebook)
            key = submission_key(source, nb, Limits(), course.release(Path.cwd()))
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


class RestoreTestCells(OverwriteCells):
    """nbgrader's ``OverwriteCells``, which puts the instructor's read-only cells back, without its
    warning about every test cell that holds hidden tests: such a cell, as released (hidden tests
    removed), is untouched, so it is restored quietly; so is the Colab set-up cell that a term's export
    wrote for the students' repository (:func:`autograder.colab.retarget`). A cell the student really
    changed is still reported, by nbgrader and in the grading report."""

    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        as_released = grade_id is not None and is_grade(cell) and is_locked(cell)
        set_up = grade_id == colab.GRADE_ID and colab.repository_of(cell.source) is not None
        if as_released or set_up:
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except Exception:  # nbgrader's own handling below reports it
                source_cell = None
            if source_cell is not None and (set_up or cell.source.strip() == released_source(source_cell.source)):
                cell.source = source_cell.source
        return super().preprocess_cell(cell, resources, cell_index)


PLACEHOLDER = "# Hidden tests ran here; their result is shown below."
FEEDBACK_WIDTH = 100  # characters of a failed check's message lines in the feedback


class HideHiddenTests(NbGraderPreprocessor):
    """Replace hidden test code with a placeholder and tracebacks in test cells with their last line."""

    # The feedback exporter configures this on every preprocessor it runs.
    display_data_priority = List(
        ["text/html", "application/pdf", "text/latex", "image/svg+xml", "image/png", "image/jpeg", "text/plain"]
    ).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code":
            return cell, resources
        cell.source = without_hidden_tests(cell.source, PLACEHOLDER)
        if is_grade(cell):
            for output in cell.get("outputs", []):
                if output.output_type == "error":  # wrapped as Jupyter shows it: a page never scrolls sideways
                    shown = shown_lines(clean_text(f"{output.ename}: {output.evalue}", 4000), FEEDBACK_WIDTH)
                    output.traceback = ["\n".join(shown)]
                elif output.output_type == "stream":  # a question's parts (apply_report), wrapped the same way
                    output.text = "\n".join(shown_lines(clean_text(output.text, 4000), FEEDBACK_WIDTH))
        return cell, resources


# nbconvert's template loads MathJax 2 from a CDN, between these two comments; a feedback page opened
# offline (or where that CDN is blocked) shows raw $...$ then.
_CDN_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL)
# A feedback page shows the student's own mathematics, so the TeX that makes HTML is left out: MathJax's html
# extension (\href, a link to any URL, javascript: included; \style, \class and \cssId, CSS of the student's
# choosing) is never loaded for its macros, and \require, which would load it (or any extension), is removed.
# Those macros stay undefined and show as written, in red.
_MATHJAX_CONFIG = (
    "<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], "
    "displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true, "
    "packages: {'[-]': ['require']}, autoload: {html: []}}, "
    "svg: {fontCache: 'global'}, options: {enableMenu: false}};</script>"
)


class FeedbackHTMLExporter(HTMLExporter):
    """nbgrader's feedback page, its mathematics rendered by the course's own MathJax, inlined
    (:data:`autograder.course.FEEDBACK_MATHJAX`, fetched by ``make book``): nbgrader releases the page
    alone, and it renders offline. Without the local copy, the page keeps nbconvert's CDN."""

    def from_notebook_node(self, nb, resources=None, **kw):
        output, resources = super().from_notebook_node(nb, resources, **kw)
        return inline_mathjax(named_index(output)), resources


# nbgrader's feedback template lists every test cell as "Test cell" and every comment as "Comment"; the
# course's grade ids (the instructor's: InstructorCellRoles) name them. Tables of the course's markdown get
# room between their columns (the template's Bootstrap 3 gives them none).
_INDEX_TEST = re.compile(r'<li><a href="#([A-Za-z0-9_-]+)">Test cell</a>')
_INDEX_COMMENT = re.compile(r'<li><a href="#comment-([A-Za-z0-9_-]+)">Comment</a>')
_FEEDBACK_CSS = (
    "<style>.rendered_html table { border-collapse: collapse; margin: 0.5em 0; }\n"
    ".rendered_html th, .rendered_html td { padding: 0.3em 0.8em; border: 1px solid #ddd; text-align: left; }\n"
    "</style>\n</head>"
)


def named_index(page: str) -> str:
    """``page`` with each test and comment of its index named by its cell's grade id, and its tables spaced."""
    page = _INDEX_TEST.sub(r'<li><a href="#\1"><code>\1</code></a>', page)
    page = _INDEX_COMMENT.sub(r'<li><a href="#comment-\1">Comment on <code>\1</code></a>', page)
    return page.replace("</head>", _FEEDBACK_CSS, 1)


def inline_mathjax(page: str, script: Path = course.FEEDBACK_MATHJAX) -> str:
    """``page`` with nbconvert's CDN MathJax replaced by ``script``'s code, where it is installed."""
    try:
        code = script.read_text()
    except OSError:
        return page
    code = code.replace("</script", "<\\/script").replace("<!--", "<\\!--")  # stays one script element
    block = f"{_MATHJAX_CONFIG}\n<script>{code}</script>"
    return _CDN_MATHJAX.sub(lambda _: block, page, count=1)


class SanitizeStudentHTML(SanitizeHTML):
    """nbconvert's :class:`SanitizeHTML`, for what the student wrote: a markdown cell identical to one of
    the released notebook's (the course's own text) is left as written, so that its code spans are not
    escaped twice (``->`` shown as ``-&gt;``); every other markdown or raw cell is sanitised."""

    def preprocess(self, nb, resources):
        assignment = (resources.get("nbgrader") or {}).get("assignment")
        self._course_text = _released_markdown(assignment) if assignment else frozenset()
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "markdown" and cell.source in self._course_text:
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


def _released_markdown(assignment: str) -> frozenset[str]:
    """The markdown cells' sources of ``assignment``'s released notebook (under the current folder, the
    course's, as nbgrader runs)."""
    try:
        nb = nbformat.read(str(course.notebook_path(assignment, "exercises", Path.cwd())), as_version=4)
    except (OSError, ValueError):
        return frozenset()
    return frozenset(cell.source for cell in nb.cells if cell.cell_type == "markdown")


# ----------------------------------------------------------------------------- cell roles


def instructor_metadata(notebook) -> dict[str, dict]:
    """grade_id -> the nbgrader metadata of that cell of the instructor's notebook, as the gradebook
    records it (``notebook``: the gradebook's Notebook)."""
    grade = {cell.name: cell.max_score for cell in notebook.grade_cells}
    task = {cell.name: cell.max_score for cell in notebook.task_cells}
    solution = {cell.name for cell in notebook.solution_cells}
    roles = {}
    for cell in notebook.source_cells:
        meta = {
            "schema_version": 3,
            "grade": cell.name in grade,
            "solution": cell.name in solution,
            "locked": bool(cell.locked),
            "task": cell.name in task,
            "grade_id": cell.name,
        }
        if cell.name in grade or cell.name in task:
            meta["points"] = grade.get(cell.name, task.get(cell.name))
        roles[cell.name] = meta
    return roles


def give_instructor_roles(nb, roles: dict[str, dict]) -> int:
    """Give each cell of ``nb`` the nbgrader metadata of the instructor's cell whose grade_id it holds,
    and a cell whose grade_id is not the instructor's (or that has none) no nbgrader metadata at all.
    Returns how many cells' metadata changed.

    A cell's role is the instructor's to decide, and the grader already decides it so: its program
    (:func:`autograder.grading.source.student_program`) runs the instructor's setup and test cells,
    found by grade_id, and everything else as the student's code, whatever else the metadata says.
    Left as the student wrote it, that metadata is an instruction to nbgrader: ``"task": true`` on a
    code cell, a duplicated, missing or malformed grade_id, an unknown schema version each make
    nbgrader refuse the notebook (it quotes the cell's source in its log on the way) or stop grading
    the class. Made the instructor's, nbgrader grades the notebook as the sandbox did, and the
    program the grader runs is the same before and after (the grade_ids it reads are kept), so the
    report made before ``nbgrader autograde`` is still the one used.
    """
    changed = 0
    for cell in nb.cells:
        metadata = cell.get("metadata")
        if not isinstance(metadata, dict) or "nbgrader" not in metadata:
            continue
        meta = metadata["nbgrader"]
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        wanted = roles.get(grade_id) if isinstance(grade_id, str) else None
        if wanted is None:
            del metadata["nbgrader"]
            changed += 1
            continue
        changed += _role(meta) != _role(wanted)
        # Replaced even when the role is the same: the other keys (a checksum, the cell's type when
        # released) are nbgrader's to recompute, and a malformed one would fail its validation.
        metadata["nbgrader"] = copy.deepcopy(wanted)
    return changed


def _role(meta: dict) -> tuple:
    return (
        *(bool(meta.get(key, False)) for key in ("grade", "solution", "locked", "task")),
        meta.get("points"),
        meta.get("schema_version"),
    )


class InstructorCellRoles(NbGraderPreprocessor):
    """Every cell's nbgrader metadata made the instructor's, or removed (see :func:`give_instructor_roles`).

    The first of ``Autograde.sanitize_preprocessors``: before nbgrader's own steps read a grade_id
    (``DeduplicateIds`` fails on a grade cell without one) or validate the metadata
    (``CheckCellMetadata``)."""

    _roles: dict[tuple[str, str, str], dict] = {}  # one nbgrader process grades a class: read them once

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        key = (info["db_url"], info["assignment"], info["notebook"])
        if key not in self._roles:
            with Gradebook(info["db_url"]) as gradebook:
                self._roles[key] = instructor_metadata(gradebook.find_notebook(info["notebook"], info["assignment"]))
        changed = give_instructor_roles(nb, self._roles[key])
        if changed:
            self.log.info(
                "%s/%s: the nbgrader metadata of %d cell(s) was not the instructor's; the instructor's is used",
                info["student"],
                info["assignment"],
                changed,
            )
        return nb, resources


# ----------------------------------------------------------------------------- feedback


def announce_feedback(student: str, notebook: str, cut: int) -> None:
    """Tell ``make grade`` (the file named by ``AUTOGRADER_FEEDBACK_PROGRESS``, if set) that the feedback on a
    student's notebook is being written, and how many of its cells were cut."""
    path = os.environ.get(FEEDBACK_PROGRESS)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"student": student, "notebook": notebook, "cut": cut}) + "\n")


CUT_NOTE = (
    "**Note from the grader:** {count} markdown or raw cell(s) of this notebook were too long to show "
    "in full in this feedback, and are shown cut (each to {cell:,} characters, {total:,} in all). "
    "Your work was graded as you submitted it; only this page is shortened."
)


class LimitMarkdown(NbGraderPreprocessor):
    """Markdown and raw cells cut to ``max_cell_chars`` each and ``max_total_chars`` in all, with a note.

    The first of ``GenerateFeedback.preprocessors``. nbconvert renders a markdown cell in time that
    grows faster than its length on some inputs; a cut cell is followed by a cell of the course's
    saying how long it was, and the feedback starts with a note (``CUT_NOTE``). It also announces
    the notebook (:func:`announce_feedback`), so that ``make grade`` can time each one."""

    max_cell_chars = Integer(20_000, help="the most characters of one markdown or raw cell shown").tag(config=True)
    max_total_chars = Integer(200_000, help="the most characters of markdown and raw cells shown in all").tag(
        config=True
    )

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        cells, shown, cut = [], 0, 0
        for cell in nb.cells:
            cells.append(cell)
            if cell.cell_type not in ("markdown", "raw"):
                continue
            room = max(0, min(self.max_cell_chars, self.max_total_chars - shown))
            length = len(cell.source)
            if length > room:
                cell.source = cell.source[:room]
                cut += 1
                cells.append(
                    new_markdown_cell(
                        f"*[The grader cut the cell above: it holds {length:,} characters, "
                        f"and the first {room:,} are shown.]*"
                    )
                )
            shown += len(cell.source)
        if cut:
            note = CUT_NOTE.format(count=cut, cell=self.max_cell_chars, total=self.max_total_chars)
            nb.cells = [new_markdown_cell(note), *cells]
        announce_feedback(str(info.get("student", "")), str(info.get("notebook", "")), cut)
        return nb, resources


_FILES_URL = re.compile(r"""(src|href)\=(['"]?)/?files/""")  # as nbconvert's; linear
_FILES_LINK_TARGET = re.compile(r"\]\(/?files/")


def strip_files_prefix(text: str) -> str:
    """nbconvert's ``strip_files_prefix`` filter (``src="files/a.png"`` and ``[a](files/a.png)`` lose their
    ``files/``), with the same output, in linear time.

    nbconvert finds markdown links with ``(!?)\\[(?P<caption>.*?)\\]\\(/?files/(?P<location>.*?)\\)``,
    which tries every ``[`` against the rest of its line: a line of 150,000 ``[`` took minutes. A match
    from a ``[`` ends at the first ``](files/`` (or ``](/files/``) after it on its line, if a ``)``
    follows that on the line; if none does, no later ``[`` of the line matches either, so the line
    is done. Each character is looked at a bounded number of times.
    """
    text = _FILES_URL.sub(r"\1=\2", text)
    pieces, done, start, line_end = [], 0, 0, -1  # text[:done] is in pieces; the search goes on from start
    while True:
        opening = text.find("[", start)
        if opening < 0:
            break
        if opening > line_end:  # on a line not seen yet: where it ends (looked for once per line)
            line_end = text.find("\n", opening)
            line_end = len(text) if line_end < 0 else line_end
        target = _FILES_LINK_TARGET.search(text, opening + 1, line_end)
        closing = text.find(")", target.end(), line_end) if target else -1
        if closing < 0:
            start = line_end + 1
            continue
        pieces += [text[done : target.start() + 2], text[target.end() : closing + 1]]
        done = start = closing + 1
    pieces.append(text[done:])
    return "".join(pieces)
