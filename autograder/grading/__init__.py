"""Grading: one notebook, and a whole class as ``make grade`` grades it, each job in a module of its own.

One notebook: the assignment's source, the student's program in a sandbox, the proxies that the test
cells call, and the report, graded by a :class:`~autograder.grading.grader.Grader`. A class: the
phases of :mod:`autograder.grading.phases`.
"""
