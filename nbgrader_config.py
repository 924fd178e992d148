"""nbgrader's configuration for this course. nbgrader reads it from the current
directory, so run every `nbgrader ...` command from the repository root.

The course layout maps onto nbgrader's folders:

    solutions/<assignment>/<notebook>.ipynb          nbgrader "source" (instructor only)
    exercises/<assignment>/<notebook>.ipynb          nbgrader "release" (students)
    submitted/<student>/<assignment>/...             collected work           (git-ignored)
    autograded/, feedback/, gradebook.db             grading state            (git-ignored)
"""

import os
import warnings
from pathlib import Path

from nbformat.warnings import MissingIDFieldWarning
from sqlalchemy.exc import SAWarning

c = get_config()  # provided by traitlets when nbgrader loads this file

c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
# nbgrader's own files travel with every submission (timestamp.txt: late penalties;
# submission_secret.txt: fetching feedback), so its default `include` (every file) and
# `ignore` (checkpoints, caches) stay; solutions/<assignment>/ holds the notebook only.
# A student's folder larger than this (in KiB) is not copied for grading.
c.CourseDirectory.max_file_size = 10_000

# Executing a submission: students' code never runs in nbgrader's process or
# in a Jupyter kernel beside the tests. It runs in a bubblewrap sandbox (no
# network, no view of solutions/, the gradebook or other students, limits on
# time, memory, processes and output), and the test cells run here, comparing
# values that come back from the sandbox as plain data; see autograder/grading/.
# The limits live in autograder/sandbox/limits.py (Limits), so that `make check` gives
# self-learners the same verdicts.
c.Autograde.autograde_preprocessors = [
    "autograder.nbgrader.execute.SandboxedExecute",
    # The autograded notebook (which the formgrader shows you) keeps no live HTML or script
    # that a submission's markdown or raw cells hold (the course's own markdown is kept as written).
    "autograder.nbgrader.sanitize.SanitizeStudentHTML",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "autograder.nbgrader.check_metadata.CheckCellMetadata",
]
# A late notebook loses what term.yml's late policy says (a penalty per day or hour started, up to a cap, zero
# after a cut-off: autograder/grading/deadlines.py); where term.yml sets no deadline for the assignment, what
# c.LateSubmissionPlugin.penalty_method says (nbgrader's 'none' or 'zero').
c.AssignLatePenalties.plugin_class = "autograder.nbgrader.late_policy.CourseLatePenalty"
# "none" runs students' code in a plain separate process: only for code you trust.
c.SandboxedExecute.isolation = "bwrap"

# Long messages and outputs are cut down before they reach the gradebook or the feedback.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 50

# A student who deleted a test cell is graded on it anyway: nbgrader puts the
# instructor's version back, after the cell that preceded it. Test cells are restored
# without nbgrader's warning about the hidden tests that the released cells lack.
c.OverwriteCells.add_missing_cells = True
# Every cell's nbgrader metadata is first made the instructor's (from the gradebook), or removed
# from a cell the instructor's notebook does not have and from every later copy of a cell (Jupyter's
# copy and paste keeps the grade_id; the first copy keeps the role): a student's metadata ("task": true
# on a code cell, a broken or copied grade_id) would make nbgrader refuse the notebook and quote the
# cell in its log.
# nbgrader's check of every cell's metadata, its schema's validator built once (CheckCellMetadata: the same
# checks and refusal, a tenth of a second less per notebook).
c.Autograde.sanitize_preprocessors = [
    "autograder.nbgrader.cell_roles.InstructorCellRoles",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "autograder.nbgrader.restore_cells.RestoreTestCells",
    "autograder.nbgrader.check_metadata.CheckCellMetadata",
]

