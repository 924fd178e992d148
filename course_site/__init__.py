"""The course's web site and what is published to students.

The book's Sphinx extension, the local MathJax copy, the logo, the internal link check, the student export
and the leak check.

It builds on :mod:`autograder` (the course's layout, settings, notebooks and reference solutions),
never the other way round.
"""
