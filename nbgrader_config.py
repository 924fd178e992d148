"""nbgrader's configuration for this course. nbgrader reads it from the current
directory, so run every `nbgrader ...` command from the repository root.

The course layout maps onto nbgrader's folders:

    solutions/<assignment>/<notebook>.ipynb          nbgrader "source" (instructor only)
    exercises/<assignment>/<notebook>.ipynb          nbgrader "release" (students)
    submitted/<student>/<assignment>/...             collected work           (git-ignored)
    autograded/, feedback/, gradebook.db             grading state            (git-ignored)
"""

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
# Only the notebooks are assignment material; nothing else in solutions/ is released.
c.CourseDirectory.include = ["*.ipynb"]
# A student's folder larger than this (in KiB) is not copied for grading.
c.CourseDirectory.max_file_size = 10_000

# Executing a submission: a cell that runs longer than this is stopped and
# scores zero; the rest of the notebook still runs.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True
c.Execute.execute_retries = 0

# A flood of output is cut down before it reaches the gradebook or the feedback.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 50

# A correct answer that prints a warning (to stderr) must not lose its points:
# drop stderr text that is only warnings before the grades are read.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(?i)warning"

# A student who deleted a test cell is graded on it anyway: nbgrader puts the
# instructor's version back, after the cell that preceded it.
c.OverwriteCells.add_missing_cells = True

# New students are added to the gradebook the first time they are graded.
c.Autograde.create_student = True

# Feedback shows which tests passed and each check's message, never the hidden
# test code or a traceback through it.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "autograder.feedback.HideHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