# Collecting from nbgrader's exchange (`nbgrader collect`, the formgrader's Collect button)
# trusts nothing that students can change there after submitting: a student whose submission
# holds a symbolic or hard link, a named pipe or another special file is refused (nothing of it
# is copied, so no link can bring in solutions/ or another student's notebook), files are read
# without following links, and the submission time is when the kernel last saw the submission
# change, not what the student's timestamp.txt says; see autograder/exchange/.
# Every user may create folders in the exchange, named for any student: a folder counts as a
# student's submission only when that student's account owns it (nbgrader's check_owner, on by
# default, which nbgrader's own collect only warns about). Another folder is collected for nobody,
# and `make grade` lists it with its owner. Turn check_owner off only where every student shares
# one system user (then a folder counts for whoever its name says).
c.ExchangeFactory.collect = "autograder.exchange.collect.SafeCollect"
# The exchange itself (release, fetch, submit, collect; the formgrader's Release and Collect buttons) is a folder
# of this course, exchange/ (git-ignored), unless NBGRADER_EXCHANGE names another: nothing outside the course is
# made or opened to every user. Where students submit through nbgrader on this machine (a JupyterHub), name the
# exchange their nbgrader uses, for every nbgrader command and make target (`make formgrader
# NBGRADER_EXCHANGE=/usr/local/share/nbgrader/exchange`, nbgrader's default: made writable by every user), or
# write it here.
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE") or str(Path(__file__).resolve().parent / "exchange")
# The class list: only its students are collected and graded (`make grade` lists the rest); one
# student id a line, or the CSV that `nbgrader db student import` reads (an "id" column), from this
# folder. Unset, every student with a submission is (on a hub: every account that submits).
# c.SafeCollect.class_list = "class_list.txt"

# New students (on the class list, where one is given) are added to the gradebook the first time
# they are graded.
c.Autograde.create_student = True

# `nbgrader export` (every assignment and student in one CSV) leaves an assignment that a student never
# submitted without a score and notes "not submitted", where nbgrader's own plugin writes 0.0; a refused
# submission gets make grade's 0 and its reason, and written answers not graded yet are named.
c.ExportApp.plugin_class = "autograder.nbgrader.export.CourseCsvExport"

# Feedback shows which tests passed and each check's message, never the hidden
# test code or a traceback through it.
# Markdown and raw cells too long to show are cut, with a note (LimitMarkdown, which also tells
# `make grade` which notebook it is on, so that one that takes too long is stopped).
# The feedback page carries the course's MathJax (book/_static/mathjax, which make book and make grade
# fetch), so that its mathematics renders wherever the student opens it, offline too. A written answer
# that you have not graded yet shows "awaiting grading" (AwaitingGrading), not a score of 0, and the
# page's total says that it is partial.
c.GenerateFeedback.exporter_class = "autograder.nbgrader.feedback_html.FeedbackHTMLExporter"
c.GenerateFeedback.preprocessors = [
    "autograder.nbgrader.limit_markdown.LimitMarkdown",
    "nbgrader.preprocessors.GetGrades",
    "autograder.nbgrader.feedback_html.AwaitingGrading",
    "autograder.nbgrader.hide_tests.HideHiddenTests",
    "autograder.nbgrader.sanitize.SanitizeStudentHTML",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
# The formgrader shows each written answer with its rubric right below it, read from the instructor
# notebook in solutions/ (ShowRubric: on the formgrader's page only; the feedback's exporter, a kind of
# HTMLExporter, runs without it, so students never see it).
c.HTMLExporter.preprocessors = ["autograder.nbgrader.rubric.ShowRubric"]
c.FeedbackHTMLExporter.preprocessors = []
# Markdown and raw cells that a submission holds are escaped (bleach, through nbconvert), never
# rendered as live HTML, in the autograded notebook and in the feedback (where the course's own
# markdown, identical to the released notebook's, is shown as written: SanitizeStudentHTML).
c.SanitizeHTML.enabled = True
c.SanitizeHTML.strip = False
c.SanitizeStudentHTML.enabled = True
c.SanitizeStudentHTML.strip = False
# The kernel's own log (it listens on localhost without encryption) is not the student's business.
c.Execute.extra_arguments = ["--IPKernelApp.log_level=ERROR"]
c.HTMLExporter.sanitize_html = True
# The formgrader's page of a submission and the feedback load nothing that a student named: markdown's own
# images (![alt](url), which no sanitiser of HTML sees) show as text, "[image: alt — url]", and any other tag
# that would load something is shown escaped (autograder/nbgrader/inert.py), in the two filters that nbgrader's
# templates apply last to a markdown cell and to an output or raw cell. nbconvert's strip_files_prefix
# also takes quadratic time on a line of "[" (minutes for 150,000); the course's takes linear time.
c.HTMLExporter.filters = {
    "strip_files_prefix": "autograder.nbgrader.inert.strip_files_prefix",
    "clean_html": "autograder.nbgrader.inert.clean_html",
}
c.LimitMarkdown.max_cell_chars = 20_000
c.LimitMarkdown.max_total_chars = 200_000

# SQLAlchemy's warnings about nbgrader's own gradebook sessions say nothing to an instructor.
warnings.filterwarnings("ignore", category=SAWarning)
# A deleted test cell that nbgrader puts back has no cell id yet; nbformat gives it one.
warnings.filterwarnings("ignore", category=MissingIDFieldWarning)
