"""nbgrader's late-penalty step with the term's policy (``CourseLatePenalty``, named in ``nbgrader_config.py``).

``nbgrader autograde``'s ``AssignLatePenalties`` asks its plugin, for each late notebook, what the notebook's score
loses; nbgrader's own plugin knows ``none`` and ``zero``. The course's asks ``term.yml``
(:mod:`autograder.grading.deadlines`: a penalty per day or hour started, up to a cap, zero after a cut-off) where it
sets a deadline for the assignment, and does what nbgrader's does (``c.LateSubmissionPlugin.penalty_method``)
where it sets none. Lateness is the gradebook's: the submission's time (the collect's) past the assignment's
``duedate`` and the student's ``extension``, which ``make grade`` writes there from ``term.yml``
(:mod:`autograder.grading.lateness`, which gives the same penalty from the same function).
"""

from __future__ import annotations

from pathlib import Path

from nbgrader.plugins import LateSubmissionPlugin

from autograder.grading.deadlines import deadline


class CourseLatePenalty(LateSubmissionPlugin):
    """The penalty of ``term.yml``'s late policy for the assignment being graded; nbgrader's where it sets none."""

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        assignment = getattr(self.parent, "assignment_id", None)
        found = deadline(assignment, Path.cwd()) if assignment else None  # nbgrader runs in the course folder
        if found is None:
            return super().late_submission_penalty(student_id, score, total_seconds_late)
        return found.policy.penalty_points(score, total_seconds_late) or None
